"""The reconciler's deciding half on plain values: pods and device answers in, decisions, outcomes and a plan out
(no cgroup tree, no port: the decider is built from a planner and a clock)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest

from agent.alloc import Decision, Observed, Planner, PodDevices
from agent.config import config_from_mapping
from agent.cpuset import CPUSet
from agent.pods import PodView, pod_from_dict
from agent.reconcile import Decided, Decider
from agent.reconcile.device_answers import DeviceAnswer, DeviceAnswers, DeviceAsks
from agent.reconcile.outcomes import Admitted, DevicesUnknown, Faulted, Outcome, Readopted, Rejected, Released
from agent.topology.model import CPU
from tests.support.machines import machine
from tests.support.podfactory import container, make_pod

# A 2-NUMA-node machine with 8 single-thread cores per node: NUMA 0 = CPUs 0-7, NUMA 1 = 8-15; CPU 0 reserved.
CONFIG = {"reservedSystemCPUs": "0", "topologyManagerPolicy": "single-numa-node"}


def _planner() -> Planner:
    return Planner(machine(threads=1), config_from_mapping(CONFIG, env={}).planner)


def _view(name: str, cpu: str, ts: int) -> PodView:
    return pod_from_dict(
        make_pod(
            name,
            containers=[container("app", cpu=cpu, memory="1Gi")],
            creation_timestamp=f"2026-01-01T00:00:{ts:02d}Z",
        )
    )


def _said(outcomes: Iterable[Outcome]) -> list[tuple[str, str]]:
    """What the outcomes would have the reporter say, in order, as (method, pod) lines."""
    lines: list[tuple[str, str]] = []
    for o in outcomes:
        if isinstance(o, Admitted):
            lines.append(("admitted", o.decision.name if o.plan is not None and o.seconds == 0.0 else "?"))
        elif isinstance(o, Rejected):
            lines.append(("rejected", o.decision.name if o.seconds == 0.0 else "?"))
        elif isinstance(o, Released):
            lines.append(("released", o.record.name))
        elif isinstance(o, DevicesUnknown):
            lines.append(("devices_unknown", f"{o.decision.name}: {o.problem} after {o.waited:g}s"))
        elif isinstance(o, Readopted):
            lines.append(("readopted", f"{len(o.readoption.moves)} moves, {len(o.pods)} pods"))
        else:
            lines.append(("faulted", f"{o.pod[1]}: {type(o.error).__name__}: {o.error}"))
    return lines


@dataclass
class _Parking:
    """A device gate that parks the pods named ``parked`` and raises for those named ``broken``."""

    parked: set[str]
    broken: set[str] = field(default_factory=set)
    passes: int = 0
    asked: list[tuple[str, bool]] = field(default_factory=list)

    def answer(self, asks: DeviceAsks) -> DeviceAnswers:
        """As ``DeviceGate.answer``: a new pass, forget the gone, then each pod in order."""
        self.passes += 1
        self.parked &= asks.live
        new: dict[str, DeviceAnswer] = {}
        held: dict[str, PodDevices | None] = {}
        failed: dict[str, Exception] = {}
        for ask in asks.pods:
            self.asked.append((ask.view.name, ask.restored))
            if ask.view.uid in self.broken:
                failed[ask.view.uid] = RuntimeError("gate")
            elif ask.restored:
                held[ask.view.uid] = None
            else:
                new[ask.view.uid] = DeviceAnswer(ready=ask.view.uid not in self.parked)
        return DeviceAnswers(new=new, held=held, failed=failed)


@dataclass
class _Pass:
    """The reconciler's steps around the decider: ask the gate first (when there is one), decide, keep the lines."""

    decider: Decider
    gate: _Parking | None = None
    lines: list[tuple[str, str]] = field(default_factory=list)

    def __call__(self, views: list[PodView], unreadable: set[str]) -> Decided:
        answers = self.gate.answer(self.decider.device_asks(views, unreadable)) if self.gate is not None else None
        decided = self.decider.decide(views, unreadable, answers)
        self.lines.extend(_said(decided.outcomes))
        return decided


def _decider(planner: Planner | None = None) -> Decider:
    return Decider(planner or _planner(), clock=lambda: 0.0)


