"""The reconciler: pods in, cgroup values out, one pass at a time (``docs/design.md``, "Data flow").

Each pass does, in order:

1. read the pods the sources reported (malformed ones are reported and skipped,
   a status containerID that can name no cgroup is reported, a pod that maps to
   a cgroup another pod holds is reported and left out, ``claims.py``) and state
   what their statuses say in the identity book (``identity.py``);
2. ask the device gate about the pods the deciding half names (``devices.py``;
   the only step of deciding that may wait), then have the deciding half
   release pods that are gone or terminal and admit new pods in creation
   order (a rejected pod is tried again only after some pod released CPUs),
   and report what it returned, in its order (``report_outcomes.py``).
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

A write to a known container's ``cpuset.cpus``, ``cpuset.mems`` or ``cpu.max`` (the watcher's
:class:`~agent.cgroups.CgroupFileChanged`: runc applying the OCI spec's quota after podpin pinned the container in
bundle mode, ``runc update``) makes that container a target of the next targeted pass, as a new cgroup is, but
without a pin-latency trace, unless the cgroup already holds what the plan wants (``file_changes.py``: the event
of podpin's own write costs one read, and no pass). A repaired value is drift (``cgroup.drift_repaired``, the
drift metric). Against a write fight (another writer that insists) each container is re-applied at most 4 times
at once, then once a second (``repair_throttle.py``); a change that finds no token is re-applied when one is back
(:meth:`Reconciler.next_recheck`). An event that needs no pass now says so (:meth:`Reconciler.on_cgroup` returns
False) and the loop runs none for it. In dry-run, or while the kubelet pins CPUs, nothing is written, so nothing is
repaired at once.

Who a container cgroup is comes from the identity book: NRI, the runtime's
bundle (read when the cgroup appears, ``naming.py``), else the pod status.

A pod that requests devices waits for the kubelet to say which it holds
(``devices.py``: parked, asked again on later passes, admitted without device
hints after ``deviceWaitTimeout``); the devices known go to the planner. The
gate is asked before the deciding half runs and its answers handed in as values.

The reconciler never decides who gets which CPU (the planner does) and never
blocks on the API server (Events are queued by the recorder). Nothing here
raises for a single pod or cgroup: failures are reported and the pass goes on.

It is the pass's conductor over two halves with narrow faces: the deciding half (``decider.py``: pods, the
planner's state and the device answers in; decisions, the plan and its outcomes out; pure, it calls no port) and
the applying half (``applier.py``: the plan in, cgroup writes, read-backs and settles out). It is the decider's
imperative shell: it asks the device gate before deciding and hands the outcomes to the reporter and the fault
boundary right after, before anything of the pass is written (``docs/design.md``, "Data flow"). What stays here
is what a pass reads and keeps between them: the pod cache, the cgroup claims, the identity book and who named it,
the pods something happened to, the kubelet's policy, the checkpoint, and the :class:`Snapshot` the metrics read.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import structlog

from agent.alloc import CheckpointError, Plan, Planner, PlannerError, PodPlan
from agent.audit import AffinityAudit
from agent.cgroups import (
    CgroupError,
    CgroupFileChanged,
    CgroupFS,
    CgroupLayout,
    CgroupRemoved,
    ContainerCgroupAppeared,
    PodCgroupAppeared,
    WatchEvent,
)
from agent.fault_boundary import FaultBoundary
from agent.kube import PodEvent
from agent.kube.node_identity import NodeIdentity, OwnerVerdict
from agent.kubelet_state import KubeletCPUPolicy
from agent.pods import PodView
from agent.reconcile.applier import Applier, Pending
from agent.reconcile.claims import CgroupClaims
from agent.reconcile.decider import Decider
from agent.reconcile.devices import DeviceGate
from agent.reconcile.file_changes import container_values, holds
from agent.reconcile.identity import IdentityBook, StatusFeed
from agent.reconcile.naming import BundleNamer
from agent.reconcile.pods import PodCache
from agent.reconcile.repair_throttle import RepairThrottle
from agent.reconcile.report_outcomes import report_decided, report_outcomes
from agent.reconcile.reporter import PodRef, Reporter
from agent.reconcile.snapshot import Snapshot
from agent.runtime import BundleReader, IdentityErrorReason
from agent.state_store import StateStore
from agent.topology import Topology

__all__ = ["Pending", "Reconciler"]


class Reconciler:
    """Keeps the node's cgroups equal to the planner's plan: one pass at a time, over its two halves."""

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
        self.decider = Decider(planner, clock=clock, rebuild=rebuild)
        self.applier = Applier(
            layout=layout,
            fs=fs,
            reporter=reporter,
            identities=self.identities,
            namer=self.namer,
            boundary=self.boundary,
            log=self.log,
            dry_run=dry_run,
            clock=clock,
            audit=audit,
        )
        self._dirty: set[str] = set()
        self._new_cgroups: dict[str, set[Path]] = {}
        self._repairs: RepairThrottle[tuple[str, Path]] = RepairThrottle()
        """Re-applies of containers whose files something rewrote, by (pod key, container cgroup)."""
        self._full = True
        self.snapshot: Snapshot | None = None
        self.passes = 0
        self.blocked: str | None = None
        self.kubelet_replaced = False
        """The kubelet's CPU manager checkpoint was replaced under its file mount: a restart is the cure."""
        if not rebuild:
            self.reporter.mark_pinned(planner.snapshot().pods)

    @property
    def planner(self) -> Planner:
        """The planner (the deciding half's; replaced on a CPU hotplug)."""
        return self.decider.planner

    @property
    def topology(self) -> Topology:
        """The machine the planner plans for."""
        return self.decider.planner.topology

    @property
    def sweeps(self) -> int:
        """The full passes completed (readiness waits for the first)."""
        return self.applier.sweeps

    def retune(self, *, audit_period: float, device_wait: float) -> None:
        """Take the live settings a reloaded configuration changed: the affinity audit's period, the device wait."""
        if self.applier.audit is not None:
            self.applier.audit.period = audit_period
        if self.devices is not None:
            self.devices.timeout = device_wait

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

    def on_cgroup(self, event: WatchEvent, seen_at: float | None = None) -> bool:
        """A cgroup appeared (or went): remember when, so the pin latency can be measured; a container's file
        changed: re-apply it (throttled, module docstring). False when the event asks for no pass now."""
        if isinstance(event, CgroupFileChanged):
            return self._file_changed(event)
        if isinstance(event, ContainerCgroupAppeared):
            handled = self.clock()
            self.applier.cgroup_appeared(event.path, seen_at if seen_at is not None else handled, handled)
            # Only this container and its pod cgroup need writing: re-applying every
            # sibling would make a new container wait on reads of all of them.
            self._new_cgroups.setdefault(event.uid, set()).add(event.path)
            if self.namer is not None:
                self.namer.identify(event.uid, event.container_id, event.runtime, event.path)
                self.applier.cgroup_named(event.path, self.clock())
        elif isinstance(event, PodCgroupAppeared):
            self._dirty.add(event.uid)
        elif isinstance(event, CgroupRemoved):
            self.applier.cgroup_removed(event.path)
            parsed = self.layout.parse_container_dir(event.path.name)
            if parsed is not None:
                self._repairs.forget(lambda key: key[1] == event.path)
                if self.namer is not None:
                    self.namer.forget(parsed[1])
        return True

    def _file_changed(self, event: CgroupFileChanged) -> bool:
        """A container's managed file was written: True when it is made a target of the next pass (module
        docstring); False when nothing is to be written there, or the re-apply is deferred (a write fight)."""
        if self.dry_run or self.blocked is not None:
            return False  # nothing is written: the full passes say what would be
        targets = self._new_cgroups.get(event.uid, set())
        if event.path in targets:
            return True  # already a target of the next pass: all the events before it are one re-apply
        pod = self.decider.pod_plan(event.uid)
        want = container_values(pod, event.container_id, event.path, self.identities) if pod is not None else None
        if want is None:
            return False  # podpin writes nothing there
        try:
            if holds(self.fs.read_values(event.path), want):
                return False  # podpin's own write, or the same value again: one read, no pass
        except CgroupError:
            pass  # unreadable or gone: the pass finds out (and a removal event follows)
        if not self._repairs.offer((event.uid, event.path), self.clock()):
            return False  # deferred: due at next_recheck()
        self._new_cgroups.setdefault(event.uid, set()).add(event.path)
        return True

    # -- container identity from the runtime's bundles ------------------------------------------
    def next_recheck(self) -> float | None:
        """When a bundle that was not complete is due to be read again, a pod's devices asked about, or a container
        whose files changed re-applied (or None)."""
        due = [
            at
            for at in (
                self.namer.next_recheck() if self.namer is not None else None,
                self.devices.next_retry() if self.devices is not None else None,
                self._repairs.next_due(),
            )
            if at is not None
        ]
        return min(due, default=None)

    def recheck(self, now: float | None = None) -> bool:
        """Read again the bundles that are due, take the deferred re-applies that are; True when any was, or a
        pod's devices are due (then run a pass)."""
        now = self.clock() if now is None else now
        devices_due = self.devices is not None and self.devices.retry_due(now)
        due = [*(self.namer.recheck(now) if self.namer is not None else ()), *self._repairs.due(now)]
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
            rebased = self.decider.rebase(topology, self.pods.views()[0])
        except (PlannerError, CheckpointError) as err:
            self.log.error("topology.rebase_failed", error=str(err))
            return []
        if rebased.readopted is not None:
            report_outcomes([rebased.readopted], self.reporter, self.boundary)
        dropped, moved = rebased.dropped, rebased.moved
        self._dirty.update(dropped, moved)
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
        return self.decider.pod_plan(uid)

    @property
    def plan(self) -> Plan | None:
        """The latest plan (None before the first pass)."""
        return self.decider.plan

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
        plan = self.decider.plan
        if pod is None or plan is None or self.blocked is not None or pod.desired.is_empty():
            return pod
        self.applier.write_pod_level(plan, pod)
        return pod

    # -- a pass ----------------------------------------------------------------------------------
    @property
    def sweeping(self) -> bool:
        """Whether a full pass was left unfinished (:meth:`sweep` continues it)."""
        return self.applier.sweeping

    def run_pass(self, pending: Pending | None = None) -> bool:
        """Decide and apply; returns True when a pass ran (False until the first pod list arrived).

        Args:
            pending: asked between the steps of a full pass; when it says True the pass returns and the full
                pass is left for :meth:`sweep` or the next pass (module docstring). None: finish it.
        """
        if not self.pods.synced:
            return False
        start = self.clock()
        self.applier.begin_pass(start)
        views, malformed = self.pods.views()
        views = [self._confirm_mirror_owner(view) for view in views]
        for view in views:
            if view.mirror_refused is not None:
                self.reporter.mirror_refused(view)
        views, conflicts = self._claims.settle(views)
        for conflict in conflicts:
            self.reporter.cgroup_taken(conflict)
        decider = self.decider
        adopting = self.passes == 0 and not decider.rebuilding
        self._statuses.update(views)
        if decider.rebuilding:
            live = self.applier.observe_live(views)
            decider.rebuilt(live)
            self.log.warning("state.rebuilt_from_cgroups", pods=len(live))
        elif adopting:
            adopted = decider.adopt(views, self.applier.observe_live(views))
            if adopted.readopted is not None:
                report_outcomes([adopted.readopted], self.reporter, self.boundary)
            if adopted.differ:
                self.log.warning("state.disagrees_with_cgroups", containers=adopted.differ, kept="the checkpoint's")
        for bad in malformed:
            self.reporter.malformed(bad)
        for bad_id in self.pods.bad_container_ids(views):
            self.reporter.bad_container_id(bad_id)
        unreadable = {bad.uid for bad in malformed if bad.uid}
        # The device gate may wait for the kubelet: asked here, before deciding, as the decider does no I/O.
        answers = self.devices.answer(decider.device_asks(views, unreadable)) if self.devices is not None else None
        decided = decider.decide(views, unreadable, answers)
        report_decided(decided, views, self.reporter, self.boundary)  # before anything of the pass is written
        self._dirty.update(decided.dirty)
        if adopting:
            behind = decider.behind()
            if behind:
                self.log.warning("state.behind_cgroups", pods=behind, kept="the CPUs their cgroups hold")
        self.reporter.forget_gone(
            {v.uid for v in views}
            | {c.pod.uid for c in conflicts}
            | {bad.uid or f"{bad.namespace}/{bad.name}" for bad in malformed}
        )
        if decided.changed or (self.store is not None and self.store.stale):
            self._checkpoint()
        plan = decider.plan_for(views)
        full = self._full or decided.changed
        self._full = False
        policy = self.kubelet()
        self.kubelet_replaced = policy.replaced
        self.reporter.kubelet(policy)
        if self.blocked is not None and not policy.pinning:
            full = True  # nothing was written while the kubelet pinned: write everything now
        self.blocked = policy.reason if policy.pinning else None
        applier = self.applier
        if policy.pinning:
            applier.drop_sweep()
        else:
            if full:
                applier.start_sweep(plan, self._dirty, self._new_cgroups)  # the targeted work is its first steps
            else:
                applier.apply_targeted(plan, self._dirty, self._new_cgroups)
            self._continue_sweep(pending)
            applier.settle_shared_only(plan, self.pods.raw)
        self._dirty.clear()
        self._new_cgroups.clear()
        self.snapshot = Snapshot(
            state=decider.planner.snapshot(),
            plan=plan,
            topology=decider.planner.topology,
            usage=applier.usage,
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

    def sweep(self, pending: Pending | None = None) -> bool:
        """Continue an unfinished full pass with the latest plan (no new decisions); False when there is none."""
        if not self.applier.sweeping:
            return False
        start = self.clock()
        self._continue_sweep(pending)
        self.reporter.metrics.reconcile_duration.observe(self.clock() - start)
        return True

    def _continue_sweep(self, pending: Pending | None) -> None:
        """The full pass's next steps; when it completes, the snapshot takes the usage it sampled."""
        if self.applier.continue_sweep(self.decider.plan, pending) and self.snapshot is not None:
            self.snapshot = dataclasses.replace(self.snapshot, usage=self.applier.usage)

    def _checkpoint(self) -> None:
        """Save the state; a failed save leaves ``store.stale`` set, so every later pass tries again."""
        if self.store is None or self.dry_run:
            return
        previous = self.store.failure
        try:
            self.store.save(self.decider.planner.snapshot())
        except OSError:
            if self.store.failure is not None:
                self.reporter.checkpoint_failed(self.store.path, self.store.failure, previous)
            return
        if previous is not None:
            self.reporter.checkpoint_recovered(self.store.path, previous.attempts)
