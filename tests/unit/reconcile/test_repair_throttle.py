"""The re-apply throttle of containers whose files something rewrote: a burst at once, then one per interval,
a change that finds no token deferred (not dropped), and nothing kept for a container that went."""

from __future__ import annotations

import pytest

from agent.reconcile.repair_throttle import RepairThrottle


def test_a_burst_is_allowed_at_once_then_the_change_is_deferred() -> None:
    """Four changes within a second are re-applied at once; the fifth and sixth wait for one re-apply when a
    token is back (refilled continuously: one interval after the first change here)."""
    throttle: RepairThrottle[str] = RepairThrottle(burst=4, interval=1.0)
    answers = [throttle.offer("a", at) for at in (0.0, 0.05, 0.1, 0.15, 0.2, 0.3)]
    due = throttle.next_due()
    assert ([True, True, True, True, False, False], True) == (answers, due is not None and abs(due - 1.0) < 1e-9)


def test_deferred_change_is_due_once_with_its_token() -> None:
    """Before its time nothing is due; at it, the container once; then nothing is deferred, and a change right
    after finds the bucket empty again (deferred, not re-applied)."""
    throttle: RepairThrottle[str] = RepairThrottle(burst=1, interval=1.0)
    first, second = throttle.offer("a", 0.0), throttle.offer("a", 0.1)
    actual = (first, second, throttle.due(0.9), throttle.due(1.0), throttle.next_due(), throttle.offer("a", 1.1))
    assert (True, False, [], ["a"], None, False) == actual


def test_a_writer_that_never_stops_gets_one_reapply_per_interval() -> None:
    """A change every 10 ms for 10 s after the burst: one re-apply per second (at once or when due), so about
    ``burst + seconds`` in all, not a thousand."""
    throttle: RepairThrottle[str] = RepairThrottle(burst=4, interval=1.0)
    reapplied = 0
    for n in range(1000):
        now = n * 0.01
        reapplied += len(throttle.due(now)) + throttle.offer("a", now)
    assert 4 + 9 <= reapplied <= 4 + 10, reapplied


def test_containers_have_their_own_buckets_and_forget_drops_them() -> None:
    """One container's empty bucket does not hold another back; forgetting a container drops its bucket and its
    deferred change."""
    throttle: RepairThrottle[tuple[str, str]] = RepairThrottle(burst=1, interval=1.0)
    answers = [throttle.offer(("pod", "a"), 0.0), throttle.offer(("pod", "a"), 0.1), throttle.offer(("pod", "b"), 0.1)]
    before = len(throttle)
    throttle.forget(lambda key: key[1] == "a")
    assert ([True, False, True], 2, 1, None, []) == (
        answers,
        before,
        len(throttle),
        throttle.next_due(),
        throttle.due(5),
    )


def test_due_is_earliest_first() -> None:
    """Two deferred containers come out in the order they are due."""
    throttle: RepairThrottle[str] = RepairThrottle(burst=1, interval=1.0)
    for key, at in (("late", 0.5), ("early", 0.0)):
        throttle.offer(key, at)
    for key, at in (("late", 0.6), ("early", 0.2)):
        throttle.offer(key, at)
    assert (1.0, ["early", "late"]) == (throttle.next_due(), throttle.due(2.0))


@pytest.mark.parametrize(("burst", "interval"), [(0, 1.0), (1, 0.0), (2, -1.0)])
def test_bad_settings_are_refused(burst: int, interval: float) -> None:
    """A burst below one or an interval that is not positive is an error naming both."""
    with pytest.raises(ValueError, match="want burst >= 1 and interval > 0"):
        RepairThrottle(burst=burst, interval=interval)
