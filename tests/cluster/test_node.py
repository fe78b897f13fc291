"""The guest node under the real control plane: the kubelet registers, the Node is Ready, a pod on the CNI
network runs, and the API server reaches the kubelet (logs, exec) only through its egress proxy."""

from __future__ import annotations

import json

import pytest

from tests.cluster.controlplane import NODE_NAME, ControlPlane
from tests.cluster.node import GuestNode
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
    """The Node is Ready with the pinned kubelet on containerd, at its address on QEMU's network."""
    plane, _ = cluster
    node = plane.admin.json("get", "node", NODE_NAME)
    info = node["status"]["nodeInfo"]
    assert k8s_version == info["kubeletVersion"]
    assert info["containerRuntimeVersion"].startswith("containerd://1.7"), info
    addresses = {a["type"]: a["address"] for a in node["status"]["addresses"]}
    assert "10.0.0.15" == addresses["InternalIP"]


def test_pod_runs_and_kubectl_reaches_the_kubelet(cluster: tuple[ControlPlane, GuestNode]) -> None:
    """A pod on the CNI bridge runs; `kubectl logs` and `exec` work through the egress proxy, nothing refused."""
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
    status = plane.admin.run("exec", "probe", "--", "cat", "/proc/self/status").stdout
    assert "Cpus_allowed_list" in status
    assert plane.proxy is not None
    assert plane.proxy.connects >= 2, tail(plane.workdir / "kube-apiserver.log")
    assert [] == plane.proxy.refused
