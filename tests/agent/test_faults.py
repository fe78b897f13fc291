"""The fault table: bad input and faults never stop the agent nor cost another pod its CPUs.

The contract is ``docs/design.md``, "Failures".

Every case runs on a fresh node in two phases, in-process over the kernel
emulation and against the API server emulator (the official client, Events
posted for real; the one pods-directory case reads manifests instead):

1. baseline: the ``keeper`` pod (two exclusive CPUs) is admitted and pinned by
   one ``--once`` pass;
2. the case's setup adds its fault (a malformed or impossible pod, a failing
   cgroup file, a damaged checkpoint, API failures ...), and the agent runs
   again (``--once``, or long-running with the case's actions while it runs).

Then four things are checked, one table column each: the log line the fault
must produce, one metric sample, the Warning Events posted (pod and reason;
none for faults that concern no pod, or a container that simply exited), and
that ``keeper`` still holds exactly its baseline CPUs in its cgroup and in the
agent's state. The agent keeps running throughout: a ``--once`` pass returns
its normal status, a long-running agent stops cleanly afterwards.
"""

from __future__ import annotations

import copy
import dataclasses
import errno
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from agent.cgroups.fs import FileOps
from agent.cpuset import CPUSet
from agent.runner import Agent
from agent.state_store import StateStore
from tests.support.agentfixture import NODE, AgentNode, kubeconfig, make_node, running, sample, wait_until
from tests.support.apiserver_emulator import ApiServerEmulator
from tests.support.cgroupfs_builder import FaultyOps, remove_cgroup
from tests.support.podfactory import container, make_pod, resources, sidecar
from tests.support.sysfs_builder import MACHINES, write_sysfs

KEEPER_CPUS = "1,17"


def _ts(n: int) -> str:
    return f"2026-01-01T00:00:{n:02d}Z"


def gu(name: str, cpus: str = "2", *, states: dict[str, str] | None = None, ts: int = 5, **kw: Any) -> dict[str, Any]:
    """A Guaranteed pod with one container ``app`` (running unless ``states`` says otherwise)."""
    return make_pod(
        name,
        containers=[container("app", cpu=cpus, memory="1Gi")],
        states=states or {"app": "running"},
        creation_timestamp=_ts(ts),
        **kw,
    )


KEEPER = gu("keeper", ts=1)


class IgnoredWrites:
    """A FileOps for which writes to ``paths`` succeed and change nothing (the kernel ignoring a value)."""

    def __init__(self, inner: FileOps, paths: set[Path]) -> None:
        self.inner = inner
        self.paths = paths

    def read(self, path: Path) -> str:
        return self.inner.read(path)

    def write(self, path: Path, text: str) -> None:
        if path not in self.paths:
            self.inner.write(path, text)


@dataclass
class Ctx:
    """What a case's setup and actions work with."""

    node: AgentNode
    api: ApiServerEmulator
    faults: FaultyOps
    ignored: set[Path] = field(default_factory=set)
    source: str = "api"

    def pod(self, raw: dict[str, Any], *, cgroups_of: dict[str, Any] | None = None) -> None:
        """Create a pod in the API server and the pods dir, and its cgroups (from ``cgroups_of`` if given)."""
        self.api.add_pod(raw)
        self.node.write_manifest(raw)
        self.node.add_pod(cgroups_of or raw, manifest=False)

    def container(self, raw: dict[str, Any], name: str = "app") -> Path:
        """The cgroup of one of the pod's containers."""
        return self.node.container_cgroup(raw, name)


@dataclass(frozen=True)
class Case:
    """One fault: how to cause it, and what must follow.

    ``log`` is the event name and fields one log line must have; ``metric`` one
    sample (name, labels, value); ``events`` the Warnings that must be posted
    (pod name, reason; empty: no Warning at all); ``live`` actions run while the
    agent runs long-running (None: one ``--once`` pass, whose exit status is ``status``);
    ``keeper_cpus`` what the other pod still holds afterwards, in its cgroup and in the state.
    """

    id: str
    setup: Callable[[Ctx], None]
    log: tuple[str, dict[str, Any]]
    metric: tuple[str, dict[str, str], float]
    events: tuple[tuple[str, str], ...]
    live: Callable[[Ctx, Agent], None] | None = None
    config: dict[str, Any] = field(default_factory=dict)
    status: int = 0
    keeper_cpus: str = KEEPER_CPUS


