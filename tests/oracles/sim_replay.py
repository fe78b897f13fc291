"""Placement node by node, literally: the simulation's replay as it was before node classes (issue 20).

One planner per node, and for every pod a scan of every node in index order
(``first-fit``) or a score of every fitting node: the cost grows as pods x
nodes. ``agent/sim/fleet.py`` groups nodes with the same history instead;
``tests/unit/sim/test_fleet.py`` checks that both give the same outcome for
every pod and the same measures on every preset and scheduler. Keep it literal.
"""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType
from typing import Any

from agent.alloc import Planner, PlannerConfig
from agent.config import AgentConfig
from agent.nrt import attributes_of, node_resource_topology, occupancy_of
from agent.pods.model import PodView, pod_from_dict
from agent.sim.derive import Model, pod_manifest, pod_name
from agent.sim.measure import pinned_request
from agent.sim.numa_aware import nrt_filter, nrt_score
from agent.sim.records import UNSCHEDULABLE, NodeResult, PodOutcome, Replay
from agent.sim.scheduler import Requests, Scheduler, SchedulerName, node_allocatable, pod_requests
from agent.sim.workload import Workload, arrivals
from agent.topology.model import Topology


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


def replay_node_by_node(
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
    """Replay the workload under one model, node by node.

    Raises:
        PlannerError: the configuration does not fit the topology.
        ValueError: ``nodes`` below one or an unknown scheduler.
    """
    planners = [Planner(topology, config.planner) for _ in range(nodes)]
    placer = Scheduler(nodes, node_allocatable(topology, config.planner, config.node_allocatable), scheduler)
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
