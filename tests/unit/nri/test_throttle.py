"""The NRI warning throttle: one warning per cause per interval, then a count of the ones held back."""

from __future__ import annotations

from agent.nri.throttle import WarningThrottle


def test_one_warning_per_cause_per_interval_with_the_count_held_back() -> None:
    """A cause warns, is held back 3 times within the interval, then warns saying 3; another cause is separate."""
    now = [0.0]
    throttle = WarningThrottle(interval=60.0, clock=lambda: now[0])
    first = [throttle.admit("invalid") for _ in range(4)]
    other = throttle.admit("timeout")
    now[0] = 61.0
    assert ([0, None, None, None], 0, 3, None) == (first, other, throttle.admit("invalid"), throttle.admit("invalid"))


def test_causes_are_bounded() -> None:
    """10,000 distinct causes leave at most 256 remembered."""
    throttle = WarningThrottle()
    for n in range(10_000):
        throttle.admit(n)
    assert 256 == len(throttle._causes)  # noqa: SLF001
