"""The replay: send a workload's pods onto N identical nodes, once per model, through the real planner.

For each model (:data:`agent.sim.derive.MODELS`) the engine builds one
:class:`~agent.alloc.planner.Planner` per node, all with the same topology and
configuration, then takes the pods in arrival order: derive the model's
manifest, read it with :func:`~agent.pods.model.pod_from_dict` (the same path
the agent's sources take), let the :class:`~agent.sim.scheduler.Scheduler`
pick a node by requests alone, and admit the pod on that node's planner. A pod
that fits no node is *unschedulable*; a pod the planner rejects is *rejected*
with the kubelet's reason; neither counts as admitted. Pods never leave.

Pure: no I/O, no clock, no unseeded randomness, so the same inputs always give
the same :class:`Simulation`. Progress is reported through an optional
callback called once per pod and model, so the command can draw a bar without
the engine knowing about terminals.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from agent.alloc import Planner, PlannerConfig
from agent.config import NodeAllocatable
from agent.sim.derive import MODELS, Model, pod_name
from agent.sim.fleet import Fleet
from agent.sim.measure import ModelResult, measure, pinned_request
from agent.sim.records import UNSCHEDULABLE, NodeResult, PodOutcome, Replay
from agent.sim.scheduler import SCHEDULERS, SchedulerName, node_allocatable
from agent.sim.workload import Workload, arrivals
from agent.topology import Topology

__all__ = ["Simulation", "replay", "simulate"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Simulation:
    """Both models' results and the settings they were produced with."""

    workload: str
    description: str
    templates: tuple[str, ...]
    pods: int
    nodes: int
    scheduler: SchedulerName
    policy: str
    seed: int
    cpus_per_node: int
    numa_per_node: int
    reserved_per_node: int
    results: Mapping[Model, ModelResult]

    @property
    def more_pods_fit(self) -> int:
        """How many more pods the pod-level model admits than the per-container one (negative: fewer)."""
        return self.results["pod-level"].pods_admitted - self.results["per-container"].pods_admitted


def replay(
    topology: Topology,
    config: PlannerConfig,
    workload: Workload,
    model: Model,
    *,
    allocatable: NodeAllocatable,
    nodes: int,
    scheduler: SchedulerName = SchedulerName.FIRST_FIT,
    seed: int | None = None,
    on_pod: Callable[[], None] | None = None,
) -> Replay:
    """Replay the workload under one model, nodes grouped by history (:mod:`agent.sim.fleet`).

    Raises:
        PlannerError: the configuration does not fit the topology.
        ValueError: ``nodes`` below one or an unknown scheduler.
    """
    if scheduler not in SCHEDULERS:
        raise ValueError(f"scheduler: {scheduler!r} is not one of {', '.join(SCHEDULERS)}")
    fleet = Fleet(
        topology,
        config,
        workload,
        model,
        nodes=nodes,
        allocatable=node_allocatable(topology, config, allocatable),
        scheduler=scheduler,
    )
    outcomes: list[PodOutcome] = []
    pinned = {t.name: pinned_request(fleet.view(i, 0)) for i, t in enumerate(workload.pods)}
    for arrival in arrivals(workload, seed):
        template = workload.pods[arrival.template]
        name = pod_name(template, arrival.ordinal)
        chosen = fleet.pick(arrival.template)
        if chosen is None:
            outcomes.append(
                PodOutcome(template=template.name, name=name, node=None, admitted=False, reason=UNSCHEDULABLE)
            )
        else:
            node, move = fleet.place(chosen, arrival.template)
            outcomes.append(
                PodOutcome(template=template.name, name=name, node=node, admitted=move.admitted, reason=move.reason)
            )
        if on_pod is not None:
            on_pod()
    results = tuple(
        NodeResult(index=c.nodes[0], state=c.planner.snapshot(), plan=c.planner.plan(c.placed), count=len(c.nodes))
        for c in fleet.classes()
    )
    return Replay(model=model, outcomes=tuple(outcomes), nodes=results, pinned=MappingProxyType(pinned))


def simulate(
    topology: Topology,
    config: PlannerConfig,
    workload: Workload,
    *,
    allocatable: NodeAllocatable,
    nodes: int | None = None,
    scheduler: SchedulerName = SchedulerName.FIRST_FIT,
    seed: int | None = None,
    on_pod: Callable[[], None] | None = None,
) -> Simulation:
    """Replay the workload under both models and measure each.

    Args:
        topology: every node's machine.
        config: every node's planner configuration (the same for both models).
        workload: the pods.
        allocatable: every node's memory reservations (the scheduler's allocatable; the CPUs are the planner's).
        nodes: how many nodes (default: the workload's).
        scheduler: ``first-fit``, ``most-allocated``, ``least-allocated`` (:mod:`agent.sim.scheduler`) or
            ``numa-aware`` (:mod:`agent.sim.numa_aware`).
        seed: overrides the workload's seed.
        on_pod: called once per pod per model (2 x pods calls).

    Raises:
        PlannerError: the configuration does not fit the topology.
    """
    count = workload.nodes if nodes is None else nodes
    results = {
        model: measure(
            replay(
                topology,
                config,
                workload,
                model,
                allocatable=allocatable,
                nodes=count,
                scheduler=scheduler,
                seed=seed,
                on_pod=on_pod,
            ),
            topology,
        )
        for model in MODELS
    }
    reserved = Planner(topology, config).reserved
    return Simulation(
        workload=workload.name,
        description=workload.description,
        templates=tuple(t.name for t in workload.pods),
        pods=workload.pod_count,
        nodes=count,
        scheduler=scheduler,
        policy=config.topology_manager_policy,
        seed=workload.seed if seed is None else seed,
        cpus_per_node=len(topology.online_cpus),
        numa_per_node=len(topology.numa_ids),
        reserved_per_node=len(reserved),
        results=MappingProxyType(results),
    )
