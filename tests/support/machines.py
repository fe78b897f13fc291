"""Synthetic :class:`Topology` values for planner tests, built in one call.

A thin wrapper over :func:`agent.sim.machines.synthetic_machine` (the product's
own synthetic machines) with test-friendly defaults: 2 sockets x 8 cores x 2
threads, Intel enumeration, so CPU 0 and CPU 16 are siblings as on the bundled
``deploy/examples/topology-2s.json``.
"""

from __future__ import annotations

from agent.sim.machines import GIB, synthetic_machine
from agent.topology.model import Topology

__all__ = ["machine", "GIB"]


def machine(
    *,
    sockets: int = 2,
    numa_per_socket: int = 1,
    cores_per_numa: int = 8,
    threads: int = 2,
    memory_gib: int = 64,
    hugepages_2m: int = 0,
    hugepages_1g: int = 0,
    distances: tuple[int, int] = (11, 21),
) -> Topology:
    """A machine of identical NUMA nodes (``hugepages_2m``/``hugepages_1g``: pages per node)."""
    pages = {size: count for size, count in ((2048, hugepages_2m), (1048576, hugepages_1g)) if count}
    return synthetic_machine(
        sockets=sockets,
        numa_per_socket=numa_per_socket,
        cores_per_numa=cores_per_numa,
        threads=threads,
        memory_gib_per_numa=memory_gib,
        distances=distances,
        hugepages=pages,
    )
