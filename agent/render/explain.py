"""``podpin plan --explain``: one pod's admission walked through, as text and as JSON.

The core hands over an :class:`~agent.alloc.AdmissionTrace` (the hints of each
provider, each merge, its verdict) and the pod's :class:`~agent.alloc.PodPlan`
(the CPUs taken and each container's reason). This module puts them in the
order a person reads them: the request, the policy and scope, the hints and the
merge, the chosen NUMA nodes and why, the CPUs taken. The "why" of the choice
follows the kubelet's merge (``pkg/kubelet/cm/topologymanager/policy.go``):
every combination of one hint per resource is intersected, a result is
preferred when every hint in it is, and the best result is preferred over not,
then the narrowest (with ``prefer-closest-numa-nodes``, the closest), then the
lowest-numbered nodes.
"""

from __future__ import annotations

from typing import Any

from agent.alloc import (
    AdmissionTrace,
    MergeStep,
    PodPlan,
    ResourceHints,
    TopologyManagerPolicy,
    TopologyManagerScope,
)
from agent.alloc.topologymanager import TopologyHint
from agent.render.plan_json import rejection_to_dict
from agent.render.reasons import reason_text, rejection_text

__all__ = ["MAX_HINTS_SHOWN", "choice_text", "explain_text", "explain_to_dict"]

#: Hints listed per resource in the text; the rest are counted (a 16-node machine offers up to 65535).
MAX_HINTS_SHOWN = 12

_PROVIDERS = {"cpu": "CPU manager", "memory": "memory manager", "device": "device manager"}

_POLICY_RULE = {
    TopologyManagerPolicy.BEST_EFFORT: "best-effort admits the best hint, preferred or not",
    TopologyManagerPolicy.RESTRICTED: "restricted admits the best hint only when it is preferred",
    TopologyManagerPolicy.SINGLE_NUMA_NODE: (
        "single-numa-node merges only preferred single-node hints and admits a preferred result"
    ),
}


def _nodes(hint: TopologyHint) -> str:
    return "any NUMA node" if hint.nodes is None else f"NUMA {','.join(map(str, hint.nodes))}"


def _hint(hint: TopologyHint) -> str:
    return _nodes(hint) + (" (preferred)" if hint.preferred else "")


def _hint_list(entry: ResourceHints) -> str:
    if entry.hints is None:
        return "no preference"
    if not entry.hints:
        return "none: the resource fits nowhere"
    shown = ", ".join(_hint(h) for h in entry.hints[:MAX_HINTS_SHOWN])
    rest = entry.hints[MAX_HINTS_SHOWN:]
    if rest:
        shown += f", … and {len(rest)} more ({sum(h.preferred for h in rest)} of them preferred)"
    return shown


def choice_text(trace: AdmissionTrace, step: MergeStep) -> str:
    """Why the merge of ``step`` chose what it chose, in one sentence."""
    best = step.best
    if not step.admitted:
        if trace.policy is TopologyManagerPolicy.SINGLE_NUMA_NODE:
            return "no single NUMA node can hold it as every resource prefers: single-numa-node rejects the pod"
        return f"the best hint, {_nodes(best)}, is not preferred: restricted rejects the pod"
    if best.affinity is None:
        return "no resource asks for a NUMA node: its CPUs may come from anywhere"
    ties = "the closest nodes" if trace.prefer_closest else "the lowest-numbered nodes"
    if best.preferred:
        return (
            f"{_nodes(best)}: the narrowest placement every resource allows and every provider prefers "
            f"(ties go to {ties})"
        )
    return (
        f"{_nodes(best)}: no placement is preferred by every provider, so the narrowest one every resource "
        f"allows (ties go to {ties}); alignment is not guaranteed"
    )


