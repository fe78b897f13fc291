"""Synthetic machines for simulations and benchmarks, built from their shape alone.

A simulation replays pods onto *identical* nodes, so it needs one topology it
can trust to be the same on every machine that runs it: a preset that reads
``/sys`` would give different numbers on a laptop and on CI. The presets
therefore default to :func:`example_machine`, the same 2-socket, 32-CPU machine
as ``deploy/examples/topology-2s.json`` (a test keeps the two equal), and the
admission benchmark builds a 256-CPU, 8-NUMA-node machine with
:func:`synthetic_machine`.

CPUs are enumerated the Intel way, every core's first thread and then every
core's second thread, so on the example machine CPU 0 and CPU 16 are siblings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from agent.cpuset import CPUSet
from agent.topology import CPU, Device, NUMANode, Topology

__all__ = ["GIB", "example_machine", "synthetic_machine"]

GIB = 2**30
"""Bytes in one GiB."""

_EXAMPLE_NIC = Device(address="0000:17:00.0", pci_class="0x020000", numa=0)


def synthetic_machine(
    *,
    sockets: int,
    numa_per_socket: int,
    cores_per_numa: int,
    threads: int,
    memory_gib_per_numa: int = 64,
    distances: tuple[int, int] = (11, 21),
    devices: Sequence[Device] = (),
    hugepages: Mapping[int, int] | None = None,
) -> Topology:
    """A machine of identical NUMA nodes, one L3 cache per socket.

    Args:
        sockets, numa_per_socket, cores_per_numa, threads: the shape.
        memory_gib_per_numa: MemTotal of every NUMA node.
        distances: SLIT distance to another node on the same socket, and to a node on another socket.
        devices: PCI devices to list.
        hugepages: pages configured on every NUMA node, by page size in KiB.

    Raises:
        ValueError: a dimension is below one.
    """
    for name, value in (
        ("sockets", sockets),
        ("numa_per_socket", numa_per_socket),
        ("cores_per_numa", cores_per_numa),
        ("threads", threads),
    ):
        if value < 1:
            raise ValueError(f"synthetic_machine: {name} must be at least 1, got {value}")
    nodes = sockets * numa_per_socket
    cores = nodes * cores_per_numa
    cores_per_socket = cores_per_numa * numa_per_socket
    cpus: list[CPU] = []
    by_node: dict[int, list[int]] = {n: [] for n in range(nodes)}
    for thread in range(threads):
        for core in range(cores):
            cpu_id = thread * cores + core
            node = core // cores_per_numa
            socket = node // numa_per_socket
            cpus.append(
                CPU(
                    id=cpu_id,
                    core=core,
                    socket=socket,
                    die=socket,
                    cluster=core % cores_per_socket,
                    numa=node,
                    l3=socket,
                )
            )
            by_node[node].append(cpu_id)

    def distance(a: int, b: int) -> int:
        if a == b:
            return 10
        return distances[0] if a // numa_per_socket == b // numa_per_socket else distances[1]

    numa_nodes = tuple(
        NUMANode(
            id=n,
            cpus=CPUSet(by_node[n]),
            memory_bytes=memory_gib_per_numa * GIB,
            hugepages=MappingProxyType(dict(hugepages or {})),
            distances=MappingProxyType({m: distance(n, m) for m in range(nodes)}),
        )
        for n in range(nodes)
    )
    return Topology(cpus=tuple(sorted(cpus, key=lambda c: c.id)), numa_nodes=numa_nodes, devices=tuple(devices))


def example_machine() -> Topology:
    """The machine of ``deploy/examples/topology-2s.json``: 2 sockets x 8 cores x 2 threads, 64 GiB per node."""
    return synthetic_machine(sockets=2, numa_per_socket=1, cores_per_numa=8, threads=2, devices=(_EXAMPLE_NIC,))
