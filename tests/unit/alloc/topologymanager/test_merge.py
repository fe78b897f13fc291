"""The topology manager merge: fast merge == literal cartesian product, and the policies' rules."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.alloc.topologymanager import (
    HintError,
    HintList,
    LatticeMerger,
    NUMAInfo,
    ProviderHints,
    TopologyHint,
    TopologyManagerPolicy,
    TopologyPolicyError,
    ids_of,
    is_narrower_than,
    lists_from_providers,
    make_policy,
    mask_of,
)
from agent.alloc.topologymanager.lattice import and_products
from agent.cpuset import CPUSet
from agent.topology.model import CPU, NUMANode, Topology
from tests.oracles.merge_reference import reference_merge
from tests.support.strategies import MergeInput, lattice_sets, merge_inputs, numa_infos

_PROPERTY = settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])

FOUR = NUMAInfo(nodes=(0, 1, 2, 3))
#: Two sockets of two NUMA nodes each: 0-1 and 2-3 are close (the kubelet's 4-node test matrix).
FOUR_DISTANCES = NUMAInfo.from_distance_map(
    [0, 1, 2, 3], {0: [10, 11, 12, 12], 1: [11, 10, 12, 12], 2: [12, 12, 10, 11], 3: [12, 12, 11, 10]}
)


def hints(*items: tuple[list[int] | None, bool]) -> list[TopologyHint]:
    """Hints from ``(node ids or None, preferred)`` pairs."""
    return [TopologyHint(None if ids is None else mask_of(ids), preferred) for ids, preferred in items]


def outcome(result: tuple[TopologyHint, bool]) -> tuple[tuple[int, ...] | None, bool, bool]:
    """(node ids or None, preferred, admit) of a merge result."""
    best, admit = result
    return best.nodes, best.preferred, admit


# -- fast == reference ----------------------------------------------------------------
class TestFastEqualsReference:
    @_PROPERTY
    @given(merge_inputs(), st.sampled_from(list(TopologyManagerPolicy)), st.booleans())
    def test_policy_merge(self, case: MergeInput, policy: str, closest: bool) -> None:
        """Every policy, with and without prefer-closest, gives the literal product's hint and admission."""
        expected = reference_merge(policy, case.numa_info, case.providers, prefer_closest=closest)
        actual = make_policy(policy, case.numa_info, prefer_closest=closest).merge(case.providers)
        assert expected == actual

    @settings(max_examples=500, deadline=None)
    @given(merge_inputs(min_nodes=3, same_size=True), st.sampled_from(["best-effort", "restricted"]))
    def test_closest_ties(self, case: MergeInput, policy: str) -> None:
        """With masks of one size, so that average distances and values break the ties, prefer-closest agrees."""
        expected = reference_merge(policy, case.numa_info, case.providers, prefer_closest=True)
        actual = make_policy(policy, case.numa_info, prefer_closest=True).merge(case.providers)
        assert expected == actual

    @settings(max_examples=300, deadline=None)
    @given(
        merge_inputs(min_nodes=7, max_nodes=10, max_lists=3, max_hints=10),
        st.sampled_from(list(TopologyManagerPolicy)),
        st.booleans(),
    )
    def test_policy_merge_on_larger_machines(self, case: MergeInput, policy: str, closest: bool) -> None:
        """On 7 to 10 NUMA nodes (lattices of 128 to 1024 masks) the fast merge still equals the product."""
        expected = reference_merge(policy, case.numa_info, case.providers, prefer_closest=closest)
        actual = make_policy(policy, case.numa_info, prefer_closest=closest).merge(case.providers)
        assert expected == actual

    @settings(max_examples=500, deadline=None)
    @given(lattice_sets())
    def test_and_products(self, case: tuple[int, list[int]]) -> None:
        """The lattice AND-convolution finds exactly the ANDs a set-by-set product finds."""
        size_bits, bitmaps = case
        full = (1 << size_bits) - 1
        reached = {full}
        for bitmap in bitmaps:
            members = [position for position in range(1 << size_bits) if bitmap >> position & 1]
            reached = {a & b for a in reached for b in members}
        expected = sum(1 << position for position in reached)
        assert expected == and_products(bitmaps, size_bits)

    @settings(max_examples=300, deadline=None)
    @given(numa_infos(max_nodes=8), st.data())
    def test_bitmaps_equal_hints(self, info: NUMAInfo, data: st.DataObject) -> None:
        """A HintList from bitmaps equals the one from the same hints listed in ascending mask order."""
        size = 1 << len(info.nodes)
        offered = data.draw(st.sets(st.integers(0, size - 1)))
        preferred = data.draw(st.sets(st.sampled_from(sorted(offered)))) if offered else set()
        nil, nil_preferred = data.draw(st.sampled_from([(False, False), (True, False), (True, True)]))
        listed = [TopologyHint(None, nil_preferred)] if nil else []
        listed += [TopologyHint(_mask(p, info.nodes), p in preferred) for p in sorted(offered)]
        expected = HintList.from_hints(listed, info)
        actual = HintList.from_bitmaps(
            info,
            masks=sum(1 << p for p in offered),
            preferred=sum(1 << p for p in preferred),
            nil=nil,
            nil_preferred=nil_preferred,
        )
        assert expected == actual


