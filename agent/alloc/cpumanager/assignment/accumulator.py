"""The packed take-by-topology: which free CPUs a request gets, as the kubelet's accumulator picks them.

The counterpart of ``takeByTopologyNUMAPacked`` in the kubelet's
``pkg/kubelet/cm/cpumanager/cpu_assignment.go`` (1.31+), with the ``spread``
sorting strategy of ``distribute-cpus-across-cores`` and the uncore-cache step
of ``prefer-align-cpus-by-uncorecache``. :class:`Accumulator` mirrors the
kubelet's ``cpuAccumulator``; the NUMA-distributed take
(:mod:`.distribute`) builds on it.

The kubelet's quirks are kept on purpose, because the static policy must pick
the same CPUs the kubelet would (the kubelet's own test cases in
``tests/data/kubelet-vectors`` pin them down):

* Counters come from ``Topology.counters`` (declared counters when given):
  ``CPUsPerCore = NumCPUs // NumCores`` decides whether a core is "free", and
  ``NumSockets >= NumNUMANodes`` chooses NUMA-first over sockets-first.
* Core ids are whatever ``CPU.core`` says; CPUs sharing a core id are one core.
* Whether a domain counts as free follows those counters, not the CPU list:
  where they disagree (a hybrid machine whose ``CPUsPerCore()`` is 1 while
  P-cores have 2 threads), a core with one free thread counts as free, as in
  the kubelet. Taking it differs on purpose: the kubelet adds the whole core,
  busy thread included, and podpin adds only its free CPUs (:meth:`Accumulator.take`;
  ``docs/kubelet-semantics.md``, "Take-by-topology").

Everything works on int bitmasks precomputed once per :class:`Topology`
(:class:`~agent.alloc.cpumanager.assignment.domains.Domains`), so one take on a
256-CPU machine costs tens of microseconds. Nothing here does I/O or reads the
clock.
"""

from __future__ import annotations

from collections.abc import Callable

from agent.alloc.cpumanager.assignment.domains import ID_BITS, ID_MASK, Children, Domains, bits_of, domains_of
from agent.alloc.errors import AllocationError
from agent.cpuset import CPUSet
from agent.topology import Topology

__all__ = ["Accumulator", "check_count", "not_enough", "take_numa_packed", "take_packed_mask"]


