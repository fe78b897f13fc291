"""Read the machine's topology from a sysfs tree (``/sys`` or a fixture copy of it).

The *observe* side of the topology. The root is a required argument (no
module-level default), so tests and ``podpin topology --sysfs-root DIR`` read
fixture trees exactly as the agent reads ``/sys``. Shaped like nri-plugins'
``pkg/sysfs``: typed read helpers whose errors start with the file's path, an
explicit list of required and optional files, and a consistency check.

Files read, relative to the root (R = required, O = optional, F = fallback):

``devices/system/cpu/``
    ``possible`` (R; F: ``present`` when ``possible`` is missing) - every CPU
    the topology lists; ``online`` (R); ``offline`` (O; a CPU listed there must
    not be online); ``isolated`` (O; missing means none).

``devices/system/cpu/cpuN/`` for every *online* CPU N (offline CPUs are listed
with ``online: false`` and no ids, and nothing of theirs is read)
    ``topology/physical_package_id`` (R), ``topology/core_id`` (R),
    ``topology/die_id`` (O, null), ``topology/cluster_id`` (O, null);
    ``topology/core_cpus_list`` (O; F: ``topology/thread_siblings_list``; with
    neither the CPU is a core of its own); the ``nodeM`` entry naming the CPU's
    NUMA node (O; F: the ``node/nodeM/cpulist`` that lists the CPU; F: node 0
    when the machine has no ``devices/system/node`` directory);
    ``cache/index*/level`` (R in every index directory present) and, for the
    level-3 entry, ``id`` (O; F: the lowest CPU of ``shared_cpu_list``, then R).
    No level-3 entry, or no ``cache`` directory, means ``l3`` is null.

``devices/system/node/nodeN/`` for every node directory (ids may be sparse)
    ``cpulist`` (R; may be empty for a memory-only node), ``meminfo`` (R; its
    ``MemTotal`` line), ``distance`` (R; one value per node directory, in
    ascending node id order), ``hugepages/hugepages-<size>kB/nr_hugepages`` (R
    for every size directory present; no ``hugepages`` directory means none).

``bus/pci/devices/*``: see :mod:`agent.topology.devices`.

``core`` is the lowest online CPU among the core's threads (as the kubelet;
``core_id`` restarts on every socket); a node's ``cpus`` are its online CPUs.
Without a node directory (``CONFIG_NUMA=n``) every CPU is on node 0 and no node
records are listed: sysfs then says nothing about memory or distances.

After reading, the facts are checked and the first offending CPU is named:
every online CPU is in exactly one NUMA node and one core, sibling lists are
symmetric and identical within a core, threads of a core share their package
and ``core_id``, and each node's ``cpulist`` agrees with the per-CPU links.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType

from agent.cpuset import CPUSet
from agent.topology.devices import read_devices
from agent.topology.model import CPU, NUMANode, Topology
from agent.topology.sysfs_files import (
    SysfsError,
    exists,
    list_dir,
    os_reason,
    read_cpulist,
    read_int,
    read_optional_int,
    read_str,
)

__all__ = ["SysfsError", "read_topology"]

_NODE_DIR = re.compile(r"^node([0-9]+)$")
_INDEX_DIR = re.compile(r"^index([0-9]+)$")
_HUGEPAGES_DIR = re.compile(r"^hugepages-([0-9]+)kB$")
_MEMTOTAL = re.compile(r"\bMemTotal:\s*([0-9]+)\s*kB\b")


def _numbered(path: Path, pattern: re.Pattern[str]) -> list[tuple[int, Path]]:
    """``(n, path/entry)`` for the directory entries matching ``pattern``, ascending n."""
    found = []
    for name in list_dir(path):
        match = pattern.match(name)
        if match:
            found.append((int(match.group(1)), path / name))
    return sorted(found)


def _check_root(root: Path) -> None:
    try:
        is_dir = root.is_dir()
        if is_dir:
            os.listdir(root)
    except OSError as err:
        raise SysfsError(root, os_reason(err)) from err
    if not is_dir:
        raise SysfsError(root, "not a directory" if root.exists() else "no such directory")


# -- CPUs -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class _RawCPU:
    """What sysfs says about one online CPU, before the cross-CPU checks."""

    id: int
    socket: int
    core_id: int
    die: int | None
    cluster: int | None
    siblings: CPUSet
    siblings_path: Path | None
    node_links: tuple[int, ...]
    l3: int | None


def _read_possible(cpu_dir: Path) -> CPUSet:
    for name in ("possible", "present"):
        if exists(cpu_dir / name):
            return read_cpulist(cpu_dir / name)
    raise SysfsError(cpu_dir / "possible", "no such file (nor a 'present' file beside it)")


def _read_l3(cpu_path: Path) -> int | None:
    """The L3 cache id of a CPU: ``id``, else the lowest CPU sharing it, else None."""
    for _, index in _numbered(cpu_path / "cache", _INDEX_DIR):
        if read_int(index / "level") != 3:
            continue
        cache_id = read_optional_int(index / "id")
        if cache_id is not None:
            return cache_id
        shared = read_cpulist(index / "shared_cpu_list")
        if not shared:
            raise SysfsError(index / "shared_cpu_list", "is empty; expected the CPUs sharing this L3 cache")
        return shared.min()
    return None


def _read_cpu(cpu_dir: Path, cpu_id: int) -> _RawCPU:
    path = cpu_dir / f"cpu{cpu_id}"
    topo = path / "topology"
    siblings_path: Path | None = None
    for name in ("core_cpus_list", "thread_siblings_list"):
        if exists(topo / name):
            siblings_path = topo / name
            break
    siblings = read_cpulist(siblings_path) if siblings_path is not None else CPUSet([cpu_id])
    return _RawCPU(
        id=cpu_id,
        socket=read_int(topo / "physical_package_id"),
        core_id=read_int(topo / "core_id"),
        die=read_optional_int(topo / "die_id"),
        cluster=read_optional_int(topo / "cluster_id"),
        siblings=siblings,
        siblings_path=siblings_path,
        node_links=tuple(n for n, _ in _numbered(path, _NODE_DIR)),
        l3=_read_l3(path),
    )


def _check_cores(cpu_dir: Path, raw: Mapping[int, _RawCPU], online: CPUSet) -> dict[int, int]:
    """Check the sibling lists and return the machine-unique core id of every online CPU."""

    def where(cpu: _RawCPU) -> Path:
        return cpu.siblings_path or cpu_dir / f"cpu{cpu.id}" / "topology"

    cores: dict[int, int] = {}
    for cpu in raw.values():
        threads = cpu.siblings & online
        if cpu.id not in threads:
            raise SysfsError(where(cpu), f"does not list CPU {cpu.id} itself")
        for other_id in threads:
            other = raw[other_id]
            if cpu.id not in other.siblings:
                reason = f"lists CPU {other_id} as a thread of CPU {cpu.id}'s core, but {where(other)} does not"
                raise SysfsError(where(cpu), f"{reason} list CPU {cpu.id}")
            if other.siblings & online != threads:
                raise SysfsError(
                    where(cpu),
                    f"CPU {cpu.id} and CPU {other_id} are threads of one core but list different threads "
                    f"({threads} and {other.siblings & online})",
                )
            if (other.socket, other.core_id) != (cpu.socket, cpu.core_id):
                raise SysfsError(
                    cpu_dir / f"cpu{other_id}" / "topology",
                    f"CPU {other_id} is a thread of CPU {cpu.id}'s core but has physical_package_id {other.socket} "
                    f"and core_id {other.core_id}, not {cpu.socket} and {cpu.core_id}",
                )
        cores[cpu.id] = threads.min()
    return cores


# -- NUMA nodes -------------------------------------------------------------------------
def _read_memtotal(path: Path) -> int:
    text = read_str(path)
    match = _MEMTOTAL.search(text)
    if match is None:
        raise SysfsError(path, "has no 'MemTotal: <n> kB' line")
    return int(match.group(1)) * 1024


def _read_hugepages(node_path: Path) -> Mapping[int, int]:
    pages = {size: read_int(d / "nr_hugepages") for size, d in _numbered(node_path / "hugepages", _HUGEPAGES_DIR)}
    return MappingProxyType(pages)


def _read_distances(path: Path, node_count: int) -> tuple[int, ...]:
    text = read_str(path)
    try:
        values = tuple(int(v) for v in text.split())
    except ValueError as err:
        raise SysfsError(path, f"not a list of integers: {text!r}") from err
    if len(values) != node_count:
        raise SysfsError(path, f"has {len(values)} distances for {node_count} NUMA nodes")
    return values


def _read_nodes(node_dir: Path) -> list[NUMANode]:
    """Every node directory; ``cpus`` is still the raw ``cpulist`` here (narrowed to the checked CPUs later)."""
    found = _numbered(node_dir, _NODE_DIR)
    ids = [node_id for node_id, _ in found]
    return [
        NUMANode(
            id=node_id,
            cpus=read_cpulist(path / "cpulist"),
            memory_bytes=_read_memtotal(path / "meminfo"),
            hugepages=_read_hugepages(path),
            distances=MappingProxyType(dict(zip(ids, _read_distances(path / "distance", len(ids)), strict=True))),
        )
        for node_id, path in found
    ]


def _assign_numa(
    cpu_dir: Path, node_dir: Path, raw: Mapping[int, _RawCPU], nodes: list[NUMANode], online: CPUSet
) -> dict[int, int]:
    """The NUMA node of every online CPU, checked against the nodes' cpulists."""
    if not exists(node_dir):
        return dict.fromkeys(raw, 0)
    known = {node.id for node in nodes}
    listed_in: dict[int, list[int]] = {}
    for node in nodes:
        for cpu_id in node.cpus & online:
            listed_in.setdefault(cpu_id, []).append(node.id)
    numa: dict[int, int] = {}
    for cpu in raw.values():
        path = cpu_dir / f"cpu{cpu.id}"
        if len(cpu.node_links) > 1:
            names = " and ".join(f"node{n}" for n in cpu.node_links)
            raise SysfsError(path, f"links to NUMA nodes {names}; a CPU is in exactly one node")
        if cpu.node_links:
            node_id = cpu.node_links[0]
            if node_id not in known:
                missing = node_dir / f"node{node_id}"
                reason = f"links CPU {cpu.id} to NUMA node {node_id}, which has no {missing} directory"
                raise SysfsError(path / f"node{node_id}", reason)
            numa[cpu.id] = node_id
            continue
        lists = listed_in.get(cpu.id, [])
        if len(lists) != 1:
            names = " and ".join(f"node{n}/cpulist" for n in lists) or "no node cpulist"
            reason = f"has no nodeM link and CPU {cpu.id} is listed by {names}; a CPU is in exactly one node"
            raise SysfsError(path, reason)
        numa[cpu.id] = lists[0]
    for node in nodes:
        linked = CPUSet(cpu_id for cpu_id, node_id in numa.items() if node_id == node.id)
        listed = node.cpus & online
        if linked != listed:
            path = node_dir / f"node{node.id}" / "cpulist"
            wrong = (listed - linked).union(linked - listed).min()
            cpu_path = cpu_dir / f"cpu{wrong}"
            if wrong in listed:
                reason = f"lists CPU {wrong}, which is on NUMA node {numa[wrong]} ({cpu_path} links node{numa[wrong]})"
                raise SysfsError(path, reason)
            raise SysfsError(path, f"does not list CPU {wrong}, which {cpu_path} links to node{node.id}")
    return numa