def _changes(decided: Decided) -> tuple[bool, frozenset[str]]:
    return decided.changed, decided.dirty


def test_admits_in_creation_order_releases_the_gone_and_says_so() -> None:
    """Three pods: the two that fit are admitted (dirty, the state changed), the third rejected and not tried again
    until a pod releases CPUs; when the first goes, it is released and the rejected one is admitted."""
    decider = _decider()
    run = _Pass(decider)
    first, second, big = _view("first", "5", 1), _view("second", "5", 2), _view("big", "4", 3)
    one = run([first, second, big], set())
    again = run([first, second, big], set())
    waited = decider.rejected(big.uid)
    after = run([second, big], set())
    assert (
        (True, frozenset({first.uid, second.uid})),
        (False, frozenset()),
        (True, frozenset({big.uid})),
        [
            ("admitted", "first"),
            ("admitted", "second"),
            ("rejected", "big"),
            ("released", "first"),
            ("admitted", "big"),
        ],
        (True, False),
    ) == (_changes(one), _changes(again), _changes(after), run.lines, (waited, decider.rejected(big.uid)))


def test_the_plan_is_kept_while_nothing_it_is_made_of_changed() -> None:
    """``plan_for`` returns the very same plan for the same views, state and decisions; a new one after a change."""
    decider = _decider()
    views = [_view("first", "2", 1)]
    decider.decide(views, set())
    plan = decider.plan_for(views)
    same = decider.plan_for(views)
    views.append(_view("second", "2", 2))
    decider.decide(views, set())
    changed = decider.plan_for(views)
    assert (True, False, True, ["first", "second"]) == (
        same is plan,
        changed is plan,
        decider.plan is changed,
        [p.name for p in changed.pods],
    )


def test_a_pod_whose_devices_are_unknown_waits_and_the_gate_is_asked_each_pass() -> None:
    """A parked pod is neither admitted nor rejected; once the gate lets it through it is admitted."""
    waiting = _view("gpu", "2", 1)
    gate = _Parking({waiting.uid})
    run = _Pass(_decider(), gate)
    parked = run([waiting], set())
    gate.parked.clear()
    admitted = run([waiting], set())
    assert ((False, frozenset()), (True, frozenset({waiting.uid})), [("admitted", "gpu")], 2) == (
        _changes(parked),
        _changes(admitted),
        run.lines,
        gate.passes,
    )


