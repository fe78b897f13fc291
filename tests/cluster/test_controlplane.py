"""The host control plane: up on 127.0.0.1 only, a real cluster's authorization, kubectl talks to it, torn down."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import psutil
import pytest

from tests.cluster.controlplane import NODE_NAME, ControlPlane, Kubectl
from tests.cluster.procs import wait_for

pytestmark = pytest.mark.cluster


def test_kubectl_talks_to_the_pinned_server(control_plane: ControlPlane, k8s_version: str) -> None:
    """`kubectl version` (the project's kubectl) reports the server built from the pin."""
    out = json.loads(control_plane.admin.run("version", "-o", "json").stdout)
    assert k8s_version == out["serverVersion"]["gitVersion"]


def test_listens_on_loopback_only(control_plane: ControlPlane) -> None:
    """Every socket the control plane's processes listen on is bound to 127.0.0.1 (nothing on 0.0.0.0 or ::)."""
    listening: list[tuple[str, str]] = []
    for proc in control_plane.procs:
        assert proc.popen is not None, proc.name
        assert proc.running(), f"{proc.name} exited; see {proc.log}"
        connections = psutil.Process(proc.popen.pid).net_connections(kind="inet")
        listening += [(proc.name, conn.laddr.ip) for conn in connections if conn.status == psutil.CONN_LISTEN]
    assert listening, "no listening socket found"
    assert [] == [(name, ip) for name, ip in listening if ip != "127.0.0.1"]


def test_rbac_forbids_what_was_not_granted(control_plane: ControlPlane) -> None:
    """The scheduler's identity may not read Secrets: 403 from RBAC, not AlwaysAllow."""
    status, body = control_plane.get("/api/v1/namespaces/kube-system/secrets", user=control_plane.pki.scheduler)
    assert 403 == status, body
    assert "system:kube-scheduler" in body


def test_node_authorizer_and_node_restriction(control_plane: ControlPlane) -> None:
    """A kubelet's identity may not list Secrets (Node authorizer) nor create another node (NodeRestriction)."""
    node = Kubectl(control_plane.kubeconfig("node", control_plane.pki.kubelet_client))
    secrets = node.run("get", "secrets", "-A", check=False)
    assert 0 != secrets.returncode
    assert "Forbidden" in secrets.stderr, secrets.stderr
    other = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "not-" + NODE_NAME}}
    created = node.run("create", "-f", "-", stdin=json.dumps(other), check=False)
    assert 0 != created.returncode
    assert "Forbidden" in created.stderr, created.stderr
    assert f'node "{NODE_NAME}" is not allowed to modify node' in created.stderr


def test_controller_manager_serves_service_accounts(control_plane: ControlPlane) -> None:
    """The controller manager runs: the default ServiceAccount and the kube-root-ca.crt ConfigMap appear."""
    admin = control_plane.admin
    wait_for(
        "the default ServiceAccount in namespace default",
        lambda: admin.run("get", "serviceaccount", "default", check=False).returncode == 0,
        timeout=180,
        logs=control_plane.logs(),
    )
    wait_for(
        "the kube-root-ca.crt ConfigMap in namespace default",
        lambda: admin.run("get", "configmap", "kube-root-ca.crt", check=False).returncode == 0,
        timeout=180,
        logs=control_plane.logs(),
    )
    token = admin.run("create", "token", "default", "--duration=10m").stdout.strip()
    assert 3 == len(token.split(".")), "a ServiceAccount token is a JWT"


def test_torn_down_cleanly(k8s_version: str, tmp_path: Path) -> None:
    """After the context ends every process is gone and the API server's port is closed."""
    with ControlPlane(tmp_path, version=k8s_version) as plane:
        pids = [proc.popen.pid for proc in plane.procs if proc.popen]
        port = plane.api_port
    assert [] == [
        pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    ]
    with socket.socket() as sock:
        assert 0 != sock.connect_ex(("127.0.0.1", port))
    assert not (tmp_path / "egress.sock").exists()