# -- setups --------------------------------------------------------------------------------------
def malformed(raw: dict[str, Any]) -> Callable[[Ctx], None]:
    """Add a pod the agent cannot read (no cgroups: it never got as far as a pod model)."""

    def setup(ctx: Ctx) -> None:
        ctx.api.add_pod(raw)
        ctx.node.write_manifest(raw)

    return setup


def with_field(raw: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of ``raw`` with the dotted ``path`` set to ``value`` (``...`` deletes it)."""
    raw = copy.deepcopy(raw)
    *parents, last = path.split(".")
    node: Any = raw
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    key: Any = int(last) if isinstance(node, list) else last
    if value is ...:
        del node[key]
    else:
        node[key] = value
    return raw


def bad_status_id(container_id: str) -> Callable[[Ctx], None]:
    """A pod whose status names its container with an unusable containerID; its real cgroup exists."""
    good = gu("odd")
    raw = with_field(good, "status.containerStatuses.0.containerID", container_id)
    return lambda ctx: ctx.pod(raw, cgroups_of=good)


def plain(raw: dict[str, Any], **kw: Any) -> Callable[[Ctx], None]:
    """Add a well-formed pod with its cgroups."""
    return lambda ctx: ctx.pod(raw, **kw)


VICTIM = gu("victim", ts=3)


def write_fault(file: str, code: int, *, level: str = "container") -> Callable[[Ctx], None]:
    """``victim``'s container (or pod) cgroup fails writes of ``file`` with ``code``."""

    def setup(ctx: Ctx) -> None:
        ctx.pod(VICTIM)
        cgroup = ctx.container(VICTIM) if level == "container" else ctx.node.pod_cgroup(VICTIM)
        ctx.faults.write_errors[cgroup / file] = code  # type: ignore[index]

    return setup


def vanish(level: str) -> Callable[[Ctx], None]:
    """``victim``'s container (or whole pod) cgroup is removed just before its cpuset.cpus is written."""

    def setup(ctx: Ctx) -> None:
        ctx.pod(VICTIM)
        cgroup = ctx.container(VICTIM) if level == "container" else ctx.node.pod_cgroup(VICTIM)
        ctx.faults.before_write[cgroup / "cpuset.cpus"] = remove_cgroup(cgroup)  # type: ignore[index]

    return setup


def read_fault(code: int) -> Callable[[Ctx], None]:
    """Reading ``victim``'s container ``cpuset.cpus`` fails with ``code``."""

    def setup(ctx: Ctx) -> None:
        ctx.pod(VICTIM)
        ctx.faults.read_errors[ctx.container(VICTIM) / "cpuset.cpus"] = code  # type: ignore[index]

    return setup


def garbage_cpu_max(ctx: Ctx) -> None:
    """``victim``'s container ``cpu.max`` holds something the kernel never writes."""
    ctx.pod(VICTIM)
    (ctx.container(VICTIM) / "cpu.max").write_text("banana\n")


def ignored_write(ctx: Ctx) -> None:
    """Writes to ``victim``'s container ``cpuset.cpus`` succeed and change nothing: the read-back differs."""
    ctx.pod(VICTIM)
    ctx.ignored.add(ctx.container(VICTIM) / "cpuset.cpus")


def qos_busy(ctx: Ctx) -> None:
    """The burstable QoS level refuses cpuset writes (EBUSY) while ``victim`` shrinks the shared pool."""
    ctx.pod(VICTIM)
    ctx.faults.write_errors[ctx.node.tree.qos_dir("Burstable") / "cpuset.cpus"] = errno.EBUSY  # type: ignore[index]


def root_lacks_cpus(ctx: Ctx) -> None:
    """The cgroup root grants CPUs 0-23 only: writing the shared pool (up to 31) gets ERANGE from the kernel."""
    ctx.pod(VICTIM)
    (ctx.node.tree.root / "cpuset.cpus.effective").write_text("0-23")


def checkpoint(text: bytes | None) -> Callable[[Ctx], None]:
    """Replace the checkpoint with ``text`` (None: a directory in its place), and add ``victim``."""

    def setup(ctx: Ctx) -> None:
        path = ctx.node.state_dir / "podpin_state.json"
        path.unlink()
        if text is None:
            path.mkdir()
        else:
            path.write_bytes(text)
        ctx.pod(VICTIM)

    return setup


def tampered_checkpoint(ctx: Ctx) -> None:
    """The checkpoint's data edited by hand: its checksum no longer matches."""
    path = ctx.node.state_dir / "podpin_state.json"
    document = json.loads(path.read_text())
    document["data"]["cpus"]["default"] = "0-31"
    path.write_text(json.dumps(document))
    ctx.pod(VICTIM)


def other_machine_checkpoint(ctx: Ctx) -> None:
    """A valid checkpoint written on a machine with CPUs 0-63 (the disk moved, or the kernel saw other CPUs)."""
    store = StateStore(ctx.node.state_dir)
    state = store.load()
    assert state is not None
    store.save(dataclasses.replace(state, online=CPUSet.parse("0-63")))
    ctx.pod(VICTIM)


def self_contradicting_checkpoint(ctx: Ctx) -> None:
    """A valid-checksum checkpoint whose shared pool also holds every exclusive CPU (it contradicts itself)."""
    store = StateStore(ctx.node.state_dir)
    state = store.load()
    assert state is not None
    cpu = state.cpu.copy()
    cpu.default = cpu.default | cpu.assigned()
    store.save(dataclasses.replace(state, cpu=cpu))
    ctx.pod(VICTIM)


def state_dir_unwritable(ctx: Ctx) -> None:
    """A file where the state directory should be: no checkpoint can be read or written."""
    shutil.rmtree(ctx.node.state_dir)
    ctx.node.state_dir.write_text("not a directory\n")
    ctx.pod(VICTIM)


def kubelet_state(content: bytes | None) -> Callable[[Ctx], None]:
    """The kubelet's ``cpu_manager_state`` holds ``content`` (None: a directory, unreadable as a file)."""

    def setup(ctx: Ctx) -> None:
        path = ctx.node.kubelet_state
        path.parent.mkdir(exist_ok=True)
        if content is None:
            path.mkdir()
        else:
            path.write_bytes(content)
        ctx.pod(VICTIM)

    return setup


def api_fails(n: int, status: int, method: str) -> Callable[[Ctx], None]:
    """The next ``n`` ``method`` requests get HTTP ``status`` (a POST case adds a pod whose Warning fails)."""

    def setup(ctx: Ctx) -> None:
        ctx.pod(VICTIM if method == "GET" else gu("huge", "40", ts=3))
        ctx.api.fail_next(n, status, method=method)

    return setup


def manifest_garbage(ctx: Ctx) -> None:
    """Pods from the pods directory, one of whose files is not YAML."""
    ctx.source = "dir"
    (ctx.node.pods_dir / "broken.yaml").write_text("kind: Pod\nmetadata: [unclosed\n")


# -- live actions --------------------------------------------------------------------------------
def drop_watch_then_add(ctx: Ctx, agent: Agent) -> None:
    """Cut the watch mid-stream; a pod created afterwards must still be pinned.

    The emulator records a watch request just before it registers the stream,
    so the cut is repeated until the agent has counted one failed watch.
    """
    wait_until(lambda: sum(r.query.get("watch") == "true" for r in ctx.api.requests) >= 2, what="this agent's watch")

    def cut() -> bool:
        if sample(agent, "podpin_source_errors_total"):
            return True
        ctx.api.drop_watches(abrupt=True)
        return False

    wait_until(cut, what="the watch cut")
    ctx.pod(VICTIM)
    wait_until(lambda: ctx.node.cpus(VICTIM, "app") == "2,18", what="victim pinned after the reconnect")


def turn_malformed(ctx: Ctx, agent: Agent) -> None:
    """An admitted pod's update has a bad status: it is reported and keeps its CPUs."""
    ctx.pod(VICTIM)
    wait_until(lambda: ctx.node.cpus(VICTIM, "app") == "2,18", what="victim pinned")
    ctx.api.update_pod(with_field(VICTIM, "status.qosClass", "Gold"))
    wait_until(lambda: sample(agent, "podpin_malformed_pods_total", reason="status"), what="the malformed update")
    agent.reconciler.request_full()
    passes = agent.reconciler.passes
    wait_until(lambda: agent.reconciler.passes > passes + 1, what="two more passes")
    admitted = agent.reconciler.planner.is_admitted(VICTIM["metadata"]["uid"])
    assert ("2,18", True) == (ctx.node.cpus(VICTIM, "app"), admitted)


def kubelet_turns_static(ctx: Ctx, agent: Agent) -> None:
    """The kubelet starts pinning while the agent runs: it stops writing and says why."""
    ctx.node.kubelet_state.parent.mkdir(exist_ok=True)
    ctx.node.kubelet_state.write_text('{"policyName":"static","defaultCpuSet":"0-31","checksum":1}')
    wait_until(lambda: agent.reconciler.blocked is not None, what="the agent to notice")
    ctx.pod(VICTIM)
    passes = agent.reconciler.passes
    wait_until(lambda: agent.reconciler.passes > passes + 1, what="two more passes")
    assert ("", (False, agent.reconciler.blocked)) == (ctx.node.cpus(VICTIM, "app"), agent.ready())


# -- the table -----------------------------------------------------------------------------------
_POD = make_pod("bad", containers=[container("app", cpu="1", memory="1Gi")], creation_timestamp=_ts(4))


def _m(field_: str, reason: str) -> tuple[tuple[str, dict[str, Any]], tuple[str, dict[str, str], float]]:
    return ("pod.malformed", {"pod": "bad", "field": field_}), ("podpin_malformed_pods_total", {"reason": reason}, 1.0)


def _malformed(id_: str, raw: dict[str, Any], field_: str, reason: str = "spec") -> Case:
    log, metric = _m(field_, reason)
    return Case(id_, malformed(raw), log, metric, (("bad", "PodpinInvalidPod"),))


def _rejected(id_: str, raw: dict[str, Any], reason: str, config: dict[str, Any] | None = None) -> Case:
    return Case(
        id_,
        plain(raw),
        ("pod.rejected", {"pod": raw["metadata"]["name"], "reason": reason}),
        ("podpin_admission_errors_total", {"reason": reason}, 1.0),
        ((raw["metadata"]["name"], reason),),
        config=config or {},
    )


def _id_case(id_: str, container_id: str) -> Case:
    return Case(
        id_,
        bad_status_id(container_id),
        ("pod.malformed", {"pod": "odd", "field": "status.containerStatuses[0].containerID"}),
        ("podpin_malformed_pods_total", {"reason": "status"}, 1.0),
        (("odd", "PodpinInvalidPod"),),
    )


def _cgroup_error(id_: str, setup: Callable[[Ctx], None], file: str, result: str, level: str = "container") -> Case:
    fields: dict[str, Any] = {"pod": "victim", "cgroup_level": level}
    metric = ("podpin_cgroup_writes_total", {"file": file, "result": result}, 1.0)
    return Case(id_, setup, ("cgroup.error", fields), metric, (("victim", "PodpinPinningFailed"),))


def _pinning_error(id_: str, setup: Callable[[Ctx], None], errno_label: str, mismatch: bool = False) -> Case:
    return Case(
        id_,
        setup,
        ("cgroup.error", {"pod": "victim", "cgroup_level": "container", "mismatch": mismatch}),
        ("podpin_cgroup_write_errors_total", {"errno": errno_label}, 1.0),
        (("victim", "PodpinPinningFailed"),),
    )


def _state(id_: str, setup: Callable[[Ctx], None], log: str) -> Case:
    return Case(id_, setup, (log, {"node": NODE}), ("podpin_exclusive_cpu_allocation_count", {}, 4.0), ())


def _kubelet(id_: str, setup: Callable[[Ctx], None]) -> Case:
    return Case(
        id_,
        setup,
        ("kubelet.pinning", {"node": NODE, "policy": None}),
        ("podpin_kubelet_pinning", {}, 1.0),
        (),
        status=3,
    )


_QUICK = {"reconcilePeriod": "300ms"}  # live cases wait for passes

CASES = [
    # malformed pods: reported, never admitted, Warning PodpinInvalidPod
    _malformed(
        "bad-cpu-quantity",
        with_field(_POD, "spec.containers.0.resources.limits.cpu", "1.5.0"),
        "spec.containers[0].resources.limits.cpu",
    ),
    _malformed(
        "unknown-quantity-suffix",
        with_field(_POD, "spec.containers.0.resources.limits.memory", "1GB"),
        "spec.containers[0].resources.limits.memory",
    ),
    _malformed(
        "negative-quantity",
        with_field(_POD, "spec.containers.0.resources.requests.cpu", "-1"),
        "spec.containers[0].resources.requests[cpu]",
    ),
    _malformed("containers-missing", with_field(_POD, "spec.containers", ...), "spec.containers"),
    _malformed("container-without-name", with_field(_POD, "spec.containers.0.name", ...), "spec.containers[0].name"),
    _malformed(
        "duplicate-container-names",
        make_pod("bad", containers=[container("app", cpu="1", memory="1Gi"), container("app", cpu="1", memory="1Gi")]),
        "spec.containers[1].name",
    ),
    _malformed(
        "request-above-limit",
        make_pod("bad", containers=[container("app", cpu_request="2", cpu_limit="1", memory="1Gi")]),
        "spec.containers[0].resources.requests",
    ),
    _malformed("status-not-a-mapping", with_field(_POD, "status", "Running"), "status", "status"),
    _malformed("unknown-qos-class", with_field(_POD, "status", {"qosClass": "Gold"}), "status.qosClass", "status"),
    _malformed("uid-not-a-uuid", with_field(_POD, "metadata.uid", "../../kubepods"), "metadata.uid", "metadata"),
    # status container IDs that name no cgroup: reported, the pod stays admitted
    _id_case("container-id-with-dot-dot", "containerd://../../../../etc/cron.d"),
    _id_case("container-id-unknown-runtime", "rkt://" + "ab" * 32),
    _id_case("container-id-too-short", "containerd://abc123"),
    # impossible requests: rejected with the kubelet's reason, the pod runs in the node shared pool
    _rejected(
        "smt-alignment", gu("odd", "3"), "SMTAlignmentError", {"cpuManagerPolicyOptions": {"full-pcpus-only": "true"}}
    ),
    _rejected(
        "topology-affinity", gu("wide", "20"), "TopologyAffinityError", {"topologyManagerPolicy": "single-numa-node"}
    ),
    _rejected(
        "empty-pod-shared-pool",
        make_pod(
            "tight",
            containers=[container("db", cpu="2", memory="1Gi"), container("proxy")],
            pod_resources=resources(cpu="2", memory="2Gi"),
            states={"db": "running", "proxy": "running"},
            creation_timestamp=_ts(3),
        ),
        "EmptyPodSharedPoolError",
    ),
    _rejected("more-cpus-than-the-machine", gu("huge", "40"), "UnexpectedAdmissionError"),
    _rejected(
        "no-cpus-left-for-a-shared-init-container",
        make_pod(
            "init",
            containers=[container("app")],
            init_containers=[sidecar("mesh", cpu="2", memory="1Gi"), container("setup")],
            pod_resources=resources(cpu="2", memory="2Gi"),
            creation_timestamp=_ts(3),
        ),
        "EmptyPodSharedPoolError",
    ),
    # cgroup faults: one cgroup fails, everything else is written
    Case(
        "container-vanishes-mid-write",
        vanish("container"),
        ("cgroup.vanished", {"pod": "victim", "container": "app"}),
        ("podpin_cgroup_writes_total", {"file": "cpuset.cpus", "result": "ENOENT"}, 1.0),
        (),
    ),
    Case(
        "pod-vanishes-mid-write",
        vanish("pod"),
        ("cgroup.vanished", {"pod": "victim", "cgroup_level": "pod"}),
        ("podpin_cgroup_writes_total", {"file": "cpuset.cpus", "result": "ENOENT"}, 1.0),
        (),
    ),
    _cgroup_error("ebusy-on-container-cpuset", write_fault("cpuset.cpus", errno.EBUSY), "cpuset.cpus", "EBUSY"),
    _cgroup_error("einval-on-cpu-max", write_fault("cpu.max", errno.EINVAL), "cpu.max", "EINVAL"),
    _cgroup_error(
        "einval-on-pod-cpuset", write_fault("cpuset.cpus", errno.EINVAL, level="pod"), "cpuset.cpus", "EINVAL", "pod"
    ),
    _cgroup_error(
        "enospc-on-pod-cpu-max", write_fault("cpu.max", errno.ENOSPC, level="pod"), "cpu.max", "ENOSPC", "pod"
    ),
    Case(
        "ebusy-on-qos-level",
        qos_busy,
        ("cgroup.error", {"cgroup_level": "qos"}),
        ("podpin_cgroup_writes_total", {"file": "cpuset.cpus", "result": "EBUSY"}, 1.0),
        (),
    ),
    Case(
        "kernel-erange-beyond-root-cpus",
        root_lacks_cpus,
        ("cgroup.error", {"cgroup_level": "qos"}),
        ("podpin_cgroup_writes_total", {"file": "cpuset.cpus", "result": "ERANGE"}, 4.0),
        (("keeper", "PodpinPinningFailed"), ("victim", "PodpinPinningFailed")),
    ),
    _pinning_error("eio-reading-cpuset", read_fault(errno.EIO), "EIO"),
    _pinning_error("garbage-in-cpu-max", garbage_cpu_max, "invalid"),
    _pinning_error("kernel-ignores-the-write", ignored_write, "mismatch", mismatch=True),
    # the checkpoint: damaged or unusable, rebuilt from the live cgroups; keeper keeps its CPUs
    _state("checkpoint-not-json", checkpoint(b'{"version": 1, "data": '), "state.corrupt"),
    _state("checkpoint-not-utf8", checkpoint(b"\xff\xfe\x00podpin\x80"), "state.corrupt"),
    _state("checkpoint-is-a-directory", checkpoint(None), "state.corrupt"),
    _state("checkpoint-checksum-mismatch", tampered_checkpoint, "state.corrupt"),
    _state("checkpoint-from-another-machine", other_machine_checkpoint, "state.readopted"),
    _state("checkpoint-contradicts-itself", self_contradicting_checkpoint, "state.invalid"),
    _state("state-dir-unwritable", state_dir_unwritable, "state.checkpoint_failed"),
    # the kubelet's CPU manager state: pinning, or unknown (treated as pinning): nothing is written
    _kubelet("kubelet-state-not-json", kubelet_state(b"{not json")),
    _kubelet("kubelet-state-not-utf8", kubelet_state(b"\xff\xfe{}")),
    _kubelet("kubelet-state-unreadable", kubelet_state(None)),
    Case(
        "kubelet-turns-static-while-running",
        lambda _ctx: None,
        ("kubelet.pinning", {"policy": "static"}),
        ("podpin_kubelet_pinning", {}, 1.0),
        (),
        live=kubelet_turns_static,
        config=_QUICK,
    ),
    # the API server: errors and disconnects are retried; Events that cannot be posted never block pinning
    Case(
        "pod-list-fails-twice",
        api_fails(2, 500, "GET"),
        ("watch.list_failed", {"error": "HTTP 500 Internal Server Error"}),
        ("podpin_source_errors_total", {}, 2.0),
        (),
    ),
    Case(
        "event-post-fails",
        api_fails(1, 500, "POST"),
        ("event.failed", {"reason": "UnexpectedAdmissionError"}),
        ("podpin_events_total", {"type": "Warning", "result": "failed"}, 1.0),
        (),
    ),
    Case(
        "event-post-forbidden",
        api_fails(1, 403, "POST"),
        ("event.failed", {"error": "HTTP 403 Forbidden"}),
        ("podpin_events_total", {"type": "Warning", "result": "failed"}, 1.0),
        (),
    ),
    Case(
        "watch-cut-mid-stream",
        lambda _ctx: None,
        ("watch.failed", {"node": NODE}),
        ("podpin_source_errors_total", {}, 1.0),
        (),
        live=drop_watch_then_add,
        config=_QUICK,
    ),
    Case(
        "admitted-pod-turns-malformed",
        lambda _ctx: None,
        ("pod.malformed", {"pod": "victim", "field": "status.qosClass"}),
        ("podpin_malformed_pods_total", {"reason": "status"}, 1.0),
        (("victim", "PodpinInvalidPod"),),
        live=turn_malformed,
        config=_QUICK,
    ),
    # the pods directory
    Case(
        "manifest-not-yaml",
        manifest_garbage,
        ("source.manifest_error", {"node": NODE}),
        ("podpin_source_errors_total", {}, 1.0),
        (),
    ),
]


@pytest.fixture(scope="module")
def sysfs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example-2s sysfs tree, shared read-only by every case."""
    return write_sysfs(tmp_path_factory.mktemp("sysfs") / "sys", MACHINES["example-2s"]())


def test_table_is_large_and_ids_are_unique() -> None:
    """At least 30 cases, each with its own id."""
    ids = [case.id for case in CASES]
    assert (True, len(ids)) == (len(ids) >= 30, len(set(ids)))


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_fault(case: Case, tmp_path: Path, sysfs: Path, api: ApiServerEmulator) -> None:
    """The fault is logged, counted and (for a pod) posted as an Event; keeper keeps its CPUs; the agent goes on."""
    node = make_node(tmp_path, sysfs=sysfs)
    options: dict[str, Any] = {"pods_dir": None, "kubeconfig": str(kubeconfig(tmp_path / "kubeconfig", api.url))}
    ctx = Ctx(node=node, api=api, faults=FaultyOps(node.tree.ops(), write_errors={}, read_errors={}, before_write={}))
    ctx.pod(KEEPER)
    node.run_once(**options)
    assert KEEPER_CPUS == node.cpus(KEEPER, "app")
    events_before = len(api.events)

    if case.config:
        node.write_config(**case.config)
    case.setup(ctx)
    if ctx.source == "dir":
        options = {}
    ops = IgnoredWrites(ctx.faults, ctx.ignored)
    with capture_logs() as logs:
        agent = node.agent(ops, once=case.live is None, **options)
        if case.live is None:
            assert case.status == agent.run()
        else:
            with running(agent):
                case.live(ctx, agent)
    event, fields = case.log
    found = [{k: line.get(k) for k in fields} for line in logs if line.get("event") == event]
    name, labels, value = case.metric
    uid = KEEPER["metadata"]["uid"]
    posted = sorted(
        (e["involvedObject"]["name"], e["reason"]) for e in api.events[events_before:] if e["type"] == "Warning"
    )
    expected_posted = sorted(case.events)
    actual_line = fields if fields in found else found
    assert (fields, value, expected_posted) == (actual_line, sample(agent, name, **labels), posted)
    assert (case.keeper_cpus, case.keeper_cpus) == (
        node.cpus(KEEPER, "app"),
        str(agent.reconciler.planner.snapshot().cpu.assignments.get(uid, {}).get("app")),
    )
