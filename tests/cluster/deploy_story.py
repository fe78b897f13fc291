"""The user's story's cluster, shared by tests/cluster/test_deploy.py and scripts/bench_cluster.py: the release's
image on a Ready guest node, ``kubectl apply -f deploy/daemonset.yaml``, and what both do with it (pods applied and
waited for, ``podpin plan`` over them, the CPUs each container's first process sees and runs on now).

Everything here talks to the real API server (``kubectl`` as the administrator) or reads the guest's kernel files
through the node's command channel; nothing asserts: the callers decide what is right.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.cpuset import CPUSet
from scripts.release import Release
from tests.cluster.controlplane import NODE_NAME, ControlPlane
from tests.cluster.node import GuestNode, NodeSpec
from tests.cluster.procs import ClusterError, wait_for
from tests.support.agent_image import build_release
from tests.support.k8s_tools import helm
from tests.vm.ociimage import FIRST_VIEW_PREFIX

__all__ = [
    "AGENT_LIMIT",
    "AGENT_TIMEOUT",
    "GUEST_PYTHON",
    "NAMESPACE",
    "PODPIN",
    "POD_TIMEOUT",
    "QOS",
    "QOS_FILES",
    "REPO",
    "REPOSITORY",
    "Story",
    "TCG_AGENT_LIMIT",
    "agent_pods",
    "all_statuses",
    "apply_pod",
    "container_names",
    "cpus_now",
    "ctr",
    "delete_pod",
    "deployed",
    "first_view",
    "get_pod",
    "now_on",
    "plan_of",
    "planned_cpus",
    "pod_ready",
    "qos_files",
    "tag_release_image",
    "wait_agent_ready",
]

REPO = Path(__file__).resolve().parents[2]
PODPIN = REPO / ".venv" / "bin" / "podpin"
GUEST_PYTHON = REPO / ".venv" / "bin" / "python"
"""The guest's root is the host's (read-only): the project's own programs run there as on the host, and the guest's
command channel reads the kernel's files as the node's root sees them (outside every container)."""
REPOSITORY = "ghcr.io/podpin/podpin"
"""The release's repository: the plain manifests name it too, so both run the archive's image once it is tagged."""
NAMESPACE = "podpin-system"
AGENT_TIMEOUT = 900.0
POD_TIMEOUT = 600.0
QOS = ("kubepods", "kubepods/burstable", "kubepods/besteffort")
QOS_FILES = ("cpuset.cpus.effective", "cpu.max")
"""What a reset must give back: the effective CPUs (a QoS level's ``cpuset.cpus`` is empty before podpin and the
full set after a reset: both mean every CPU) and the quota."""
AGENT_LIMIT = "limits:\n              cpu: 200m\n"
TCG_AGENT_LIMIT = "limits:\n              cpu: 1\n"
"""The agent's CPU limit in the test: at 200m of an emulated CPU on a loaded host the agent took 9 minutes to start
(its startup probe allows 10); the only change to the plain manifests (and `--set resources.limits.cpu=1` to helm)."""


@dataclass(slots=True)
class Story:
    """The cluster, the release, and what the tests learn on the way (the pods applied, in order)."""

    plane: ControlPlane
    node: GuestNode
    release: Release
    workdir: Path
    baseline: dict[str, str]
    applied: list[tuple[str, str]] = field(default_factory=list)
    """(namespace, name) of the test pods on the node, in creation order."""
    topology: str = ""
    """``podpin topology --output json`` of the node, read once (a start of podpin in the loaded TCG guest took
    over two minutes)."""

    def kubectl(self, *args: str, timeout: float = 120.0, stdin: str | None = None) -> str:
        return self.plane.admin.run(*args, timeout=timeout, stdin=stdin).stdout

    def helm(self, *args: str, timeout: float = 1500.0) -> str:
        run = subprocess.run(
            [str(helm()), "--kubeconfig", str(self.plane.admin.kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if run.returncode != 0:
            raise ClusterError(f"helm {' '.join(args[:2])} failed ({run.returncode}): {run.stderr.strip()[-3000:]}")
        return run.stdout


def ctr(node: GuestNode, *args: str) -> str:
    """``ctr -n k8s.io ARGS`` in the guest, against the node's containerd."""
    return node.sh(
        str(node.runtime_bin / "ctr"), "--address", "/run/containerd/containerd.sock", "-n", "k8s.io", *args
    ).stdout


