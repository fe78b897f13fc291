"""The loop's schedule: how long it waits on its queue, and whether it resyncs, sweeps or runs a pass."""

from __future__ import annotations

import pytest

from agent.reconcile.schedule import MAX_WAIT, LoopSchedule, LoopStep


@pytest.mark.parametrize(
    ("recheck_at", "nri_due", "sweeping", "expected"),
    [
        (None, None, False, MAX_WAIT),  # the resync is 10 s away: at most a second
        (100.25, None, False, 0.25),  # a bundle to read again in 250 ms
        (100.5, 100.125, False, 0.125),  # a parked NRI request answered first
        (99.0, None, False, 0.0),  # overdue: no wait
        (None, None, True, 0.0),  # a full pass unfinished: look at the queue only
    ],
    ids=["resync-far", "recheck", "nri-deadline", "overdue", "sweeping"],
)
def test_wait_is_until_the_earliest_clock(
    recheck_at: float | None, nri_due: float | None, sweeping: bool, expected: float
) -> None:
    """The queue wait ends at the earliest of the resync, a bundle re-read and an NRI deadline, at most MAX_WAIT."""
    schedule = LoopSchedule.starting(100.0, 10.0)
    assert expected == pytest.approx(schedule.wait(100.0, recheck_at=recheck_at, nri_due=nri_due, sweeping=sweeping))


def test_steps_resync_once_per_period_and_sweep_only_when_nothing_targeted_came() -> None:
    """Before the period ends: a pass for targeted work, else a sweep step; at its end one resync, then a new
    period (from the reloaded configuration when it changed)."""
    schedule = LoopSchedule.starting(0.0, 10.0)
    steps = [
        schedule.step(1.0, targeted=True),
        schedule.step(2.0, targeted=False),
        schedule.step(10.0, targeted=True),
        schedule.step(10.5, targeted=False),
    ]
    schedule.resynced(11.0, 5.0)
    later = [schedule.step(15.5, targeted=False), schedule.step(16.0, targeted=False)]
    assert (
        [LoopStep.PASS, LoopStep.SWEEP, LoopStep.RESYNC, LoopStep.SWEEP],
        [LoopStep.SWEEP, LoopStep.RESYNC],
        21.0,
    ) == (steps, later, schedule.next_resync)
