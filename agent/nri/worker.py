"""Handler calls on their own thread, one at a time, waited for at most a budget.

The runtime gives a plugin a fixed time per request (containerd/nri
``pkg/api/timeouts.go``: ``DefaultPluginRequestTimeout``, 2 s, sent to the
plugin in ``ConfigureRequest.request_timeout``), and when it passes the runtime
*closes the plugin's connection* (``pkg/adaptation/plugin.go``:
``isFatalError`` counts ``context.DeadlineExceeded``). So a slow handler must
not make the plugin answer late: the plugin waits for the handler at most a
budget below the runtime's timeout, then answers without adjustment.

Python cannot interrupt a thread, so the call goes on. :class:`HandlerWorker`
runs every call on one long-lived thread, in submission order (the handler sees
the runtime's events in the runtime's order, never two at once); a call the
caller stopped waiting for is *abandoned*, and when it finishes ``on_late``
reports it. While the thread is busy, later calls queue behind it (each with
its own budget); beyond ``max_pending`` queued calls a new one is refused at
once rather than queued without bound.

The same :class:`Job` carries a call to the agent's reconcile loop instead (``agent/reconcile/nri_handler.py``):
any :class:`Calls` runs the handler, and :func:`await_job` is the one wait under the one budget. A call may
answer later than it returns (:class:`Later`): the loop parks a request for a pod the API has not delivered and
answers it when the pod comes, within the same budget.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

import structlog

__all__ = ["Calls", "HandlerWorker", "Job", "Later", "WorkResult", "WorkStatus", "await_job"]

_log = structlog.get_logger("podpin.nri.worker")

_POLL = 0.02
"""How often a waiting caller checks whether it should stop waiting (connection closed, plugin stopped)."""


class WorkStatus(StrEnum):
    """How a handler call went, from the caller's side.

    ``ok`` (the result's ``value`` holds the return value), ``error`` (its
    ``error`` holds the exception), ``timeout`` (the budget ran out; the call goes
    on), ``busy`` (refused: too many calls already queued), ``cancelled`` (the
    caller stopped waiting before the budget ran out).
    """

    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    BUSY = "busy"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkResult:
    """How a handler call went (:class:`WorkStatus`), with its value or exception and how long it took."""

    kind: WorkStatus
    value: Any = None
    error: BaseException | None = None
    seconds: float = 0.0


class Later(Exception):  # noqa: N818 - not an error: the call's answer comes later
    """Raised by a call that answers later: its job stays open, and the raiser keeps this and calls :meth:`give`.

    The job binds itself when it catches it (:meth:`Job.run`); a :meth:`give` before that has no job to answer.
    """

    def __init__(self) -> None:
        super().__init__("answered later")
        self._job: Job | None = None

    def bind(self, job: Job) -> None:
        """The job this answers (called by :meth:`Job.run`)."""
        self._job = job

    @property
    def answered(self) -> bool:
        """Whether the job has its answer (or none is bound)."""
        return self._job is None or self._job.done

    def give(self, value: Any) -> None:
        """Answer the job now; the first answer wins."""
        if self._job is not None:
            self._job.give(value)


class Job:
    """One submitted call; ``tag`` is whatever the submitter wants back in ``on_late``.

    ``on_late`` (optional) is called with the job, on the answering thread, when its answer comes after the
    caller stopped waiting (from :meth:`run` or, for a call that raised :class:`Later`, :meth:`give`).
    """

    __slots__ = ("_abandoned", "_done", "_fn", "_lock", "_on_late", "error", "seconds", "tag", "value")

    def __init__(self, fn: Callable[[], Any], tag: object, *, on_late: Callable[[Job], None] | None = None) -> None:
        self._fn = fn
        self.tag = tag
        self._on_late = on_late
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._abandoned = False
        self.value: Any = None
        self.error: BaseException | None = None
        self.seconds = 0.0

    @property
    def done(self) -> bool:
        """Whether the call has its answer."""
        return self._done.is_set()

    def run(self) -> bool:
        """Run the call; True if the caller had abandoned it (the result is late).

        A call that raises :class:`Later` leaves the job open (False): the answer comes through that object.
        """
        started = time.monotonic()
        try:
            self.value = self._fn()
        except Later as later:
            self.seconds = time.monotonic() - started
            later.bind(self)
            return False
        except BaseException as err:  # the handler's failure, even SystemExit, is the caller's result
            self.error = err
        self.seconds = time.monotonic() - started
        with self._lock:
            self._done.set()
            late = self._abandoned
        if late:
            self._report_late()
        return late

    def _report_late(self) -> None:
        if self._on_late is None:
            return
        try:
            self._on_late(self)
        except Exception:  # reporting must not end the thread that answers
            _log.exception("nri.worker.on_late_failed")

    def give(self, value: Any) -> None:
        """The answer of a call that raised :class:`Later`; a second answer is ignored, a late one reported."""
        with self._lock:
            if self._done.is_set():
                return
            self.value = value
            self._done.set()
            late = self._abandoned
        if late:
            self._report_late()

    def wait(self, seconds: float, cancel: threading.Event | None) -> bool:
        """Wait up to ``seconds`` (less if ``cancel`` is set); True if the call finished.

        A call that did not finish is marked abandoned, atomically with the check.
        """
        deadline = time.monotonic() + seconds
        while True:
            remaining = deadline - time.monotonic()
            if self._done.wait(max(0.0, min(_POLL, remaining))):
                return True
            if remaining <= 0 or (cancel is not None and cancel.is_set()):
                with self._lock:
                    if self._done.is_set():
                        return True
                    self._abandoned = True
                    return False


def await_job(job: Job, budget: float, cancel: threading.Event | None, *, submitted: float) -> WorkResult:
    """Wait for a submitted job at most ``budget`` seconds after ``submitted``; how it went."""
    if not job.wait(max(0.0, budget - (time.monotonic() - submitted)), cancel):
        waited = time.monotonic() - submitted
        return WorkResult(kind=WorkStatus.CANCELLED if waited < budget else WorkStatus.TIMEOUT, seconds=waited)
    if job.error is not None:
        return WorkResult(kind=WorkStatus.ERROR, error=job.error, seconds=job.seconds)
    return WorkResult(kind=WorkStatus.OK, value=job.value, seconds=job.seconds)


class Calls(Protocol):
    """Runs handler calls one at a time, in submission order, on a thread other than the caller's."""

    def start(self) -> None:
        """Be ready for calls."""

    def call(
        self, fn: Callable[[], Any], budget: float, *, tag: object = None, cancel: threading.Event | None = None
    ) -> WorkResult:
        """Run ``fn`` and wait for it at most ``budget`` seconds (less once ``cancel`` is set)."""

    def stop(self, timeout: float = 0.2) -> bool:
        """No more calls; True when nothing runs any more."""


