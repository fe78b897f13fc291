"""Take-by-topology beyond the kubelet vectors: invariants, hand-checked machines, the NUMA planner.

The kubelet's own cases run in ``tests/unit/alloc/test_kubelet_vectors.py``. Here:

* hypothesis properties over the vector topologies (size, subset, error iff
  short, determinism) for every option combination;
* hand-checked picks on machines the vectors do not have (offline CPUs and
  sparse ids, sub-NUMA clustering without declared counters, split L3 caches);
* the distributed planner's arithmetic in isolation.
"""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.alloc import AllocationError
from agent.alloc.cpumanager.assignment import TakeOptions, take_by_topology, take_numa_packed
from agent.alloc.cpumanager.assignment.accumulator import Accumulator
from agent.alloc.cpumanager.assignment.distribute import (
    Distribution,
    balance_score,
    go_round,
    numa_node_range,
    plan_distribution,
    take_numa_distributed,
)
from agent.alloc.cpumanager.assignment.domains import memoised_ids
from agent.cpuset import CPUSet
from agent.topology.model import CPU, Topology
from tests.support import vectors

# -- helpers ---------------------------------------------------------------------------------


def _cpus(text: str) -> CPUSet:
    return CPUSet.parse(text)


def _machine(rows: Iterable[tuple[int, int, int, int, int | None]], offline: Iterable[int] = ()) -> Topology:
    """A topology from ``(cpu, core, socket, numa, l3)`` rows; ``offline`` CPUs get no placement."""
    cpus = [CPU(id=cpu, core=core, socket=socket, numa=numa, l3=l3) for cpu, core, socket, numa, l3 in rows]
    cpus += [CPU(id=cpu, online=False) for cpu in offline]
    return Topology(cpus=tuple(sorted(cpus, key=lambda c: c.id)))


def _fits_kubelet_counters(topology: Topology) -> bool:
    """True when no core or socket holds more CPUs than ``CPUsPerCore()``/``CPUsPerSocket()`` say.

    Where a domain is larger, the kubelet counts it as free with only part of
    it available; podpin then takes only its free CPUs (see
    ``test_hybrid_core_with_one_free_thread_never_hands_out_the_busy_one``),
    so the picks differ from the kubelet's there and are left out.
    """
    cores = (len(topology.cpus_in_cores(c)) <= topology.cpus_per_core() for c in topology.core_ids)
    sockets = (len(topology.cpus_in_sockets(s)) <= topology.cpus_per_socket() for s in topology.socket_ids)
    return all(cores) and all(sockets)


_ALL_VECTOR_TOPOLOGIES = vectors.topology_names()
_VECTOR_TOPOLOGIES = [name for name in _ALL_VECTOR_TOPOLOGIES if _fits_kubelet_counters(vectors.topology(name))]


def _options_for(topology: Topology) -> list[TakeOptions]:
    per_core = max(topology.cpus_per_core(), 1)
    return [
        TakeOptions(),
        TakeOptions(spread=True),
        TakeOptions(prefer_uncore=True),
        TakeOptions(distribute_across_numa=True),
        TakeOptions(distribute_across_numa=True, cpu_group_size=per_core),
        TakeOptions(distribute_across_numa=True, spread=True),
    ]


@st.composite
def _requests(draw: st.DrawFn) -> tuple[Topology, CPUSet, int, TakeOptions]:
    """A vector topology, a subset of its CPUs, a request up to two more than that subset, and options."""
    topology = vectors.topology(draw(st.sampled_from(_VECTOR_TOPOLOGIES)))
    ids = topology.online_cpus.sorted()
    bits = draw(st.integers(min_value=0, max_value=(1 << len(ids)) - 1))
    available = CPUSet(cpu for i, cpu in enumerate(ids) if bits >> i & 1)
    count = draw(st.integers(min_value=0, max_value=len(available) + 2))
    options = draw(st.sampled_from(_options_for(topology)))
    return topology, available, count, options


# -- properties over the vector topologies ----------------------------------------------------


