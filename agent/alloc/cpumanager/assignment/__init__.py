"""Take-by-topology: which free CPUs an exclusive request gets (the kubelet's ``cpu_assignment.go``).

The counterpart of ``pkg/kubelet/cm/cpumanager/cpu_assignment.go``, in three
layers that import downwards only: :mod:`.domains` (the machine as bitmask
tables, built once per topology), :mod:`.accumulator` (the packed algorithm,
``takeByTopologyNUMAPacked``, on the kubelet's ``cpuAccumulator``),
:mod:`.distribute` (``takeByTopologyNUMADistributed``, which packs each NUMA
node's share with the accumulator), and :mod:`.take` on top, which chooses
between the two like the static policy's ``takeByTopology``.
"""

from agent.alloc.cpumanager.assignment.accumulator import take_numa_packed
from agent.alloc.cpumanager.assignment.distribute import (
    Distribution,
    balance_score,
    numa_node_range,
    plan_distribution,
    take_numa_distributed,
)
from agent.alloc.cpumanager.assignment.take import TakeOptions, take_by_topology

__all__ = [
    "Distribution",
    "TakeOptions",
    "balance_score",
    "numa_node_range",
    "plan_distribution",
    "take_by_topology",
    "take_numa_distributed",
    "take_numa_packed",
]
