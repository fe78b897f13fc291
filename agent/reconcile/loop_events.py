"""What the reconcile loop's queue carries: one typed value per kind of work, each stamped when it was queued.

Sources, the cgroup watcher, the NRI plugin's connection thread and the signal handler only put these on the
queue (``agent/runner.py``); the loop takes them one at a time. A new kind of work is a new class here and one
branch where the loop handles it, checked by mypy, instead of a string both sides must spell alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.cgroups import WatchEvent
from agent.kube import PodEvent
from agent.nri import Job
from agent.reconcile.nri_handler import LoopCalls

__all__ = ["CgroupChanged", "LoopEvent", "NRICall", "PodsChanged", "StopLoop"]


@dataclass(frozen=True, slots=True)
class PodsChanged:
    """The pod source saw this node's pods change."""

    event: PodEvent
    at: float


@dataclass(frozen=True, slots=True)
class CgroupChanged:
    """The cgroup watcher saw a cgroup appear or go, or a container's managed file written (``at``: when, for
    the pin latency of a new container)."""

    event: WatchEvent
    at: float


@dataclass(frozen=True, slots=True)
class NRICall:
    """A runtime request's handler call, to run on the loop (``agent/reconcile/nri_handler.py``)."""

    calls: LoopCalls
    job: Job
    at: float


@dataclass(frozen=True, slots=True)
class StopLoop:
    """Wake the loop so it sees the stop event at once (it may wait up to a second on the queue)."""

    at: float


LoopEvent = PodsChanged | CgroupChanged | NRICall | StopLoop
"""Anything the loop's queue carries."""
