"""The user's story on the real cluster: the image built as the image test builds it, imported into the node's
containerd, `kubectl apply` of the plain manifests (the image reference set to the local tag) — the DaemonSet
controller and the scheduler place the agent's pod, the kubelet starts it and it becomes Ready; `kubectl logs`
shows the agent's own lines."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.controlplane import NODE_NAME, ControlPlane
from tests.cluster.image import IMAGE_TAG, build_agent_image, missing_image_inputs
from tests.cluster.node import GuestNode, NodeSpec, guest_modules
from tests.cluster.procs import ClusterError, require_setup, wait_for
from tests.vm.harness import require_vm

# The image build and its import into the TCG guest take most of a quarter hour: kept out of CI's default run (the
# whole suite must stay within its time budget) and run with `PODPIN_CLUSTER_DEPLOY=1 scripts/test`.
pytestmark = [pytest.mark.cluster, pytest.mark.cluster_deploy]

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "podpin-system"
RELEASED_IMAGE = "ghcr.io/podpin/podpin:0.2.0"
AGENT_TIMEOUT = 900.0


@pytest.fixture(scope="module")
def deployed(k8s_version: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, GuestNode]]:
    """A Ready node with the agent's image imported and `kubectl apply -f deploy/daemonset.yaml` done."""
    require_vm()
    for reason in (missing_image_inputs(), guest_modules()):
        if reason:
            require_setup(reason)
    workdir = Path(tmp_path_factory.mktemp("deploy"))
    image = build_agent_image(workdir / "image")
    with ControlPlane(workdir / "plane", version=k8s_version) as plane:
        node = GuestNode(plane, workdir / "node", NodeSpec(cpus=4, numa_nodes=2, images=(image,)))
        try:
            node.start()
            plane.admin.run("label", "node", NODE_NAME, "podpin.io/enabled=true")
            manifest = (REPO / "deploy" / "daemonset.yaml").read_text()
            assert RELEASED_IMAGE in manifest, "the manifests name another image: update RELEASED_IMAGE"
            plane.admin.run("apply", "-f", "-", stdin=manifest.replace(RELEASED_IMAGE, IMAGE_TAG))
            yield plane, node
        finally:
            node.stop()


def _agent_pod(plane: ControlPlane) -> dict[str, Any] | None:
    pods: list[dict[str, Any]] = plane.admin.json("-n", NAMESPACE, "get", "pods")["items"]
    return pods[0] if pods else None


def _ready(pod: dict[str, Any] | None) -> bool:
    if pod is None:
        return False
    conditions = pod["status"].get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def test_agent_pod_scheduled_started_ready(deployed: tuple[ControlPlane, GuestNode]) -> None:
    """The DaemonSet's pod lands on the node and becomes Ready under the real kubelet, without restarts."""
    plane, node = deployed

    def ready() -> bool:
        return _ready(_agent_pod(plane))

    try:
        wait_for("the podpin DaemonSet's pod to be Ready", ready, timeout=AGENT_TIMEOUT, logs=node.logs(), every=5.0)
    except ClusterError as err:
        pod = _agent_pod(plane)
        agent_log = plane.admin.run("-n", NAMESPACE, "logs", "ds/podpin", "--tail=30", check=False)
        status = json.dumps(pod["status"] if pod else None, indent=1)[-3000:]
        raise ClusterError(f"{err}\n--- agent pod status ---\n{status}\n--- agent log ---\n{agent_log.stdout}") from err
    pod = _agent_pod(plane)
    assert pod is not None
    assert NODE_NAME == pod["spec"]["nodeName"]
    assert 0 == pod["status"]["containerStatuses"][0]["restartCount"], pod["status"]["containerStatuses"]


def test_kubectl_logs_show_the_agent(deployed: tuple[ControlPlane, GuestNode]) -> None:
    """`kubectl logs ds/podpin` (through the API server and the kubelet) shows the agent's started line."""
    plane, _ = deployed
    logs = plane.admin.run("-n", NAMESPACE, "logs", "ds/podpin").stdout
    assert '"event": "agent.started"' in logs, logs[-2000:]
