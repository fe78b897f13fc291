"""The reconciler's deciding half on plain values: pods in, decisions, reports and a plan out (no cgroup tree)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from agent.alloc import Decision, Observed, Planner, PodDevices, PodPlan, PodRecord
from agent.alloc.state.readopt import Readoption
from agent.config import config_from_mapping
from agent.cpuset import CPUSet
from agent.fault_boundary import FaultBoundary, Stage
from agent.pods import PodView, pod_from_dict
from agent.reconcile import Decided, Decider
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


@dataclass
class _Said:
    """What the decider reported, in order."""

    lines: list[tuple[str, str]] = field(default_factory=list)

    def admitted(self, decision: Decision, plan: PodPlan | None, seconds: float) -> None:
        self.lines.append(("admitted", decision.name if plan is not None and seconds == 0.0 else "?"))

    def rejected(self, decision: Decision, seconds: float) -> None:
        self.lines.append(("rejected", decision.name if seconds == 0.0 else "?"))

    def released(self, record: PodRecord) -> None:
        self.lines.append(("released", record.name))

    def devices_unknown(self, decision: Decision, problem: str, waited: float) -> None:
        self.lines.append(("devices_unknown", f"{decision.name}: {problem} after {waited:g}s"))

    def readopted(self, readoption: Readoption, pods: Mapping[str, PodView]) -> None:
        self.lines.append(("readopted", f"{len(readoption.moves)} moves, {len(pods)} pods"))


@dataclass(frozen=True)
class _Reply:
    ready: bool
    devices: PodDevices | None = None
    unknown: str | None = None
    waited: float = 0.0


@dataclass
class _Parking:
    """A device gate that parks the pods named ``parked``."""

    parked: set[str]
    passes: int = 0

    def begin_pass(self) -> None:
        self.passes += 1

    def forget(self, alive: Iterable[str]) -> None:
        self.parked &= set(alive)

    def check(self, pod: PodView) -> _Reply:
        return _Reply(ready=pod.uid not in self.parked)

    def held(self, pod: PodView) -> PodDevices | None:  # noqa: ARG002 (the gate's signature; nothing is held)
        return None


@dataclass
class _Log:
    """The boundary's logger: the events it logged, without their fields."""

    events: list[str] = field(default_factory=list)

    def error(self, event: str, **fields: Any) -> None:
        self.events.append(f"{event}: {fields.get('error')}")

    def debug(self, event: str, **fields: Any) -> None:
        self.events.append(f"{event}: {fields.get('error')}")


def _decider(
    said: _Said, devices: _Parking | None = None, planner: Planner | None = None, counted: list[Stage] | None = None
) -> Decider:
    caught: list[Stage] = counted if counted is not None else []
    boundary = FaultBoundary(log=_Log(), count=caught.append)
    return Decider(planner or _planner(), reports=said, boundary=boundary, clock=lambda: 0.0, devices=devices)


def test_admits_in_creation_order_releases_the_gone_and_says_so() -> None:
    """Three pods: the two that fit are admitted (dirty, the state changed), the third rejected and not tried again
    until a pod releases CPUs; when the first goes, it is released and the rejected one is admitted."""
    said = _Said()
    decider = _decider(said)
    first, second, big = _view("first", "5", 1), _view("second", "5", 2), _view("big", "4", 3)
    one = decider.decide([first, second, big], set())
    again = decider.decide([first, second, big], set())
    waited = decider.rejected(big.uid)
    after = decider.decide([second, big], set())
    assert (
        Decided(True, frozenset({first.uid, second.uid})),
        Decided(False, frozenset()),
        Decided(True, frozenset({big.uid})),
        [
            ("admitted", "first"),
            ("admitted", "second"),
            ("rejected", "big"),
            ("released", "first"),
            ("admitted", "big"),
        ],
        (True, False),
    ) == (one, again, after, said.lines, (waited, decider.rejected(big.uid)))


def test_the_plan_is_kept_while_nothing_it_is_made_of_changed() -> None:
    """``plan_for`` returns the very same plan for the same views, state and decisions; a new one after a change."""
    said = _Said()
    decider = _decider(said)
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
    said = _Said()
    waiting = _view("gpu", "2", 1)
    gate = _Parking({waiting.uid})
    decider = _decider(said, gate)
    parked = decider.decide([waiting], set())
    gate.parked.clear()
    admitted = decider.decide([waiting], set())
    assert (Decided(False, frozenset()), Decided(True, frozenset({waiting.uid})), [("admitted", "gpu")], 2) == (
        parked,
        admitted,
        said.lines,
        gate.passes,
    )


def test_a_malformed_pod_is_not_released_and_a_failure_stays_in_its_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pod whose latest version is unreadable keeps its CPUs; an exception in one admission stops only that pod
    (counted at the pod's boundary)."""
    said = _Said()
    planner = _planner()
    counted: list[Stage] = []
    decider = _decider(said, planner=planner, counted=counted)
    kept, other = _view("kept", "2", 1), _view("other", "2", 2)
    decider.decide([kept], set())
    admit = planner.admit

    def failing(view: PodView, *args: Any, **kwargs: Any) -> Decision:
        if view.name == "other":
            raise RuntimeError("boom")
        return admit(view, *args, **kwargs)

    monkeypatch.setattr(planner, "admit", failing)
    decided = decider.decide([other], {kept.uid})
    assert (Decided(False, frozenset()), True, [("admitted", "kept")], [Stage.POD]) == (
        decided,
        planner.is_admitted(kept.uid),
        said.lines,
        counted,
    )


def test_adopting_offers_the_pods_what_their_cgroups_hold_first() -> None:
    """After a restart the pods the checkpoint does not hold are offered what their cgroups hold, first."""
    said = _Said()
    decider = _decider(said)
    seen = _view("seen", "2", 2)
    earlier = _view("earlier", "2", 1)
    differ = decider.adopt([earlier, seen], {seen.uid: Observed(containers={"app": CPUSet.parse("1-2")}, pod=None)})
    decider.decide([earlier, seen], set())
    plan = decider.plan_for([earlier, seen])
    assert ({}, "1-2", [("admitted", "seen"), ("admitted", "earlier")]) == (
        differ,
        str(next(p for p in plan.pods if p.name == "seen").container("app").cpus),
        said.lines,
    )