def _mask(position: int, nodes: tuple[int, ...]) -> int:
    return mask_of(nodes[index] for index in ids_of(position))


# -- policies -------------------------------------------------------------------------
class TestPolicies:
    @pytest.mark.parametrize(
        ("name", "guaranteed"),
        [("none", False), ("best-effort", False), ("restricted", False), ("single-numa-node", True)],
    )
    def test_name_and_alignment(self, name: str, guaranteed: bool) -> None:
        """Each policy reports its name, and only single-numa-node guarantees alignment."""
        policy = make_policy(name, FOUR)
        assert (name, guaranteed) == (policy.name, policy.alignment_guaranteed)

    def test_unknown_name(self) -> None:
        """An unknown policy name is refused, naming it and the valid ones."""
        with pytest.raises(TopologyPolicyError) as error:
            make_policy("strict", FOUR)
        expected = (
            "unknown topology manager policy 'strict': expected one of none, best-effort, restricted, single-numa-node"
        )
        assert expected == str(error.value)

    def test_prefer_closest_needs_distances(self) -> None:
        """prefer-closest-numa-nodes without NUMA distances is refused, naming the nodes."""
        with pytest.raises(TopologyPolicyError) as error:
            make_policy("best-effort", FOUR, prefer_closest=True)
        expected = (
            "topology manager policy option prefer-closest-numa-nodes needs NUMA distances, "
            "and NUMA nodes [0, 1, 2, 3] have none"
        )
        assert expected == str(error.value)

    def test_none_does_not_merge(self) -> None:
        """Policy none admits with a nil preferred hint whatever the providers say."""
        providers: list[ProviderHints] = [{"cpu": []}, {"memory": hints(([1], False))}]
        assert (None, True, True) == outcome(make_policy("none", FOUR).merge(providers))

    def test_best_effort_admits_non_preferred(self) -> None:
        """best-effort admits the best non-preferred hint: {1,2} has the target size 2, so it beats the narrower {1}."""
        providers = [{"cpu": hints(([0, 1], False), ([0, 1, 2], False))}, {"memory": hints(([1, 2], False))}]
        assert ((1, 2), False, True) == outcome(make_policy("best-effort", FOUR).merge(providers))

    def test_restricted_rejects_non_preferred(self) -> None:
        """restricted merges like best-effort but rejects a non-preferred result."""
        providers = [{"cpu": hints(([0], True))}, {"memory": hints(([0, 1], True))}]
        assert ((0,), False, False) == outcome(make_policy("restricted", FOUR).merge(providers))

    def test_restricted_admits_preferred(self) -> None:
        """restricted admits when both providers prefer the same node."""
        providers = [{"cpu": hints(([0], True), ([2], True))}, {"memory": hints(([2], True), ([2, 3], False))}]
        assert ((2,), True, True) == outcome(make_policy("restricted", FOUR).merge(providers))

    def test_single_numa_node_reports_anywhere_as_nil(self) -> None:
        """single-numa-node turns the all-nodes result of don't-care providers into a nil affinity."""
        assert (None, True, True) == outcome(make_policy("single-numa-node", FOUR).merge([None, {"cpu": None}]))

    def test_single_numa_node_rejects_multi_node_hints(self) -> None:
        """single-numa-node drops two-node hints, so a resource offering only those leaves nothing to admit."""
        providers = [{"cpu": hints(([0, 1], True))}, {"memory": hints(([0], True))}]
        assert (None, False, False) == outcome(make_policy("single-numa-node", FOUR).merge(providers))

    def test_single_numa_node_ignores_prefer_closest(self) -> None:
        """single-numa-node ranks by narrowness even with prefer-closest; best-effort would take the closer node 3."""
        info = NUMAInfo(
            nodes=(0, 1, 2, 3), distances=((10, 11, 12, 12), (11, 11, 12, 12), (12, 12, 10, 11), (12, 12, 11, 10))
        )
        providers = [{"cpu": hints(([3], True), ([1], True))}, {"memory": hints(([1], True), ([3], True))}]
        single = make_policy("single-numa-node", info, prefer_closest=True).merge(providers)
        best_effort = make_policy("best-effort", info, prefer_closest=True).merge(providers)
        assert [((1,), True, True), ((3,), True, True)] == [outcome(single), outcome(best_effort)]

    def test_prefer_closest_picks_the_closer_pair(self) -> None:
        """With prefer-closest the pair on one socket, {2,3}, wins; narrowest takes the lowest-valued pair {0,2}."""
        providers = [{"cpu": hints(([0, 2], True), ([1, 3], True), ([2, 3], True))}]
        closest = make_policy("best-effort", FOUR_DISTANCES, prefer_closest=True).merge(providers)
        narrowest = make_policy("best-effort", FOUR_DISTANCES).merge(providers)
        assert [((2, 3), True, True), ((0, 2), True, True)] == [outcome(closest), outcome(narrowest)]

    def test_non_preferred_aims_at_best_count(self) -> None:
        """With only non-preferred results, the mask size nearest below the target count wins over a narrower one."""
        providers = [
            {"cpu": hints(([0, 1, 2], False), ([0, 1, 2, 3], False))},
            {"memory": hints(([0], False), ([0, 1, 2], False))},
        ]
        # target = max(min size 3, min size 1) = 3: {0,1,2} is reachable, so it beats {0}
        assert ((0, 1, 2), False, True) == outcome(make_policy("best-effort", FOUR).merge(providers))

    def test_no_usable_permutation_gives_all_nodes(self) -> None:
        """Disjoint masks only AND to empty masks: the result is all nodes, not preferred."""
        providers = [{"cpu": hints(([0], True))}, {"memory": hints(([1], True))}]
        assert ((0, 1, 2, 3), False, True) == outcome(make_policy("best-effort", FOUR).merge(providers))

    def test_scattered_node_ids(self) -> None:
        """Node ids that are not 0..N-1 (here 0, 2, 5) come back as the same ids."""
        info = NUMAInfo(nodes=(0, 2, 5))
        providers = [
            {"cpu": hints(([2, 5], False), ([0, 2, 5], False))},
            {"memory": hints(([5], True), ([2, 5], False))},
        ]
        assert ((2, 5), False, False) == outcome(make_policy("restricted", info).merge(providers))

    def test_mask_naming_an_unknown_node(self) -> None:
        """A preferred mask naming an unknown node stays preferred if every list prefers it; known nodes remain."""
        providers = [{"cpu": hints(([1, 7], True))}, {"memory": hints(([1, 7], True), ([0], True))}]
        assert ((1,), True, True) == outcome(make_policy("restricted", FOUR).merge(providers))