class Accumulator:
    """The kubelet's ``cpuAccumulator``: the free CPUs left, the CPUs taken, the CPUs still needed.

    ``details`` starts as the available CPUs the topology knows (online) and
    only shrinks. Every ``sort_available_*`` list is recomputed from the
    current ``details``; every ``take_full_*`` loop walks a list computed once
    when the loop starts, as the kubelet does.

    Attributes:
        available_mask: ``details`` as an int bitmask (the hot loops read it directly).
        result_mask: ``result`` as an int bitmask.
        needed: CPUs still to take (negative if a whole domain overshot).
    """

    __slots__ = ("_d", "_spread", "available_mask", "needed", "result_mask")

    def __init__(self, domains: Domains, available: int, count: int, *, spread: bool = False) -> None:
        """An accumulator over prebuilt domain tables and an available-CPU mask (the takers' fast path)."""
        self._d = domains
        self.available_mask = available & domains.online
        self.result_mask = 0
        self.needed = count
        self._spread = spread

    @classmethod
    def of_cpus(cls, topology: Topology, available: CPUSet, count: int, *, spread: bool = False) -> Accumulator:
        """An accumulator over a topology and a set of available CPUs."""
        return cls(domains_of(topology), available.mask, count, spread=spread)

    # -- state ---------------------------------------------------------------------------
    @property
    def result(self) -> CPUSet:
        """The CPUs taken so far."""
        return CPUSet.from_mask(self.result_mask)

    @property
    def details(self) -> CPUSet:
        """The available CPUs not taken yet."""
        return CPUSet.from_mask(self.available_mask)

    def take(self, cpus: CPUSet) -> None:
        """Add the still-free CPUs of ``cpus`` to the result; the need drops by how many were added.

        The kubelet adds the whole domain. Where its counters make a partly busy
        domain look free (``CPUsPerCore = NumCPUs / NumCores`` is 1 on hybrid
        parts or with one SMT sibling offline), that hands a busy CPU to a second
        container. podpin takes only the free ones, which changes nothing on
        machines where a free domain is wholly free.
        """
        self.take_mask(cpus.mask)

    def take_mask(self, mask: int) -> None:
        """:meth:`take` on a bitmask."""
        mask &= self.available_mask
        self.result_mask |= mask
        self.available_mask &= ~self.result_mask
        self.needed -= mask.bit_count()

    def needs_at_least(self, n: int) -> bool:
        """True while at least ``n`` more CPUs are needed (``needsAtLeast``)."""
        return self.needed >= n

    def is_satisfied(self) -> bool:
        """Nothing more is needed."""
        return self.needed < 1

    def is_failed(self) -> bool:
        """More CPUs are needed than remain available."""
        return self.needed > self.available_mask.bit_count()

    # -- orderings ---------------------------------------------------------------------
    def _ranked(self, children: Children) -> list[int]:
        """Sort keys of the children with an available CPU, ascending.

        Sort keys: available CPUs of the child (over all its CPUs, not only
        those inside the parent) ascending, then child id ascending, packed
        into one int (``count << 32 | id``) that sorts the same as the pair.
        """
        details = self.available_mask
        keys = [(full & details).bit_count() << ID_BITS | child for child, inside, full in children if inside & details]
        keys.sort()
        return keys

    def _ranked_under(self, parents: list[int], table: dict[int, Children]) -> list[int]:
        """:meth:`_ranked` children of each parent in turn, concatenated in the parents' order."""
        out: list[int] = []
        for parent in parents:
            out += self._ranked(table.get(parent, ()))
        return out

    def _numa_keys(self) -> list[int]:
        d = self._d
        if d.numa_first:
            return self._ranked(d.all_numas)
        return self._ranked_under(self.sort_available_sockets(), d.numas_in_socket)

    def _socket_keys(self) -> list[int]:
        d = self._d
        if not d.numa_first:
            return self._ranked(d.all_sockets)
        return self._ranked_under(self.sort_available_numa_nodes(), d.sockets_in_numa)

    def _core_keys(self) -> list[int]:
        d = self._d
        if d.numa_first:
            return self._ranked_under(self.sort_available_sockets(), d.cores_in_socket)
        return self._ranked_under(self.sort_available_numa_nodes(), d.cores_in_numa)

    def _uncore_keys(self) -> list[int]:
        return self._ranked_under(self.sort_available_numa_nodes(), self._d.uncores_in_numa)

    def sort_available_numa_nodes(self) -> list[int]:
        """NUMA nodes with an available CPU.

        NUMA-first sort keys: available CPUs ascending, id ascending.
        Sockets-first: for each socket of :meth:`sort_available_sockets`, its
        NUMA nodes by available CPUs ascending, id ascending (a node spanning
        two sockets appears twice).
        """
        return [key & ID_MASK for key in self._numa_keys()]

    def sort_available_sockets(self) -> list[int]:
        """Sockets with an available CPU.

        Sockets-first sort keys: available CPUs ascending, id ascending.
        NUMA-first: for each node of :meth:`sort_available_numa_nodes`, its
        sockets by available CPUs ascending, id ascending.
        """
        return [key & ID_MASK for key in self._socket_keys()]

    def sort_available_cores(self) -> list[int]:
        """Cores with an available CPU.

        Sort keys: the parent order (NUMA-first: sockets of
        :meth:`sort_available_sockets`; sockets-first: NUMA nodes of
        :meth:`sort_available_numa_nodes`), then available CPUs of the core
        (over the whole machine, core ids being global) ascending, then core id.
        """
        return [key & ID_MASK for key in self._core_keys()]

    def sort_available_uncore_caches(self) -> list[int]:
        """Uncore caches with an available CPU.

        Sort keys: NUMA node in :meth:`sort_available_numa_nodes` order, then
        available CPUs of the cache ascending, then cache id.
        """
        return [key & ID_MASK for key in self._uncore_keys()]

    def sort_available_cpus_packed(self) -> list[int]:
        """Available CPUs. Sort keys: core in :meth:`sort_available_cores` order, then CPU id."""
        core, details = self._d.core, self.available_mask
        out: list[int] = []
        for c in self.sort_available_cores():
            out += bits_of(core[c] & details)
        return out

    def sort_available_cpus_spread(self) -> list[int]:
        """Available CPUs. Sort keys: socket in :meth:`sort_available_sockets` order, then CPU id."""
        socket, details = self._d.socket, self.available_mask
        out: list[int] = []
        for s in self.sort_available_sockets():
            out += bits_of(socket[s] & details)
        return out

    # -- free domains ------------------------------------------------------------------
    @staticmethod
    def _whole(keys: list[int], masks: dict[int, int]) -> list[int]:
        """Ids of the keys whose available count is the domain's full topology size."""
        return [key & ID_MASK for key in keys if key >> ID_BITS == masks[key & ID_MASK].bit_count()]

    @staticmethod
    def _sized(keys: list[int], size: int) -> list[int]:
        """Ids of the keys whose available count equals ``size``."""
        return [key & ID_MASK for key in keys if key >> ID_BITS == size]

    def free_numa_nodes(self) -> list[int]:
        """NUMA nodes whose every CPU is available, in :meth:`sort_available_numa_nodes` order."""
        return self._whole(self._numa_keys(), self._d.numa)

    def free_sockets(self) -> list[int]:
        """Sockets with ``CPUsPerSocket()`` available CPUs, in :meth:`sort_available_sockets` order."""
        return self._sized(self._socket_keys(), self._d.cpus_per_socket)

    def free_cores(self) -> list[int]:
        """Cores with ``CPUsPerCore()`` available CPUs, in :meth:`sort_available_cores` order."""
        return self._sized(self._core_keys(), self._d.cpus_per_core)

    def free_uncore_caches(self) -> list[int]:
        """Uncore caches whose every CPU is available, in :meth:`sort_available_uncore_caches` order."""
        return self._whole(self._uncore_keys(), self._d.uncore)

    def free_cpus(self) -> list[int]:
        """Available CPUs in :meth:`sort_available_cpus_packed` order (the kubelet's ``freeCPUs``)."""
        return self.sort_available_cpus_packed()

    # -- taking ------------------------------------------------------------------------
    def _take_whole(self, free: Callable[[], list[int]], masks: dict[int, int], smallest: int) -> None:
        """Take each domain of ``free()`` (listed once, up front) whose full size fits the need.

        ``smallest`` is the size of the level's smallest domain: while the need
        is below it no domain can fit, so the list is not even computed (the
        kubelet computes it and skips every entry; the outcome is the same).
        """
        if self.needed < smallest:
            return
        for i in free():
            mask = masks[i]
            if self.needed >= mask.bit_count():
                self.take_mask(mask)
                if self.needed < smallest:
                    return

    def take_full_numa_nodes(self) -> None:
        """Take every free NUMA node that fits in the remaining need."""
        self._take_whole(self.free_numa_nodes, self._d.numa, self._d.smallest_numa)

    def take_full_sockets(self) -> None:
        """Take every free socket that fits in the remaining need."""
        self._take_whole(self.free_sockets, self._d.socket, self._d.smallest_socket)

    def take_full_cores(self) -> None:
        """Take every free core that fits in the remaining need."""
        self._take_whole(self.free_cores, self._d.core, self._d.smallest_core)

    def take_full_uncore(self) -> None:
        """Take every free uncore cache that fits in the remaining need."""
        self._take_whole(self.free_uncore_caches, self._d.uncore, self._d.smallest_uncore)

    def take_full_first_level(self) -> None:
        """Whole NUMA nodes when NUMA-first, else whole sockets."""
        if self._d.numa_first:
            self.take_full_numa_nodes()
        else:
            self.take_full_sockets()

    def take_full_second_level(self) -> None:
        """Whole sockets when NUMA-first, else whole NUMA nodes."""
        if self._d.numa_first:
            self.take_full_sockets()
        else:
            self.take_full_numa_nodes()

    def take_partial_uncore(self, uncore_id: int) -> None:
        """Take the whole remaining need from one uncore cache if its lowest-id cores hold exactly that.

        The cores are the ``ceil(needed / CPUsPerCore())`` lowest core ids with
        an available CPU in the cache; with SMT and an odd need the highest CPU
        of them is dropped. Nothing is taken unless the count then equals the need.
        """
        d, details = self._d, self.available_mask
        per_core = max(d.cpus_per_core, 1)
        cores_needed = (self.needed + per_core - 1) // per_core
        cores = [full for _core, inside, full in d.cores_in_uncore.get(uncore_id, ()) if inside & details]
        free = 0
        for full in cores[:cores_needed]:
            free |= full
        free &= details
        if self.needed % 2 != 0 and d.cpus_per_core > 1 and free.bit_count() > self.needed:
            free &= ~(1 << (free.bit_length() - 1))
        if free.bit_count() == self.needed:
            self.take_mask(free)

    def take_uncore_cache(self) -> None:
        """Whole uncore caches while the need is at least ``CPUsPerUncore()``, else one cache that fits."""
        per_uncore = self._d.cpus_per_uncore
        for uncore in self.sort_available_uncore_caches():
            if self.needs_at_least(per_uncore):
                self.take_full_uncore()
            if self.is_satisfied():
                return
            self.take_partial_uncore(uncore)
            if self.is_satisfied():
                return

    def take_remaining_cpus(self) -> None:
        """Take single CPUs in the packed (or spread) order until satisfied."""
        order = self.sort_available_cpus_spread() if self._spread else self.sort_available_cpus_packed()
        for cpu in order:
            self.take_mask(1 << cpu)
            if self.needed < 1:
                return