def qos_files(node: GuestNode) -> dict[str, str]:
    return {
        f"{level}/{name}": node.sh("cat", f"/sys/fs/cgroup/{level}/{name}").stdout.strip()
        for level in QOS
        for name in QOS_FILES
    }


def tag_release_image(node: GuestNode, release: Release) -> None:
    """Name the imported archive's image as a registry serving the release would: by tag and by digest."""
    listed = ctr(node, "images", "list", "--quiet").split()
    imported = [name for name in listed if name.endswith(f"/podpin:{release.version}")]
    if not imported:
        raise ClusterError(f"the release's image is not in the node's containerd (it lists {listed})")
    for target in (f"{REPOSITORY}:{release.version}", f"{REPOSITORY}@{release.image_digest}"):
        if target not in listed:
            ctr(node, "images", "tag", imported[0], target)


@contextmanager
def deployed(version: str, workdir: Path, *, cpus: int = 4) -> Iterator[Story]:
    """A Ready node (`cpus` CPUs on 2 NUMA nodes) holding the release's image, its QoS files read, labelled,
    ``kubectl apply -f deploy/daemonset.yaml`` done (the agent's CPU limit raised for TCG); stopped on exit.

    Raises:
        ClusterError: the manifests name another image or CPU limit than the test knows, or the node failed.
    """
    release = build_release(workdir / "dist", repository=REPOSITORY)
    with ControlPlane(workdir / "plane", version=version) as plane:
        node = GuestNode(plane, workdir / "node", NodeSpec(cpus=cpus, numa_nodes=2, images=(release.image_archive,)))
        try:
            node.start()
            tag_release_image(node, release)
            baseline = qos_files(node)
            plane.admin.run("label", "node", NODE_NAME, "podpin.io/enabled=true")
            manifest = (REPO / "deploy" / "daemonset.yaml").read_text()
            if f"image: {REPOSITORY}:{release.version}\n" not in manifest:
                raise ClusterError("deploy/daemonset.yaml names another image than the release's")
            if AGENT_LIMIT not in manifest:
                raise ClusterError("deploy/daemonset.yaml sets another CPU limit: update AGENT_LIMIT")
            plane.admin.run("apply", "-f", "-", stdin=manifest.replace(AGENT_LIMIT, TCG_AGENT_LIMIT))
            yield Story(plane=plane, node=node, release=release, workdir=workdir, baseline=baseline)
        finally:
            node.stop()


def agent_pods(story: Story) -> list[dict[str, Any]]:
    pods: list[dict[str, Any]] = story.plane.admin.json("-n", NAMESPACE, "get", "pods")["items"]
    return [
        pod
        for pod in pods
        if any(
            ref["kind"] == "DaemonSet" and ref["name"] == "podpin" for ref in pod["metadata"].get("ownerReferences", [])
        )
    ]


def pod_ready(pod: dict[str, Any]) -> bool:
    conditions = pod["status"].get("conditions", [])
    return pod["metadata"].get("deletionTimestamp") is None and any(
        c["type"] == "Ready" and c["status"] == "True" for c in conditions
    )


def wait_agent_ready(story: Story, *, other_than: str | None = None) -> dict[str, Any]:
    """The agent's one pod, Ready (another than the pod uid `other_than`); on timeout its status and log."""

    def ready() -> bool:
        pods = agent_pods(story)
        return len(pods) == 1 and pod_ready(pods[0]) and pods[0]["metadata"]["uid"] != other_than

    try:
        wait_for(
            "the podpin DaemonSet's pod to be Ready", ready, timeout=AGENT_TIMEOUT, logs=story.node.logs(), every=5
        )
    except ClusterError as err:
        pods = agent_pods(story)
        log = story.plane.admin.run("-n", NAMESPACE, "logs", "ds/podpin", "--tail=30", check=False)
        status = json.dumps([pod["status"] for pod in pods], indent=1)[-3000:]
        raise ClusterError(f"{err}\n--- agent pods ---\n{status}\n--- agent log ---\n{log.stdout}") from err
    return agent_pods(story)[0]