def _scope_line(trace: AdmissionTrace) -> str:
    if trace.policy is TopologyManagerPolicy.NONE:
        return "topology manager: policy none: no hints are merged, nothing is aligned; each container is allocated"
    if trace.scope == TopologyManagerScope.POD:
        what = (
            "one merge for the whole pod, then the pod's CPUs are carved at once (KEP-5526)"
            if trace.pod_level
            else "one merge for the whole pod, then each container is allocated"
        )
    else:
        what = "one merge per container, in order (init containers first)"
    return f"topology manager: policy {trace.policy}, scope {trace.scope}: {what}; {_POLICY_RULE[trace.policy]}"


def explain_text(trace: AdmissionTrace, pod: PodPlan) -> str:
    """The walk-through as text, for one pod."""
    lines = [f"{pod.namespace}/{pod.name}  (uid {pod.uid}, {pod.qos})", f"  {rejection_text(trace.request)}", ""]
    lines.append(_scope_line(trace))
    for step in trace.steps:
        whose = "the pod" if step.container is None else f"container {step.container}"
        lines.append(f"hints for {whose}:")
        width = max(len(entry.resource) for entry in step.hints)
        for entry in step.hints:
            provider = _PROVIDERS.get(entry.provider, entry.provider)
            lines.append(f"  {entry.resource:<{width}}  ({provider})  {_hint_list(entry)}")
        verdict = "admitted" if step.admitted else "rejected"
        lines.append(f"  merge: best hint {_hint(step.best)} -> {verdict}")
        lines.append(f"  why: {choice_text(trace, step)}")
    lines.append("")
    if not trace.admitted:
        lines += [f"REJECTED: {trace.reason}", f"  message: {trace.message}"]
        lines.append("  its containers keep running in the node shared pool")
        return "\n".join(lines) + "\n"
    numa = ",".join(map(str, pod.numa_affinity)) if pod.numa_affinity else "none (nothing aligned)"
    lines.append(f"chosen NUMA nodes: {numa}")
    lines.append("CPUs taken:")
    if pod.bubble is not None:
        lines.append(f"  the pod's CPUs: {pod.bubble}")
    width = max((len(c.name) for c in pod.containers), default=0)
    for c in pod.containers:
        numa_of = ",".join(map(str, c.numa)) or "-"
        lines.append(f"  {c.name:<{width}}  {c.pool:<11}  {c.cpus!s:<12}  NUMA {numa_of:<5}  {reason_text(c.reason)}")
    held = [c for c in pod.containers if c.devices]
    if held:
        lines.append("devices held:")
        for c in held:
            device_numa = ",".join(map(str, c.device_numa)) or "-"
            ids = ", ".join(f"{group.resource} {','.join(group.ids)}" for group in c.devices)
            lines.append(f"  {c.name:<{width}}  {ids}  NUMA {device_numa}  CPUs {c.device_alignment or '-'}")
    return "\n".join(lines) + "\n"


def _hint_dict(hint: TopologyHint) -> dict[str, Any]:
    return {"numa": list(hint.nodes) if hint.nodes is not None else None, "preferred": hint.preferred}


def explain_to_dict(trace: AdmissionTrace, pod: PodPlan) -> dict[str, Any]:
    """The walk-through, JSON-ready: the trace's values plus the sentence for each merge."""
    return {
        "policy": trace.policy,
        "scope": trace.scope,
        "prefer_closest": trace.prefer_closest,
        "pod_level": trace.pod_level,
        "admitted": trace.admitted,
        "reason": trace.reason,
        "message": trace.message,
        "request": rejection_to_dict(trace.request),
        "steps": [
            {
                "container": step.container,
                "hints": [
                    {
                        "provider": entry.provider,
                        "resource": entry.resource,
                        "hints": [_hint_dict(h) for h in entry.hints] if entry.hints is not None else None,
                    }
                    for entry in step.hints
                ],
                "best": _hint_dict(step.best),
                "admitted": step.admitted,
                "why": choice_text(trace, step),
            }
            for step in trace.steps
        ],
        "numa_affinity": list(pod.numa_affinity) if pod.numa_affinity is not None else None,
    }
