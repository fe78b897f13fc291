"""The agent's NRI calls: each runtime request runs on the reconcile loop, one thread hop, under one budget.

podpin decides in one place: the single-threaded reconcile loop (``agent/runner.py``). The NRI plugin
(``agent/nri/plugin.py``) reads a request on its connection's thread, builds the typed values
(``agent.nri.model``) and the call of its :class:`~agent.nri.NRIHandler`, and hands that call to a
:class:`~agent.nri.Calls`. The agent's is :class:`LoopCalls`: the call goes on the loop's queue as a
:class:`~agent.nri.Job`, the loop runs it (the handler is ``agent/reconcile/nri_desk.py``), and the
connection's thread waits for it once, under the plugin's budget (75 % of the runtime's own request timeout,
``timeout_nano``, at most ``handler_timeout``). No second thread in between, no second timer: a request the
loop has not answered within the budget is answered without adjustment and reported by the plugin
(``podpin_nri_requests_total{result="timeout"}``); what the loop decides later still reaches the container
through the cgroup writes, as without NRI. A request for a pod the API has not delivered is parked by the
desk (:class:`~agent.nri.Later`) and answered when the pod comes or ``nri.podWaitTimeout`` passes, below
the budget.

So the loop stays the one that plans and writes; the connection's thread never touches the planner, the
identity book or a cgroup. The queue keeps the runtime's order; beyond :data:`MAX_PENDING` calls the loop
has not taken yet, a new one is refused at once (``busy``) rather than queued without bound.

The kubelet counterpart of this hand-off is the CPU manager's ``Allocate``/``AddContainer`` pair called
from the container runtime's pre-start hook (``pkg/kubelet/cm/internal_container_lifecycle_linux.go``
``PreCreateContainer``); podpin gets the same moment through NRI.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from agent.nri import Job, WorkResult, WorkStatus, await_job

__all__ = ["MAX_PENDING", "LoopCalls", "NRIInputError"]

MAX_PENDING = 64
"""Calls submitted and not yet taken by the loop beyond which a new one is refused (as the plugin's own
handler thread refuses)."""


class NRIInputError(ValueError):
    """A runtime request podpin cannot act on (a pod uid that names no cgroup, a container id that is not
    one); the message names the field. Raised to the plugin, which answers without adjustment and reports it."""


class LoopCalls:
    """:class:`~agent.nri.Calls` that run each handler call on the reconcile loop (module docstring).

    Args:
        submit: puts a job on the loop's queue; must not block. The loop runs it with :meth:`run`.
        on_late: the plugin's report of a call answered after its caller stopped waiting.
    """

    def __init__(self, submit: Callable[[Job], None], on_late: Callable[[Job], None]) -> None:
        self._submit = submit
        self._on_late = on_late
        self._lock = threading.Lock()
        self._waiting = 0

    def start(self) -> None:
        """Nothing to start: the loop runs already."""

    def call(
        self, fn: Callable[[], Any], budget: float, *, tag: object = None, cancel: threading.Event | None = None
    ) -> WorkResult:
        """Queue ``fn`` for the loop and wait for its answer at most ``budget`` seconds."""
        with self._lock:
            if self._waiting >= MAX_PENDING:
                return WorkResult(kind=WorkStatus.BUSY, seconds=0.0)
            self._waiting += 1
        job = Job(fn, tag, on_late=self._on_late)
        submitted = time.monotonic()
        self._submit(job)
        return await_job(job, budget, cancel, submitted=submitted)

    def run(self, job: Job) -> None:
        """Run a queued call (on the loop); a late answer is reported by the job."""
        with self._lock:
            self._waiting -= 1
        job.run()

    def stop(self, timeout: float = 0.2) -> bool:  # noqa: ARG002 - the loop is stopped by the agent
        """Nothing runs on a thread of this object's own."""
        return True
