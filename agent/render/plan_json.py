"""The JSON form of a :class:`~agent.alloc.plan.Plan` (``podpin plan --output json``, ``/state``).

Shape::

    {"node": {"cpus", "reserved", "shared_pool"},
     "pods": [{"namespace", "name", "uid", "qos", "admitted", "reason", "message", "rejection",
               "numa_affinity", "bubble",
               "containers": [{"name", "kind", "pool", "cpus", "mems", "cpu_max", "reason", "reason_kind",
                               "eligibility", "devices", "device_alignment"}]}]}

``bubble`` is null outside pod scope; ``mems`` is null unless the memory policy
is ``Static``; ``cpu_max`` is the value podpin writes, or null where it leaves
the runtime's value alone. A pod's ``reason``/``message`` are the kubelet's for
a rejection; ``rejection`` then holds the pod's whole request and what was free
per NUMA node (``{"text", "pod_cpu", "pod_memory", "exclusive_cpus",
"containers": [{"name", "kind", "cpu", "memory", "exclusive_cpus"}], "free":
[{"numa", "cpus", "memory"}]}``, quantities as manifests write them), else null.
A container's ``reason`` says why it runs in its pool (``agent/render/reasons.py``),
``reason_kind`` and ``eligibility`` are the same in words a program can match.
A container's ``devices`` are the ones it holds when they are known
(``[{"resource", "ids", "numa"}]``, else ``[]``); ``device_alignment`` says
whether its CPUs sit on their NUMA nodes (``aligned``, ``unaligned``,
``no_numa``), null when it holds none.
"""

from __future__ import annotations

from typing import Any

from agent.alloc import ContainerPlan, Plan, PodPlan, RequestFacts
from agent.quantity import format_bytes, format_cpu
from agent.render.reasons import reason_text, rejection_text

__all__ = ["plan_to_dict", "pod_to_dict", "rejection_to_dict"]


def _container(plan: ContainerPlan) -> dict[str, Any]:
    mems = plan.desired.cpuset_mems
    return {
        "name": plan.name,
        "kind": plan.kind,
        "pool": plan.pool,
        "cpus": str(plan.cpus),
        "mems": str(mems) if mems is not None else None,
        "cpu_max": str(plan.desired.cpu_max) if plan.desired.cpu_max is not None else None,
        "reason": reason_text(plan.reason),
        "reason_kind": plan.reason.kind,
        "eligibility": plan.reason.eligibility,
        "devices": [{"resource": g.resource, "ids": list(g.ids), "numa": list(g.numa)} for g in plan.devices],
        "device_alignment": plan.device_alignment,
    }


def _quantity(value: int | None, *, cpu: bool) -> str | None:
    if value is None:
        return None
    return format_cpu(value) if cpu else format_bytes(value)


def rejection_to_dict(facts: RequestFacts) -> dict[str, Any]:
    """A refused pod's request and what was free, JSON-ready."""
    return {
        "text": rejection_text(facts),
        "pod_cpu": _quantity(facts.pod_cpu, cpu=True),
        "pod_memory": _quantity(facts.pod_memory, cpu=False),
        "exclusive_cpus": facts.exclusive_cpus,
        "containers": [
            {
                "name": c.name,
                "kind": c.kind,
                "cpu": _quantity(c.cpu, cpu=True),
                "memory": _quantity(c.memory, cpu=False),
                "exclusive_cpus": c.exclusive_cpus,
            }
            for c in facts.containers
        ],
        "free": [{"numa": f.numa, "cpus": f.cpus, "memory": _quantity(f.memory, cpu=False)} for f in facts.free],
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
        "rejection": rejection_to_dict(plan.rejection) if plan.rejection is not None else None,
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
