"""The user's story on the real cluster, end to end, in one guest boot (the tests run in file order, each building
on the last):

1. the release made by ``scripts/release`` (tests/support/agent_image.py builds it as the image test does); its OCI
   archive imported into the node's containerd and tagged as a registry would serve it (``REPOSITORY:VERSION`` and
   ``REPOSITORY@DIGEST``: containerd resolves a digest reference by that name only), so the plain manifests and the
   packaged chart run unchanged; the QoS cgroups' files read before podpin ever runs;
2. ``kubectl label node`` + ``kubectl apply -f deploy/daemonset.yaml`` (the agent's CPU limit raised for the emulated
   node, TCG_AGENT_LIMIT): the agent's pod scheduled, started, Ready;
3. scaled copies of deploy/examples/pods (tests/cluster/example_pods.py) applied one by one: every container's first
   ``Cpus_allowed_list`` (the probe's first log line) equals ``podpin plan`` for that node (its topology read by
   ``podpin topology`` in the agent's pod, its configuration the ConfigMap's) over the pods created so far; the
   ``Pinned`` Events (``kubectl get events``), the ``podpin.io/CPUsPinned`` condition, the allocation lines in
   ``kubectl logs``; a pod deleted gives its CPUs back to the pool;
4. the plain install removed (``kubectl delete -f``: the agent stops, the cgroups stay as they are) and the release's
   chart installed with ``helm install`` (single-numa-node): nothing moves; then ``helm upgrade``, the agent's pod
   deleted, a kubelet restart and a containerd restart: nothing moves;
5. a pod that cannot be placed: ``kubectl describe`` shows ``podpin.io/CPUsPinned False`` and
   ``TopologyAffinityError``;
6. ``helm uninstall``: the pre-delete hook resets the node, and the QoS levels' effective cpusets and ``cpu.max``
   are what they were before podpin ran.

The image build, its import into the TCG guest and the agent's starts take most of the module's half hour.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent.cpuset import CPUSet
from scripts.release import Release
from tests.cluster.controlplane import NODE_NAME, ControlPlane
from tests.cluster.example_pods import scaled_example
from tests.cluster.node import GuestNode, NodeSpec, guest_modules
from tests.cluster.procs import ClusterError, require_setup, wait_for
from tests.support.agent_image import build_release, missing_image_inputs
from tests.support.k8s_tools import helm
from tests.vm.containerd import runtime_bin
from tests.vm.harness import require_vm
from tests.vm.ociimage import FIRST_VIEW_PREFIX

pytestmark = [pytest.mark.cluster, pytest.mark.cluster_deploy]

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
CPU_DIVISOR, MEMORY_DIVISOR = 4, 16
"""The examples ask for a two-socket machine; the node has 4 CPUs on 2 NUMA nodes and 4 GiB (example_pods.py)."""
REJECTED_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "too-wide", "namespace": "default"},
    "spec": {
        "resources": {"requests": {"cpu": "3", "memory": "64Mi"}, "limits": {"cpu": "3", "memory": "64Mi"}},
        "containers": [
            {
                "name": "app",
                "image": "podpin.local/probe:1",
                "imagePullPolicy": "Never",
                "resources": {"requests": {"cpu": "3", "memory": "64Mi"}, "limits": {"cpu": "3", "memory": "64Mi"}},
            }
        ],
        "terminationGracePeriodSeconds": 1,
    },
}
"""A 3-CPU pod bubble on a node whose NUMA nodes have 2 CPUs: single-numa-node cannot place it."""
LATE_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "late", "namespace": "default"},
    "spec": {
        "containers": [
            {
                "name": "app",
                "image": "podpin.local/probe:1",
                "imagePullPolicy": "Never",
                "resources": {"requests": {"cpu": "1", "memory": "32Mi"}, "limits": {"cpu": "1", "memory": "32Mi"}},
            }
        ],
        "terminationGracePeriodSeconds": 1,
    },
}
"""A Guaranteed pod with one whole CPU, created while no agent runs."""


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


def _ctr(node: GuestNode, *args: str) -> str:
    """``ctr -n k8s.io ARGS`` in the guest, against the node's containerd."""
    ctr = runtime_bin(Path(os.environ.get("PODPIN_VM_DIR", "/tmp/podpin-vm"))) / "ctr"
    return node.sh(str(ctr), "--address", "/run/containerd/containerd.sock", "-n", "k8s.io", *args).stdout


