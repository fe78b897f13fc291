"""The machine as podpin sees it: CPUs, NUMA nodes and devices (pure values).

``Topology`` is built from plain values (by ``topology.sysfs`` from a sysfs
tree, by ``topology.codec`` from the JSON of ``podpin topology``, or by tests)
and never does I/O. Besides the raw facts it offers the lookups the kubelet's
``CPUDetails`` offers (``cpus_in_numa``, ``cores_in_socket`` ...), computed once
over the *online* CPUs, because that is the set the CPU manager allocates from.

Ids follow the kubelet:

* ``CPU.core`` is unique across the machine: the lowest CPU id among the core's
  threads (sysfs ``core_id`` restarts on every socket and can have gaps).
* ``CPU.uncore`` is the L3 cache id, or the socket id when the CPU has no L3
  (``getUncoreCacheID`` falls back to socket alignment).
* The counters (``num_cpus`` ... ``num_uncore_caches``) are derived from the
  online CPUs unless ``declared`` overrides them; the kubelet's unit-test
  fixtures declare counters that disagree with their CPU lists, and the
  kubelet's arithmetic (``CPUsPerCore = NumCPUs / NumCores``) uses them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType

from agent.cpuset import CPUSet

__all__ = ["CPU", "NUMANode", "Device", "Counters", "Topology", "TopologyError"]


class TopologyError(ValueError):
    """A topology whose facts contradict each other; the message names the CPU or node."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CPU:
    """One logical CPU. An offline CPU has ``online=False`` and no placement ids."""

    id: int
    online: bool = True
    isolated: bool = False
    core: int | None = None
    socket: int | None = None
    die: int | None = None
    cluster: int | None = None
    numa: int | None = None
    l3: int | None = None

    @property
    def uncore(self) -> int:
        """The kubelet's uncore cache id: L3 id, else the socket id."""
        if self.l3 is not None:
            return self.l3
        return self.socket if self.socket is not None else 0


@dataclass(frozen=True, slots=True, kw_only=True)
class NUMANode:
    """A NUMA node: its online CPUs, memory and hugepages, and SLIT distances.

    ``hugepages`` maps the page size in KiB (as sysfs names it, ``2048`` for
    ``hugepages-2048kB``) to the number of pages configured on the node.
    ``distances`` maps a node id to the distance from this node.
    """

    id: int
    cpus: CPUSet = field(default_factory=CPUSet)
    memory_bytes: int = 0
    hugepages: Mapping[int, int] = field(default_factory=lambda: MappingProxyType({}))
    distances: Mapping[int, int] = field(default_factory=lambda: MappingProxyType({}))

    def hugepages_bytes(self, page_kib: int) -> int:
        """Bytes of hugepages of one size on this node."""
        return self.hugepages.get(page_kib, 0) * page_kib * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class Device:
    """A PCI device and the NUMA node it is attached to (None when the firmware says -1)."""

    address: str
    pci_class: str
    numa: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Counters:
    """The kubelet ``CPUTopology`` counters (``NumCPUs``, ``NumSockets`` ...)."""

    num_cpus: int
    num_sockets: int
    num_cores: int
    num_numa_nodes: int
    num_uncore_caches: int


def _ids(values: object) -> tuple[int, ...]:
    return tuple(sorted(set(values)))  # type: ignore[call-overload]