def check_count(count: int) -> None:
    """Reject a CPU request that is not a non-negative integer (``ValueError``)."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(f"CPU request must be a non-negative integer, got {count!r}")


def not_enough(count: int, available: int) -> AllocationError:
    """The kubelet's "not enough cpus available to satisfy request" error."""
    return AllocationError(f"not enough cpus available to satisfy request: requested={count}, available={available}")


def take_packed_mask(domains: Domains, available: int, size: int, count: int, spread: bool, prefer_uncore: bool) -> int:
    """``takeByTopologyNUMAPacked`` on masks; ``size`` is ``len(available)`` for the error text."""
    acc = Accumulator(domains, available, count, spread=spread)
    if acc.is_satisfied():
        return acc.result_mask
    if acc.is_failed():
        raise not_enough(count, size)
    steps = [acc.take_full_first_level, acc.take_full_second_level]
    if prefer_uncore:
        steps.append(acc.take_uncore_cache)
    if not spread:
        steps.append(acc.take_full_cores)
    steps.append(acc.take_remaining_cpus)
    for step in steps:
        step()
        if acc.is_satisfied():
            return acc.result_mask
    raise AllocationError("failed to allocate cpus")


def take_numa_packed(
    topology: Topology, available: CPUSet, count: int, *, spread: bool = False, prefer_uncore: bool = False
) -> CPUSet:
    """``count`` CPUs from ``available``, packed: whole NUMA nodes/sockets, (uncore caches,) cores, then threads.

    Raises:
        AllocationError: too few CPUs (the kubelet's "not enough cpus available
            to satisfy request: requested=N, available=M").
        ValueError: ``count`` is negative.
    """
    check_count(count)
    mask = take_packed_mask(domains_of(topology), available.mask, len(available), count, spread, prefer_uncore)
    return CPUSet.from_mask(mask)
