"""The JSON form of a :class:`~agent.alloc.plan.Plan` (``podpin plan --output json``, ``/state``).

Shape::

    {"node": {"cpus", "reserved", "shared_pool"},
     "pods": [{"namespace", "name", "uid", "qos", "admitted", "reason", "message", "numa_affinity",
               "bubble", "containers": [{"name", "kind", "pool", "cpus", "mems", "cpu_max"}]}]}

``bubble`` is null outside pod scope; ``mems`` is null unless the memory policy
is ``Static``; ``cpu_max`` is the value podpin writes, or null where it leaves
the runtime's value alone.
"""

from __future__ import annotations

from typing import Any

from agent.alloc import ContainerPlan, Plan, PodPlan

__all__ = ["plan_to_dict", "pod_to_dict"]


def _container(plan: ContainerPlan) -> dict[str, Any]:
    mems = plan.desired.cpuset_mems
    return {
        "name": plan.name,
        "kind": plan.kind,
        "pool": plan.pool,
        "cpus": str(plan.cpus),
        "mems": str(mems) if mems is not None else None,
        "cpu_max": plan.desired.cpu_max,
    }


def pod_to_dict(plan: PodPlan) -> dict[str, Any]:
    """One pod's entry."""
    return {
        "namespace": plan.namespace,
        "name": plan.name,
        "uid": plan.uid,
        "qos": plan.qos,
        "admitted": plan.admitted,
        "reason": plan.reason,
        "message": plan.message,
        "numa_affinity": list(plan.numa_affinity) if plan.numa_affinity is not None else None,
        "bubble": str(plan.bubble) if plan.bubble is not None else None,
        "containers": [_container(c) for c in plan.containers],
    }


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    """The whole plan, JSON-ready."""
    return {
        "node": {"cpus": str(plan.online), "reserved": str(plan.reserved), "shared_pool": str(plan.shared_pool)},
        "pods": [pod_to_dict(p) for p in plan.pods],
    }
