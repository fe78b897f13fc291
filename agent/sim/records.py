"""What a replay leaves behind: each pod's outcome and each node's final state.

These records are the hand-over from :mod:`agent.sim.engine` (which produces
them) to :mod:`agent.sim.measure` (which turns them into numbers), kept apart
so neither module imports the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agent.alloc import NodeState, Plan
from agent.sim.derive import Model

__all__ = ["UNSCHEDULABLE", "NodeResult", "PodOutcome", "Replay"]

UNSCHEDULABLE = "Unschedulable"
"""The reason recorded for a pod that fits no node (the scheduler's condition reason)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PodOutcome:
    """What happened to one pod: the node it was sent to (None: none fits) and the admission."""

    template: str
    name: str
    node: int | None
    admitted: bool
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeResult:
    """Nodes at the end of a replay: the planner's state and the plan of its admitted pods.

    ``count`` nodes, the lowest being ``index``, ended in this state (``agent/sim/fleet.py``: nodes with the
    same history share one result).
    """

    index: int
    state: NodeState
    plan: Plan
    count: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Replay:
    """Everything one model's replay produced, for :func:`agent.sim.measure.measure`.

    ``pinned`` maps each template to the CPUs one of its pods holds from the
    node in this model (:func:`agent.sim.measure.pinned_request`).
    """

    model: Model
    outcomes: tuple[PodOutcome, ...]
    nodes: tuple[NodeResult, ...]
    pinned: Mapping[str, int]