def get_pod(story: Story, namespace: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = story.plane.admin.json("-n", namespace, "get", "pod", name)
    return found


def container_names(pod: dict[str, Any]) -> list[str]:
    spec = pod["spec"]
    sidecars = [c["name"] for c in spec.get("initContainers", []) if c.get("restartPolicy") == "Always"]
    return [*sidecars, *(c["name"] for c in spec["containers"])]


def apply_pod(story: Story, manifest: dict[str, Any]) -> None:
    """Create the pod (and its namespace) and wait until every container runs."""
    namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
    story.plane.admin.run("create", "namespace", namespace, check=False)
    story.kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    story.applied.append((namespace, name))

    def running() -> bool:
        statuses = get_pod(story, namespace, name)["status"].get("containerStatuses", [])
        return bool(statuses) and all("running" in s.get("state", {}) for s in statuses)

    wait_for(f"pod {namespace}/{name} to run", running, timeout=POD_TIMEOUT, logs=story.node.logs(), every=3)


def delete_pod(story: Story, namespace: str, name: str) -> None:
    story.kubectl("-n", namespace, "delete", "pod", name, "--wait=true", timeout=POD_TIMEOUT)
    story.applied.remove((namespace, name))


def plan_of(story: Story, pods: list[tuple[str, str]]) -> dict[str, Any]:
    """``podpin plan --output json`` of `pods` (as the API server has them) on the node's topology, with the
    agent's ConfigMap."""
    scratch = story.workdir / f"plan-{time.monotonic_ns()}"
    scratch.mkdir()
    topology = scratch / "topology.json"
    if not story.topology:
        story.topology = story.node.sh(str(PODPIN), "topology", "--output", "json", timeout=900).stdout
    topology.write_text(story.topology)
    config = scratch / "config.yaml"
    config.write_text(
        story.plane.admin.json("-n", NAMESPACE, "get", "configmap", "podpin-config")["data"]["config.yaml"]
    )
    files = []
    for index, (namespace, name) in enumerate(pods):
        path = scratch / f"{index:02d}-{name}.json"
        path.write_text(json.dumps(get_pod(story, namespace, name)))
        files.append(str(path))
    run = subprocess.run(
        [str(PODPIN), "plan", "--output", "json", "--topology", str(topology), "--config", str(config), *files],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert 0 == run.returncode, run.stderr
    plan: dict[str, Any] = json.loads(run.stdout)
    return plan


def planned_cpus(plan: dict[str, Any], name: str) -> dict[str, str]:
    pod = next(p for p in plan["pods"] if p["name"] == name)
    return {c["name"]: str(CPUSet.parse(c["cpus"])) for c in pod["containers"] if c["kind"] != "init"}


def first_view(story: Story, namespace: str, name: str, container: str) -> str:
    log = story.kubectl("-n", namespace, "logs", name, "-c", container)
    line = next((line for line in log.splitlines() if line.startswith(FIRST_VIEW_PREFIX)), None)
    assert line is not None, f"{namespace}/{name}/{container} logged no first view: {log[:500]!r}"
    return str(CPUSet.parse(line.removeprefix(FIRST_VIEW_PREFIX).strip()))


def now_on(story: Story, pod: dict[str, Any], container: str) -> str:
    """The CPUs a container's first process may run on now: ``Cpus_allowed_list`` of the first pid of its cgroup,
    read in the guest."""
    status = next(s for s in all_statuses(pod) if s["name"] == container)
    container_id = status["containerID"].split("://", 1)[1]
    script = (
        f'd=$(find /sys/fs/cgroup/kubepods -maxdepth 3 -type d -name "{container_id}"); '
        'p=$(head -n 1 "$d/cgroup.procs"); grep Cpus_allowed_list "/proc/$p/status"'
    )
    line = story.node.sh("sh", "-c", script).stdout.strip()
    return str(CPUSet.parse(line.split(":", 1)[1].strip()))


def all_statuses(pod: dict[str, Any]) -> list[dict[str, Any]]:
    status = pod["status"]
    found: list[dict[str, Any]] = [*status.get("initContainerStatuses", []), *status.get("containerStatuses", [])]
    return found


def cpus_now(story: Story) -> dict[str, str]:
    """Every test container's CPUs now (:func:`_now_on`), by namespace/pod/container; a read that fails (a container
    between restarts) is tried again for up to a minute."""
    seen: dict[str, str] = {}

    def read() -> bool:
        seen.clear()
        seen.update(
            {
                f"{namespace}/{name}/{container}": now_on(story, pod, container)
                for namespace, name in story.applied
                for pod in (get_pod(story, namespace, name),)
                for container in container_names(pod)
            }
        )
        return True

    wait_for("the containers' CPUs to be read in the guest", read, timeout=60, every=5)
    return dict(seen)