def test_a_malformed_pod_is_not_released_and_a_failure_stays_in_its_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pod whose latest version is unreadable keeps its CPUs; an exception in one admission stops only that pod
    (returned as a fault for the pod's boundary)."""
    planner = _planner()
    decider = _decider(planner)
    run = _Pass(decider)
    kept, other = _view("kept", "2", 1), _view("other", "2", 2)
    run([kept], set())
    admit = planner.admit

    def failing(view: PodView, *args: Any, **kwargs: Any) -> Decision:
        if view.name == "other":
            raise RuntimeError("boom")
        return admit(view, *args, **kwargs)

    monkeypatch.setattr(planner, "admit", failing)
    decided = run([other], {kept.uid})
    assert (
        (False, frozenset()),
        True,
        [("admitted", "kept"), ("faulted", "other: RuntimeError: boom")],
        [("default", "other", other.uid)],
    ) == (
        _changes(decided),
        planner.is_admitted(kept.uid),
        run.lines,
        [o.pod for o in decided.outcomes if isinstance(o, Faulted)],
    )


def test_adopting_offers_the_pods_what_their_cgroups_hold_first() -> None:
    """After a restart the pods the checkpoint does not hold are offered what their cgroups hold, first."""
    decider = _decider()
    run = _Pass(decider)
    seen = _view("seen", "2", 2)
    earlier = _view("earlier", "2", 1)
    adopted = decider.adopt([earlier, seen], {seen.uid: Observed(containers={"app": CPUSet.parse("1-2")}, pod=None)})
    run([earlier, seen], set())
    plan = decider.plan_for([earlier, seen])
    assert ({}, None, "1-2", [("admitted", "seen"), ("admitted", "earlier")]) == (
        adopted.differ,
        adopted.readopted,
        str(next(p for p in plan.pods if p.name == "seen").container("app").cpus),
        run.lines,
    )


class _Ticks:
    """A clock that moves one second at each read, and counts its reads."""

    def __init__(self) -> None:
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return float(self.reads)


def test_decide_calls_nothing_and_returns_what_happened_in_order() -> None:
    """A decider built from a planner and a clock alone (no reporter, no device gate, no fault boundary) returns
    each release, rejection, unknown-devices notice, admission and fault as a value, in the order it made them,
    with the admission time it measured (two clock reads per admission, nothing else read)."""
    clock = _Ticks()
    planner = _planner()
    decider = Decider(planner, clock=clock)
    first, big = _view("first", "8", 1), _view("big", "8", 2)
    gpu, broken = _view("gpu", "2", 3), _view("broken", "2", 4)
    one = decider.decide([first, big], set())
    reads_after_one = clock.reads
    asks = decider.device_asks([big, gpu, broken], set())
    answers = DeviceAnswers(
        new={big.uid: DeviceAnswer(ready=True), gpu.uid: DeviceAnswer(ready=True, unknown="no answer", waited=5.0)},
        held={},
        failed={broken.uid: RuntimeError("gate")},
    )
    two = decider.decide([big, gpu, broken], set(), answers)
    assert (
        [("Admitted", "first", 1.0), ("Rejected", "big", 1.0)],
        4,
        ["big", "gpu", "broken"],
        [
            ("Released", "first"),
            ("Admitted", "big"),
            ("DevicesUnknown", "gpu"),
            ("Admitted", "gpu"),
            ("Faulted", "broken"),
        ],
        [1.0, 1.0],
        ("no answer", 5.0, "RuntimeError('gate')"),
        (True, frozenset({big.uid, gpu.uid})),
        8,
    ) == (
        [(type(o).__name__, o.decision.name, o.seconds) for o in one.outcomes if isinstance(o, Admitted | Rejected)],
        reads_after_one,
        [a.view.name for a in asks.pods],
        [(type(o).__name__, _pod_name(o)) for o in two.outcomes],
        [o.seconds for o in two.outcomes if isinstance(o, Admitted)],
        next(
            (o.problem, o.waited, repr(f.error))
            for o in two.outcomes
            for f in two.outcomes
            if isinstance(o, DevicesUnknown) and isinstance(f, Faulted)
        ),
        _changes(two),
        clock.reads,
    )


def _pod_name(outcome: Outcome) -> str:
    """The name of the pod an outcome is about."""
    if isinstance(outcome, Released):
        return outcome.record.name
    if isinstance(outcome, Faulted):
        return outcome.pod[1]
    if isinstance(outcome, Readopted):
        return ",".join(sorted(v.name for v in outcome.pods.values()))
    return outcome.decision.name


def test_decide_returns_the_very_values_the_reporter_is_given() -> None:
    """The outcomes hold the planner's decision and the pod's plan as admitted: what ``Reporter.admitted`` and
    ``Reporter.rejected`` take, unchanged."""
    decider = _decider()
    fits, big = _view("fits", "4", 1), _view("big", "16", 2)
    decided = decider.decide([fits, big], set())
    admitted, rejected = decided.outcomes
    assert isinstance(admitted, Admitted)
    assert isinstance(rejected, Rejected)
    plan = decider.plan_for([fits, big])
    assert (True, False, plan.pods[0], "TopologyAffinityError") == (
        admitted.decision.admitted,
        rejected.decision.admitted,
        admitted.plan,
        rejected.decision.reason,
    )


def test_device_asks_names_exactly_the_pods_decide_needs_answers_for() -> None:
    """A rejected pod is not asked about again until a pod releases CPUs, a release of this very pass included;
    an admitted pod is not asked about; terminal pods never are; the gone are left out of ``live``."""
    decider = _decider()
    gate = _Parking(set())
    run = _Pass(decider, gate)
    first, big = _view("first", "8", 1), _view("big", "8", 2)
    run([first, big], set())
    quiet = decider.device_asks([first, big], set())
    releasing = decider.device_asks([big], set())
    run([big], set())
    assert (
        [("first", False), ("big", False), ("big", False)],
        (),
        frozenset({first.uid, big.uid}),
        ["big"],
        frozenset({big.uid}),
        [("released", "first"), ("admitted", "big")],
    ) == (
        gate.asked,
        quiet.pods,
        quiet.live,
        [a.view.name for a in releasing.pods],
        releasing.live,
        run.lines[2:],
    )


def test_a_pod_restored_from_the_checkpoint_is_asked_only_which_devices_it_holds() -> None:
    """A pod the planner holds from the checkpoint is asked once, as restored; its plan takes what it holds, and
    nothing is said for it (it was admitted by the earlier run)."""
    planner = _planner()
    restored = _view("restored", "2", 1)
    planner.admit(restored)
    decider = _decider(planner)
    gate = _Parking(set())
    run = _Pass(decider, gate)
    decided = run([restored], set())
    again = run([restored], set())
    assert ([("restored", True)], (False, frozenset()), (False, frozenset()), []) == (
        gate.asked,
        _changes(decided),
        _changes(again),
        run.lines,
    )


def test_a_gate_that_raised_for_a_pod_ends_its_admission_at_its_boundary() -> None:
    """The gate's exception for a new pod, or a restored one, comes back as the pod's fault; it is not admitted
    and is asked about again next pass."""
    planner = _planner()
    restored, new = _view("restored", "2", 1), _view("new", "2", 2)
    planner.admit(restored)
    decider = _decider(planner)
    gate = _Parking(set(), broken={restored.uid, new.uid})
    run = _Pass(decider, gate)
    broken = run([restored, new], set())
    gate.broken.clear()
    healed = run([restored, new], set())
    assert (
        (False, frozenset()),
        [("faulted", "restored: RuntimeError: gate"), ("faulted", "new: RuntimeError: gate"), ("admitted", "new")],
        (True, frozenset({new.uid})),
    ) == (_changes(broken), run.lines, _changes(healed))


def test_an_answer_missing_for_an_asked_pod_is_a_fault_not_a_guess() -> None:
    """Answers that leave out a pod :meth:`Decider.device_asks` names (a caller that did not ask first) end that
    pod's admission at its boundary instead of admitting it without its devices."""
    decider = _decider()
    pod = _view("pod", "2", 1)
    decided = decider.decide([pod], set(), DeviceAnswers(new={}, held={}, failed={}))
    assert ([("faulted", f"pod: KeyError: '{pod.uid}'")], False) == (_said(decided.outcomes), decided.changed)


def test_rebase_returns_the_readoption_to_report() -> None:
    """A move to a topology without some admitted pod's CPUs returns the pods dropped or moved and the
    re-adoption, naming the readable pods; the decider says nothing itself."""
    topology = machine(threads=1)
    decider = _decider(Planner(topology, config_from_mapping(CONFIG, env={}).planner))
    pod = _view("pod", "2", 1)
    decider.decide([pod], set())
    lost = min(decider.plan_for([pod]).pods[0].container("app").cpus)
    fewer = dataclasses.replace(
        topology,
        cpus=tuple(CPU(id=c.id, online=False) if c.id == lost else c for c in topology.cpus),
        numa_nodes=tuple(dataclasses.replace(n, cpus=n.cpus - CPUSet([lost])) for n in topology.numa_nodes),
    )
    rebased = decider.rebase(fewer, [pod])
    assert rebased.readopted is not None
    assert ([], [pod.uid], [pod.uid], {pod.uid: pod}) == (
        rebased.dropped,
        rebased.moved,
        [m.uid for m in rebased.readopted.readoption.moves],
        dict(rebased.readopted.pods),
    )


def test_a_memory_error_is_not_a_pods_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    """``MemoryError`` leaves ``decide`` (nothing the agent holds can be trusted after it), as it left the pod's
    fault boundary before."""
    planner = _planner()
    decider = _decider(planner)

    def exhausted(*_: Any, **__: Any) -> Decision:
        raise MemoryError

    monkeypatch.setattr(planner, "admit", exhausted)
    with pytest.raises(MemoryError):
        decider.decide([_view("pod", "2", 1)], set())