def test_property_topologies_exclude_only_inconsistent_fixtures() -> None:
    """Only the hybrid and the duplicated-core-id fixtures, and the hint tests' machine that declares no socket
    (``returnMachineInfo``: ``CPUsPerSocket`` is undefined there), are left out of the property tests."""
    excluded = sorted(set(_ALL_VECTOR_TOPOLOGIES) - set(_VECTOR_TOPOLOGIES))
    assert [
        "returnMachineInfo",
        "topoDualSocketMultiNumaPerSocketUncore",
        "topoSingleSocketSingleNumaPerSocketPCoreHTMonolithicUncore",
    ] == excluded


@settings(max_examples=400, deadline=None)
@given(_requests())
def test_take_returns_count_cpus_from_available(request: tuple[Topology, CPUSet, int, TakeOptions]) -> None:
    """A request that fits gets exactly ``count`` CPUs, all of them from ``available``."""
    topology, available, count, options = request
    if count > len(available):
        return
    result = take_by_topology(topology, available, count, options)
    assert (count, True) == (len(result), result.is_subset_of(available))


@settings(max_examples=200, deadline=None)
@given(_requests())
def test_error_iff_request_exceeds_available(request: tuple[Topology, CPUSet, int, TakeOptions]) -> None:
    """The kubelet's "not enough cpus" error comes exactly when ``count`` exceeds the available CPUs."""
    topology, available, count, options = request
    expected = f"not enough cpus available to satisfy request: requested={count}, available={len(available)}"
    if count > len(available):
        with pytest.raises(AllocationError) as raised:
            take_by_topology(topology, available, count, options)
        assert expected == str(raised.value)
    else:
        assert count == len(take_by_topology(topology, available, count, options))


@settings(max_examples=150, deadline=None)
@given(_requests())
def test_take_is_deterministic(request: tuple[Topology, CPUSet, int, TakeOptions]) -> None:
    """The same request on the same or an equal, separately built topology gives the same CPUs."""
    topology, available, count, options = request
    count = min(count, len(available))
    twin = dataclasses.replace(topology)
    first = take_by_topology(topology, available, count, options)
    assert first == take_by_topology(topology, available, count, options)
    assert first == take_by_topology(twin, available, count, options)


# -- edges of the API --------------------------------------------------------------------------


@pytest.mark.parametrize("options", _options_for(vectors.topology("topoDualSocketHT")), ids=repr)
def test_zero_cpus_is_the_empty_set(options: TakeOptions) -> None:
    """A request for 0 CPUs gives the empty set under every option, even with nothing available."""
    assert CPUSet() == take_by_topology(vectors.topology("topoDualSocketHT"), CPUSet(), 0, options)


def test_negative_count_is_rejected() -> None:
    """A negative request is a caller error naming the value."""
    with pytest.raises(ValueError) as raised:
        take_numa_packed(vectors.topology("topoDualSocketHT"), _cpus("0-11"), -1)
    assert "CPU request must be a non-negative integer, got -1" == str(raised.value)


def test_group_size_below_one_is_rejected() -> None:
    """TakeOptions refuses a CPU group size below 1, naming the field and value."""
    with pytest.raises(ValueError) as raised:
        TakeOptions(distribute_across_numa=True, cpu_group_size=0)
    assert "TakeOptions.cpu_group_size must be a positive integer, got 0" == str(raised.value)


def test_distributed_falls_back_to_packed_when_count_is_not_a_multiple_of_the_group() -> None:
    """3 CPUs in groups of 2 cannot be distributed, so the packed pick (core 0, then CPU 1) is returned."""
    topology = vectors.topology("topoDualSocketMultiNumaPerSocketHT")
    assert _cpus("0-1,40") == take_numa_distributed(topology, topology.online_cpus, 3, 2)


def test_dispatch_uses_the_distributed_algorithm_when_asked() -> None:
    """24 free CPUs on 4 NUMA nodes: packed fills node 0 and adds 2 cores of node 1; distributed takes 12 + 12."""
    topology = vectors.topology("topoDualSocketMultiNumaPerSocketHT")
    options = TakeOptions(distribute_across_numa=True)
    assert (_cpus("0-11,40-51"), _cpus("0-5,10-15,40-45,50-55")) == (
        take_by_topology(topology, topology.online_cpus, 24),
        take_by_topology(topology, topology.online_cpus, 24, options),
    )


def test_domain_id_beyond_the_sort_key_range_is_rejected() -> None:
    """An L3 id of 2**32 does not fit the packed sort key; the error names the CPU and the id."""
    topology = _machine([(0, 0, 0, 0, 2**32)])
    with pytest.raises(ValueError) as raised:
        take_numa_packed(topology, topology.online_cpus, 1)
    assert "CPU 0: domain id 4294967296 exceeds 4294967295, the sort-key limit" == str(raised.value)


