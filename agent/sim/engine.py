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
from typing import Any

from agent.alloc import Planner, PlannerConfig
from agent.config import AgentConfig
from agent.nrt import attributes_of, node_resource_topology, occupancy_of
from agent.pods.model import PodView, pod_from_dict
from agent.sim.derive import MODELS, Model, pod_manifest, pod_name
from agent.sim.measure import ModelResult, measure, pinned_request
from agent.sim.numa_aware import nrt_filter, nrt_score
from agent.sim.records import UNSCHEDULABLE, NodeResult, PodOutcome, Replay
from agent.sim.scheduler import Requests, Scheduler, SchedulerName, node_allocatable, pod_requests
from agent.sim.workload import Workload, arrivals
from agent.topology.model import Topology

__all__ = ["Simulation", "replay", "simulate"]


class _Topologies:
    """Each node's NodeResourceTopology, recomputed only after that node's state changed."""

    def __init__(self, topology: Topology, config: PlannerConfig, planners: list[Planner]) -> None:
        self.topology = topology
        self.config = config
        self.planners = planners
        self.attributes = attributes_of(config)
        self._cache: dict[int, tuple[object, dict[str, Any]]] = {}

    def of(self, node: int) -> dict[str, Any]:
        state = self.planners[node].snapshot()
        cached = self._cache.get(node)
        if cached is None or cached[0] is not state:
            obj = node_resource_topology(
                node_name=f"node-{node}",
                topology=self.topology,
                occupancy=occupancy_of(self.topology, self.config, state),
                attributes=self.attributes,
            )
            cached = self._cache[node] = (state, obj)
        return cached[1]


def _numa_aware_pick(placer: Scheduler, nrts: _Topologies, pod: PodView, requests: Requests) -> int | None:
    """``NodeResourcesFit`` and NodeResourceTopologyMatch filters, their two scores summed; ties to the lowest node."""
    best: tuple[int, int] | None = None
    for node in range(len(nrts.planners)):
        if not placer.fits(node, requests):
            continue
        obj = nrts.of(node)
        if not nrt_filter(pod, obj):
            continue
        score = nrt_score(pod, obj) + placer.least_allocated(node, requests)
        if best is None or score > best[0]:
            best = (score, node)
    return None if best is None else best[1]


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
    config: AgentConfig,
    workload: Workload,
    model: Model,
    *,
    nodes: int,
    scheduler: SchedulerName = SchedulerName.FIRST_FIT,
    seed: int | None = None,
    on_pod: Callable[[], None] | None = None,
) -> Replay:
    """Replay the workload under one model.

    Raises:
        PlannerError: the configuration does not fit the topology.
        ValueError: ``nodes`` below one or an unknown scheduler.
    """
    planners = [Planner(topology, config.planner) for _ in range(nodes)]
    placer = Scheduler(nodes, node_allocatable(topology, config), scheduler)
    placed: list[list[PodView]] = [[] for _ in range(nodes)]
    nrts = _Topologies(topology, config.planner, planners) if scheduler == SchedulerName.NUMA_AWARE else None
    outcomes: list[PodOutcome] = []
    pinned = {t.name: pinned_request(pod_from_dict(pod_manifest(t, model, 0))) for t in workload.pods}
    for arrival in arrivals(workload, seed):
        template = workload.pods[arrival.template]
        pod = pod_from_dict(pod_manifest(template, model, arrival.ordinal))
        requests = pod_requests(pod)
        node = placer.pick(requests) if nrts is None else _numa_aware_pick(placer, nrts, pod, requests)
        name = pod_name(template, arrival.ordinal)
        if node is None:
            outcomes.append(
                PodOutcome(template=template.name, name=name, node=None, admitted=False, reason=UNSCHEDULABLE)
            )
        else:
            decision = planners[node].admit(pod)
            if decision.admitted:
                placer.bind(node, requests)
                placed[node].append(pod)
            outcomes.append(
                PodOutcome(
                    template=template.name, name=name, node=node, admitted=decision.admitted, reason=decision.reason
                )
            )
        if on_pod is not None:
            on_pod()
    results = tuple(
        NodeResult(index=i, state=planner.snapshot(), plan=planner.plan(placed[i]))
        for i, planner in enumerate(planners)
    )
    return Replay(model=model, outcomes=tuple(outcomes), nodes=results, pinned=MappingProxyType(pinned))


def simulate(
    topology: Topology,
    config: AgentConfig,
    workload: Workload,
    *,
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
            replay(topology, config, workload, model, nodes=count, scheduler=scheduler, seed=seed, on_pod=on_pod),
            topology,
        )
        for model in MODELS
    }
    reserved = Planner(topology, config.planner).reserved
    return Simulation(
        workload=workload.name,
        description=workload.description,
        templates=tuple(t.name for t in workload.pods),
        pods=workload.pod_count,
        nodes=count,
        scheduler=scheduler,
        policy=config.planner.topology_manager_policy,
        seed=workload.seed if seed is None else seed,
        cpus_per_node=len(topology.online_cpus),
        numa_per_node=len(topology.numa_ids),
        reserved_per_node=len(reserved),
        results=MappingProxyType(results),
    )