def _qos_files(node: GuestNode) -> dict[str, str]:
    return {
        f"{level}/{name}": node.sh("cat", f"/sys/fs/cgroup/{level}/{name}").stdout.strip()
        for level in QOS
        for name in QOS_FILES
    }


def _tag_release_image(node: GuestNode, release: Release) -> None:
    """Name the imported archive's image as a registry serving the release would: by tag and by digest."""
    listed = _ctr(node, "images", "list", "--quiet").split()
    imported = [name for name in listed if name.endswith(f"/podpin:{release.version}")]
    if not imported:
        raise ClusterError(f"the release's image is not in the node's containerd (it lists {listed})")
    for target in (f"{REPOSITORY}:{release.version}", f"{REPOSITORY}@{release.image_digest}"):
        if target not in listed:
            _ctr(node, "images", "tag", imported[0], target)


@pytest.fixture(scope="module")
def story(k8s_version: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    """A Ready node holding the release's image, its QoS files read, labelled, `kubectl apply -f deploy/daemonset.yaml`
    done."""
    require_vm()
    for reason in (missing_image_inputs(), guest_modules()):
        if reason:
            require_setup(reason)
    workdir = Path(tmp_path_factory.mktemp("deploy"))
    release = build_release(workdir / "dist", repository=REPOSITORY)
    with ControlPlane(workdir / "plane", version=k8s_version) as plane:
        node = GuestNode(plane, workdir / "node", NodeSpec(cpus=4, numa_nodes=2, images=(release.image_archive,)))
        try:
            node.start()
            _tag_release_image(node, release)
            baseline = _qos_files(node)
            plane.admin.run("label", "node", NODE_NAME, "podpin.io/enabled=true")
            manifest = (REPO / "deploy" / "daemonset.yaml").read_text()
            assert f"image: {REPOSITORY}:{release.version}\n" in manifest, "the manifests name another image"
            assert AGENT_LIMIT in manifest, "the manifests set another CPU limit: update AGENT_LIMIT"
            plane.admin.run("apply", "-f", "-", stdin=manifest.replace(AGENT_LIMIT, TCG_AGENT_LIMIT))
            yield Story(plane=plane, node=node, release=release, workdir=workdir, baseline=baseline)
        finally:
            node.stop()


def _agent_pods(story: Story) -> list[dict[str, Any]]:
    pods: list[dict[str, Any]] = story.plane.admin.json("-n", NAMESPACE, "get", "pods")["items"]
    return [
        pod
        for pod in pods
        if any(
            ref["kind"] == "DaemonSet" and ref["name"] == "podpin" for ref in pod["metadata"].get("ownerReferences", [])
        )
    ]


def _ready(pod: dict[str, Any]) -> bool:
    conditions = pod["status"].get("conditions", [])
    return pod["metadata"].get("deletionTimestamp") is None and any(
        c["type"] == "Ready" and c["status"] == "True" for c in conditions
    )


def _wait_agent_ready(story: Story, *, other_than: str | None = None) -> dict[str, Any]:
    """The agent's one pod, Ready (another than the pod uid `other_than`); on timeout its status and log."""

    def ready() -> bool:
        pods = _agent_pods(story)
        return len(pods) == 1 and _ready(pods[0]) and pods[0]["metadata"]["uid"] != other_than

    try:
        wait_for(
            "the podpin DaemonSet's pod to be Ready", ready, timeout=AGENT_TIMEOUT, logs=story.node.logs(), every=5
        )
    except ClusterError as err:
        pods = _agent_pods(story)
        log = story.plane.admin.run("-n", NAMESPACE, "logs", "ds/podpin", "--tail=30", check=False)
        status = json.dumps([pod["status"] for pod in pods], indent=1)[-3000:]
        raise ClusterError(f"{err}\n--- agent pods ---\n{status}\n--- agent log ---\n{log.stdout}") from err
    return _agent_pods(story)[0]


def _pod(story: Story, namespace: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = story.plane.admin.json("-n", namespace, "get", "pod", name)
    return found


def _containers(pod: dict[str, Any]) -> list[str]:
    spec = pod["spec"]
    sidecars = [c["name"] for c in spec.get("initContainers", []) if c.get("restartPolicy") == "Always"]
    return [*sidecars, *(c["name"] for c in spec["containers"])]


def _apply_pod(story: Story, manifest: dict[str, Any]) -> None:
    """Create the pod (and its namespace) and wait until every container runs."""
    namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
    story.plane.admin.run("create", "namespace", namespace, check=False)
    story.kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    story.applied.append((namespace, name))

    def running() -> bool:
        statuses = _pod(story, namespace, name)["status"].get("containerStatuses", [])
        return bool(statuses) and all("running" in s.get("state", {}) for s in statuses)

    wait_for(f"pod {namespace}/{name} to run", running, timeout=POD_TIMEOUT, logs=story.node.logs(), every=3)


def _delete_pod(story: Story, namespace: str, name: str) -> None:
    story.kubectl("-n", namespace, "delete", "pod", name, "--wait=true", timeout=POD_TIMEOUT)
    story.applied.remove((namespace, name))


def _plan(story: Story, pods: list[tuple[str, str]]) -> dict[str, Any]:
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
        path.write_text(json.dumps(_pod(story, namespace, name)))
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


def _planned(plan: dict[str, Any], name: str) -> dict[str, str]:
    pod = next(p for p in plan["pods"] if p["name"] == name)
    return {c["name"]: str(CPUSet.parse(c["cpus"])) for c in pod["containers"] if c["kind"] != "init"}


def _first_view(story: Story, namespace: str, name: str, container: str) -> str:
    log = story.kubectl("-n", namespace, "logs", name, "-c", container)
    line = next((line for line in log.splitlines() if line.startswith(FIRST_VIEW_PREFIX)), None)
    assert line is not None, f"{namespace}/{name}/{container} logged no first view: {log[:500]!r}"
    return str(CPUSet.parse(line.removeprefix(FIRST_VIEW_PREFIX).strip()))


def _now_on(story: Story, pod: dict[str, Any], container: str) -> str:
    """The CPUs a container's first process may run on now: ``Cpus_allowed_list`` of the first pid of its cgroup,
    read in the guest."""
    status = next(s for s in _all_statuses(pod) if s["name"] == container)
    container_id = status["containerID"].split("://", 1)[1]
    script = (
        f'd=$(find /sys/fs/cgroup/kubepods -maxdepth 3 -type d -name "{container_id}"); '
        'p=$(head -n 1 "$d/cgroup.procs"); grep Cpus_allowed_list "/proc/$p/status"'
    )
    line = story.node.sh("sh", "-c", script).stdout.strip()
    return str(CPUSet.parse(line.split(":", 1)[1].strip()))


def _all_statuses(pod: dict[str, Any]) -> list[dict[str, Any]]:
    status = pod["status"]
    found: list[dict[str, Any]] = [*status.get("initContainerStatuses", []), *status.get("containerStatuses", [])]
    return found


def _cpus_now(story: Story) -> dict[str, str]:
    """Every test container's CPUs now (:func:`_now_on`), by namespace/pod/container; a read that fails (a container
    between restarts) is tried again for up to a minute."""
    seen: dict[str, str] = {}

    def read() -> bool:
        seen.clear()
        seen.update(
            {
                f"{namespace}/{name}/{container}": _now_on(story, pod, container)
                for namespace, name in story.applied
                for pod in (_pod(story, namespace, name),)
                for container in _containers(pod)
            }
        )
        return True

    wait_for("the containers' CPUs to be read in the guest", read, timeout=60, every=5)
    return dict(seen)


def _apply_example(story: Story, example: str) -> None:
    """Apply one scaled example; its containers' first views equal the plan over the pods created so far."""
    manifest = scaled_example(example, cpu_divisor=CPU_DIVISOR, memory_divisor=MEMORY_DIVISOR)
    _apply_pod(story, manifest)
    namespace, name = story.applied[-1]
    planned = _planned(_plan(story, story.applied), name)
    seen = {container: _first_view(story, namespace, name, container) for container in planned}
    assert planned == seen, f"{namespace}/{name}: planned (left) and first views (right)"


def _settled_on_plan(story: Story) -> None:
    """Wait until every test container runs on its planned CPUs (after a release: the pool grows back)."""
    plan = _plan(story, story.applied)
    expected = {
        f"{namespace}/{name}/{container}": cpus
        for namespace, name in story.applied
        for container, cpus in _planned(plan, name).items()
    }
    wait_for(
        f"the containers to run on {expected}",
        lambda: _cpus_now(story) == expected,
        timeout=180,
        logs=story.node.logs(),
        every=5,
    )


def test_agent_pod_scheduled_started_ready(story: Story) -> None:
    """The DaemonSet's pod lands on the node and becomes Ready under the real kubelet, without restarts."""
    pod = _wait_agent_ready(story)
    assert (NODE_NAME, 0) == (pod["spec"]["nodeName"], pod["status"]["containerStatuses"][0]["restartCount"])


def test_kubectl_logs_show_the_agent(story: Story) -> None:
    """`kubectl logs ds/podpin` (through the API server and the kubelet) shows the agent's started line and that it
    reads no kubelet configuration file (the chart's default: none mounted)."""
    logs = story.kubectl("-n", NAMESPACE, "logs", "ds/podpin")
    events = {json.loads(line).get("event") for line in logs.splitlines() if line.startswith("{")}
    assert {"agent.started", "kubelet.config_not_read"} <= events, logs[-2000:]


def test_example_pods_start_on_the_planned_cpus(story: Story) -> None:
    """The burstable web pod, then the trading engine (a 2-CPU pod bubble: one exclusive CPU for the database, the
    sidecars on the pod's shared CPU): each container's first Cpus_allowed_list is `podpin plan`'s."""
    _apply_example(story, "web-burstable.yaml")
    _apply_example(story, "trading-engine-after.yaml")


def test_pinned_events_and_condition(story: Story) -> None:
    """`kubectl get events` shows podpin's Normal Pinned Event on the trading engine, and its status carries
    podpin.io/CPUsPinned True."""
    events = story.plane.admin.json("-n", "trading", "get", "events")["items"]
    pinned = [e for e in events if e["involvedObject"]["name"] == "trading-engine" and e["reason"] == "Pinned"]
    condition = [
        c
        for c in _pod(story, "trading", "trading-engine")["status"]["conditions"]
        if c["type"] == "podpin.io/CPUsPinned"
    ]
    assert (1, "Normal", [("True", "Pinned")]) == (
        len(pinned),
        pinned[0]["type"] if pinned else None,
        [(c["status"], c["reason"]) for c in condition],
    ), events


def test_kubectl_logs_show_the_allocations(story: Story) -> None:
    """The agent's log has the trading engine's allocation lines: the database exclusive, the sidecars on the pod
    pool."""
    logs = story.kubectl("-n", NAMESPACE, "logs", "ds/podpin")
    lines = [json.loads(line) for line in logs.splitlines() if line.startswith("{")]
    admitted = {
        container: decision["pool"]
        for line in lines
        if line.get("event") == "pod.admitted" and line.get("pod") == "trading-engine"
        for container, decision in line["containers"].items()
    }
    assert {"database": "exclusive", "envoy": "pod_shared", "log-collector": "pod_shared"} == admitted, logs[-3000:]


def test_a_deleted_pod_gives_its_cpus_back(story: Story) -> None:
    """The trading engine deleted: web runs on the whole node again; the ML loader then takes a bubble (its first
    views are the plan's too)."""
    _delete_pod(story, "trading", "trading-engine")
    _settled_on_plan(story)
    assert {"default/web/nginx": "0-3"} == _cpus_now(story)
    _apply_example(story, "ml-data-loader.yaml")


def test_helm_install_of_the_release_moves_nothing(story: Story) -> None:
    """The plain install deleted (the agent stops; the kernel keeps every cpuset), a pod created meanwhile, then the
    release's chart installed by helm (single-numa-node): the new agent runs the released image by digest, adopts
    the pods (nothing moves) and pins the pod created while it was down on its planned CPU."""
    before = _cpus_now(story)
    story.kubectl("delete", "-f", str(REPO / "deploy" / "daemonset.yaml"), "--wait=true", timeout=POD_TIMEOUT)
    _apply_pod(story, LATE_POD)
    notes = story.helm(
        "install",
        "podpin",
        str(story.release.chart),
        "--namespace",
        NAMESPACE,
        "--create-namespace",
        "--set",
        "resources.limits.cpu=1",  # 200m starves the agent's start under TCG
        "--set",
        "config.topologyManagerPolicy=single-numa-node",
    )
    pod = _wait_agent_ready(story)
    assert (story.release.image, True) == (pod["spec"]["containers"][0]["image"], "NOTES:" in notes), notes
    _settled_on_plan(story)
    # The pinned pod keeps its CPUs; the node shared pool (web's) gives the late pod its CPU, as the plan says.
    pinned = {key for key in before if key.startswith("ml/")}
    now = _cpus_now(story)
    assert {key: before[key] for key in pinned} == {key: now[key] for key in pinned}


def test_helm_upgrade_moves_nothing(story: Story) -> None:
    """`helm upgrade` changing a key the agents take only at start rolls the agent: nothing moves."""
    before, old = _cpus_now(story), _agent_pods(story)[0]["metadata"]["uid"]
    story.helm(
        "upgrade",
        "podpin",
        str(story.release.chart),
        "--namespace",
        NAMESPACE,
        "--reuse-values",
        "--set",
        "config.logLevel=debug",
    )
    _wait_agent_ready(story, other_than=old)
    assert before == _cpus_now(story)


def test_agent_pod_deleted_and_recreated_moves_nothing(story: Story) -> None:
    """The agent's pod deleted: the DaemonSet controller makes another, which adopts the pods; nothing moves."""
    before, old = _cpus_now(story), _agent_pods(story)[0]
    story.kubectl("-n", NAMESPACE, "delete", "pod", old["metadata"]["name"], "--wait=false")
    _wait_agent_ready(story, other_than=old["metadata"]["uid"])
    assert before == _cpus_now(story)


def test_kubelet_and_containerd_restarts_move_nothing(story: Story) -> None:
    """A kubelet restart, then a containerd crash and restart: the pods keep their CPUs, the agent stays."""
    before = _cpus_now(story)
    story.node.restart_kubelet()
    wait_for(f"Node {NODE_NAME} Ready", story.node.ready, timeout=300, logs=story.node.logs(), every=3)
    story.node.restart_containerd()
    _wait_agent_ready(story)
    assert before == _cpus_now(story)


def _writes(story: Story) -> dict[str, float]:
    """The agent's cgroup write and drift repair counters, from its /metrics on its pod's address, read in the guest
    (the pod network is not reachable from the host)."""
    address = _agent_pods(story)[0]["status"]["podIP"]
    script = f"import urllib.request; print(urllib.request.urlopen('http://{address}:9363/metrics').read().decode())"
    text = story.node.sh(str(GUEST_PYTHON), "-c", script, timeout=600).stdout
    counters: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name in ("podpin_cgroup_writes", "podpin_drift_repairs"):
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    key = family.name + "".join(f"/{v}" for _, v in sorted(sample.labels.items()))
                    counters[key] = sample.value
    return counters


def test_five_minutes_beside_the_kubelet_write_nothing(story: Story) -> None:
    """Settled, the agent writes no cpuset or cpu.max for five minutes of the kubelet's syncs and housekeeping, and
    repairs no drift: nothing of the kubelet's fights podpin's values (issue 16 item 4)."""
    time.sleep(30)  # three reconcile periods after the restarts
    first = _writes(story)
    time.sleep(300)
    last = _writes(story)
    assert {} == {key: last.get(key, 0.0) - value for key, value in first.items() if last.get(key, 0.0) != value} | {
        key: value for key, value in last.items() if key not in first
    }


def test_a_rejected_pod_shows_why(story: Story) -> None:
    """The ML loader deleted, a 3-CPU pod bubble under single-numa-node on 2-CPU NUMA nodes: `podpin plan` rejects
    it, and `kubectl describe` shows podpin.io/CPUsPinned False and TopologyAffinityError."""
    _delete_pod(story, "ml", "imagenet-loader")
    _delete_pod(story, "default", "late")  # the scheduler's room for 3 CPUs
    _apply_pod(story, REJECTED_POD)
    planned = next(p for p in _plan(story, story.applied)["pods"] if p["name"] == "too-wide")

    def condition() -> dict[str, Any] | None:
        found = [
            c
            for c in _pod(story, "default", "too-wide")["status"].get("conditions", [])
            if c["type"] == "podpin.io/CPUsPinned"
        ]
        return found[0] if found else None

    wait_for("too-wide's podpin.io/CPUsPinned condition", lambda: condition() is not None, timeout=180, every=3)
    described = story.kubectl("-n", "default", "describe", "pod", "too-wide")
    shown = [line.split() for line in described.splitlines() if "podpin.io/CPUsPinned" in line]
    found = condition()
    assert found is not None
    assert (
        (False, "TopologyAffinityError"),
        ("False", "TopologyAffinityError"),
        [["podpin.io/CPUsPinned", "False"]],
        True,
    ) == (
        (planned["admitted"], planned["reason"]),
        (found["status"], found["reason"]),
        shown[:1],
        "TopologyAffinityError" in described,
    ), described


def test_helm_uninstall_resets_the_node(story: Story) -> None:
    """`helm uninstall`: the pre-delete hook resets the node before the agents go; the QoS levels' effective
    cpusets and quotas are what they were before podpin ever ran."""
    story.helm("uninstall", "podpin", "--namespace", NAMESPACE, "--wait", "--timeout", "20m")
    assert story.baseline == _qos_files(story.node)
