"""The per-topology bitmask index the CPU accumulator works on, built once per :class:`Topology`.

:class:`Domains` is the kubelet's ``CPUDetails`` turned into int bitmasks over
the online CPUs: each NUMA node, socket, core and uncore cache as a mask, and
per parent domain its children with the masks of CPUs in both, so "children of
X within the free CPUs, by free CPUs" is two ANDs and a popcount per child.
:func:`domains_of` memoises the tables per topology object, which is what makes
one take on a 256-CPU machine cost tens of microseconds; :func:`bits_of` lists
the CPU ids of a mask.

It is separate from :mod:`agent.alloc.cpumanager.assignment.accumulator` because building and
caching the index is a job of its own; the packed accumulator and the
NUMA-distributed take (:mod:`agent.alloc.cpumanager.assignment.distribute`) both read it. Nothing
here does I/O or reads the clock.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from dataclasses import dataclass

from agent.topology import Topology

#: Public to the takers of this package (accumulator, distribute); the package does not export them.
__all__ = ["ID_BITS", "ID_MASK", "Children", "Domains", "bits_of", "domains_of", "memoised_ids"]

#: ``((child id, CPUs in both parent and child, all CPUs of the child), ...)`` as masks, ascending id.
Children = tuple[tuple[int, int, int], ...]

#: Sort keys are ``available_cpus << ID_BITS | id``: one int sorts like the pair (count, id).
ID_BITS = 32
ID_MASK = (1 << ID_BITS) - 1


@dataclass(frozen=True, slots=True)
class Domains:
    """One topology as bitmasks over its online CPUs (the kubelet's ``CPUDetails``), built once.

    ``numa``/``socket``/``core``/``uncore`` map a domain id to the mask of its
    CPUs. The ``*_in_*`` tables list, per parent domain, each child domain with
    the mask of CPUs in both and the child's own mask, so "children of X
    within the free CPUs, by free CPUs" is two ANDs and a popcount per child.
    ``smallest_*`` is the CPU count of the level's smallest domain.
    """

    online: int
    numa_first: bool
    cpus_per_core: int
    cpus_per_socket: int
    cpus_per_uncore: int
    num_cpus: int
    num_numa_nodes: int
    all_numas: Children
    all_sockets: Children
    numa: dict[int, int]
    socket: dict[int, int]
    core: dict[int, int]
    uncore: dict[int, int]
    sockets_in_numa: dict[int, Children]
    numas_in_socket: dict[int, Children]
    cores_in_socket: dict[int, Children]
    cores_in_numa: dict[int, Children]
    uncores_in_numa: dict[int, Children]
    cores_in_uncore: dict[int, Children]
    smallest_numa: int
    smallest_socket: int
    smallest_core: int
    smallest_uncore: int

    @classmethod
    def of(cls, topology: Topology) -> Domains:
        """Build the tables of one topology (online CPUs only)."""
        rows = [
            (cpu.id, int(cpu.numa or 0), int(cpu.socket or 0), int(cpu.core or 0), cpu.uncore)
            for cpu in topology.cpus
            if cpu.online
        ]
        for row in rows:
            if max(row[1:]) > ID_MASK:
                raise ValueError(f"CPU {row[0]}: domain id {max(row[1:])} exceeds {ID_MASK}, the sort-key limit")

        def group(col: int) -> dict[int, int]:
            masks: dict[int, int] = {}
            for row in rows:
                masks[row[col]] = masks.get(row[col], 0) | (1 << row[0])
            return dict(sorted(masks.items()))

        def nest(parent: int, child: int) -> dict[int, Children]:
            pairs: dict[int, dict[int, int]] = {}
            for row in rows:
                kids = pairs.setdefault(row[parent], {})
                kids[row[child]] = kids.get(row[child], 0) | (1 << row[0])
            full = group(child)
            return {p: tuple((k, m, full[k]) for k, m in sorted(kids.items())) for p, kids in pairs.items()}

        def whole(masks: dict[int, int]) -> Children:
            return tuple((k, m, m) for k, m in masks.items())

        def smallest(masks: dict[int, int]) -> int:
            return min((mask.bit_count() for mask in masks.values()), default=0)

        numa, socket, core, uncore = group(1), group(2), group(3), group(4)
        counters = topology.counters
        return cls(
            online=topology.online_cpus.mask,
            numa_first=counters.num_sockets >= counters.num_numa_nodes,
            cpus_per_core=topology.cpus_per_core(),
            cpus_per_socket=topology.cpus_per_socket(),
            cpus_per_uncore=topology.cpus_per_uncore(),
            num_cpus=len(rows),
            num_numa_nodes=len(numa),
            all_numas=whole(numa),
            all_sockets=whole(socket),
            numa=numa,
            socket=socket,
            core=core,
            uncore=uncore,
            sockets_in_numa=nest(1, 2),
            numas_in_socket=nest(2, 1),
            cores_in_socket=nest(2, 3),
            cores_in_numa=nest(1, 3),
            uncores_in_numa=nest(1, 4),
            cores_in_uncore=nest(4, 3),
            smallest_numa=smallest(numa),
            smallest_socket=smallest(socket),
            smallest_core=smallest(core),
            smallest_uncore=smallest(uncore),
        )


_CACHE: dict[int, tuple[weakref.ref[Topology], Domains]] = {}


def domains_of(topology: Topology) -> Domains:
    """The tables of ``topology``, memoised by identity for as long as the topology lives.

    Hashing a ``Topology`` walks every CPU, which would cost more than the take
    itself; the planner keeps one topology object, so identity is the right key.
    """
    key = id(topology)
    hit = _CACHE.get(key)
    if hit is not None and hit[0]() is topology:
        return hit[1]
    built = Domains.of(topology)
    _CACHE[key] = (weakref.ref(topology, lambda _ref: _CACHE.pop(key, None)), built)
    return built


def memoised_ids() -> frozenset[int]:
    """The ``id()`` of every topology whose tables are held (a dropped topology leaves this set)."""
    return frozenset(_CACHE)


def bits_of(mask: int) -> Iterator[int]:
    """CPU ids of a mask, ascending."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low