# -- the reader -------------------------------------------------------------------------
def _read_cpus_and_nodes(root: Path) -> tuple[tuple[CPU, ...], tuple[NUMANode, ...]]:
    cpu_dir = root / "devices" / "system" / "cpu"
    node_dir = root / "devices" / "system" / "node"
    possible = _read_possible(cpu_dir)
    online = read_cpulist(cpu_dir / "online")
    offline = read_cpulist(cpu_dir / "offline") if exists(cpu_dir / "offline") else CPUSet()
    isolated = read_cpulist(cpu_dir / "isolated") if exists(cpu_dir / "isolated") else CPUSet()
    if not online.is_subset_of(possible):
        named = cpu_dir / "possible" if exists(cpu_dir / "possible") else cpu_dir / "present"
        raise SysfsError(cpu_dir / "online", f"lists CPU {(online - possible).min()}, which {named} does not")
    if not (online & offline).is_empty():
        both = (online & offline).min()
        raise SysfsError(cpu_dir / "offline", f"lists CPU {both}, which {cpu_dir / 'online'} lists too")

    raw = {cpu_id: _read_cpu(cpu_dir, cpu_id) for cpu_id in online}
    cores = _check_cores(cpu_dir, raw, online)
    nodes = _read_nodes(node_dir)
    numa = _assign_numa(cpu_dir, node_dir, raw, nodes, online)

    cpus = tuple(
        CPU(
            id=cpu_id,
            online=True,
            isolated=cpu_id in isolated,
            core=cores[cpu_id],
            socket=raw[cpu_id].socket,
            die=raw[cpu_id].die,
            cluster=raw[cpu_id].cluster,
            numa=numa[cpu_id],
            l3=raw[cpu_id].l3,
        )
        if cpu_id in online
        else CPU(id=cpu_id, online=False, isolated=cpu_id in isolated)
        for cpu_id in possible
    )
    numa_nodes = tuple(
        replace(node, cpus=CPUSet(cpu_id for cpu_id, node_id in numa.items() if node_id == node.id)) for node in nodes
    )
    return cpus, numa_nodes


def read_topology(root: Path) -> Topology:
    """Read CPUs, NUMA nodes and PCI devices from the sysfs tree at ``root``.

    Args:
        root: the sysfs mount point: ``Path("/sys")`` on a machine, a fixture
            directory in tests.

    Returns:
        The machine's topology; devices come from :func:`agent.topology.devices.read_devices`.

    Raises:
        SysfsError: ``root`` is missing or unreadable, a required file is
            missing or malformed, or the files contradict each other; the
            message starts with the path of the file to look at.
    """
    _check_root(root)
    cpus, numa_nodes = _read_cpus_and_nodes(root)
    return Topology(cpus=cpus, numa_nodes=numa_nodes, devices=read_devices(root))
