"""Handler calls on one thread: results, errors, budgets, late completions, order, back-pressure."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from agent.nri.worker import HandlerWorker, Job, WorkStatus


@pytest.fixture
def late() -> list[Job]:
    """The jobs the worker reports as late."""
    return []


@pytest.fixture
def worker(late: list[Job]) -> Iterator[HandlerWorker]:
    """A started worker whose late jobs land in ``late``."""
    handler_worker = HandlerWorker(on_late=late.append, max_pending=2)
    handler_worker.start()
    yield handler_worker
    handler_worker.stop(1.0)


def test_result_and_error_come_back(worker: HandlerWorker) -> None:
    """A call's return value comes back as ok; an exception as error, with the exception."""
    ok = worker.call(lambda: 42, 1.0)
    failed = worker.call(lambda: 1 / 0, 1.0)
    assert (WorkStatus.OK, 42) == (ok.kind, ok.value)
    assert (WorkStatus.ERROR, ZeroDivisionError) == (failed.kind, type(failed.error))


def test_budget_ends_the_wait_and_the_late_result_is_reported(worker: HandlerWorker, late: list[Job]) -> None:
    """A call longer than its budget returns timeout at the budget; when it ends, on_late gets it with its tag."""
    release = threading.Event()
    started = time.monotonic()
    result = worker.call(lambda: release.wait(5) and "done", 0.1, tag="create c1")
    waited = time.monotonic() - started
    assert WorkStatus.TIMEOUT == result.kind
    assert 0.1 <= waited < 1.0
    release.set()
    for _ in range(100):
        if late:
            break
        time.sleep(0.01)
    assert [("create c1", "done")] == [(job.tag, job.value) for job in late]


def test_calls_run_one_at_a_time_in_order(worker: HandlerWorker) -> None:
    """A call queued behind a slow one runs after it, never beside it."""
    trace: list[str] = []
    release = threading.Event()

    def slow() -> None:
        trace.append("slow start")
        release.wait(5)
        trace.append("slow end")

    assert WorkStatus.TIMEOUT == worker.call(slow, 0.05).kind
    waiter = threading.Thread(target=lambda: trace.append(str(worker.call(lambda: trace.append("next"), 2.0).kind)))
    waiter.start()
    time.sleep(0.05)
    release.set()
    waiter.join(2)
    assert ["slow start", "slow end", "next", "ok"] == trace


def test_too_many_queued_calls_are_refused(worker: HandlerWorker) -> None:
    """Beyond max_pending queued calls a new call is refused as busy at once."""
    release = threading.Event()
    worker.call(lambda: release.wait(5), 0.01)  # running
    worker.call(lambda: None, 0.01)  # queued
    worker.call(lambda: None, 0.01)  # queued
    started = time.monotonic()
    busy = worker.call(lambda: None, 1.0)
    assert (WorkStatus.BUSY, True) == (busy.kind, time.monotonic() - started < 0.5)
    release.set()


def test_cancel_stops_the_wait_early(worker: HandlerWorker) -> None:
    """A set cancel event ends the wait before the budget, reported as cancelled."""
    cancel = threading.Event()
    release = threading.Event()
    threading.Timer(0.05, cancel.set).start()
    started = time.monotonic()
    result = worker.call(lambda: release.wait(5), 2.0, cancel=cancel)
    assert (WorkStatus.CANCELLED, True) == (result.kind, time.monotonic() - started < 1.0)
    release.set()
