"""The guest node under the real control plane: the kubelet registers, the Node is Ready, a pod on the CNI
network runs, and the API server reaches the kubelet (logs, exec) only through its egress proxy."""

from __future__ import annotations

import json

import pytest

from tests.cluster.controlplane import NODE_NAME, ControlPlane
from tests.cluster.node import GuestNode, cluster_runtime
from tests.cluster.procs import tail, wait_for
from tests.vm.ociimage import FIRST_VIEW_PREFIX, PROBE_IMAGE

pytestmark = pytest.mark.cluster

PROBE_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "probe", "namespace": "default"},
    "spec": {
        "containers": [{"name": "probe", "image": PROBE_IMAGE.ref, "imagePullPolicy": "Never"}],
        "terminationGracePeriodSeconds": 1,
    },
}


def test_kubelet_registers_ready(cluster: tuple[ControlPlane, GuestNode], k8s_version: str) -> None:
    """The Node is Ready with the pinned kubelet on the chosen containerd (``PODPIN_CLUSTER_RUNTIME``), at its address
    on QEMU's network."""
    plane, _ = cluster
    node = plane.admin.json("get", "node", NODE_NAME)
    info = node["status"]["nodeInfo"]
    assert k8s_version == info["kubeletVersion"]
    runtime = cluster_runtime()
    assert info["containerRuntimeVersion"].startswith(f"containerd://{runtime.version}"), info
    addresses = {a["type"]: a["address"] for a in node["status"]["addresses"]}
    assert "10.0.0.15" == addresses["InternalIP"]


def test_pod_runs_and_kubectl_reaches_the_kubelet(cluster: tuple[ControlPlane, GuestNode]) -> None:
    """A pod on the CNI bridge runs; `kubectl logs` and `exec` work through the egress proxy, nothing refused; the
    exec'd process runs in the container (its mount and PID namespaces)."""
    plane, node = cluster
    plane.admin.run("apply", "-f", "-", stdin=json.dumps(PROBE_POD))
    wait_for(
        "pod probe to be Running",
        lambda: plane.admin.json("get", "pod", "probe")["status"].get("phase") == "Running",
        timeout=600,
        logs=node.logs(),
        every=3.0,
    )
    pod = plane.admin.json("get", "pod", "probe")
    assert pod["status"]["podIP"].startswith("10.88."), pod["status"]
    logs = plane.admin.run("logs", "probe").stdout
    assert FIRST_VIEW_PREFIX in logs, logs
    # In the container: its image's /etc/passwd and its own PID 1 (the probe's sleep), not the guest's or the VM
    # init's (which is where an exec'd process landed while the guest's root was only chroot'ed into).
    inside = plane.admin.run("exec", "probe", "--", "cat", "/etc/passwd", "/proc/1/cmdline").stdout
    assert "root:x:0:0:root:/:/bin/sh\n/bin/sleep\x002147483647\x00" == inside
    assert plane.proxy is not None
    assert plane.proxy.connects >= 2, tail(plane.workdir / "kube-apiserver.log")
    assert [] == plane.proxy.refused


def test_kubelet_restarts_with_a_new_configuration_and_fresh_state(cluster: tuple[ControlPlane, GuestNode]) -> None:
    """restart_kubelet with a static CPU policy and cleared checkpoints: the kubelet runs that policy (its new
    checkpoint says so) and the Node stays Ready; back to `none` the same way (a changed policy needs the clearing)."""
    _, node = cluster
    for overrides, policy in (({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0"}, "static"), ({}, "none")):
        result = node.restart_kubelet(overrides, clear_state=True)
        assert "cpu_manager_state" in result["cleared"], result

        def checkpoint(policy: str = policy) -> bool:
            state = node.sh("cat", "/var/lib/kubelet/cpu_manager_state", check=False)
            return state.returncode == 0 and json.loads(state.stdout)["policyName"] == policy

        wait_for(f"the kubelet's cpu_manager_state to say {policy}", checkpoint, timeout=300, logs=node.logs())
        wait_for(f"Node {NODE_NAME} Ready after the restart", node.ready, timeout=300, logs=node.logs(), every=3.0)


def test_containerd_restart_keeps_the_pods(cluster: tuple[ControlPlane, GuestNode]) -> None:
    """A containerd crash and restart: its pods keep running and the kubelet reaches them again (exec)."""
    plane, node = cluster
    pid = node.restart_containerd()
    assert pid > 1
    wait_for(
        "kubectl exec into pod probe after the containerd restart",
        lambda: plane.admin.run("exec", "probe", "--", "cat", "/proc/self/status", check=False).returncode == 0,
        timeout=300,
        logs=node.logs(),
        every=3.0,
    )
    assert "Running" == plane.admin.json("get", "pod", "probe")["status"]["phase"]


def test_named_process_starts_and_stops(cluster: tuple[ControlPlane, GuestNode]) -> None:
    """A named process runs in the guest (its /proc entry is there) until stopped, then SIGTERM is its end."""
    _, node = cluster
    pid = node.start_process("sleeper", ["sleep", "600"])
    assert "sleep" in node.sh("cat", f"/proc/{pid}/cmdline").stdout
    assert node.process_status("sleeper")["running"]
    assert -15 == node.stop_process("sleeper")
    assert not node.process_status("sleeper")["running"]