# -- compact input ----------------------------------------------------------------------
SIXTEEN = NUMAInfo(nodes=tuple(range(16)))


def _feasible(free: list[int], request: int) -> tuple[int, int]:
    """(bitmap of node subsets with enough free capacity, bitmap of those with the fewest nodes)."""
    totals = [0] * (1 << len(free))
    offered: list[int] = []
    for position in range(1, 1 << len(free)):
        low = position & -position
        totals[position] = totals[position ^ low] + free[low.bit_length() - 1]
        if totals[position] >= request:
            offered.append(position)
    smallest = min(position.bit_count() for position in offered)
    preferred = [position for position in offered if position.bit_count() == smallest]
    return sum(1 << p for p in offered), sum(1 << p for p in preferred)


class TestHintList:
    def test_sixteen_nodes_from_bitmaps(self) -> None:
        """Providers on 16 nodes give bitmaps of every feasible subset; node 9 is the only one both fit."""
        cpu_free = [2] * 16
        cpu_free[9] = cpu_free[12] = 8
        memory_free = [1] * 16
        memory_free[9] = memory_free[3] = 4
        cpu_masks, cpu_preferred = _feasible(cpu_free, 6)
        memory_masks, memory_preferred = _feasible(memory_free, 4)
        providers = [
            {"cpu": HintList.from_bitmaps(SIXTEEN, masks=cpu_masks, preferred=cpu_preferred)},
            {"memory": HintList.from_bitmaps(SIXTEEN, masks=memory_masks, preferred=memory_preferred)},
            None,
        ]
        assert ((9,), True, True) == outcome(make_policy("single-numa-node", SIXTEEN).merge(providers))

    def test_sixteen_nodes_none_fits_one_node(self) -> None:
        """No node fits the CPUs: as in the kubelet, the narrowest reachable mask of the target size 2 wins."""
        cpu_free = [1] * 16
        cpu_free[4] = cpu_free[6] = cpu_free[11] = 3
        memory_free = [2] * 16
        cpu_masks, _ = _feasible(cpu_free, 6)
        memory_masks, memory_preferred = _feasible(memory_free, 2)
        providers = [
            {"cpu": HintList.from_bitmaps(SIXTEEN, masks=cpu_masks)},
            {"memory": HintList.from_bitmaps(SIXTEEN, masks=memory_masks, preferred=memory_preferred)},
        ]
        assert ((0, 1), False, True) == outcome(make_policy("best-effort", SIXTEEN).merge(providers))

    def test_empty_hint_list_means_impossible(self) -> None:
        """An empty HintList stands for an empty hint list: {nil, not preferred}."""
        providers = [{"cpu": HintList.from_bitmaps(FOUR, masks=0)}]
        assert ((0, 1, 2, 3), False, False) == outcome(make_policy("restricted", FOUR).merge(providers))

    def test_other_nodes_refused(self) -> None:
        """A HintList built for other NUMA nodes is refused, naming the resource and both node lists."""
        providers = [{"cpu": HintList.dont_care(NUMAInfo(nodes=(0, 1)))}]
        with pytest.raises(HintError) as error:
            lists_from_providers(providers, FOUR)
        assert "hints of resource 'cpu' are over NUMA nodes [0, 1], but the machine has [0, 1, 2, 3]" == str(
            error.value
        )

    def test_preferred_must_be_offered(self) -> None:
        """A preferred bitmap naming a mask the masks bitmap lacks is refused, naming the nodes."""
        with pytest.raises(HintError) as error:
            HintList.from_bitmaps(FOUR, masks=1 << 0b0011, preferred=1 << 0b0110)
        assert "hint list prefers NUMA nodes [1, 2], which it does not offer" == str(error.value)

    def test_bitmap_too_wide(self) -> None:
        """A bitmap with more positions than the node count allows is refused."""
        with pytest.raises(HintError) as error:
            HintList.from_bitmaps(FOUR, masks=1 << 16)
        assert "hint list masks bitmap has bits beyond the 16 masks of 4 NUMA nodes" == str(error.value)

    def test_min_count_restarts_after_empty_mask(self) -> None:
        """Like the kubelet, an empty mask resets the list's running minimum size."""
        listed = hints(([0, 1], False), ([], False), ([0, 1, 2], False))
        assert 3 == HintList.from_hints(listed, FOUR).min_count

    def test_merger_refuses_other_nodes(self) -> None:
        """The merger refuses a list over other nodes instead of misreading positions."""
        with pytest.raises(HintError) as error:
            LatticeMerger(FOUR).merge([HintList.dont_care(NUMAInfo(nodes=(0, 1, 2, 4)))])
        assert "hint list over NUMA nodes [0, 1, 2, 4] given to a merge over [0, 1, 2, 3]" == str(error.value)


