"""The reconciler's deciding half: pods and the planner's state in, decisions and a plan out (no I/O).

Given the readable pods of a pass (in creation order) it releases the pods that are gone or terminal and admits
the new ones through the planner, in the order a restart needs (:meth:`Decider.decide`), and makes the pass's plan
(:meth:`Decider.plan_for`). What it cannot know by itself comes in as values or through two narrow ports, so that
it reads no file, socket or clock of its own and writes nothing:

* the live cgroups' cpusets at a restart (``Observed`` per pod), read by the applying half
  (``applier.py``) and handed to :meth:`Decider.rebuilt` or :meth:`Decider.adopt`;
* a new pod's devices, asked of the kubelet through :class:`DeviceAnswers` (``devices.py``'s gate);
* what happened, said through :class:`DecisionReports` (the reporter: Events, metrics, log);
* how long an admission took, from the ``clock`` it is given (the admission latency metric).

The import contracts in ``pyproject.toml`` hold it to that: it imports no cgroup, API, runtime, state-store,
metrics or PodResources module and none of the standard modules for files, time or logging.

Which pods a pass writes is the caller's business: :meth:`Decider.decide` returns the uids whose plan changed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from agent.alloc import Decision, NodeState, Observed, Plan, Planner, PodDevices, PodPlan, PodRecord
from agent.alloc.cpumanager.restore import StaleAllocation
from agent.alloc.state.readopt import Readoption
from agent.alloc.tally import AllocationEvent
from agent.fault_boundary import FaultBoundary, Stage
from agent.pods import PodView
from agent.topology import Topology

__all__ = ["Decided", "DecisionReports", "Decider", "DeviceAnswers", "DeviceReply"]


class DecisionReports(Protocol):
    """What the decider says happened (``reporter.py``): once per decision, in the order it was made."""

    def admitted(self, decision: Decision, plan: PodPlan | None, seconds: float) -> None:
        """A pod was admitted (``seconds``: the planner's time)."""

    def rejected(self, decision: Decision, seconds: float) -> None:
        """A pod was rejected."""

    def released(self, record: PodRecord) -> None:
        """A pod that is gone or terminal gave its CPUs back."""

    def devices_unknown(self, decision: Decision, problem: str, waited: float) -> None:
        """A pod was admitted without device hints after the wait for its devices."""

    def readopted(self, readoption: Readoption, pods: Mapping[str, PodView]) -> None:
        """The checkpoint's pods were re-adopted onto a new topology or reservation."""


class DeviceReply(Protocol):
    """The kubelet's word on a new pod's devices (``devices.DeviceAnswer``)."""

    @property
    def ready(self) -> bool:
        """The pod may be admitted now."""

    @property
    def devices(self) -> PodDevices | None:
        """The devices it holds (None: none known)."""

    @property
    def unknown(self) -> str | None:
        """Why its devices stayed unknown after the wait (then it is admitted without hints)."""

    @property
    def waited(self) -> float:
        """Seconds it waited."""


class DeviceAnswers(Protocol):
    """The bounded wait for a new pod's devices (``devices.DeviceGate``)."""

    def begin_pass(self) -> None:
        """A new pass: ask afresh."""

    def forget(self, alive: Iterable[str]) -> None:
        """Stop waiting for pods no longer on the node."""

    def check(self, pod: PodView) -> DeviceReply:
        """Whether ``pod`` may be admitted now, and with which devices."""

    def held(self, pod: PodView) -> PodDevices | None:
        """The devices an already admitted pod holds (for its plan only)."""


@dataclass(frozen=True, slots=True)
class Decided:
    """What one round of decisions changed.

    Attributes:
        changed: the planner's state changed (a release or an admission): the checkpoint is saved, a full pass due.
        dirty: the uids of the pods admitted (again) in this round: their cgroups are written.
    """

    changed: bool
    dirty: frozenset[str]


class Decider:
    """Admits and releases pods through the planner and keeps the latest plan (module docstring).

    Args:
        planner: the planner over the checkpoint (or an empty state to rebuild).
        reports: where decisions are said.
        boundary: where an unexpected exception in one pod's admission stops.
        clock: monotonic seconds, for the admission latency only.
        devices: the wait for new pods' devices (None: no pod waits).
        rebuild: the state is empty and is rebuilt from the live cgroups on the first pass.
    """

    def __init__(
        self,
        planner: Planner,
        *,
        reports: DecisionReports,
        boundary: FaultBoundary,
        clock: Callable[[], float],
        devices: DeviceAnswers | None = None,
        rebuild: bool = False,
    ) -> None:
        self._planner = planner
        self._reports = reports
        self._boundary = boundary
        self._clock = clock
        self._devices = devices
        self._rebuild = rebuild
        self._readoption = planner.readoption
        self._observations: dict[str, Observed] = {}
        self._contradicted: dict[str, StaleAllocation] = {}
        """Pods whose checkpointed CPUs a running container of another pod held at the restart: released, and
        reported with their next admission."""
        self._decisions: dict[str, Decision] = {}
        self._rejected_at: dict[str, int] = {}
        self._epoch = 0
        self._dirty: set[str] = set()
        self._plan: Plan | None = None
        self._plan_inputs: tuple[NodeState, tuple[PodView, ...], tuple[tuple[str, Decision], ...]] | None = None

    @property
    def planner(self) -> Planner:
        """The planner (replaced by :meth:`rebase`)."""
        return self._planner

    @property
    def plan(self) -> Plan | None:
        """The latest plan (None before the first pass)."""
        return self._plan

    @property
    def rebuilding(self) -> bool:
        """The state is to be rebuilt from the live cgroups (:meth:`rebuilt`)."""
        return self._rebuild

    def rejected(self, uid: str) -> bool:
        """Whether ``uid`` was rejected and waits for some pod to release CPUs."""
        return uid in self._rejected_at

    # -- a restart ---------------------------------------------------------------------------------
    def rebuilt(self, live: Mapping[str, Observed]) -> None:
        """The first pass after a lost checkpoint: the pods are offered what their live cgroups hold."""
        self._rebuild = False
        self._observations = dict(live)

    def adopt(self, views: list[PodView], live: Mapping[str, Observed]) -> dict[str, dict[str, str]]:
        """The first pass over a checkpoint; returns the containers whose checkpointed set their cgroup contradicts.

        A checkpoint may be older than the cgroups (a save failed before the restart): its claims on CPUs another
        pod's running container holds are released (stale), and the pods it does not hold are offered their live
        cpusets first, so no running container loses its CPUs to the checkpoint or to an older new pod.
        """
        if self._readoption is not None:
            self._reports.readopted(self._readoption, {v.uid: v for v in views})
            self._readoption = None
        by_uid = {v.uid: v for v in views}
        self._contradicted = self._planner.release_contradicted(
            (by_uid[uid], seen) for uid, seen in live.items() if uid in by_uid
        )
        cpu = self._planner.snapshot().cpu
        differ = {
            f"{uid}/{name}": {"checkpoint": str(cpu.get(uid, name)), "cgroup": str(cpus)}
            for uid, seen in live.items()
            for name, cpus in seen.containers.items()
            if cpu.get(uid, name) not in (None, cpus)
        }
        self._observations = {uid: seen for uid, seen in live.items() if not self._planner.is_admitted(uid)}
        return differ

    def behind(self) -> list[str]:
        """``namespace/name`` of the pods that kept the CPUs their cgroups hold over an older checkpoint."""
        return sorted(
            f"{d.namespace}/{d.name}"
            for d in self._decisions.values()
            if d.kept_observed and not any(e.stale is not None for e in d.allocations)
        )

    def rebase(self, topology: Topology, views: Callable[[], list[PodView]]) -> tuple[list[str], list[str]]:
        """Move to a new topology (CPU hotplug); the uids dropped and the uids whose CPUs moved.

        Raises:
            PlannerError, CheckpointError: the state does not fit the new topology (nothing changed).
        """
        planner, dropped = self._planner.rebased(topology)
        self._planner = planner
        moved = sorted({m.uid for m in planner.readoption.moves}) if planner.readoption is not None else []
        for uid in dropped:
            self._decisions.pop(uid, None)
        if planner.readoption is not None:
            self._reports.readopted(planner.readoption, {v.uid: v for v in views()})
        self._epoch += 1
        return dropped, moved

    # -- a pass ------------------------------------------------------------------------------------
    def decide(self, views: list[PodView], unreadable: set[str]) -> Decided:
        """Release the gone, admit the new.

        Args:
            views: the readable pods, in creation order.
            unreadable: uids whose latest version is malformed; they are not gone.
        """
        changed = False
        self._dirty = set()
        live = {v.uid for v in views if not v.is_terminal} | unreadable
        for uid, record in list(self._planner.snapshot().pods.items()):
            if uid not in live and self._planner.release(uid):
                changed = True
                self._epoch += 1
                self._decisions.pop(uid, None)
                self._reports.released(record)
        for uid in [u for u in self._decisions if u not in live]:
            del self._decisions[uid]
            self._rejected_at.pop(uid, None)
        for uid in [u for u in self._contradicted if u not in live]:
            del self._contradicted[uid]
        if self._devices is not None:
            self._devices.begin_pass()
            self._devices.forget(live)
        for view in sorted(views, key=self._adoption_order):
            if view.is_terminal:
                continue
            with self._boundary.guard(Stage.POD, pod=(view.namespace, view.name, view.uid)):
                changed = self._decide_one(view) or changed
        return Decided(changed, frozenset(self._dirty))

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
        return 0 if self._planner.holds_observed(view, seen) else 1

    def _decide_one(self, view: PodView) -> bool:
        """Admit one pod that is not terminal (or take a restored one's plan); True when the state changed.

        It runs inside the pod's fault boundary (``agent/fault_boundary.py``): an unexpected exception ends this
        pod's admission for this pass only.
        """
        if self._planner.is_admitted(view.uid):
            if view.uid in self._decisions:
                return False
            # Restored from the checkpoint: its plan names its devices.
            held = self._devices.held(view) if self._devices is not None else None
            start = self._clock()
            decision = self._planner.admit(view, devices=held)
            self._decisions[view.uid] = decision
            if decision.already_admitted:
                return False
            # The CPUs it held were stale: it was admitted again.
            self._dirty.add(view.uid)
            if decision.admitted:
                plan = self._planner.plan([view], self._decisions).pods[0]
                self._reports.admitted(decision, plan, self._clock() - start)
            else:
                self._reports.rejected(decision, self._clock() - start)
            return True
        if self._rejected_at.get(view.uid) == self._epoch:
            return False
        answer = self._devices.check(view) if self._devices is not None else None
        if answer is not None and not answer.ready:
            return False  # its devices are not known yet: asked again on a later pass
        start = self._clock()
        decision = self._planner.admit(
            view, self._observations.pop(view.uid, None), devices=answer.devices if answer is not None else None
        )
        seconds = self._clock() - start
        stale = self._contradicted.pop(view.uid, None)
        if stale is not None:  # its checkpointed CPUs were released at the restart: said with this admission
            decision = dataclasses.replace(
                decision, allocations=(AllocationEvent.released_stale(stale), *decision.allocations)
            )
        self._decisions[view.uid] = decision
        if answer is not None and answer.unknown is not None:
            self._reports.devices_unknown(decision, answer.unknown, answer.waited)
        if not decision.admitted:
            self._rejected_at[view.uid] = self._epoch
            self._reports.rejected(decision, seconds)
            return False
        self._rejected_at.pop(view.uid, None)
        self._dirty.add(view.uid)
        self._reports.admitted(decision, self._planner.plan([view], self._decisions).pods[0], seconds)
        return True

    def plan_for(self, views: list[PodView]) -> Plan:
        """The plan of these pods, kept as the latest: the previous one when nothing it is made of changed.

        A periodic pass on a quiet node sees the same pod views (the source hands over the same objects),
        the same planner state and the same decisions; the plan is then the one already made, and planning
        110 pods again was the largest part of an idle pass after the cgroup reads (``docs/benchmarks.md``,
        "Agent at rest").
        """
        state = self._planner.snapshot()
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
        plan = self._planner.plan(views, self._decisions)
        self._plan_inputs = (state, tuple(views), decisions)
        self._plan = plan
        return plan

    def pod_plan(self, uid: str) -> PodPlan | None:
        """The latest plan of the pod whose uid or cgroup key is ``uid``, or None."""
        plan = self._plan
        if plan is None:
            return None
        return next((p for p in plan.pods if uid in (p.uid, p.cgroup_key)), None)
