"""Reporter.rejected: a rejection is a warning line once per change of its reason, a debug line otherwise."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from structlog.testing import capture_logs

from agent.alloc.planner import Decision
from agent.metrics import AgentMetrics
from agent.reconcile.reporter import Reporter

UID = "6f1c2d3e-0000-4000-8000-000000000001"
NOT_ENOUGH = "not enough cpus available to satisfy request: requested={}, available={}"


def refused(reason: str, message: str) -> Decision:
    return Decision(uid=UID, namespace="default", name="big", admitted=False, reason=reason, message=message)


def levels(logs: Iterable[Mapping[str, Any]]) -> list[tuple[str, object]]:
    return [(str(e["log_level"]), e["event"]) for e in logs if str(e["event"]).startswith("pod.rejected")]


def test_same_reason_with_other_numbers_is_logged_once() -> None:
    """Tried again after releases (the free count changes): one warning, then debug lines."""
    reporter = Reporter("node-1", AgentMetrics(lambda: None), None)
    with capture_logs() as logs:
        for free in (2, 3, 5, 3):
            reporter.rejected(refused("UnexpectedAdmissionError", NOT_ENOUGH.format(8, free)), 0.0)
    assert [("warning", "pod.rejected")] + [("debug", "pod.rejected_again")] * 3 == levels(logs)


def test_changed_reason_is_logged_again() -> None:
    """A different reason (or a different message shape) is a new warning; after admission, a new rejection too."""
    reporter = Reporter("node-1", AgentMetrics(lambda: None), None)
    with capture_logs() as logs:
        reporter.rejected(refused("UnexpectedAdmissionError", NOT_ENOUGH.format(8, 2)), 0.0)
        reporter.rejected(refused("TopologyAffinityError", "Resources cannot be allocated with Topology locality"), 0)
        reporter.rejected(refused("TopologyAffinityError", "Resources cannot be allocated with Topology locality"), 0)
        reporter.admitted(Decision(uid=UID, namespace="default", name="big", admitted=True), None, 0.0)
        reporter.rejected(refused("TopologyAffinityError", "Resources cannot be allocated with Topology locality"), 0)
    assert [
        ("warning", "pod.rejected"),
        ("warning", "pod.rejected"),
        ("debug", "pod.rejected_again"),
        ("warning", "pod.rejected"),
    ] == levels(logs)
