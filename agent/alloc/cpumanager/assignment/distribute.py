"""``distribute-cpus-across-numa``: the kubelet's ``takeByTopologyNUMADistributed`` (KEP-2902).

Two steps. :func:`plan_distribution` works on counts only: given how many CPUs
each NUMA node still has free, it decides which nodes a request is spread
over, how many CPUs each gets and which nodes absorb the remainder, so the
scoring can be tested with plain numbers. :func:`take_numa_distributed` then
takes the actual CPUs of each node's share with the packed algorithm of
:mod:`agent.alloc.cpumanager.assignment.accumulator`.

The kubelet's rules, kept literally because the vectors pin them down:

* k runs from :func:`numa_node_range`'s minimum to its maximum; the first k
  with any admissible combination wins.
* Combinations are visited in lexicographic order over the *sorted* NUMA list
  (``sortAvailableNUMANodes``: fewest free CPUs first), so ties keep the
  earliest combination in that order, not the lowest ids.
* The score is the population standard deviation of the free CPUs left on
  *every* NUMA node that had free CPUs, rounded to 3 decimals; lower wins and
  ``<`` is strict, so the first of equal scores stays.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

from agent.alloc.cpumanager.assignment.accumulator import Accumulator, check_count, not_enough, take_packed_mask
from agent.alloc.cpumanager.assignment.domains import domains_of
from agent.alloc.errors import AllocationError
from agent.cpuset import CPUSet
from agent.topology import Topology

__all__ = ["Distribution", "balance_score", "go_round", "numa_node_range", "plan_distribution", "take_numa_distributed"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Distribution:
    """Where a distributed request goes.

    Attributes:
        nodes: the NUMA nodes each giving ``per_node`` CPUs, in the order the
            kubelet takes from them (the combination's order).
        per_node: CPUs taken from every node of ``nodes`` (a multiple of the group size).
        remainder: CPUs still to hand out after ``per_node`` from every node.
        remainder_nodes: nodes that receive the remainder one group at a time,
            round-robin in this order (empty when ``remainder`` is 0).
    """

    nodes: tuple[int, ...]
    per_node: int
    remainder: int
    remainder_nodes: tuple[int, ...]


def balance_score(values: Iterable[int]) -> float:
    """Population standard deviation rounded to 3 decimals, as the kubelet's ``standardDeviation``.

    Go computes the mean, the mean of squared deviations and its square root in
    float64, then ``math.Round(x*1000)/1000`` (half away from zero); the same
    steps are done here so equal inputs give equal scores.
    """
    xs = list(values)
    if not xs:
        raise ValueError("balance_score of no NUMA nodes")
    mean = sum(xs) / len(xs)
    squares = 0.0
    for x in xs:
        squares += (x - mean) * (x - mean)
    return go_round(math.sqrt(squares / len(xs)) * 1000) / 1000


def go_round(x: float) -> float:
    """Go's ``math.Round`` for x >= 0: nearest integer, halves away from zero.

    ``floor(x + 0.5)`` would round 0.49999999999999994 up, because the
    addition itself rounds; subtracting the floor is exact instead.
    """
    whole = math.floor(x)
    return whole + 1.0 if x - whole >= 0.5 else float(whole)


def numa_node_range(
    count: int, group: int, *, num_cpus: int, num_numa_nodes: int, num_numa_available: int
) -> tuple[int, int]:
    """``rangeNUMANodesNeededToSatisfy``: the fewest and most NUMA nodes worth trying.

    Args:
        count: CPUs requested (> 0).
        group: CPUs handed out together (``cpuGroupSize``).
        num_cpus: CPUs of the whole topology.
        num_numa_nodes: NUMA nodes of the whole topology.
        num_numa_available: NUMA nodes that still have a free CPU.

    Returns:
        ``(min, max)``; the range is empty when ``min > max``.
    """
    groups_total = (num_cpus - 1) // group + 1
    groups_per_node = (groups_total - 1) // num_numa_nodes + 1
    groups_needed = (count - 1) // group + 1
    return (groups_needed - 1) // groups_per_node + 1, min(groups_needed, num_numa_available)


def _hand_out(after: list[int], subset: Sequence[int], remainder: int, group: int) -> bool:
    """Take ``group`` CPUs round-robin from ``subset`` until ``remainder`` is placed; False if stuck.

    The kubelet loops ``for remainder > 0`` without a progress check, which
    would spin forever if every node of the subset dropped below ``group``
    before the remainder was placed (possible only with ``group > 1``). Such a
    subset cannot place the remainder, so it is rejected instead.
    """
    while remainder > 0:
        placed = False
        for node in subset:
            if remainder == 0:
                break
            if after[node] < group:
                continue
            after[node] -= group
            remainder -= group
            placed = True
        if not placed:
            return False
    return True


def _score_combo(
    combo: tuple[int, ...], free: list[int], count: int, group: int, per_node: int, remainder: int
) -> tuple[float, tuple[int, ...]] | None:
    """The best score of one combination (positions in ``free``) and its remainder subset, or None.

    None means the combination cannot hold the request: too few CPUs, too few
    whole groups, or no subset that can take the remainder.
    """
    if sum(free[i] for i in combo) < count or sum(free[i] // group for i in combo) * group < count:
        return None
    after = free.copy()
    for i in combo:
        after[i] -= per_node
    if remainder == 0:
        return balance_score(after), ()
    candidates = [i for i in combo if after[i] >= group]
    best: tuple[float, tuple[int, ...]] | None = None
    for size in range(len(candidates), 0, -1):
        for subset in combinations(candidates, size):
            if sum(after[i] for i in subset) < remainder:
                continue
            trial = after.copy()
            if not _hand_out(trial, subset, remainder, group):
                continue
            score = balance_score(trial)
            if best is None or score < best[0]:
                best = (score, subset)
    return best


def plan_distribution(
    numas: Sequence[int], free: Mapping[int, int], count: int, group: int, *, num_cpus: int, num_numa_nodes: int
) -> Distribution | None:
    """The kubelet's choice of NUMA nodes for a distributed request, or None to fall back to packing.

    Combinations holding a node with fewer than ``per_node`` free CPUs are
    never scored (the kubelet skips them one by one), so they are left out of
    the enumeration up front; the order of the others is unchanged.

    Args:
        numas: NUMA nodes with free CPUs in ``sortAvailableNUMANodes`` order.
        free: free CPUs per node of ``numas``.
        count: CPUs requested, a positive multiple of ``group``.
        group: ``cpuGroupSize``.
        num_cpus: CPUs of the whole topology.
        num_numa_nodes: NUMA nodes of the whole topology.
    """
    low, high = numa_node_range(
        count, group, num_cpus=num_cpus, num_numa_nodes=num_numa_nodes, num_numa_available=len(numas)
    )
    values = [free[node] for node in numas]
    for k in range(low, high + 1):
        per_node = (count // k // group) * group
        remainder = count - per_node * k
        eligible = [i for i, value in enumerate(values) if value >= per_node]
        best: tuple[float, tuple[int, ...], tuple[int, ...]] | None = None
        for combo in combinations(eligible, k):
            if best is not None and best[0] == 0:
                break
            scored = _score_combo(combo, values, count, group, per_node, remainder)
            if scored is not None and (best is None or scored[0] < best[0]):
                best = (scored[0], combo, scored[1])
        if best is not None:
            return Distribution(
                nodes=tuple(numas[i] for i in best[1]),
                per_node=per_node,
                remainder=remainder,
                remainder_nodes=tuple(numas[i] for i in best[2]),
            )
    return None


def take_numa_distributed(
    topology: Topology, available: CPUSet, count: int, cpu_group_size: int, *, spread: bool = False
) -> CPUSet:
    """``count`` CPUs spread evenly over the fewest NUMA nodes, in groups of ``cpu_group_size``.

    Falls back to :func:`take_numa_packed` (without uncore alignment) when
    ``count`` is not a multiple of the group size or no NUMA combination fits.

    Raises:
        AllocationError: too few CPUs, or the kubelet's accounting errors.
        ValueError: ``count`` is negative or ``cpu_group_size`` < 1.
    """
    check_count(count)
    if isinstance(cpu_group_size, bool) or not isinstance(cpu_group_size, int) or cpu_group_size < 1:
        raise ValueError(f"cpu_group_size must be a positive integer, got {cpu_group_size!r}")
    d = domains_of(topology)
    group = cpu_group_size
    if count % group != 0:
        return CPUSet.from_mask(take_packed_mask(d, available.mask, len(available), count, spread, False))
    acc = Accumulator(d, available.mask, count, spread=spread)
    if acc.is_satisfied():
        return acc.result
    if acc.is_failed():
        raise not_enough(count, len(available))
    numas = acc.sort_available_numa_nodes()
    free = {n: (d.numa[n] & acc.available_mask).bit_count() for n in numas}
    plan = plan_distribution(numas, free, count, group, num_cpus=d.num_cpus, num_numa_nodes=d.num_numa_nodes)
    if plan is None:
        return CPUSet.from_mask(take_packed_mask(d, available.mask, len(available), count, spread, False))

    def take_from(numa: int, n: int) -> None:
        node_free = d.numa[numa] & acc.available_mask
        try:
            acc.take_mask(take_packed_mask(d, node_free, node_free.bit_count(), n, spread, False))
        except AllocationError:
            return  # the kubelet ignores this error; the accounting check below reports the shortfall

    for numa in plan.nodes:
        take_from(numa, plan.per_node)
    remainder = plan.remainder
    while remainder > 0:
        placed = False
        for numa in plan.remainder_nodes:
            if remainder == 0:
                break
            if (d.numa[numa] & acc.available_mask).bit_count() < group:
                continue
            take_from(numa, group)
            remainder -= group
            placed = True
        if not placed:
            break
    if acc.needed > 0:
        raise AllocationError(f"accounting error, not enough CPUs allocated, remaining: {acc.needed}")
    if acc.needed < 0:
        raise AllocationError(f"accounting error, too many CPUs allocated, remaining: {acc.needed}")
    return acc.result
