"""The simulation report: a side-by-side text table and the JSON document.

The text puts each metric on one row, right-aligned label, then
``<per-container> -> <pod-level>`` and the change, so the seed-mesh story
reads ``exclusive CPUs  1200 -> 800``. A workload with more than one template
gets a second table of admitted pods per template. The last line is the
headline: how many more pods fit with pod-level resources on the same nodes
when the cluster is full, or how many CPUs stay free when everything fits.

The JSON document has one object per model, keyed ``per-container`` and
``pod-level`` (:func:`simulation_to_dict`), and the settings under
``simulation``.
"""

from __future__ import annotations

from typing import Any

from agent.sim.derive import MODELS
from agent.sim.engine import Simulation
from agent.sim.measure import ModelResult

__all__ = ["ROWS", "render_text", "simulation_to_dict"]

ROWS: tuple[tuple[str, str], ...] = (
    ("pods admitted", "pods_admitted"),
    ("NUMA-aligned pods", "numa_aligned"),
    ("exclusive CPUs", "exclusive_cpus"),
    ("total CPUs", "total_cpus"),
    ("free CPUs", "free_cpus"),
    ("stranded CPUs", "stranded_cpus"),
    ("unschedulable pods", "pods_unschedulable"),
    ("rejected pods", "pods_rejected"),
    ("nodes used", "nodes_used"),
)
"""(row label, :class:`ModelResult` field) in report order."""


def _result_to_dict(result: ModelResult) -> dict[str, Any]:
    return {
        "pods_admitted": result.pods_admitted,
        "numa_aligned": result.numa_aligned,
        "exclusive_cpus": result.exclusive_cpus,
        "total_cpus": result.total_cpus,
        "free_cpus": result.free_cpus,
        "stranded_cpus": result.stranded_cpus,
        "pods_total": result.pods_total,
        "pods_unschedulable": result.pods_unschedulable,
        "pods_rejected": result.pods_rejected,
        "stranded_threshold": result.stranded_threshold,
        "allocatable_cpus": result.allocatable_cpus,
        "nodes_used": result.nodes_used,
        "admitted_by_template": dict(result.admitted_by_template),
        "rejections": dict(result.rejections),
    }


def simulation_to_dict(sim: Simulation) -> dict[str, Any]:
    """The JSON document: ``per-container`` and ``pod-level`` objects, and the settings."""
    document: dict[str, Any] = {model: _result_to_dict(sim.results[model]) for model in MODELS}
    document["simulation"] = {
        "workload": sim.workload,
        "description": sim.description,
        "pods": sim.pods,
        "nodes": sim.nodes,
        "scheduler": sim.scheduler,
        "topology_manager_policy": sim.policy,
        "topology_manager_scope": "pod",
        "seed": sim.seed,
        "cpus_per_node": sim.cpus_per_node,
        "numa_nodes_per_node": sim.numa_per_node,
        "reserved_cpus_per_node": sim.reserved_per_node,
        "more_pods_fit": sim.more_pods_fit,
    }
    return document


def _percent(before: int, after: int) -> str:
    return "" if before in (after, 0) else f"({(after - before) / before:+.0%})"


def _table(rows: list[tuple[str, int, int]]) -> list[str]:
    """``label  a -> b  delta (percent)``, labels right-aligned, every column aligned."""
    label_w = max(len(r[0]) for r in rows)
    a_w = max(len(str(r[1])) for r in rows)
    b_w = max(len(str(r[2])) for r in rows)
    d_w = max(len(f"{b - a:+d}") for _, a, b in rows)
    return [
        f"{label:>{label_w}}  {a:>{a_w}} -> {b:<{b_w}}  {b - a:>+{d_w}d} {_percent(a, b)}".rstrip()
        for label, a, b in rows
    ]


def _headline(sim: Simulation) -> str:
    before, after = sim.results["per-container"], sim.results["pod-level"]
    if before.pods_admitted == sim.pods and after.pods_admitted == sim.pods:
        saved = after.free_cpus - before.free_cpus
        return (
            f"all {sim.pods} pods fit in both models; pod-level resources leave {saved} more CPUs free "
            f"and use {before.nodes_used - after.nodes_used} fewer nodes"
        )
    more = sim.more_pods_fit
    if more >= 0:
        return f"{more} more pods fit on the same {sim.nodes} nodes with pod-level resources"
    return f"{-more} fewer pods fit on the same {sim.nodes} nodes with pod-level resources"


def render_text(sim: Simulation) -> str:
    """The human report (module docstring)."""
    before, after = sim.results["per-container"], sim.results["pod-level"]
    lines = [
        f"workload {sim.workload}: {sim.description}" if sim.description else f"workload {sim.workload}",
        (
            f"{sim.pods} pods onto {sim.nodes} nodes of {sim.cpus_per_node} CPUs ({sim.numa_per_node} NUMA nodes, "
            f"{sim.reserved_per_node} reserved), scheduler {sim.scheduler}, topology manager {sim.policy} / pod scope, "
            f"seed {sim.seed}"
        ),
        "per-container (Kubernetes 1.35: every container Guaranteed) -> pod-level (podpin: budget, shared sidecars)",
        "",
    ]
    lines += _table([(label, getattr(before, name), getattr(after, name)) for label, name in ROWS])
    if len(sim.templates) > 1:
        lines += ["", "admitted pods by template:"]
        lines += _table(
            [(t, before.admitted_by_template.get(t, 0), after.admitted_by_template.get(t, 0)) for t in sim.templates]
        )
    lines += [
        "",
        "stranded CPUs: free CPUs on NUMA nodes with fewer free CPUs than the smallest pod left out",
        (
            f"  (or, when all fit, the smallest pod): {before.stranded_threshold} per-container, "
            f"{after.stranded_threshold} pod-level"
        ),
        _headline(sim),
    ]
    return "\n".join(lines) + "\n"