class HandlerWorker:
    """A thread that runs handler calls one at a time (the plugin's own :class:`Calls`).

    Args:
        on_late: called on the worker thread with each abandoned job once it finishes (by the job).
        max_pending: queued calls beyond this are refused (``busy``).
        name: the thread's name.
    """

    def __init__(
        self, *, on_late: Callable[[Job], None], max_pending: int = 64, name: str = "podpin-nri-handler"
    ) -> None:
        self._on_late = on_late
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._max_pending = max_pending
        self._name = name
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start the thread (idempotent)."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()

    def call(
        self, fn: Callable[[], Any], budget: float, *, tag: object = None, cancel: threading.Event | None = None
    ) -> WorkResult:
        """Run ``fn`` on the worker thread and wait for it at most ``budget`` seconds."""
        if self._queue.qsize() >= self._max_pending:
            return WorkResult(kind=WorkStatus.BUSY, seconds=0.0)
        job = Job(fn, tag, on_late=self._on_late)
        submitted = time.monotonic()
        self._queue.put(job)
        return await_job(job, budget, cancel, submitted=submitted)

    def stop(self, timeout: float = 0.2) -> bool:
        """Let the thread end after the call it is running; wait up to ``timeout``. True if it ended."""
        self._queue.put(None)
        with self._lock:
            thread = self._thread
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

    def _loop(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            job.run()  # a late answer is reported by the job (on_late)
