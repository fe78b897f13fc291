"""Synthetic :class:`Topology` values for planner tests, built in one call.

CPUs are enumerated the Intel way (every core's first thread, then every core's
second thread), so with 2 sockets x 8 cores x 2 threads CPU 0 and CPU 16 are
siblings, like the bundled ``deploy/examples/topology-2s.json``.
"""

from __future__ import annotations

from types import MappingProxyType

from agent.cpuset import CPUSet
from agent.topology.model import CPU, NUMANode, Topology

__all__ = ["machine", "GIB"]

GIB = 2**30


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
    """A machine of identical NUMA nodes.

    Args:
        sockets, numa_per_socket, cores_per_numa, threads: the shape.
        memory_gib: MemTotal per NUMA node.
        hugepages_2m, hugepages_1g: pages configured per NUMA node.
        distances: (same socket, other socket) SLIT distances between different nodes.
    """
    nodes = sockets * numa_per_socket
    cores = nodes * cores_per_numa
    cpus: list[CPU] = []
    by_node: dict[int, list[int]] = {n: [] for n in range(nodes)}
    for thread in range(threads):
        for core in range(cores):
            cpu_id = thread * cores + core
            node = core // cores_per_numa
            socket = node // numa_per_socket
            cpus.append(CPU(id=cpu_id, core=core, socket=socket, die=socket, numa=node, l3=socket))
            by_node[node].append(cpu_id)
    pages = {}
    if hugepages_2m:
        pages[2048] = hugepages_2m
    if hugepages_1g:
        pages[1048576] = hugepages_1g
    numa_nodes = tuple(
        NUMANode(
            id=n,
            cpus=CPUSet(by_node[n]),
            memory_bytes=memory_gib * GIB,
            hugepages=MappingProxyType(dict(pages)),
            distances=MappingProxyType(
                {
                    m: 10 if m == n else (distances[0] if m // numa_per_socket == n // numa_per_socket else distances[1])
                    for m in range(nodes)
                }
            ),
        )
        for n in range(nodes)
    )
    return Topology(cpus=tuple(sorted(cpus, key=lambda c: c.id)), numa_nodes=numa_nodes)
