"""The agent's NRI calls: each handler call runs on the loop and is waited for once, under the plugin's budget."""

from __future__ import annotations

import queue
import threading
import time

from agent.cpuset import CPUSet
from agent.nri import ContainerAdjustment, CreateResult, Job, Later, WorkStatus
from agent.reconcile.nri_handler import MAX_PENDING, LoopCalls, NRIInputError

ANSWER = CreateResult(adjustment=ContainerAdjustment(cpuset_cpus=CPUSet.parse("1,17")))


class _Loop:
    """A loop thread that takes queued jobs and runs them, as the agent's loop does (``Agent._handle``)."""

    def __init__(self) -> None:
        self.jobs: queue.Queue[Job | None] = queue.Queue()
        self.late: list[Job] = []
        self.threads: list[str] = []
        self.calls = LoopCalls(self.jobs.put, self.late.append)
        self._thread = threading.Thread(target=self._run, name="loop", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (job := self.jobs.get()) is not None:
            self.calls.run(job)

    def stop(self) -> None:
        self.jobs.put(None)
        self._thread.join(5)


def test_a_call_runs_on_the_loop_thread_and_its_answer_is_returned() -> None:
    """The call runs on the loop's thread (one hop from the caller's), and the caller gets its value."""
    loop = _Loop()
    ran_on: list[str] = []

    def answer() -> CreateResult:
        ran_on.append(threading.current_thread().name)
        return ANSWER

    result = loop.calls.call(answer, 1.0)
    loop.stop()
    assert (WorkStatus.OK, ANSWER, ["loop"]) == (result.kind, result.value, ran_on)


def test_an_input_error_is_the_callers_error() -> None:
    """What the loop's call raises comes back as an error result (the plugin answers empty and reports it)."""
    loop = _Loop()

    def refuse() -> None:
        raise NRIInputError("pod default/web: uid: bad")

    result = loop.calls.call(refuse, 1.0)
    loop.stop()
    assert (WorkStatus.ERROR, "pod default/web: uid: bad") == (result.kind, str(result.error))


def test_a_busy_loop_times_out_once_and_the_late_answer_is_reported() -> None:
    """A loop that does not answer within the budget: one timeout for the caller; the answer, when it comes, is
    reported late (the plugin counts it) instead of being lost."""
    loop = _Loop()
    gate = threading.Event()
    started = time.monotonic()
    result = loop.calls.call(lambda: gate.wait(5) and ANSWER, 0.05)
    waited = time.monotonic() - started
    gate.set()
    loop.stop()
    assert (WorkStatus.TIMEOUT, True, 1) == (result.kind, waited < 1.0, len(loop.late))


def test_a_parked_call_is_answered_later_through_later() -> None:
    """A call that raises ``Later`` leaves the caller waiting; ``give`` answers it; a second answer is ignored."""
    loop = _Loop()
    parked: list[Later] = []

    def park() -> CreateResult:
        later = Later()
        parked.append(later)
        raise later

    def answer_soon() -> None:
        while not parked:
            time.sleep(0.001)
        time.sleep(0.02)
        parked[0].give(ANSWER)
        parked[0].give(CreateResult())

    threading.Thread(target=answer_soon, daemon=True).start()
    result = loop.calls.call(park, 2.0)
    loop.stop()
    assert (WorkStatus.OK, ANSWER, True) == (result.kind, result.value, parked[0].answered)


def test_calls_beyond_the_bound_are_refused_at_once() -> None:
    """With MAX_PENDING calls not yet taken by the loop, the next one is refused (busy) without waiting."""
    held: queue.Queue[Job] = queue.Queue()
    calls = LoopCalls(held.put, lambda _job: None)
    cancel = threading.Event()
    cancel.set()  # each caller stops waiting at once; its job stays queued for the loop
    for _ in range(MAX_PENDING):
        calls.call(lambda: None, 1.0, cancel=cancel)
    refused = calls.call(lambda: None, 1.0)
    assert (WorkStatus.BUSY, MAX_PENDING) == (refused.kind, held.qsize())