def test_domain_tables_are_released_with_their_topology() -> None:
    """The per-topology memo does not keep a dropped topology's tables alive."""
    topology = _machine((cpu, cpu, 0, 0, 0) for cpu in range(4))
    take_numa_packed(topology, topology.online_cpus, 2)
    key = id(topology)
    assert key in memoised_ids()
    del topology
    gc.collect()
    assert key not in memoised_ids()


# -- hand-checked machines the vectors do not cover ----------------------------------------------


def _sparse_two_socket() -> Topology:
    """CPU ids 0-3 (socket 0) and 8-11 (socket 1), one NUMA node per socket, no SMT, CPU 9 offline."""
    rows = [(c, c, 0, 0, 0) for c in range(4)] + [(c, c, 1, 1, 1) for c in (8, 10, 11)]
    return _machine(rows, offline=[9])


def test_sparse_offline_machine_packs_into_the_smaller_numa_node() -> None:
    """3 CPUs take the whole 3-CPU NUMA node 1 (fewest free first), skipping the offline CPU 9."""
    topology = _sparse_two_socket()
    assert _cpus("8,10-11") == take_numa_packed(topology, _cpus("0-3,8-11"), 3)


def test_sparse_offline_machine_takes_a_whole_node_then_a_core() -> None:
    """4 CPUs: NUMA node 1 whole (3 CPUs), then core 0; node 0 (4 CPUs) does not fit the remaining 1."""
    topology = _sparse_two_socket()
    assert _cpus("0,8,10-11") == take_numa_packed(topology, _cpus("0-3,8-11"), 4)


def test_offline_cpu_in_available_is_never_taken_but_counted_in_the_message() -> None:
    """The error names the size of the ``available`` argument, as the kubelet does, offline CPU included."""
    topology = _sparse_two_socket()
    with pytest.raises(AllocationError) as raised:
        take_numa_packed(topology, _cpus("0-3,8-11"), 8)
    assert "not enough cpus available to satisfy request: requested=8, available=8" == str(raised.value)


def _snc2_single_socket() -> Topology:
    """One socket split into 2 NUMA nodes (sub-NUMA clustering), 8 cores x 2 threads, derived counters.

    Core c has threads c and c+8; cores 0-3 are on node 0, cores 4-7 on node 1.
    """
    rows = [(c + t * 8, c, 0, 0 if c < 4 else 1, 0) for t in range(2) for c in range(8)]
    return _machine(rows)


def test_snc_machine_takes_the_one_free_numa_node_whole() -> None:
    """8 CPUs with CPU 0 busy: NUMA node 1 is the only free node and is taken whole."""
    topology = _snc2_single_socket()
    available = topology.online_cpus - _cpus("0")
    assert _cpus("4-7,12-15") == take_numa_packed(topology, available, 8)


def test_snc_machine_free_cpu_order_fills_the_busy_core_first() -> None:
    """With only node 0 left, the packed order visits half-used core 0 (CPU 8) before the whole cores."""
    topology = _snc2_single_socket()
    acc = Accumulator.of_cpus(topology, topology.online_cpus - _cpus("0,4-7,12-15"), 0)
    assert [8, 1, 9, 2, 10, 3, 11] == acc.free_cpus()


def _split_l3() -> Topology:
    """One socket, one NUMA node, 8 cores without SMT, two L3 caches: CPUs 0-3 and 4-7."""
    return _machine((c, c, 0, 0, 0 if c < 4 else 4) for c in range(8))


def test_uncore_option_keeps_a_small_request_inside_one_cache() -> None:
    """With 0 and 3 busy, 3 CPUs go to L3 4 (CPUs 4-6) instead of straddling both caches (1,2,4)."""
    topology = _split_l3()
    available = _cpus("1-2,4-7")
    assert (_cpus("1-2,4"), _cpus("4-6")) == (
        take_numa_packed(topology, available, 3),
        take_numa_packed(topology, available, 3, prefer_uncore=True),
    )


