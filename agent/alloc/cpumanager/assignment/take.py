"""The static policy's ``takeByTopology``: choose the packed or the NUMA-distributed algorithm.

The kubelet's ``takeByTopology`` in ``pkg/kubelet/cm/cpumanager/policy_static.go``
picks ``takeByTopologyNUMADistributed`` when ``distribute-cpus-across-numa`` is
set and ``takeByTopologyNUMAPacked`` otherwise. The choice sits here, above both
algorithms, so the packed accumulator (:mod:`.accumulator`) and the distributed
take that builds on it (:mod:`.distribute`) import in one direction only.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.alloc.cpumanager.assignment.accumulator import take_numa_packed
from agent.alloc.cpumanager.assignment.distribute import take_numa_distributed
from agent.cpuset import CPUSet
from agent.topology import Topology

__all__ = ["TakeOptions", "take_by_topology"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TakeOptions:
    """The CPU manager policy options that change how CPUs are picked.

    Attributes:
        distribute_across_numa: ``distribute-cpus-across-numa``; use the
            NUMA-distributed algorithm (which ignores ``prefer_uncore``, as the kubelet does).
        cpu_group_size: distributed only: CPUs handed out together, ``CPUsPerCore()``
            with ``full-pcpus-only``, else 1.
        spread: ``distribute-cpus-across-cores``: no whole-core step, single CPUs socket by socket.
        prefer_uncore: ``prefer-align-cpus-by-uncorecache``: try to stay inside one uncore cache.
    """

    distribute_across_numa: bool = False
    cpu_group_size: int = 1
    spread: bool = False
    prefer_uncore: bool = False

    def __post_init__(self) -> None:
        size = self.cpu_group_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"TakeOptions.cpu_group_size must be a positive integer, got {size!r}")


_DEFAULT_OPTIONS = TakeOptions()


def take_by_topology(
    topology: Topology, available: CPUSet, count: int, options: TakeOptions = _DEFAULT_OPTIONS
) -> CPUSet:
    """The static policy's ``takeByTopology``: distributed if the option says so, else packed.

    Args:
        topology: the machine.
        available: CPUs that may be taken (shared pool minus reserved, plus reusable).
        count: CPUs wanted; 0 gives the empty set.
        options: the policy options that change the picking.

    Raises:
        AllocationError: with the kubelet's message, e.g. "not enough cpus
            available to satisfy request: requested=5, available=4".
    """
    if options.distribute_across_numa:
        return take_numa_distributed(topology, available, count, options.cpu_group_size, spread=options.spread)
    return take_numa_packed(topology, available, count, spread=options.spread, prefer_uncore=options.prefer_uncore)