@dataclass(frozen=True, kw_only=True)
class Topology:
    """CPUs (every possible one, ascending id), NUMA nodes (ascending id) and PCI devices."""

    cpus: tuple[CPU, ...]
    numa_nodes: tuple[NUMANode, ...] = ()
    devices: tuple[Device, ...] = ()
    declared: Counters | None = None

    def __post_init__(self) -> None:
        ids = [cpu.id for cpu in self.cpus]
        if ids != sorted(set(ids)):
            raise TopologyError(f"CPU ids must be unique and ascending, got {ids[:16]}...")
        node_ids = [node.id for node in self.numa_nodes]
        if node_ids != sorted(set(node_ids)):
            raise TopologyError(f"NUMA node ids must be unique and ascending, got {node_ids}")
        for cpu in self.cpus:
            if cpu.online and (cpu.core is None or cpu.socket is None or cpu.numa is None):
                raise TopologyError(f"online CPU {cpu.id} lacks a core, socket or NUMA node id")
        known = set(node_ids)
        for cpu in self.cpus:
            if cpu.online and known and cpu.numa not in known:
                raise TopologyError(f"CPU {cpu.id} is on NUMA node {cpu.numa}, which the topology does not list")

    # -- raw CPU facts ------------------------------------------------------------------
    @cached_property
    def _by_id(self) -> Mapping[int, CPU]:
        return MappingProxyType({cpu.id: cpu for cpu in self.cpus})

    def cpu(self, cpu_id: int) -> CPU:
        """The CPU with this id (``KeyError`` if the machine has none)."""
        return self._by_id[cpu_id]

    @cached_property
    def online_cpus(self) -> CPUSet:
        """Online CPUs: the set the CPU manager works with."""
        return CPUSet(cpu.id for cpu in self.cpus if cpu.online)

    @cached_property
    def offline_cpus(self) -> CPUSet:
        return CPUSet(cpu.id for cpu in self.cpus if not cpu.online)

    @cached_property
    def isolated_cpus(self) -> CPUSet:
        return CPUSet(cpu.id for cpu in self.cpus if cpu.isolated)

    @cached_property
    def _online(self) -> tuple[CPU, ...]:
        return tuple(cpu for cpu in self.cpus if cpu.online)

    # -- kubelet CPUDetails-style lookups (online CPUs only) ----------------------------
    @cached_property
    def numa_ids(self) -> tuple[int, ...]:
        """NUMA nodes that have online CPUs (``CPUDetails.NUMANodes()``), ascending."""
        return _ids(cpu.numa for cpu in self._online)

    @cached_property
    def socket_ids(self) -> tuple[int, ...]:
        return _ids(cpu.socket for cpu in self._online)

    @cached_property
    def core_ids(self) -> tuple[int, ...]:
        return _ids(cpu.core for cpu in self._online)

    @cached_property
    def uncore_ids(self) -> tuple[int, ...]:
        return _ids(cpu.uncore for cpu in self._online)

    @cached_property
    def memory_numa_ids(self) -> tuple[int, ...]:
        """Every NUMA node of the machine (with CPUs or memory-only), ascending.

        Topology hints and memory accounting range over these. A topology built
        without NUMA node records (kubelet test fixtures) uses the CPUs' nodes.
        """
        if self.numa_nodes:
            return tuple(node.id for node in self.numa_nodes)
        return self.numa_ids

    def _group(self, key: str) -> Mapping[int, CPUSet]:
        masks: dict[int, int] = {}
        for cpu in self._online:
            value = getattr(cpu, key)
            masks[value] = masks.get(value, 0) | (1 << cpu.id)
        return MappingProxyType({k: CPUSet.from_mask(v) for k, v in masks.items()})

    @cached_property
    def _cpus_by_numa(self) -> Mapping[int, CPUSet]:
        return self._group("numa")

    @cached_property
    def _cpus_by_socket(self) -> Mapping[int, CPUSet]:
        return self._group("socket")

    @cached_property
    def _cpus_by_core(self) -> Mapping[int, CPUSet]:
        return self._group("core")

    @cached_property
    def _cpus_by_uncore(self) -> Mapping[int, CPUSet]:
        return self._group("uncore")

    @staticmethod
    def _union(groups: Mapping[int, CPUSet], ids: tuple[int, ...]) -> CPUSet:
        mask = 0
        for i in ids:
            found = groups.get(i)
            if found is not None:
                mask |= found.mask
        return CPUSet.from_mask(mask)

    def cpus_in_numa(self, *ids: int) -> CPUSet:
        """Online CPUs of these NUMA nodes."""
        return self._union(self._cpus_by_numa, ids)

    def cpus_in_sockets(self, *ids: int) -> CPUSet:
        return self._union(self._cpus_by_socket, ids)

    def cpus_in_cores(self, *ids: int) -> CPUSet:
        """Online CPUs whose (machine-unique) core id is one of these."""
        return self._union(self._cpus_by_core, ids)

    def cpus_in_uncore(self, *ids: int) -> CPUSet:
        return self._union(self._cpus_by_uncore, ids)

    def _ids_of(self, key: str, cpus: CPUSet) -> tuple[int, ...]:
        return _ids(getattr(self._by_id[c], key) for c in cpus if c in self._by_id and self._by_id[c].online)

    def numa_of(self, cpus: CPUSet) -> tuple[int, ...]:
        """NUMA nodes holding any of these CPUs, ascending."""
        return self._ids_of("numa", cpus)

    def sockets_of(self, cpus: CPUSet) -> tuple[int, ...]:
        return self._ids_of("socket", cpus)

    def cores_of(self, cpus: CPUSet) -> tuple[int, ...]:
        return self._ids_of("core", cpus)

    def uncores_of(self, cpus: CPUSet) -> tuple[int, ...]:
        return self._ids_of("uncore", cpus)

    def sockets_in_numa(self, *ids: int) -> tuple[int, ...]:
        return self.sockets_of(self.cpus_in_numa(*ids))

    def numa_in_sockets(self, *ids: int) -> tuple[int, ...]:
        return self.numa_of(self.cpus_in_sockets(*ids))

    def core_siblings(self, cpus: CPUSet) -> CPUSet:
        """Every online thread of every core that holds one of these CPUs."""
        return self.cpus_in_cores(*self.cores_of(cpus))

    # -- counters -----------------------------------------------------------------------
    @cached_property
    def counters(self) -> Counters:
        """Declared counters if given, else derived from the online CPUs as the kubelet does."""
        if self.declared is not None:
            return self.declared
        return Counters(
            num_cpus=len(self._online),
            num_sockets=len(self.socket_ids),
            num_cores=len(self.core_ids),
            num_numa_nodes=len(self.numa_ids),
            num_uncore_caches=len(self.uncore_ids),
        )

    def cpus_per_core(self) -> int:
        """``CPUsPerCore()``: NumCPUs / NumCores (integer division, 0 when no cores)."""
        c = self.counters
        return c.num_cpus // c.num_cores if c.num_cores else 0

    def cpus_per_socket(self) -> int:
        c = self.counters
        return c.num_cpus // c.num_sockets if c.num_sockets else 0

    def cpus_per_numa(self) -> int:
        c = self.counters
        return c.num_cpus // c.num_numa_nodes if c.num_numa_nodes else 0

    def cpus_per_uncore(self) -> int:
        c = self.counters
        return c.num_cpus // c.num_uncore_caches if c.num_uncore_caches else 0

    # -- NUMA nodes ---------------------------------------------------------------------
    @cached_property
    def _nodes(self) -> Mapping[int, NUMANode]:
        return MappingProxyType({node.id: node for node in self.numa_nodes})

    def numa_node(self, node_id: int) -> NUMANode:
        """The NUMA node record (``KeyError`` if unknown)."""
        return self._nodes[node_id]

    def distance(self, a: int, b: int) -> int:
        """SLIT distance from node ``a`` to ``b`` (10 on the diagonal, 20 when unknown)."""
        node = self._nodes.get(a)
        if node is not None and b in node.distances:
            return node.distances[b]
        return 10 if a == b else 20

    def has_distances(self) -> bool:
        """True when every node lists a distance to every node (needed by prefer-closest-numa-nodes)."""
        ids = set(self.memory_numa_ids)
        return bool(self.numa_nodes) and all(ids <= set(node.distances) for node in self.numa_nodes)