def test_uncore_option_takes_a_whole_cache_then_one_cpu_of_the_next() -> None:
    """5 CPUs on a free machine: the whole first L3 (0-3), then CPU 4 from the second."""
    topology = _split_l3()
    assert _cpus("0-4") == take_numa_packed(topology, topology.online_cpus, 5, prefer_uncore=True)


def test_uncore_option_drops_one_thread_for_an_odd_request_on_smt() -> None:
    """3 CPUs with SMT: cores 0-1 of L3 0 give 4 threads, the highest (5) is dropped -> 0,1,4."""
    rows = [(c + t * 4, c, 0, 0, 0 if c < 2 else 2) for t in range(2) for c in range(4)]
    topology = _machine(rows)
    available = _cpus("0-2,4-5")
    assert (_cpus("0,2,4"), _cpus("0-1,4")) == (
        take_numa_packed(topology, available, 3),
        take_numa_packed(topology, available, 3, prefer_uncore=True),
    )


def test_spread_orders_single_cpus_socket_by_socket() -> None:
    """Spread skips whole cores: on the SNC machine 4 CPUs are the lowest ids of the socket, siblings last."""
    topology = _snc2_single_socket()
    assert _cpus("0-3") == take_numa_packed(topology, topology.online_cpus, 4, spread=True)


def test_hybrid_core_with_one_free_thread_never_hands_out_the_busy_one() -> None:
    """CPUsPerCore() = 24//16 = 1 makes P-core 8 look free with busy CPU 16 in it; podpin takes only CPU 8.

    The kubelet would take CPU 16 as well and give a busy CPU to a second container.
    """
    topology = vectors.topology("topoSingleSocketSingleNumaPerSocketPCoreHTMonolithicUncore")
    result = take_numa_packed(topology, topology.online_cpus - _cpus("16"), 10)
    assert _cpus("0-9") == result


# -- the distributed planner ----------------------------------------------------------------------


def test_balance_score_is_population_stddev_rounded_to_three_decimals() -> None:
    """[1,2,3] -> sqrt(2/3) = 0.81649... -> 0.816; equal values -> 0."""
    assert (0.816, 0.0, 2.0) == (balance_score([1, 2, 3]), balance_score([5, 5, 5]), balance_score([0, 4]))


def test_go_round_rounds_halves_away_from_zero() -> None:
    """Go's math.Round: 2.5 -> 3 (Python's round gives 2), 0.49999999999999994 -> 0."""
    assert (3.0, 1.0, 0.0) == (go_round(2.5), go_round(0.5), go_round(0.49999999999999994))


def test_numa_node_range_follows_group_arithmetic() -> None:
    """26 CPUs in groups of 2 on 80 CPUs / 4 nodes: 13 groups, 10 per node -> 2 to 4 nodes."""
    assert (2, 4) == numa_node_range(26, 2, num_cpus=80, num_numa_nodes=4, num_numa_available=4)


def test_plan_keeps_the_first_of_equal_scores_in_sorted_order() -> None:
    """Nodes 0, 2 and 3 score the same for 8 CPUs; node 0 comes first in the sorted list and wins."""
    plan = plan_distribution([1, 0, 2, 3], {1: 4, 0: 10, 2: 10, 3: 10}, 8, 1, num_cpus=40, num_numa_nodes=4)
    assert Distribution(nodes=(0,), per_node=8, remainder=0, remainder_nodes=()) == plan


def test_plan_sends_the_remainder_where_it_balances_best() -> None:
    """7 CPUs over nodes with 6 and 4 free: 3 each, the extra one from the fuller node 0."""
    plan = plan_distribution([1, 0], {1: 4, 0: 6}, 7, 1, num_cpus=20, num_numa_nodes=2)
    assert Distribution(nodes=(1, 0), per_node=3, remainder=1, remainder_nodes=(0,)) == plan


def test_plan_skips_a_remainder_subset_that_cannot_place_whole_groups() -> None:
    """14 CPUs in pairs over 4 nodes: subset (0, 1) left with 3 + 3 cannot take 3 pairs, (2, 0, 1) can."""
    plan = plan_distribution([3, 2, 0, 1], {3: 2, 2: 4, 0: 5, 1: 5}, 14, 2, num_cpus=40, num_numa_nodes=4)
    assert Distribution(nodes=(3, 2, 0, 1), per_node=2, remainder=6, remainder_nodes=(2, 0, 1)) == plan
