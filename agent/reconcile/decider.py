"""The reconciler's deciding half: pods, the planner's state and the device gate's answers in; decisions, what
happened and a plan out (pure: no I/O, no call out).

Given the readable pods of a pass (in creation order) it releases the pods that are gone or terminal and admits
the new ones through the planner, in the order a restart needs (:meth:`Decider.decide`), and makes the pass's plan
(:meth:`Decider.plan_for`). It is the functional core of the reconciler (``docs/style.md``, "Functional core,
imperative shell"): what it cannot know by itself comes in as values, and what it decided goes out as values, so
that it reads no file, socket or clock of its own, waits for nothing and writes, logs, counts or posts nothing:

* the live cgroups' cpusets at a restart (``Observed`` per pod), read by the applying half
  (``applier.py``) and handed to :meth:`Decider.rebuilt` or :meth:`Decider.adopt`;
* a new pod's devices: :meth:`Decider.device_asks` says which pods a pass needs the kubelet's word on, the
  reconciler asks the device gate (``devices.py``, which may wait for PodResources) *before* deciding, and the
  answers come into :meth:`Decider.decide` as a :class:`~agent.reconcile.device_answers.DeviceAnswers` value;
* what happened: :meth:`Decider.decide`, :meth:`Decider.adopt` and :meth:`Decider.rebase` return it as
  outcome values (``outcomes.py``), in the order the decisions were made, and the reconciler hands them to the
  reporter (Events, metrics, log) and to the fault boundary right after, before anything is written;
* how long an admission took, from the ``clock`` it is given (the admission latency metric, carried by the
  outcomes).

The import contracts in ``pyproject.toml`` hold it to that: it imports no cgroup, API, runtime, state-store,
metrics, PodResources, reporter, device-gate or fault-boundary module and none of the standard modules for files,
time, threads or logging.

Which pods a pass writes is the caller's business: :meth:`Decider.decide` returns the uids whose plan changed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from agent.alloc import Decision, NodeState, Observed, Plan, Planner, PodPlan
from agent.alloc.cpumanager.restore import StaleAllocation
from agent.alloc.tally import AllocationEvent
from agent.pods import PodView
from agent.reconcile.device_answers import DeviceAnswers, DeviceAsk, DeviceAsks
from agent.reconcile.outcomes import Admitted, DevicesUnknown, Faulted, Outcome, Readopted, Rejected, Released
from agent.topology import Topology

__all__ = ["Adopted", "Decided", "Decider", "Rebased"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Decided:
    """What one round of decisions changed, and what happened in it.

    Attributes:
        changed: the planner's state changed (a release or an admission): the checkpoint is saved, a full pass due.
        dirty: the uids of the pods admitted (again) in this round: their cgroups are written.
        outcomes: the releases, admissions, rejections, unknown devices and faults of this round, in the order
            they happened: the caller reports them (``outcomes.py``).
    """

    changed: bool
    dirty: frozenset[str]
    outcomes: tuple[Outcome, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Adopted:
    """The first pass over a checkpoint (:meth:`Decider.adopt`).

    Attributes:
        differ: the containers whose checkpointed set their cgroup contradicts (``uid/name``: both sets).
        readopted: the checkpoint was re-adopted onto a new topology or reservation at load (None: it was not).
    """

    differ: dict[str, dict[str, str]]
    readopted: Readopted | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Rebased:
    """A move to a new topology (:meth:`Decider.rebase`).

    Attributes:
        dropped: the uids of the pods the state could not keep (admitted again like new pods).
        moved: the uids of the pods some of whose CPUs moved.
        readopted: the re-adoption to report (None: the planner made none).
    """

    dropped: list[str]
    moved: list[str]
    readopted: Readopted | None


class Decider:
    """Admits and releases pods through the planner and keeps the latest plan (module docstring).

    Args:
        planner: the planner over the checkpoint (or an empty state to rebuild).
        clock: monotonic seconds, for the admission latency only (a clock read neither waits nor changes anything).
        rebuild: the state is empty and is rebuilt from the live cgroups on the first pass.
    """

    def __init__(self, planner: Planner, *, clock: Callable[[], float], rebuild: bool = False) -> None:
        self._planner = planner
        self._clock = clock
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

    def adopt(self, views: list[PodView], live: Mapping[str, Observed]) -> Adopted:
        """The first pass over a checkpoint: the containers whose checkpointed set their cgroup contradicts, and the
        checkpoint's re-adoption at load to report (the caller reports it before it logs the differences).

        A checkpoint may be older than the cgroups (a save failed before the restart): its claims on CPUs another
        pod's running container holds are released (stale), and the pods it does not hold are offered their live
        cpusets first, so no running container loses its CPUs to the checkpoint or to an older new pod.
        """
        readopted = None
        if self._readoption is not None:
            readopted = Readopted(readoption=self._readoption, pods={v.uid: v for v in views})
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
        return Adopted(differ=differ, readopted=readopted)

    def behind(self) -> list[str]:
        """``namespace/name`` of the pods that kept the CPUs their cgroups hold over an older checkpoint."""
        return sorted(
            f"{d.namespace}/{d.name}"
            for d in self._decisions.values()
            if d.kept_observed and not any(e.stale is not None for e in d.allocations)
        )

    def rebase(self, topology: Topology, views: Sequence[PodView]) -> Rebased:
        """Move to a new topology (CPU hotplug): the uids dropped, the uids whose CPUs moved, the re-adoption to
        report (``views``: the readable pods, to name the dropped ones).

        Raises:
            PlannerError, CheckpointError: the state does not fit the new topology (nothing changed).
        """
        planner, dropped = self._planner.rebased(topology)
        self._planner = planner
        moved = sorted({m.uid for m in planner.readoption.moves}) if planner.readoption is not None else []
        for uid in dropped:
            self._decisions.pop(uid, None)
        readopted = None
        if planner.readoption is not None:
            readopted = Readopted(readoption=planner.readoption, pods={v.uid: v for v in views})
        self._epoch += 1
        return Rebased(dropped=dropped, moved=moved, readopted=readopted)

    # -- a pass ------------------------------------------------------------------------------------
    def device_asks(self, views: list[PodView], unreadable: set[str]) -> DeviceAsks:
        """The pods :meth:`decide` will need the device gate's word on, given the same arguments; changes nothing.

        A new pod is asked about unless it was rejected and no pod has released CPUs since (the releases this
        very pass will make count: one per admitted pod no longer live); a pod restored from the checkpoint is
        asked, once, which devices it holds. Exactly these pods: asking about a rejected pod again would call
        PodResources on passes that did not before.
        """
        live = self._live(views, unreadable)
        epoch = self._epoch + sum(1 for uid in self._planner.snapshot().pods if uid not in live)
        asks = []
        for view in views:
            if view.is_terminal:
                continue
            if self._planner.is_admitted(view.uid):
                if view.uid not in self._decisions:
                    asks.append(DeviceAsk(view=view, restored=True))
            elif self._rejected_at.get(view.uid) != epoch:
                asks.append(DeviceAsk(view=view, restored=False))
        return DeviceAsks(live=frozenset(live), pods=tuple(asks))

    @staticmethod
    def _live(views: list[PodView], unreadable: set[str]) -> set[str]:
        """The uids still on the node: readable and not terminal, or unreadable (they are not gone)."""
        return {v.uid for v in views if not v.is_terminal} | unreadable

    def decide(self, views: list[PodView], unreadable: set[str], devices: DeviceAnswers | None = None) -> Decided:
        """Release the gone, admit the new; what happened is in the result's outcomes, in order.

        Args:
            views: the readable pods, in creation order.
            unreadable: uids whose latest version is malformed; they are not gone.
            devices: the device gate's answers for :meth:`device_asks` of the same arguments (None: no gate, no
                pod waits for its devices).
        """
        outcomes: list[Outcome] = []
        changed = False
        self._dirty = set()
        live = self._live(views, unreadable)
        for uid, record in list(self._planner.snapshot().pods.items()):
            if uid not in live and self._planner.release(uid):
                changed = True
                self._epoch += 1
                self._decisions.pop(uid, None)
                outcomes.append(Released(record=record))
        for uid in [u for u in self._decisions if u not in live]:
            del self._decisions[uid]
            self._rejected_at.pop(uid, None)
        for uid in [u for u in self._contradicted if u not in live]:
            del self._contradicted[uid]
        for view in sorted(views, key=self._adoption_order):
            if view.is_terminal:
                continue
            # The pod's fault boundary (agent/fault_boundary.py): an unexpected exception ends this pod's
            # admission for this pass only; the caller hands it to the boundary in its place among the outcomes.
            try:
                changed = self._decide_one(view, devices, outcomes) or changed
            except MemoryError:
                raise
            except Exception as err:
                outcomes.append(Faulted(pod=(view.namespace, view.name, view.uid), error=err))
        return Decided(changed=changed, dirty=frozenset(self._dirty), outcomes=tuple(outcomes))

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

    def _decide_one(self, view: PodView, devices: DeviceAnswers | None, outcomes: list[Outcome]) -> bool:
        """Admit one pod that is not terminal (or take a restored one's plan); True when the state changed.

        What happened is appended to ``outcomes``. A pod whose question to the device gate raised ends here, as
        it did when the gate was asked from inside its boundary; a pod :meth:`device_asks` did not name has no
        answer (a ``KeyError``: a caller that did not ask first, caught at the pod's boundary).
        """
        ref = (view.namespace, view.name, view.uid)
        if self._planner.is_admitted(view.uid):
            if view.uid in self._decisions:
                return False
            # Restored from the checkpoint: its plan names its devices.
            if devices is not None and (failure := devices.failed.get(view.uid)) is not None:
                outcomes.append(Faulted(pod=ref, error=failure))
                return False
            held = devices.held[view.uid] if devices is not None else None
            start = self._clock()
            decision = self._planner.admit(view, devices=held)
            self._decisions[view.uid] = decision
            if decision.already_admitted:
                return False
            # The CPUs it held were stale: it was admitted again.
            self._dirty.add(view.uid)
            if decision.admitted:
                plan = self._planner.plan([view], self._decisions).pods[0]
                outcomes.append(Admitted(decision=decision, plan=plan, seconds=self._clock() - start))
            else:
                outcomes.append(Rejected(decision=decision, seconds=self._clock() - start))
            return True
        if self._rejected_at.get(view.uid) == self._epoch:
            return False
        if devices is not None and (failure := devices.failed.get(view.uid)) is not None:
            outcomes.append(Faulted(pod=ref, error=failure))
            return False
        answer = devices.new[view.uid] if devices is not None else None
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
            outcomes.append(DevicesUnknown(decision=decision, problem=answer.unknown, waited=answer.waited))
        if not decision.admitted:
            self._rejected_at[view.uid] = self._epoch
            outcomes.append(Rejected(decision=decision, seconds=seconds))
            return False
        self._rejected_at.pop(view.uid, None)
        self._dirty.add(view.uid)
        outcomes.append(
            Admitted(decision=decision, plan=self._planner.plan([view], self._decisions).pods[0], seconds=seconds)
        )
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
