"""Where a new container's pin latency went: the stages computed from the stamps of its way (pin_trace.py)."""

from __future__ import annotations

from agent.reconcile.pin_trace import PinTrace


def test_every_stage_named_by_the_step_that_ends_it() -> None:
    """Bundle naming: queue, name, wait, plan and write, each the gap to the step before, and the total."""
    trace = PinTrace(seen=10.0, handled=10.0002, named=10.0006, pass_began=10.0011, writing=10.0014)
    expected = {"total": 2.5, "queue": 0.2, "name": 0.4, "wait": 0.5, "plan": 0.3, "write": 1.1}
    assert expected == trace.stages_ms(10.0025)


def test_a_step_that_did_not_happen_counts_in_the_next_stage() -> None:
    """Named by the pod status (no bundle read): no ``name`` stage, the wait runs from the event taken."""
    trace = PinTrace(seen=5.0, handled=5.001, pass_began=5.004, writing=5.0045)
    expected = {"total": 5.5, "queue": 1.0, "wait": 3.0, "plan": 0.5, "write": 1.0}
    assert expected == trace.stages_ms(5.0055)


def test_only_seen_gives_the_whole_time_to_the_write() -> None:
    """A cgroup written before any other stamp (the full pass of a sweep): total and write are the same."""
    assert {"total": 3.0, "write": 3.0} == PinTrace(seen=1.0).stages_ms(1.003)


def test_a_stamp_before_the_previous_one_counts_zero() -> None:
    """The watcher's thread stamped a tick after the loop took the event: queue 0, never negative, and the
    next stage counts from the later stamp."""
    trace = PinTrace(seen=2.0005, handled=2.0, pass_began=2.001, writing=2.001)
    expected = {"total": 1.5, "queue": 0.0, "wait": 0.5, "plan": 0.0, "write": 1.0}
    assert expected == trace.stages_ms(2.002)
