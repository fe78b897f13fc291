"""What the reconciler saw and decided on its latest pass: the value the scrape-time collectors read.

It lives beside the reconciler, which makes it; the collectors that read it (``agent/metrics.py``'s
``PlanCollector``, ``agent/audit/interference.py``) sit in lower layers and know it only as
:class:`agent.metrics.PassView`, the four fields they read (``docs/design.md``, "Layout").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agent.alloc import NodeState, Plan
from agent.metrics import UsageKey
from agent.topology import Topology

__all__ = ["Snapshot"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """What the reconciler saw and decided on its latest pass; the scrape-time metrics read only this.

    The reconciler builds a new one after every pass and replaces a reference
    (one attribute assignment, atomic in CPython), so a scrape from the server
    thread never sees half a pass.

    Attributes:
        state: the planner's node state after the pass.
        plan: the plan the pass applied (every pod bound to the node).
        topology: the machine, for per-NUMA-node counts.
        usage: CPU seconds consumed per ``(pool, namespace, pod)``, from ``cpu.stat``.
    """

    state: NodeState
    plan: Plan
    topology: Topology
    usage: Mapping[UsageKey, float]
