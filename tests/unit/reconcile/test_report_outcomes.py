"""What the decider returned, handed to the reporter and the fault boundary: the same calls, in the same order,
each pod's reports inside its boundary."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from agent.alloc import Decision, Planner, PodPlan, PodRecord
from agent.alloc.state.readopt import Readoption
from agent.config import config_from_mapping
from agent.fault_boundary import FaultBoundary, Stage
from agent.metrics import AgentMetrics
from agent.pods import PodView, pod_from_dict
from agent.reconcile import Decided, Reporter
from agent.reconcile.outcomes import Admitted, DevicesUnknown, Faulted, Outcome, Readopted, Rejected, Released
from agent.reconcile.report_outcomes import report_decided, report_outcomes
from tests.support.machines import machine
from tests.support.podfactory import container, make_pod


class _Heard(Reporter):
    """The real reporter, keeping each decision call (method and arguments) before it runs; ``failing`` names the
    pods whose report raises."""

    def __init__(self, failing: frozenset[str] = frozenset()) -> None:
        super().__init__("node-1", AgentMetrics(lambda: None), None)
        self.heard: list[tuple[Any, ...]] = []
        self.failing = failing

    def _hear(self, *call: Any) -> None:
        self.heard.append(call)
        pod = call[1]
        if getattr(pod, "name", None) in self.failing:
            raise RuntimeError(f"report of {pod.name}")

    def admitted(self, decision: Decision, plan: PodPlan | None, seconds: float) -> None:
        self._hear("admitted", decision, plan, seconds)
        super().admitted(decision, plan, seconds)

    def rejected(self, decision: Decision, seconds: float) -> None:
        self._hear("rejected", decision, seconds)
        super().rejected(decision, seconds)

    def released(self, record: PodRecord) -> None:
        self._hear("released", record)
        super().released(record)

    def devices_unknown(self, decision: Decision, problem: str, waited: float) -> None:
        self._hear("devices_unknown", decision, problem, waited)
        super().devices_unknown(decision, problem, waited)

    def readopted(self, readoption: Readoption, pods: Mapping[str, PodView]) -> None:
        self._hear("readopted", readoption, pods)
        super().readopted(readoption, pods)


class _Counted:
    """The boundary's counter: the stages counted."""

    def __init__(self) -> None:
        self.stages: list[Stage] = []

    def __call__(self, stage: Stage) -> None:
        self.stages.append(stage)


def _decision(name: str, admitted: bool = True) -> Decision:
    return Decision(uid=f"uid-{name}", namespace="default", name=name, admitted=admitted)


def test_each_outcome_becomes_its_reporter_call_with_the_same_arguments_in_order() -> None:
    """Release, re-adoption, unknown devices, admission and rejection: one call each, in the outcomes' order,
    given the very values the outcomes hold; a fault goes to the boundary in its place."""
    reporter, counted = _Heard(), _Counted()
    boundary = FaultBoundary(structlog.get_logger("test"), counted)
    record = PodRecord(uid="uid-gone", namespace="default", name="gone")
    readoption = Readoption(state=Planner(machine(threads=1), config_from_mapping({}, env={}).planner).snapshot())
    gpu, web, big = _decision("gpu"), _decision("web"), _decision("big", admitted=False)
    outcomes: list[Outcome] = [
        Released(record=record),
        Readopted(readoption=readoption, pods={}),
        DevicesUnknown(decision=gpu, problem="no answer", waited=5.0),
        Admitted(decision=gpu, plan=None, seconds=0.25),
        Faulted(pod=("default", "bad", "uid-bad"), error=RuntimeError("boom")),
        Admitted(decision=web, plan=None, seconds=0.5),
        Rejected(decision=big, seconds=0.75),
    ]
    with capture_logs() as logs:
        faulted = report_outcomes(outcomes, reporter, boundary)
    assert (
        [
            ("released", record),
            ("readopted", readoption, {}),
            ("devices_unknown", gpu, "no answer", 5.0),
            ("admitted", gpu, None, 0.25),
            ("admitted", web, None, 0.5),
            ("rejected", big, 0.75),
        ],
        {"uid-bad"},
        [Stage.POD],
        [
            "pod.released",
            "state.readopted",
            "pod.devices_unknown",
            "pod.admitted",
            "agent.internal_error",
            "pod.admitted",
            "pod.rejected",
        ],
    ) == (
        reporter.heard,
        faulted,
        counted.stages,
        [line["event"] for line in logs],
    )


def test_a_report_that_raises_ends_only_its_pods_reports() -> None:
    """A report about one pod that raises is caught at that pod's boundary (counted, logged); the pod's later
    reports this pass are skipped, the other pods' are made."""
    reporter, counted = _Heard(failing=frozenset({"gpu"})), _Counted()
    boundary = FaultBoundary(structlog.get_logger("test"), counted)
    gpu, web = _decision("gpu"), _decision("web")
    outcomes: list[Outcome] = [
        DevicesUnknown(decision=gpu, problem="no answer", waited=5.0),
        Admitted(decision=gpu, plan=None, seconds=0.0),
        Admitted(decision=web, plan=None, seconds=0.0),
    ]
    with capture_logs() as logs:
        faulted = report_outcomes(outcomes, reporter, boundary)
    assert (
        [("devices_unknown", "gpu"), ("admitted", "web")],
        {"uid-gpu"},
        [Stage.POD],
        [("agent.internal_error", "gpu")],
    ) == (
        [(call[0], call[1].name) for call in reporter.heard],
        faulted,
        counted.stages,
        [(line["event"], line["pod"]) for line in logs if line["event"].startswith("agent.")],
    )


def test_report_decided_closes_the_boundary_of_every_pod_that_went_through() -> None:
    """A pod whose admission failed before and went through this pass: the boundary forgets its failure, so the
    same failure next time is logged as an error again; a terminal pod never went through its boundary."""
    boundary = FaultBoundary(structlog.get_logger("test"), _Counted())
    raw = make_pod("web", containers=[container("app", cpu="1", memory="1Gi")])
    view = pod_from_dict(raw)
    done = pod_from_dict(make_pod("done", phase="Succeeded", containers=[container("app", cpu="1", memory="1Gi")]))
    pod, done_pod = (view.namespace, view.name, view.uid), (done.namespace, done.name, done.uid)
    boundary.caught(Stage.POD, RuntimeError("boom"), pod=pod)
    boundary.caught(Stage.POD, RuntimeError("boom"), pod=done_pod)
    report_decided(Decided(changed=False, dirty=frozenset()), [view, done], _Heard(), boundary)
    with capture_logs() as logs:
        boundary.caught(Stage.POD, RuntimeError("boom"), pod=pod)
        boundary.caught(Stage.POD, RuntimeError("boom"), pod=done_pod)
    assert [("agent.internal_error", "web"), ("agent.internal_error_again", "done")] == [
        (line["event"], line["pod"]) for line in logs
    ]


def test_a_memory_error_in_a_report_is_not_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """``MemoryError`` in a pod's report leaves the reports, as it leaves every fault boundary."""
    reporter = _Heard()

    def exhausted(*_: Any) -> None:
        raise MemoryError

    monkeypatch.setattr(reporter, "admitted", exhausted)
    boundary = FaultBoundary(structlog.get_logger("test"), _Counted())
    with pytest.raises(MemoryError):
        report_outcomes([Admitted(decision=_decision("web"), plan=None, seconds=0.0)], reporter, boundary)
