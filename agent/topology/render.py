"""The human-readable summary of a :class:`Topology` (``podpin topology --output text``).

An operator reads it to check what podpin believes before trusting it with
pods: which CPUs share a socket, a NUMA node, an L3 cache and a core, what is
offline or isolated, how much memory and how many hugepages each node has, how
far the nodes are from each other and where the devices sit. The machine-
readable form is :func:`agent.topology.codec.topology_to_dict`; this module
only formats and never reads files.
"""

from __future__ import annotations

from agent.cpuset import CPUSet
from agent.quantity import count_of
from agent.topology.codec import device_sort_key
from agent.topology.model import Device, NUMANode, Topology

__all__ = ["format_bytes", "render_text"]

_UNITS = (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def format_bytes(amount: int) -> str:
    """``137438953472`` -> ``"128 GiB"``; one decimal when not a whole number of the unit."""
    for unit, size in _UNITS:
        if amount >= size:
            whole, rest = divmod(amount, size)
            return f"{whole} {unit}" if rest == 0 else f"{amount / size:.1f} {unit}"
    return f"{amount} B"


def _cpulist(cpus: CPUSet) -> str:
    return str(cpus) if cpus else "none"


def _hugepages(node: NUMANode) -> str:
    sizes = [f"{count} x {format_bytes(kib * 1024)}" for kib, count in sorted(node.hugepages.items()) if count]
    return ", ".join(sizes) if sizes else "none"


def _memory_line(node: NUMANode) -> str:
    return f"memory {format_bytes(node.memory_bytes)}, hugepages {_hugepages(node)}"


def _summary(topology: Topology) -> list[str]:
    node_count = len(topology.memory_numa_ids)
    return [
        "machine: "
        + ", ".join(
            [
                count_of(len(topology.socket_ids), "socket"),
                count_of(node_count, "NUMA node"),
                count_of(len(topology.core_ids), "core"),
                f"{len(topology.online_cpus)} of {count_of(len(topology.cpus), 'CPU')} online",
            ]
        ),
        f"offline CPUs: {_cpulist(topology.offline_cpus)}",
        f"isolated CPUs: {_cpulist(topology.isolated_cpus)}",
    ]


def _cores(topology: Topology, cpus: CPUSet, indent: str) -> list[str]:
    """One line per core of ``cpus``, grouped under their L3 cache when sysfs names one."""
    lines: list[str] = []
    for uncore in topology.uncores_of(cpus):
        in_cache = cpus & topology.cpus_in_uncore(uncore)
        inner = indent
        if topology.cpu(in_cache.min()).l3 is not None:
            lines.append(f"{indent}L3 cache {uncore}: CPUs {in_cache}")
            inner = indent + "  "
        for core in topology.cores_of(in_cache):
            threads = topology.cpus_in_cores(core) & in_cache
            isolated = threads & topology.isolated_cpus
            marker = f" (isolated {isolated})" if isolated else ""
            lines.append(f"{inner}core {core}: CPUs {threads}{marker}")
    return lines


def _sockets(topology: Topology) -> list[str]:
    lines: list[str] = []
    for socket in topology.socket_ids:
        in_socket = topology.cpus_in_sockets(socket)
        lines.append(f"socket {socket}: CPUs {in_socket}")
        for numa in topology.numa_of(in_socket):
            cpus = in_socket & topology.cpus_in_numa(numa)
            lines.append(f"  NUMA node {numa}: CPUs {cpus}")
            if numa in topology.memory_numa_ids and topology.numa_nodes:
                lines.append(f"    {_memory_line(topology.numa_node(numa))}")
            lines.extend(_cores(topology, cpus, "    "))
    return lines


def _memory_only(topology: Topology) -> list[str]:
    nodes = [node for node in topology.numa_nodes if not node.cpus]
    if not nodes:
        return []
    return ["memory-only NUMA nodes:"] + [f"  NUMA node {node.id}: {_memory_line(node)}" for node in nodes]


def _distances(topology: Topology) -> list[str]:
    if not topology.numa_nodes:
        return ["NUMA distances: unknown (no NUMA node directory)"]
    ids = [node.id for node in topology.numa_nodes]
    width = max(4, *(len(str(topology.distance(a, b))) + 1 for a in ids for b in ids), *(len(str(i)) + 1 for i in ids))
    header = "node".rjust(width) + "".join(str(i).rjust(width) for i in ids)
    rows = [str(a).rjust(width) + "".join(str(topology.distance(a, b)).rjust(width) for b in ids) for a in ids]
    return ["NUMA distances:", "  " + header] + ["  " + row for row in rows]


def _devices(devices: tuple[Device, ...]) -> list[str]:
    if not devices:
        return ["PCI devices: none"]
    lines = ["PCI devices:"]
    for device in sorted(devices, key=device_sort_key):
        where = f"NUMA node {device.numa}" if device.numa is not None else "no NUMA node"
        lines.append(f"  {where}: {device.address} class {device.pci_class}")
    return lines


def render_text(topology: Topology) -> str:
    """The summary: totals, then socket -> NUMA node -> L3 -> core, memory, distances, devices.

    Returns:
        Lines joined by newlines, ending with a newline.
    """
    sections = [
        _summary(topology),
        _sockets(topology),
        _memory_only(topology),
        _distances(topology),
        _devices(topology.devices),
    ]
    return "\n\n".join("\n".join(section) for section in sections if section) + "\n"
