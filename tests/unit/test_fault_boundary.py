"""The fault boundary: an unexpected exception is caught, logged once with its traceback, counted every time and
posted on its pod; MemoryError and non-Exceptions pass; what it remembers is bounded."""

from __future__ import annotations

from collections import Counter

import pytest
import structlog
from structlog.testing import capture_logs

from agent.fault_boundary import INTERNAL_ERROR_REASON, FaultBoundary, Stage

POD = ("default", "web", "uid-1")


class Recorder:
    """Counts per stage and the Events posted."""

    def __init__(self) -> None:
        self.counts: Counter[Stage] = Counter()
        self.events: list[tuple[tuple[str, str, str], str, str]] = []

    def count(self, stage: Stage) -> None:
        self.counts[stage] += 1

    def warn(self, pod: tuple[str, str, str], reason: str, message: str) -> None:
        self.events.append((pod, reason, message))


def test_a_repeated_failure_is_logged_and_posted_once_and_counted_each_time() -> None:
    """Three identical failures of one pod: one error line (with the traceback), one Event, a count of 3."""
    recorder = Recorder()
    boundary = FaultBoundary(structlog.get_logger("test"), recorder.count, recorder.warn)
    with capture_logs() as logs:
        for _ in range(3):
            with boundary.guard(Stage.POD, pod=POD):
                raise KeyError("x")
    errors = [line for line in logs if line["event"] == "agent.internal_error"]
    assert (1, 2) == (len(errors), sum(line["event"] == "agent.internal_error_again" for line in logs))
    assert ("pod", "KeyError: 'x'", "web", True) == (
        errors[0]["stage"],
        errors[0]["error"],
        errors[0]["pod"],
        isinstance(errors[0]["exc_info"], KeyError),
    )
    assert ({Stage.POD: 3}, [(POD, INTERNAL_ERROR_REASON)]) == (
        dict(recorder.counts),
        [(pod, reason) for pod, reason, _ in recorder.events],
    )


def test_a_success_between_failures_makes_the_next_one_logged_again() -> None:
    """Fail, succeed, fail: two error lines."""
    recorder = Recorder()
    boundary = FaultBoundary(structlog.get_logger("test"), recorder.count)
    with capture_logs() as logs:
        for fail in (True, False, True):
            with boundary.guard(Stage.PASS, "pass"):
                if fail:
                    raise ValueError("bad")
    assert 2 == sum(line["event"] == "agent.internal_error" for line in logs)


@pytest.mark.parametrize("error", [MemoryError(), KeyboardInterrupt(), SystemExit(3)])
def test_memory_errors_and_non_exceptions_pass_through(error: BaseException) -> None:
    """Nothing the agent holds can be trusted after a MemoryError; an interrupt or exit is not a fault."""
    recorder = Recorder()
    boundary = FaultBoundary(structlog.get_logger("test"), recorder.count)
    with pytest.raises(type(error)), boundary.guard(Stage.PASS):
        raise error
    assert {} == dict(recorder.counts)


def test_what_it_remembers_is_bounded() -> None:
    """Failures of 5,000 different subjects leave at most 1,024 remembered."""
    recorder = Recorder()
    boundary = FaultBoundary(structlog.get_logger("test"), recorder.count)
    with capture_logs():
        for n in range(5000):
            boundary.caught(Stage.BUNDLE, ValueError("x"), f"bundle-{n}")
    assert (5000, 1024) == (recorder.counts[Stage.BUNDLE], len(boundary._last))  # noqa: SLF001
