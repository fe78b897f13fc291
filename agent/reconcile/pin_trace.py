"""Where a new container's pin latency went: the moments of its way from the watcher to its cgroup written.

The pin latency (``podpin_pin_latency_seconds``) says how long a container ran on a set that was not yet its own;
when it is long, an operator needs to know which step took the time. The steps happen in different calls of the
loop (the watcher's thread reads the event, the loop takes it and names the container, a later pass decides and
writes), so each is stamped when it happens and the stages are computed once the write is verified. The stages,
each named by the step that ends it:

- ``queue``: the watcher read the cgroup's creation → the loop took the event;
- ``name``: → its runtime bundle was read to name it (only where bundles name containers);
- ``wait``: → the pass that wrote it began (other work of the loop; a bundle not complete yet, read again later);
- ``plan``: → its writes began (pod views, decisions, plan, the pod's scan; in a full pass, its earlier steps);
- ``write``: → written and read back.

The cgroup's line ``cgroup.applied`` carries them as ``pin_ms`` (with ``total``), and the VM pin-window bench reads
them to say where a slow container's time went.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PinTrace"]


@dataclass(slots=True)
class PinTrace:
    """The stamps (monotonic seconds) of one new container cgroup; None where that step has not happened (or does
    not happen on this node: ``named`` without bundles)."""

    seen: float
    """The watcher read the cgroup's creation."""
    handled: float | None = None
    named: float | None = None
    pass_began: float | None = None
    writing: float | None = None

    def stages_ms(self, written: float) -> dict[str, float]:
        """``total`` and each stage in milliseconds (module docstring), rounded to microseconds.

        A step without a stamp is left out, its time counted in the next stage's; a stamp earlier than the one
        before it (clocks of two threads a tick apart) counts as zero, never negative.
        """
        stages: dict[str, float] = {"total": _ms(written - self.seen)}
        last = self.seen
        for stage, at in (
            ("queue", self.handled),
            ("name", self.named),
            ("wait", self.pass_began),
            ("plan", self.writing),
            ("write", written),
        ):
            if at is None:
                continue
            stages[stage] = _ms(at - last)
            last = max(last, at)
        return stages


def _ms(seconds: float) -> float:
    return round(max(0.0, seconds) * 1000, 3)
