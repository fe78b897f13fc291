"""A full pass, cut into steps: the QoS levels first, then one pod at a time.

A full pass (start, resync, a change of the pools) rewrites every live cgroup
the plan names and samples every container's ``cpu.stat``. Done in one go it
takes the loop for as long as all those reads and writes last — on a loaded node
or an emulated VM, hundreds of milliseconds — and a container cgroup that
appears meanwhile waits for all of it. A :class:`Sweep` holds what is left of
one full pass so the reconciler can do it step by step and do the targeted work
that arrived in between first (``reconciler.py``). It does no I/O: it is the
list of steps, what the steps found, and nothing else.

Order of the steps: the QoS levels (they hold the node shared pool for every
pod below them, so a new exclusive slice leaves them first), then the pods
something happened to when the sweep started (a new container cgroup, the pod
just admitted, a relist), then the others in scan order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from agent.cgroups import ScannedPod
from agent.metrics import UsageKey

__all__ = ["QoSLevels", "Sweep", "SweepStep"]


@dataclass(frozen=True, slots=True)
class QoSLevels:
    """The step that writes the burstable and besteffort QoS levels."""


SweepStep = QoSLevels | ScannedPod
"""One step of a sweep: the QoS levels, or a pod cgroup as the sweep's scan found it."""


@dataclass(slots=True)
class Sweep:
    """What is left of one full pass, and what its steps found so far."""

    steps: deque[SweepStep]
    usage: dict[UsageKey, float] = field(default_factory=dict)
    """CPU seconds per (pool, namespace, pod), from the pods swept so far."""
    seen: set[Path] = field(default_factory=set)
    """Every cgroup written (or found right) during the sweep; what is not in it is forgotten at the end."""

    @classmethod
    def of_scan(cls, live: Iterable[ScannedPod], first: Iterable[str]) -> Sweep:
        """A sweep over ``live``: QoS levels, then the pods whose cgroup key is in ``first`` (in that order), then
        the rest in scan order."""
        rank = {key: index for index, key in enumerate(dict.fromkeys(first))}
        pods = sorted(live, key=lambda pod: rank.get(pod.uid, len(rank)))  # stable: the rest keep scan order
        return cls(steps=deque([QoSLevels(), *pods]))

    @property
    def done(self) -> bool:
        """Whether every step was taken."""
        return not self.steps

    def next_step(self) -> SweepStep:
        """The next step, taken off the list.

        Raises:
            IndexError: the sweep is done.
        """
        return self.steps.popleft()

    def add_usage(self, usage: Mapping[UsageKey, float]) -> None:
        """Count one step's ``cpu.stat`` samples in."""
        for key, seconds in usage.items():
            self.usage[key] = self.usage.get(key, 0.0) + seconds
