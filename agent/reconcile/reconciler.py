"""The reconciler: pods in, cgroup values out, one pass at a time (``docs/design.md``, "Data flow").

Each pass does, in order:

1. read the pods the sources reported (malformed ones are reported and skipped,
   a status containerID that can name no cgroup is reported, a pod that maps to
   a cgroup another pod holds is reported and left out, ``claims.py``) and state
   what their statuses say in the identity book (``identity.py``);
2. release pods that are gone or terminal, then admit new pods in creation
   order (a rejected pod is tried again only after some pod released CPUs).
   After a restart (a rebuilt state, or a checkpoint older than the cgroups),
   the pods whose cgroups hold CPUs they can keep are admitted first, then the
   others seen on their cgroups, so a pod created earlier cannot take a running
   container's CPUs; a pod whose latest version is malformed is not released
   (it still runs on its CPUs);
3. checkpoint the state if it changed (never in dry-run);
4. plan, and unless the kubelet pins CPUs itself, write the plan into the live
   cgroups: a full pass when one is due (start, resync, any change of the
   pools), else only the pods something happened to (a new container cgroup, a
   new containerID in a pod status, a bundle read again), which is what keeps
   the pin latency in milliseconds.

A full pass is a sweep (``sweep.py``): the QoS levels, then one pod at a time
(the pods something happened to first), each step scanning, writing and
sampling that one pod. Between steps it asks the caller's ``pending()``
whether targeted work is waiting (the agent's queue holds an event, a bundle
re-read is due); if so the pass returns and the sweep stays where it is. The
next pass does the targeted work first, then resumes the sweep with the newest
plan; a change of the pools starts it again from the QoS levels. So a
container cgroup that appears during a full pass waits for at most one step of
it, not for all of it. The loop stays single-threaded and
every set written still comes from the planner's latest plan. ``run_pass()``
without ``pending`` (``--once``, tests) finishes the sweep before it returns;
``sweeps`` counts the full passes completed (readiness waits for the first).

Who a container cgroup is comes from the identity book: NRI, the runtime's
bundle (read when the cgroup appears, ``naming.py``), else the pod status.

A pod that requests devices waits for the kubelet to say which it holds
(``devices.py``: parked, asked again on later passes, admitted without device
hints after ``deviceWaitTimeout``); the devices known go to the planner.

The reconciler never decides who gets which CPU (the planner does) and never
blocks on the API server (Events are queued by the recorder). Nothing here
raises for a single pod or cgroup: failures are reported and the pass goes on.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import structlog

from agent.alloc import (
    CheckpointError,
    ContainerPlan,
    Decision,
    NodeState,
    Observed,
    Plan,
    Planner,
    PlannerError,
    PodPlan,
    Pool,
)
from agent.alloc.cpumanager.restore import StaleAllocation
from agent.alloc.tally import AllocationEvent
from agent.audit import AffinityAudit
from agent.cgroups import (
    ApplyReport,
    CgroupError,
    CgroupFS,
    CgroupLayout,
    CgroupRemoved,
    ContainerCgroupAppeared,
    PodCgroupAppeared,
    ScannedContainer,
    ScannedPod,
    WatchEvent,
    ensure_inside,
    scan,
)
from agent.cpuset import CPUSet
from agent.fault_boundary import FaultBoundary, Stage
from agent.kube import PodEvent
from agent.kube.conditions import readiness_gated
from agent.kube.node_identity import NodeIdentity, OwnerVerdict
from agent.kubelet_state import KubeletCPUPolicy
from agent.metrics import Snapshot, UsageKey
from agent.pods import ContainerKind, PodView, QOSClass
from agent.reconcile.claims import CgroupClaims
from agent.reconcile.devices import DeviceGate
from agent.reconcile.identity import IdentityBook, StatusFeed
from agent.reconcile.naming import BundleNamer
from agent.reconcile.pods import PodCache
from agent.reconcile.reporter import PodRef, Reporter
from agent.reconcile.sweep import QoSLevels, Sweep
from agent.reconcile.targets import Target, pod_targets, qos_targets
from agent.runtime import BundleReader, IdentityErrorReason, IdentitySource
from agent.state_store import StateStore
from agent.topology import Topology
from agent.vocabulary import CgroupLevel

__all__ = ["Pending", "Reconciler"]

_PENDING_TTL = 300.0

Pending = Callable[[], bool]
"""Asked between the steps of a full pass: True when targeted work waits (the pass then returns early)."""


class Reconciler:
    """Keeps the node's cgroups equal to the planner's plan."""

    def __init__(
        self,
        planner: Planner,
        *,
        layout: CgroupLayout,
        fs: CgroupFS,
        reporter: Reporter,
        store: StateStore | None,
        kubelet: Callable[[], KubeletCPUPolicy],
        dry_run: bool = False,
        rebuild: bool = False,
        bundles: BundleReader | None = None,
        clock: Callable[[], float] = time.monotonic,
        devices: DeviceGate | None = None,
        audit: AffinityAudit | None = None,
        node_identity: NodeIdentity | None = None,
    ) -> None:
        self.planner = planner
        self.node_identity = node_identity
        self.devices = devices
        self.layout = layout
        self.fs = fs
        self.reporter = reporter
        self.store = store
        self.kubelet = kubelet
        self.dry_run = dry_run
        self.clock = clock
        self.pods = PodCache()
        self._claims = CgroupClaims()
        self.identities = IdentityBook()
        self._statuses = StatusFeed(self.identities)
        self.log = structlog.get_logger("podpin.reconciler").bind(node=reporter.node)
        self.boundary = FaultBoundary(
            self.log, lambda stage: reporter.metrics.internal_errors.labels(stage=stage).inc(), reporter.pod_warning
        )
        if devices is not None:
            devices.boundary = self.boundary
        self.namer = (
            BundleNamer(self.identities, bundles, on_error=self._identity_error, log=self.log, clock=clock)
            if bundles is not None
            else None
        )
        if self.namer is not None:
            self.namer.boundary = self.boundary
        self._rebuild = rebuild
        self._observations: dict[str, Observed] = {}
        self._contradicted: dict[str, StaleAllocation] = {}
        """Pods whose checkpointed CPUs a running container of another pod held at the restart: released, and
        reported with their next admission."""
        self._decisions: dict[str, Decision] = {}
        self._rejected_at: dict[str, int] = {}
        self._epoch = 0
        self._dirty: set[str] = set()
        self._new_cgroups: dict[str, set[Path]] = {}
        self._full = True
        self._pending: dict[Path, float] = {}
        self._applied: dict[tuple[Path, str], str] = {}
        self._controllers: set[Path] = set()
        self._plan: Plan | None = None
        self._plan_inputs: tuple[NodeState, tuple[PodView, ...], tuple[tuple[str, Decision], ...]] | None = None
        self._plan_positions: dict[str, tuple[int, PodPlan]] = {}
        self._sweep: Sweep | None = None
        self._usage: dict[UsageKey, float] = {}
        self.snapshot: Snapshot | None = None
        self.passes = 0
        self.sweeps = 0
        self.blocked: str | None = None
        self.kubelet_replaced = False
        """The kubelet's CPU manager checkpoint was replaced under its file mount: a restart is the cure."""
        self.audit = audit
        self._auditing = False
        if not rebuild:
            self.reporter.mark_pinned(planner.snapshot().pods)
        self._readoption = planner.readoption

    # -- inputs --------------------------------------------------------------------------------
    def on_pods(self, event: PodEvent) -> None:
        """A source event: the pods it names get a targeted apply on the next pass."""
        self.pods.apply(event)
        if event.kind == "SYNC":
            self._full = True
        for raw in event.pods:
            metadata = raw.get("metadata")
            uid = metadata.get("uid") if isinstance(metadata, Mapping) else None
            if isinstance(uid, str):
                self._dirty.add(uid)

    def on_cgroup(self, event: WatchEvent, seen_at: float | None = None) -> None:
        """A cgroup appeared (or went): remember when, so the pin latency can be measured."""
        if isinstance(event, ContainerCgroupAppeared):
            self._pending[event.path] = seen_at if seen_at is not None else self.clock()
            # Only this container and its pod cgroup need writing: re-applying every
            # sibling would make a new container wait on reads of all of them.
            self._new_cgroups.setdefault(event.uid, set()).add(event.path)
            if self.namer is not None:
                self.namer.identify(event.uid, event.container_id, event.runtime, event.path)
        elif isinstance(event, PodCgroupAppeared):
            self._dirty.add(event.uid)
        elif isinstance(event, CgroupRemoved):
            self._pending.pop(event.path, None)
            self._controllers.discard(event.path)
            for key in [k for k in self._applied if k[0] == event.path]:
                del self._applied[key]
            parsed = self.layout.parse_container_dir(event.path.name)
            if parsed is not None and self.namer is not None:
                self.namer.forget(parsed[1])

    # -- container identity from the runtime's bundles ------------------------------------------
    def next_recheck(self) -> float | None:
        """When a bundle that was not complete is due to be read again, or a pod's devices asked about (or None)."""
        due = [
            at
            for at in (
                self.namer.next_recheck() if self.namer is not None else None,
                self.devices.next_retry() if self.devices is not None else None,
            )
            if at is not None
        ]
        return min(due, default=None)

    def recheck(self, now: float | None = None) -> bool:
        """Read again the bundles that are due; True when any was, or a pod's devices are due (then run a pass)."""
        now = self.clock() if now is None else now
        devices_due = self.devices is not None and self.devices.retry_due(now)
        if self.namer is None:
            return devices_due
        due = self.namer.recheck(now)
        for pod_key, path in due:
            self._new_cgroups.setdefault(pod_key, set()).add(path)
        return bool(due) or devices_due

    def _identity_error(
        self, pod_key: str, runtime_id: str, path: Path, reason: IdentityErrorReason, message: str
    ) -> None:
        pod: PodRef | None = None
        if self.snapshot is not None:
            pod = next(((p.namespace, p.name, p.uid) for p in self.snapshot.plan.pods if p.cgroup_key == pod_key), None)
        self.reporter.identity_error(reason, message, path=path, container_id=runtime_id, pod=pod)

    def request_full(self) -> None:
        """The next pass rewrites everything (periodic resync, drift repair)."""
        self._full = True

    def rebase(self, topology: Topology) -> list[str]:
        """CPUs went offline or online: move to the new topology; only the CPUs that went (or became reserved) move."""
        try:
            planner, dropped = self.planner.rebased(topology)
        except (PlannerError, CheckpointError) as err:
            self.log.error("topology.rebase_failed", error=str(err))
            return []
        self.planner = planner
        moved = sorted({m.uid for m in planner.readoption.moves}) if planner.readoption is not None else []
        for uid in dropped:
            self._decisions.pop(uid, None)
        self._dirty.update(dropped, moved)
        if planner.readoption is not None:
            self.reporter.readopted(planner.readoption, {v.uid: v for v in self.pods.views()[0]})
        self._epoch += 1
        self._full = True
        replanned = sorted(set(dropped) | set(moved))
        self.log.warning("topology.changed", online=str(topology.online_cpus), replanned=replanned)
        return replanned

    # -- NRI: the runtime asks before a container exists (``nri_desk.py``) ------------------------
    def find_view(self, uid: str) -> PodView | None:
        """The readable pod whose uid or cgroup uid (a static pod's config hash) is ``uid``, or None.

        A mirror pod's claim on a static pod's cgroup is held to its Node owner's uid here too, as in a pass: the
        NRI path asks by the cgroup's uid, and a forged mirror pod must not answer for the static pod's container.
        """
        views, _ = self.pods.views()
        for view in views:
            if uid == view.uid:
                return view
            if uid == view.cgroup_uid:
                confirmed = self._confirm_mirror_owner(view)
                return confirmed if confirmed.cgroup_uid == uid else None
        return None

    def pod_plan(self, uid: str) -> PodPlan | None:
        """The latest plan of the pod whose uid or cgroup key is ``uid``, or None."""
        plan = self._plan
        if plan is None:
            return None
        return next((p for p in plan.pods if uid in (p.uid, p.cgroup_key)), None)

    @property
    def plan(self) -> Plan | None:
        """The latest plan (None before the first pass)."""
        return self._plan

    def prepare_pod(self, uid: str, pending: Pending | None = None) -> PodPlan | None:
        """Decide for pod ``uid`` now (admitting it if new) and write its pod cgroup; its plan, or None when the
        pod is not known yet (the API watch has not delivered it) or no pod list arrived.

        What NRI needs before a container of the pod is created: the pod cgroup must hold the container's set
        before runc writes it into the container's cgroup (cgroup v2 intersects a child's cpuset with its
        parent's). The pass is a targeted one for this pod; a full pass it starts goes on in later steps.
        """
        view = self.find_view(uid)
        if view is None:
            return None
        self._dirty.add(view.uid)
        if not self.run_pass(pending):
            return None
        pod = self.pod_plan(view.uid)
        if pod is None or self._plan is None or self.blocked is not None or pod.desired.is_empty():
            return pod
        scanned = self._scan_pod(pod.cgroup_key, pod.qos)
        if scanned is not None:
            self._write(
                self._plan, [t for t in pod_targets(pod, scanned, self.identities) if t.level is CgroupLevel.POD]
            )
        return pod

    # -- a pass ----------------------------------------------------------------------------------
    @property
    def sweeping(self) -> bool:
        """Whether a full pass was left unfinished (:meth:`sweep` continues it)."""
        return self._sweep is not None

    def run_pass(self, pending: Pending | None = None) -> bool:
        """Decide and apply; returns True when a pass ran (False until the first pod list arrived).

        Args:
            pending: asked between the steps of a full pass; when it says True the pass returns and the full
                pass is left for :meth:`sweep` or the next pass (module docstring). None: finish it.
        """
        if not self.pods.synced:
            return False
        start = self.clock()
        views, malformed = self.pods.views()
        views = [self._confirm_mirror_owner(view) for view in views]
        for view in views:
            if view.mirror_refused is not None:
                self.reporter.mirror_refused(view)
        views, conflicts = self._claims.settle(views)
        for conflict in conflicts:
            self.reporter.cgroup_taken(conflict)
        adopting = self.passes == 0 and not self._rebuild
        self._statuses.update(views)
        if self._rebuild:
            self._rebuild = False
            self._observations = self._observe_live(views)
            self.log.warning("state.rebuilt_from_cgroups", pods=len(self._observations))
        elif adopting:
            if self._readoption is not None:
                self.reporter.readopted(self._readoption, {v.uid: v for v in views})
                self._readoption = None
            # A checkpoint may be older than the cgroups (a save failed before the restart): its claims on CPUs
            # another pod's running container holds are released (stale), and the pods it does not hold are
            # offered their live cpusets first, so no running container loses its CPUs to the checkpoint or to
            # an older new pod.
            live = self._observe_live(views)
            by_uid = {v.uid: v for v in views}
            self._contradicted = self.planner.release_contradicted(
                (by_uid[uid], seen) for uid, seen in live.items() if uid in by_uid
            )
            self._report_disagreements(live)
            self._observations = {uid: seen for uid, seen in live.items() if not self.planner.is_admitted(uid)}
        for bad in malformed:
            self.reporter.malformed(bad)
        for bad_id in self.pods.bad_container_ids(views):
            self.reporter.bad_container_id(bad_id)
        changed = self._decide(views, {bad.uid for bad in malformed if bad.uid})
        if adopting:
            behind = sorted(
                f"{d.namespace}/{d.name}"
                for d in self._decisions.values()
                if d.kept_observed and not any(e.stale is not None for e in d.allocations)
            )
            if behind:
                self.log.warning("state.behind_cgroups", pods=behind, kept="the CPUs their cgroups hold")
        self.reporter.forget_gone(
            {v.uid for v in views}
            | {c.pod.uid for c in conflicts}
            | {bad.uid or f"{bad.namespace}/{bad.name}" for bad in malformed}
        )
        if changed or (self.store is not None and self.store.stale):
            self._checkpoint()
        plan = self._plan_for(views)
        self._plan = plan
        full = self._full or changed
        self._full = False
        policy = self.kubelet()
        self.kubelet_replaced = policy.replaced
        self.reporter.kubelet(policy)
        if self.blocked is not None and not policy.pinning:
            full = True  # nothing was written while the kubelet pinned: write everything now
        self.blocked = policy.reason if policy.pinning else None
        if policy.pinning:
            self._sweep = None
        else:
            if full:
                self._sweep = self._start_sweep(plan)  # the targeted work is its first steps
            else:
                self._apply_targeted(plan)
            self._continue_sweep(pending)
            self._settle_shared_only(plan)
        self._dirty.clear()
        self._new_cgroups.clear()
        self.snapshot = Snapshot(
            state=self.planner.snapshot(),
            plan=plan,
            topology=self.planner.topology,
            usage=self._usage,
        )
        self.passes += 1
        self.reporter.metrics.reconcile_duration.observe(self.clock() - start)
        return True

    def _confirm_mirror_owner(self, view: PodView) -> PodView:
        """``view``, or a copy no longer a mirror pod when its Node owner's uid is not the Node's (finding 1 of
        issue 22: the garbage collector's check, ``agent/kube/node_identity.py``)."""
        if view.mirror_of is None or self.node_identity is None:
            return view
        verdict, node_uid = self.node_identity.check(view.mirror_owner_uid or "")
        if verdict is not OwnerVerdict.MISMATCH:
            return view
        return dataclasses.replace(view, mirror_of=None, mirror_refused=view.mirror_of, mirror_owner_mismatch=node_uid)

    def _plan_for(self, views: list[PodView]) -> Plan:
        """The plan of these pods: the previous one when nothing it is made of changed.

        A periodic pass on a quiet node sees the same pod views (the source hands over the same objects),
        the same planner state and the same decisions; the plan is then the one already made, and planning
        110 pods again was the largest part of an idle pass after the cgroup reads (``docs/benchmarks.md``,
        "Agent at rest").
        """
        state = self.planner.snapshot()
        decisions = tuple(self._decisions.items())
        inputs = self._plan_inputs
        if (
            self._plan is not None
            and inputs is not None
            and inputs[0] is state
            and len(inputs[1]) == len(views)
            and all(a is b for a, b in zip(inputs[1], views, strict=True))
            and len(inputs[2]) == len(decisions)
            and all(a[0] == b[0] and a[1] is b[1] for a, b in zip(inputs[2], decisions, strict=True))
        ):
            return self._plan
        plan = self.planner.plan(views, self._decisions)
        self._plan_inputs = (state, tuple(views), decisions)
        self._plan_positions = {pod.uid: (i, pod) for i, pod in enumerate(plan.pods)}
        return plan

    def sweep(self, pending: Pending | None = None) -> bool:
        """Continue an unfinished full pass with the latest plan (no new decisions); False when there is none."""
        if self._sweep is None:
            return False
        start = self.clock()
        self._continue_sweep(pending)
        self.reporter.metrics.reconcile_duration.observe(self.clock() - start)
        return True

    def _decide(self, views: list[PodView], unreadable: set[str]) -> bool:
        """Release the gone, admit the new; True when the state changed.

        Args:
            views: the readable pods, in creation order.
            unreadable: uids whose latest version is malformed; they are not gone.
        """
        changed = False
        live = {v.uid for v in views if not v.is_terminal} | unreadable
        for uid, record in list(self.planner.snapshot().pods.items()):
            if uid not in live and self.planner.release(uid):
                changed = True
                self._epoch += 1
                self._decisions.pop(uid, None)
                self.reporter.released(record)
        for uid in [u for u in self._decisions if u not in live]:
            del self._decisions[uid]
            self._rejected_at.pop(uid, None)
        for uid in [u for u in self._contradicted if u not in live]:
            del self._contradicted[uid]
        if self.devices is not None:
            self.devices.begin_pass()
            self.devices.forget(live)
        for view in sorted(views, key=self._adoption_order):
            if view.is_terminal:
                continue
            with self.boundary.guard(Stage.POD, pod=(view.namespace, view.name, view.uid)):
                changed = self._decide_one(view) or changed
        return changed

    def _adoption_order(self, view: PodView) -> int:
        """Where a pod goes in a pass's admissions (a stable sort keeps creation order within each rank).

        0: its live cgroups hold CPUs it can keep as they are (``Planner.holds_observed``); 1: other pods seen
        on their cgroups (a rebuilt or older state); 2: the rest. A pod rejected before a restart holds the node
        shared pool on its pod cgroup: seen, but keeping nothing; admitted before a running container's pod, it
        took that container's CPUs (issue 22, the soak's last finding).
        """
        seen = self._observations.get(view.uid)
        if seen is None:
            return 2
        return 0 if self.planner.holds_observed(view, seen) else 1

    def _decide_one(self, view: PodView) -> bool:
        """Admit one pod that is not terminal (or take a restored one's plan); True when the state changed.

        It runs inside the pod's fault boundary (``agent/fault_boundary.py``): an unexpected exception ends this
        pod's admission for this pass only.
        """
        if self.planner.is_admitted(view.uid):
            if view.uid in self._decisions:
                return False
            # Restored from the checkpoint: its plan names its devices.
            held = self.devices.held(view) if self.devices is not None else None
            start = self.clock()
            decision = self.planner.admit(view, devices=held)
            self._decisions[view.uid] = decision
            if decision.already_admitted:
                return False
            # The CPUs it held were stale: it was admitted again.
            self._dirty.add(view.uid)
            if decision.admitted:
                plan = self.planner.plan([view], self._decisions).pods[0]
                self.reporter.admitted(decision, plan, self.clock() - start)
            else:
                self.reporter.rejected(decision, self.clock() - start)
            return True
        if self._rejected_at.get(view.uid) == self._epoch:
            return False
        answer = self.devices.check(view) if self.devices is not None else None
        if answer is not None and not answer.ready:
            return False  # its devices are not known yet: asked again on a later pass
        start = self.clock()
        decision = self.planner.admit(
            view, self._observations.pop(view.uid, None), devices=answer.devices if answer is not None else None
        )
        seconds = self.clock() - start
        stale = self._contradicted.pop(view.uid, None)
        if stale is not None:  # its checkpointed CPUs were released at the restart: said with this admission
            decision = dataclasses.replace(
                decision, allocations=(AllocationEvent.released_stale(stale), *decision.allocations)
            )
        self._decisions[view.uid] = decision
        if answer is not None and answer.unknown is not None:
            self.reporter.devices_unknown(decision, answer.unknown, answer.waited)
        if not decision.admitted:
            self._rejected_at[view.uid] = self._epoch
            self.reporter.rejected(decision, seconds)
            return False
        self._rejected_at.pop(view.uid, None)
        self._dirty.add(view.uid)
        self.reporter.admitted(decision, self.planner.plan([view], self._decisions).pods[0], seconds)
        return True

    def _observe_live(self, views: list[PodView]) -> dict[str, Observed]:
        """The explicit cpusets on the live cgroups of these pods (for rebuilding a lost checkpoint)."""
        observed: dict[str, Observed] = {}
        by_uid = {v.cgroup_uid: v for v in views}
        try:
            live = scan(self.layout)
        except (CgroupError, OSError) as err:
            self.log.error("cgroup.scan_failed", error=str(err))
            return observed
        if self.namer is not None:
            self.namer.identify_live(live)
        for scanned in live:
            view = by_uid.get(scanned.uid)
            if view is None:
                continue
            containers: dict[str, CPUSet] = {}
            for child in scanned.containers:
                identity = self.identities.in_pod(scanned.uid, child.id)
                name = identity.name if identity is not None else None
                cpus = self._explicit_cpus(child.path)
                if name is not None and cpus:
                    containers[name] = cpus
            pod_cpus = self._explicit_cpus(scanned.path)
            if containers or pod_cpus:
                observed[view.uid] = Observed(containers=containers, pod=pod_cpus or None)
        return observed

    def _report_disagreements(self, live: Mapping[str, Observed]) -> None:
        """Say so when a checkpointed exclusive set differs from what the container's cgroup holds (never silently)."""
        cpu = self.planner.snapshot().cpu
        differ = {
            f"{uid}/{name}": {"checkpoint": str(cpu.get(uid, name)), "cgroup": str(cpus)}
            for uid, seen in live.items()
            for name, cpus in seen.containers.items()
            if cpu.get(uid, name) not in (None, cpus)
        }
        if differ:
            self.log.warning("state.disagrees_with_cgroups", containers=differ, kept="the checkpoint's")

    def _explicit_cpus(self, path: Path) -> CPUSet:
        try:
            return self.fs.read_cpuset(path, "cpuset.cpus")
        except CgroupError:
            return CPUSet()

    def _checkpoint(self) -> None:
        """Save the state; a failed save leaves ``store.stale`` set, so every later pass tries again."""
        if self.store is None or self.dry_run:
            return
        previous = self.store.failure
        try:
            self.store.save(self.planner.snapshot())
        except OSError:
            if self.store.failure is not None:
                self.reporter.checkpoint_failed(self.store.path, self.store.failure, previous)
            return
        if previous is not None:
            self.reporter.checkpoint_recovered(self.store.path, previous.attempts)

    # -- applying --------------------------------------------------------------------------------
    def _qos_levels(self) -> dict[str, Path]:
        levels = {}
        for qos in (QOSClass.BURSTABLE, QOSClass.BESTEFFORT):
            path = self.layout.qos_dir(qos)
            if path.is_dir():
                levels[qos.value] = path
        return levels

    def _scan_pod(self, uid: str, qos: str) -> ScannedPod | None:
        with self.boundary.guard(Stage.CGROUP, f"pod cgroup of {uid}"):
            try:
                location = self.layout.find_pod(uid, qos)
            except CgroupError:
                return None
            if location is None:
                return None
            return self._rescan(ScannedPod(qos=location.qos, uid=uid, path=location.path, containers=()))
        return None  # an unexpected failure, caught at this cgroup directory's boundary

    def _rescan(self, pod: ScannedPod) -> ScannedPod | None:
        """``pod`` with its container cgroups as they are now; None when its cgroup is gone."""
        containers = []
        try:
            names = sorted(entry.name for entry in pod.path.iterdir() if entry.is_dir() and not entry.is_symlink())
        except OSError:
            return None
        for name in names:
            parsed = self.layout.parse_container_dir(name)
            if parsed is not None:
                path = ensure_inside(self.layout.root, pod.path / name, resolved_root=self.layout.real_root)
                containers.append(ScannedContainer(id=parsed[1], runtime=parsed[0], path=path))
        return dataclasses.replace(pod, containers=tuple(containers))

    def _apply_targeted(self, plan: Plan) -> None:
        """Write the pods something happened to: their new container cgroups (and the pod), or all of a dirty pod."""
        targets: list[Target] = []
        for pod in plan.pods:
            new = self._new_cgroups.get(pod.cgroup_key)
            dirty = pod.uid in self._dirty or pod.cgroup_key in self._dirty
            if not dirty and new is None:
                continue
            scanned = self._scan_pod(pod.cgroup_key, pod.qos)
            if scanned is None:
                continue
            if self.namer is not None:
                self.namer.identify_live([scanned])
            found = pod_targets(pod, scanned, self.identities)
            if not dirty and new is not None:
                found = [t for t in found if t.level is CgroupLevel.POD or t.path in new]
            targets.extend(found)
        self._write(plan, targets)

    def _start_sweep(self, plan: Plan) -> Sweep:
        """Scan the tree for a full pass: the pods with new container cgroups, then the dirty ones, go first."""
        try:
            live = scan(self.layout)
        except (CgroupError, OSError) as err:
            self.log.error("cgroup.scan_failed", error=str(err))
            live = []
        if self.namer is not None:
            self.namer.retain(live)
        dirty = [p.cgroup_key for p in plan.pods if p.uid in self._dirty or p.cgroup_key in self._dirty]
        if self.audit is not None and not self.dry_run and not self._auditing:
            self._auditing = self.audit.due(self.clock())  # the affinity audit rides on this full pass
        return Sweep.of_scan(live, [*self._new_cgroups, *dirty])

    def _continue_sweep(self, pending: Pending | None) -> None:
        """Take sweep steps until it is done or ``pending()`` says targeted work waits (after one step at least)."""
        sweep = self._sweep
        if sweep is None or self._plan is None:
            return
        plan = self._plan
        by_key = {pod.cgroup_key: pod for pod in plan.pods}
        first = True
        while not sweep.done:
            if not first and pending is not None and pending():
                return
            first = False
            step = sweep.next_step()
            if isinstance(step, QoSLevels):
                targets = qos_targets(plan, self._qos_levels())
            else:
                pod = by_key.get(step.uid)
                scanned = self._rescan(step) if pod is not None else None
                if pod is None or scanned is None:
                    continue
                if self.namer is not None:
                    self.namer.identify_live([scanned])
                targets = pod_targets(pod, scanned, self.identities)
                sweep.add_usage(self._sample_usage(pod, scanned))
            self._write(plan, targets)
            if self._auditing and self.audit is not None and not isinstance(step, QoSLevels) and pod is not None:
                self.audit.audit(pod, self._audited(pod, targets))
        self._finish_sweep(sweep)

    @staticmethod
    def _audited(pod: PodPlan, targets: list[Target]) -> list[tuple[ContainerPlan, Path]]:
        """The container targets of one pod, with their plans (for the affinity audit)."""
        return [
            (pod.container(t.container), t.path)
            for t in targets
            if t.level is CgroupLevel.CONTAINER and t.container is not None
        ]

    def _finish_sweep(self, sweep: Sweep) -> None:
        if self._auditing and self.audit is not None:
            self._auditing = False
            self.reporter.affinity_audited(self.audit.finish())
        self._sweep = None
        self.sweeps += 1
        self._usage = sweep.usage
        if self.snapshot is not None:
            self.snapshot = dataclasses.replace(self.snapshot, usage=sweep.usage)
        if not self.dry_run:  # forget cgroups no longer targeted (gone pods, a watcher that missed a removal)
            self._applied = {key: value for key, value in self._applied.items() if key[0] in sweep.seen}

    def _write(self, plan: Plan, targets: list[Target]) -> None:
        """Write ``targets`` (or say what would be written, in dry-run); a sweep in progress notes their paths."""
        desired = {t.path: t.values for t in targets}
        if self.dry_run:
            self._dry_run(targets)
            report = ApplyReport()
        else:
            self._enable_controllers(targets)
            report = self.fs.apply(desired) if desired else ApplyReport()
            drift = {
                (r.path, r.file)
                for r in report.writes
                if r.phase != "widen" and self._applied.get((r.path, r.file)) == r.new
            }
            self.reporter.applied(report, targets, drift)
            self._remember(report)
        self._settle(plan, targets, report)
        if self._sweep is not None:
            self._sweep.seen.update(desired)

    def _enable_controllers(self, targets: list[Target]) -> None:
        """``+cpuset +cpu`` in ``cgroup.subtree_control`` down to each target's parent, where missing.

        The kubelet and the runtime normally enable both; a cgroup without them has
        no ``cpuset.*``/``cpu.*`` files to write. Checked once per parent cgroup.
        """
        for target in targets:
            parent = target.path.parent
            if parent in self._controllers:
                continue
            try:
                records = self.fs.enable_controllers(target.path)
            except CgroupError as err:
                self.reporter.controllers_failed(target, err)
                continue
            self._controllers.add(parent)
            self.reporter.controllers_enabled(records)

    def _remember(self, report: ApplyReport) -> None:
        failed = {getattr(f, "path", None) for f in (*report.failures, *report.mismatches)}
        for record in report.writes:
            if record.result == "ok" and record.phase != "widen" and record.path not in failed:
                self._applied[(record.path, record.file)] = record.new
        for path, file in report.unchanged:
            if path not in failed and (path, file) not in self._applied:  # read only what is not known yet
                self._applied[(path, file)] = self._current(path, file)

    def _current(self, path: Path, file: str) -> str:
        try:
            return self.fs.read_text(path, file).strip()
        except CgroupError:
            return ""

    def _dry_run(self, targets: Iterable[Target]) -> None:
        for target in targets:
            try:
                actual = self.fs.read_values(target.path)
            except CgroupError as err:
                self.log.info("cgroup.dry_run", path=str(target.path), error=str(err))
                continue
            if actual != target.values:
                self.log.info(
                    "cgroup.dry_run",
                    path=str(target.path),
                    cgroup_level=target.level,
                    would_write={
                        k: str(v)
                        for k, v in (
                            ("cpuset.cpus", target.values.cpuset_cpus),
                            ("cpuset.mems", target.values.cpuset_mems),
                            ("cpu.max", target.values.cpu_max),
                        )
                        if v is not None
                    },
                )

    def _settle(self, plan: Plan, targets: list[Target], report: ApplyReport) -> None:
        """Pin latency for containers now pinned; the ``Pinned`` Event for pods whose containers all are."""
        now = self.clock()
        bad = {getattr(f, "path", None) for f in (*report.failures, *report.mismatches)}
        done_pods: dict[str, bool] = {}
        for target in targets:
            if target.level is not CgroupLevel.CONTAINER or target.pod is None:
                continue
            ok = target.path not in bad
            done_pods[target.pod.uid] = done_pods.get(target.pod.uid, True) and ok
            seen = self._pending.get(target.path)
            if ok and seen is not None and not self.dry_run:
                self.reporter.metrics.pin_latency.observe(max(0.0, now - seen))
                self.reporter.metrics.container_pins.labels(source=target.source or IdentitySource.STATUS).inc()
                del self._pending[target.path]
        for path in [p for p, seen in self._pending.items() if now - seen > _PENDING_TTL]:
            del self._pending[path]
        if self.dry_run:
            return
        # Only the pods written here (in plan order): looking at every pod on every write of a full pass made
        # the pass quadratic in the pods.
        positions = self._plan_positions if plan is self._plan else {p.uid: (i, p) for i, p in enumerate(plan.pods)}
        written = sorted((positions[uid] for uid, done in done_pods.items() if done and uid in positions))
        for _, pod in written:
            pinned = [c for c in pod.containers if c.pool != Pool.NODE_SHARED and c.kind != ContainerKind.INIT]
            if not pinned:
                continue
            named = self.identities.named(pod.cgroup_key)
            if all(c.name in named for c in pinned):
                self.reporter.pinned(pod)

    def _settle_shared_only(self, plan: Plan) -> None:
        """The condition for admitted pods with nothing of their own to pin (their CPUs are the node shared pool)
        that wait for it (a readiness gate); once per pass."""
        if self.dry_run:
            return
        for pod in plan.pods:
            if not pod.admitted or any(
                c.pool != Pool.NODE_SHARED and c.kind != ContainerKind.INIT for c in pod.containers
            ):
                continue
            if readiness_gated(self.pods.raw(pod.uid)):
                self.reporter.shared_only(pod)

    def _sample_usage(self, pod: PodPlan, scanned: ScannedPod) -> dict[UsageKey, float]:
        """CPU seconds per (pool, namespace, pod) of one pod's containers, from their ``cpu.stat``."""
        pools = {c.name: c.pool for c in pod.containers}
        usage: dict[UsageKey, float] = {}
        for child in scanned.containers:
            identity = self.identities.in_pod(scanned.uid, child.id)
            pool = pools.get(identity.name) if identity is not None and identity.name is not None else None
            if pool is None:
                continue
            try:
                seconds = self.fs.read_cpu_stat(child.path).usage_usec / 1e6
            except CgroupError:
                continue
            key = (pool, pod.namespace, pod.name)
            usage[key] = usage.get(key, 0.0) + seconds
        return usage
