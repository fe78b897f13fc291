"""When the reconcile loop wakes and what it does next: a resync, a step of the full pass, or a targeted pass.

The loop (``agent/runner.py``) waits on its queue; what it waits for is decided here, from three clocks: the
full pass every ``reconcilePeriod`` (drift repair, usage sampling, the CPU hotplug check), a container bundle
to read again (``Reconciler.next_recheck``) and a parked NRI request's deadline (``NRIDesk.next_deadline``). A
full pass left unfinished for targeted work is not waited on: the loop only looks at the queue. The wait is at
most :data:`MAX_WAIT`, so the loop notices a stop and beats its heartbeat. Pure: the loop passes the clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["MAX_WAIT", "LoopSchedule", "LoopStep"]

MAX_WAIT = 1.0
"""The longest the loop waits on its queue (seconds)."""


class LoopStep(StrEnum):
    """What the loop does after taking the queued work."""

    RESYNC = "resync"
    """``reconcilePeriod`` is over: a full pass is requested (after the configuration and CPU checks)."""
    SWEEP = "sweep"
    """Nothing targeted came: the next step of the full pass."""
    PASS = "pass"
    """Targeted work came (an event, a bundle read again): a pass for it."""


@dataclass(slots=True, kw_only=True)
class LoopSchedule:
    """The loop's resync clock (``clock()`` seconds) and the decisions made from it."""

    period: float
    next_resync: float

    @classmethod
    def starting(cls, now: float, period: float) -> LoopSchedule:
        """The first resync one period after the start."""
        return cls(period=period, next_resync=now + period)

    def wait(self, now: float, *, recheck_at: float | None, nri_due: float | None, sweeping: bool) -> float:
        """Seconds to wait on the queue: 0 while a full pass is unfinished, else until the earliest clock."""
        if sweeping:
            return 0.0
        wake = min(t for t in (self.next_resync, recheck_at, nri_due) if t is not None)
        return max(0.0, min(MAX_WAIT, wake - now))

    def step(self, now: float, *, targeted: bool) -> LoopStep:
        """What to do now; a resync moves the clock one ``period`` on (see :meth:`resynced` for a new period)."""
        if now >= self.next_resync:
            self.next_resync = now + self.period
            return LoopStep.RESYNC
        return LoopStep.PASS if targeted else LoopStep.SWEEP

    def resynced(self, now: float, period: float) -> None:
        """The period changed at a resync (the configuration was reloaded): the next one is a new period away."""
        self.period = period
        self.next_resync = now + period