class TestAndProducts:
    def test_no_sets(self) -> None:
        """With no factor the only AND is the all-ones position (the default mask)."""
        assert 1 << 0b111 == and_products([], 3)

    def test_an_empty_set_empties_the_product(self) -> None:
        """A factor with no member leaves no permutation at all."""
        assert 0 == and_products([0b1110, 0], 2)

    def test_counts_beyond_int64(self) -> None:
        """Twelve full 6-bit lattices (64**12 = 2**72 permutations) still give every mask exactly."""
        full = (1 << 64) - 1
        assert full == and_products([full] * 12, 6)

    def test_too_many_bits(self) -> None:
        """A lattice over more than 20 bits is refused."""
        with pytest.raises(HintError) as error:
            and_products([], 21)
        assert "lattice of 21 bits: must be 0..20" == str(error.value)


# -- hints and NUMA facts -------------------------------------------------------------------
class TestHints:
    def test_mask_round_trip(self) -> None:
        """mask_of and ids_of are inverse on sorted ids, up to node 63."""
        assert (0, 2, 63) == ids_of(mask_of([63, 0, 2]))

    def test_mask_of_refuses_id_64(self) -> None:
        """Node ids beyond the 64-bit mask are refused, naming the id."""
        with pytest.raises(HintError) as error:
            mask_of([1, 64])
        assert "invalid NUMA node id 64: must be an integer in 0..63" == str(error.value)

    def test_hint_refuses_wide_affinity(self) -> None:
        """A hint affinity wider than 64 bits is refused."""
        with pytest.raises(HintError) as error:
            TopologyHint(1 << 64, True)
        assert f"invalid hint affinity {1 << 64}: must be None or a 64-bit NUMA mask" == str(error.value)

    @pytest.mark.parametrize(
        ("first", "second", "narrower"),
        [
            ([0], [0, 1], True),
            ([2, 3], [0, 1, 2], True),
            ([0, 3], [1, 2], False),
            ([1, 2], [0, 3], True),
            ([1], [1], False),
        ],
    )
    def test_is_narrower_than(self, first: list[int], second: list[int], narrower: bool) -> None:
        """Fewer nodes is narrower, then the smaller mask value; a mask is not narrower than itself."""
        assert narrower == is_narrower_than(mask_of(first), mask_of(second))

    def test_average_distance_counts_self_pairs(self) -> None:
        """The average covers all ordered pairs including self pairs: {0,2} -> (10+12+12+10)/4."""
        assert 11.0 == FOUR_DISTANCES.average_distance(mask_of([0, 2]))

    def test_from_distance_map_needs_every_row(self) -> None:
        """A distance map without a row for a node is refused, naming the node."""
        with pytest.raises(HintError) as error:
            NUMAInfo.from_distance_map([0, 1], {0: [10, 20]})
        assert "NUMA distances lack a row for node 1" == str(error.value)

    def test_nodes_must_ascend(self) -> None:
        """NUMA node ids must be unique and ascending."""
        with pytest.raises(HintError) as error:
            NUMAInfo(nodes=(1, 0))
        assert "NUMA node ids must be unique and ascending, got [1, 0]" == str(error.value)

    def test_from_topology(self) -> None:
        """NUMAInfo from a Topology has every NUMA node and its SLIT row (20 where the firmware is silent)."""
        topology = Topology(
            cpus=(CPU(id=0, core=0, socket=0, numa=0), CPU(id=1, core=1, socket=0, numa=2)),
            numa_nodes=(
                NUMANode(id=0, cpus=CPUSet([0]), distances={0: 10, 2: 21}),
                NUMANode(id=2, cpus=CPUSet([1]), distances={0: 21, 2: 10}),
                NUMANode(id=3, memory_bytes=1 << 30),
            ),
        )
        expected = NUMAInfo(nodes=(0, 2, 3), distances=((10, 21, 20), (21, 10, 20), (20, 20, 10)))
        assert expected == NUMAInfo.from_topology(topology)
