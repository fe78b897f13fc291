"""Fleet-scale placement: nodes with the same history share one class, so a replay costs per class, not per node.

Every node of a simulation has the same machine and configuration, and every
pod of a template is the same pod under another name. A node's state is
therefore fixed by the sequence of templates it admitted (a rejection changes
nothing), and nodes with the same sequence are interchangeable: same requested
CPU and memory, same pod count, same CPUs held, same answer to the next pod.
So the replay keeps one :class:`NodeClass` per distinct history, holding one
planner for all its nodes and the indices of the nodes in it (a heap, lowest
first), and remembers each class's answer to each template (the decision and
the class the node moves to). A pod then costs a look over the live classes
(those holding nodes) instead of every node, and one planner admission per
*new* history instead of one per pod: 100,000 seed-mesh pods on 20,000 nodes
touch a handful of classes.

The scheduler's choice is unchanged: every score and filter depends on the
class alone, and each policy breaks ties towards the lowest node index, which
in a class is its heap's top. ``first-fit`` takes the lowest index among the
classes that fit; ``most-allocated`` / ``least-allocated`` the best share, then
the lowest index; ``numa-aware`` scores each class's NodeResourceTopology once
per class. ``tests/unit/sim/test_fleet.py`` checks that every preset and
scheduler gives the same outcomes, pod by pod, as placing on each node
(``tests/oracles/sim_replay.py``).

Pods of a template are named by their arrival ordinal in the outcomes; the
planner of a class admits the *k*-th pod of a template in its history under
ordinal *k*, so uids stay distinct on a node and admission (which never
depends on a pod's name) decides as it would for the real pod.

Pure: no I/O, clock or randomness.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

from agent.alloc import Planner, PlannerConfig
from agent.nrt import attributes_of, node_resource_topology, occupancy_of
from agent.pods import PodView, pod_from_dict
from agent.sim.derive import Model, pod_manifest
from agent.sim.numa_aware import nrt_filter, nrt_score
from agent.sim.scheduler import (
    Requests,
    SchedulerName,
    allocated_share,
    fits,
    least_allocated_score,
    pod_requests,
)
from agent.sim.workload import Workload
from agent.topology import Topology

__all__ = ["Fleet", "Move", "NodeClass"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Move:
    """A class's answer to one template: admitted or not (with the kubelet's reason), and where the node goes."""

    admitted: bool
    reason: str | None
    to: NodeClass


@dataclass(eq=False, slots=True, kw_only=True)
class NodeClass:
    """Nodes that admitted the same templates in the same order (module docstring)."""

    planner: Planner
    requested: Requests
    pods: int
    placed: tuple[PodView, ...]
    per_template: tuple[int, ...]
    nodes: list[int] = field(default_factory=list)
    moves: dict[int, Move] = field(default_factory=dict)
    nrt: dict[str, Any] | None = None


class Fleet:
    """``nodes`` identical nodes, grouped into classes, and the scheduler's choice among them."""

    def __init__(
        self,
        topology: Topology,
        config: PlannerConfig,
        workload: Workload,
        model: Model,
        *,
        nodes: int,
        allocatable: Requests,
        scheduler: SchedulerName,
    ) -> None:
        """Every node empty, in one class.

        Raises:
            PlannerError: the configuration does not fit the topology.
            ValueError: fewer than one node.
        """
        if nodes < 1:
            raise ValueError(f"nodes: {nodes} must be at least 1")
        self.topology = topology
        self.config = config
        self.workload = workload
        self.model = model
        self.allocatable = allocatable
        self.scheduler = scheduler
        self._attributes = attributes_of(config)
        self._views: dict[tuple[int, int], PodView] = {}
        self._requests = [pod_requests(self.view(t, 0)) for t in range(len(workload.pods))]
        empty = NodeClass(
            planner=Planner(topology, config),
            requested=Requests(0, 0),
            pods=0,
            placed=(),
            per_template=(0,) * len(workload.pods),
            nodes=list(range(nodes)),
        )
        self.live: list[NodeClass] = [empty]

    def view(self, template: int, ordinal: int) -> PodView:
        """The pod of ``template`` with ``ordinal`` under this model, read once."""
        key = (template, ordinal)
        found = self._views.get(key)
        if found is None:
            found = self._views[key] = pod_from_dict(pod_manifest(self.workload.pods[template], self.model, ordinal))
        return found

    def requests(self, template: int) -> Requests:
        """What the scheduler counts for one pod of ``template``."""
        return self._requests[template]

    def pick(self, template: int) -> NodeClass | None:
        """The class whose lowest node the scheduler sends this template's next pod to; None: no node fits."""
        pod = self._requests[template]
        fitting = [c for c in self.live if fits(self.allocatable, c.requested, c.pods, pod)]
        if not fitting:
            return None
        if self.scheduler == SchedulerName.FIRST_FIT:
            return min(fitting, key=lambda c: c.nodes[0])
        if self.scheduler == SchedulerName.MOST_ALLOCATED:
            return max(fitting, key=lambda c: (allocated_share(self.allocatable, c.requested, pod), -c.nodes[0]))
        if self.scheduler == SchedulerName.LEAST_ALLOCATED:
            return min(fitting, key=lambda c: (allocated_share(self.allocatable, c.requested, pod), c.nodes[0]))
        return self._numa_aware(fitting, template, pod)

    def _numa_aware(self, fitting: list[NodeClass], template: int, pod: Requests) -> NodeClass | None:
        """NodeResourceTopologyMatch's filter and score plus ``LeastAllocated``; ties to the lowest node."""
        view = self.view(template, 0)
        best: tuple[int, int, NodeClass] | None = None
        for c in fitting:
            obj = self._nrt(c)
            if not nrt_filter(view, obj):
                continue
            score = nrt_score(view, obj) + least_allocated_score(self.allocatable, c.requested, pod)
            if best is None or (score, -c.nodes[0]) > (best[0], -best[1]):
                best = (score, c.nodes[0], c)
        return None if best is None else best[2]

    def _nrt(self, c: NodeClass) -> dict[str, Any]:
        if c.nrt is None:
            c.nrt = node_resource_topology(
                node_name=f"node-{c.nodes[0]}",
                topology=self.topology,
                occupancy=occupancy_of(self.topology, self.config, c.planner.snapshot()),
                attributes=self._attributes,
            )
        return c.nrt

    def place(self, c: NodeClass, template: int) -> tuple[int, Move]:
        """Send the template's pod to the class's lowest node: that node and what its planner answered."""
        node = heapq.heappop(c.nodes)
        move = c.moves.get(template)
        if move is None:
            move = c.moves[template] = self._admit(c, template)
        heapq.heappush(move.to.nodes, node)
        if move.to is not c:
            if not c.nodes:
                self.live.remove(c)
            if len(move.to.nodes) == 1:
                self.live.append(move.to)
        return node, move

    def _admit(self, c: NodeClass, template: int) -> Move:
        pod = self.view(template, c.per_template[template])
        planner = c.planner.fork()
        decision = planner.admit(pod)
        if not decision.admitted:
            return Move(admitted=False, reason=decision.reason, to=c)
        counts = list(c.per_template)
        counts[template] += 1
        after = NodeClass(
            planner=planner,
            requested=c.requested + self._requests[template],
            pods=c.pods + 1,
            placed=(*c.placed, pod),
            per_template=tuple(counts),
        )
        return Move(admitted=True, reason=decision.reason, to=after)

    def classes(self) -> list[NodeClass]:
        """The classes holding nodes, by lowest node."""
        return sorted(self.live, key=lambda c: c.nodes[0])
