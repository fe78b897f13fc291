"""Write synthetic sysfs trees for tests, and say what podpin must read from them.

A test describes a machine as a :class:`FakeMachine` (usually through
:func:`make_machine`), writes it with :func:`write_sysfs` into a temp dir, and
compares what the code under test reads with :func:`expected_json`, which
derives the ``podpin topology`` JSON from the description rather than from the
files. File quirks of real kernels (no ``die_id``, no cache directory, no
``core_cpus_list``, no per-CPU node links ...) are flags of the machine, so
``dataclasses.replace(machine, write_die_id=False)`` gives the same machine as
an older or another architecture's kernel shows it.

The tree has the shape the kernel gives ``/sys`` (only the parts podpin
reads): ``devices/system/cpu`` with per-CPU ``topology/``, ``cache/index*/``
and ``nodeM`` links; ``devices/system/node/nodeN`` with ``cpuN`` links;
``bus/pci/devices/<address>`` as symlinks to ``devices/pci0000:XX/<address>``.
As on x86, an offline CPU has no ``topology`` or ``cache`` directory, and the
sibling, cache and node lists name online CPUs only.

Named machines (:data:`MACHINES`) are shared by the topology tests and by
anyone needing a realistic tree; ``python -m tests.support.sysfs_builder NAME DIR``
writes one (``deploy/examples/topology-2s.json`` is ``podpin topology
--output json`` of ``example-2s``).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agent.cpuset import CPUSet
from tests.support.paths import DATA

if TYPE_CHECKING:
    import pytest

__all__ = [
    "CAPTURED",
    "MACHINES",
    "FakeCPU",
    "FakeMachine",
    "FakeNode",
    "FakePCIDevice",
    "GiB",
    "expected_json",
    "make_machine",
    "scratch_dir",
    "unpack_captured",
    "write_sysfs",
]

GiB = 1 << 30

#: The captured machines shipped as ``tests/data/sysfs/<name>.tar.gz`` (each with an ``expected.json``).
FIXTURES = DATA / "sysfs"
CAPTURED = sorted(p.name.removesuffix(".tar.gz") for p in FIXTURES.glob("*.tar.gz"))

#: tmpfs: on this project's machines creating a tree's ~1000 small files there is ~50x faster than on /tmp.
_TMPFS = Path("/dev/shm")


@contextmanager
def scratch_dir(fallback: Path) -> Iterator[Path]:
    """A new empty directory on tmpfs, removed afterwards; ``fallback`` when the machine has no usable /dev/shm."""
    if not (_TMPFS.is_dir() and os.access(_TMPFS, os.W_OK | os.X_OK)):
        yield fallback
        return
    path = Path(tempfile.mkdtemp(prefix="podpin-sysfs-", dir=_TMPFS))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


_unpacked: dict[str, Path] = {}
_session = ExitStack()
atexit.register(_session.close)


def unpack_captured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Unpack every captured tarball once per pytest session (whichever test module asks first): name -> tree.

    The trees go to tmpfs when there is one (removed when the interpreter exits), else under the session's
    pytest base temp dir.
    """
    if not _unpacked:
        base = _session.enter_context(scratch_dir(tmp_path_factory.mktemp("sysfs-captured")))
        for name in CAPTURED:
            shutil.unpack_archive(FIXTURES / f"{name}.tar.gz", base, filter="data")
            _unpacked[name] = base / name
    return dict(_unpacked)


@dataclass(frozen=True, slots=True, kw_only=True)
class FakeCPU:
    """One present CPU as the hardware describes it (ids as sysfs shows them)."""

    id: int
    socket: int
    core_id: int
    numa: int
    die: int
    cluster: int
    l3: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class FakeNode:
    """A NUMA node: memory in bytes (a multiple of 1 KiB), hugepages {size KiB: count}, distances in node order."""

    id: int
    memory_bytes: int
    hugepages: Mapping[int, int] = field(default_factory=dict)
    distances: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class FakePCIDevice:
    """A PCI device; ``numa`` None is written as ``-1``."""

    address: str
    pci_class: str
    numa: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class FakeMachine:
    """A machine to write as a sysfs tree: present CPUs, nodes, devices and file quirks."""

    cpus: tuple[FakeCPU, ...]
    nodes: tuple[FakeNode, ...]
    devices: tuple[FakePCIDevice, ...] = ()
    possible: CPUSet | None = None  # None: the present CPUs
    offline: CPUSet = field(default_factory=CPUSet)
    isolated: CPUSet = field(default_factory=CPUSet)
    write_possible: bool = True
    write_offline_file: bool = True
    write_isolated_file: bool = True
    write_die_id: bool = True
    write_cluster_id: bool = True
    write_cache: bool = True
    write_l3_id: bool = True
    write_core_cpus_list: bool = True
    write_thread_siblings_list: bool = True
    write_cpu_node_links: bool = True
    write_node_dir: bool = True

    @property
    def present(self) -> CPUSet:
        return CPUSet(cpu.id for cpu in self.cpus)

    @property
    def online(self) -> CPUSet:
        return self.present - self.offline

    @property
    def all_possible(self) -> CPUSet:
        return self.possible if self.possible is not None else self.present


def make_machine(
    *,
    sockets: int = 1,
    cores_per_socket: int,
    threads_per_core: int = 2,
    numa_per_socket: int = 1,
    l3_per_socket: int | None = 1,
    cores_per_cluster: int = 1,
    core_id_stride: int = 1,
    enumeration: Literal["intel", "linear"] = "intel",
    node_ids: Sequence[int] | None = None,
    memory_only_nodes: int = 0,
    memory_per_node: int = 64 * GiB,
    hugepage_sizes: Sequence[int] = (2048, 1048576),
    hugepages: Mapping[int, Mapping[int, int]] | None = None,
    near: int = 12,
    far: int = 21,
    devices: Sequence[FakePCIDevice] = (),
) -> FakeMachine:
    """A regular machine: every socket alike, cores split evenly over its NUMA nodes and L3 caches.

    Args:
        enumeration: ``"intel"`` numbers all first threads of all sockets,
            then all second threads (x86, AMD too); ``"linear"`` numbers the
            threads of a core consecutively (POWER, some ARM).
        core_id_stride: sysfs ``core_id`` of a socket's k-th core is
            ``k * stride`` (Intel leaves gaps); ``cluster_id`` is
            ``(k // cores_per_cluster) * stride`` (Intel: the core id; ARM:
            the pair index).
        node_ids: the sysfs id of each node, CPU nodes first (socket by
            socket), then memory-only nodes; default ``0..n-1``.
        memory_only_nodes: nodes without CPUs, attached in turn to sockets
            0, 1, ... for their distances.
        hugepages: ``{node id: {size KiB: count}}``; sizes of
            ``hugepage_sizes`` not given are written as 0.
        near, far: distance between nodes of one socket / of two sockets.
    """
    cpu_nodes = sockets * numa_per_socket
    ids = list(node_ids) if node_ids is not None else list(range(cpu_nodes + memory_only_nodes))
    if len(ids) != cpu_nodes + memory_only_nodes:
        raise ValueError(f"node_ids has {len(ids)} ids for {cpu_nodes + memory_only_nodes} nodes")
    total_cores = sockets * cores_per_socket
    cpus: list[FakeCPU] = []
    for socket in range(sockets):
        for k in range(cores_per_socket):
            numa = ids[socket * numa_per_socket + k * numa_per_socket // cores_per_socket]
            l3 = None if l3_per_socket is None else socket * l3_per_socket + k * l3_per_socket // cores_per_socket
            for thread in range(threads_per_core):
                if enumeration == "intel":
                    cpu_id = thread * total_cores + socket * cores_per_socket + k
                else:
                    cpu_id = (socket * cores_per_socket + k) * threads_per_core + thread
                cpus.append(
                    FakeCPU(
                        id=cpu_id,
                        socket=socket,
                        core_id=k * core_id_stride,
                        numa=numa,
                        die=socket,
                        cluster=(k // cores_per_cluster) * core_id_stride,
                        l3=l3,
                    )
                )
    node_socket = {ids[i]: i // numa_per_socket for i in range(cpu_nodes)}
    node_socket.update({ids[cpu_nodes + j]: j % sockets for j in range(memory_only_nodes)})
    ordered = sorted(ids)

    def distance(a: int, b: int) -> int:
        return 10 if a == b else near if node_socket[a] == node_socket[b] else far

    given = hugepages or {}
    nodes = tuple(
        FakeNode(
            id=n,
            memory_bytes=memory_per_node,
            hugepages={size: given.get(n, {}).get(size, 0) for size in hugepage_sizes},
            distances=tuple(distance(n, m) for m in ordered),
        )
        for n in ordered
    )
    return FakeMachine(cpus=tuple(sorted(cpus, key=lambda c: c.id)), nodes=nodes, devices=tuple(devices))


# -- writing ----------------------------------------------------------------------------
def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def _link(path: Path, target: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)


def _threads(machine: FakeMachine, cpu: FakeCPU) -> CPUSet:
    online = machine.online
    return CPUSet(c.id for c in machine.cpus if (c.socket, c.core_id) == (cpu.socket, cpu.core_id) and c.id in online)


def _l3_sharers(machine: FakeMachine, l3: int) -> CPUSet:
    online = machine.online
    return CPUSet(c.id for c in machine.cpus if c.l3 == l3 and c.id in online)


def _write_cpu(machine: FakeMachine, cpu_dir: Path, cpu: FakeCPU) -> None:
    path = cpu_dir / f"cpu{cpu.id}"
    online = cpu.id in machine.online
    path.mkdir(parents=True)
    if machine.write_node_dir and machine.write_cpu_node_links:
        _link(path / f"node{cpu.numa}", f"../../node/node{cpu.numa}")
    if not online:
        _write(path / "online", "0")
        return
    _write(path / "online", "1")
    topo = path / "topology"
    _write(topo / "physical_package_id", str(cpu.socket))
    _write(topo / "core_id", str(cpu.core_id))
    if machine.write_die_id:
        _write(topo / "die_id", str(cpu.die))
    if machine.write_cluster_id:
        _write(topo / "cluster_id", str(cpu.cluster))
    threads = str(_threads(machine, cpu))
    if machine.write_core_cpus_list:
        _write(topo / "core_cpus_list", threads)
    if machine.write_thread_siblings_list:
        _write(topo / "thread_siblings_list", threads)
    if not machine.write_cache:
        return
    caches: list[tuple[int, str, str, int]] = [
        (1, "Data", threads, 0),
        (1, "Instruction", threads, 0),
        (2, "Unified", threads, 0),
    ]
    if cpu.l3 is not None:
        caches.append((3, "Unified", str(_l3_sharers(machine, cpu.l3)), cpu.l3))
    for index, (level, kind, shared, cache_id) in enumerate(caches):
        index_dir = path / "cache" / f"index{index}"
        _write(index_dir / "level", str(level))
        _write(index_dir / "type", kind)
        _write(index_dir / "shared_cpu_list", shared)
        if machine.write_l3_id:
            _write(index_dir / "id", str(cache_id if level == 3 else cpu.core_id))


def _write_node(machine: FakeMachine, node_dir: Path, node: FakeNode) -> None:
    path = node_dir / f"node{node.id}"
    online = machine.online
    cpus = [c.id for c in machine.cpus if c.numa == node.id]
    _write(path / "cpulist", str(CPUSet(cpu for cpu in cpus if cpu in online)))
    for cpu in cpus:
        _link(path / f"cpu{cpu}", f"../../cpu/cpu{cpu}")
    kib = node.memory_bytes // 1024
    _write(path / "meminfo", f"Node {node.id} MemTotal:       {kib} kB\nNode {node.id} MemFree:        {kib // 2} kB")
    _write(path / "distance", " ".join(str(d) for d in node.distances))
    for size, count in sorted(node.hugepages.items()):
        pages = path / "hugepages" / f"hugepages-{size}kB"
        _write(pages / "nr_hugepages", str(count))
        _write(pages / "free_hugepages", str(count))


def write_sysfs(root: Path, machine: FakeMachine) -> Path:
    """Write ``machine`` as a sysfs tree under ``root`` (created) and return ``root``."""
    cpu_dir = root / "devices" / "system" / "cpu"
    cpu_dir.mkdir(parents=True)
    if machine.write_possible:
        _write(cpu_dir / "possible", str(machine.all_possible))
    _write(cpu_dir / "present", str(machine.present))
    _write(cpu_dir / "online", str(machine.online))
    if machine.write_offline_file:
        _write(cpu_dir / "offline", str(machine.all_possible - machine.online))
    if machine.write_isolated_file:
        _write(cpu_dir / "isolated", str(machine.isolated))
    for cpu in machine.cpus:
        _write_cpu(machine, cpu_dir, cpu)
    if machine.write_node_dir:
        node_dir = root / "devices" / "system" / "node"
        node_dir.mkdir(parents=True)
        for node in machine.nodes:
            _write_node(machine, node_dir, node)
    pci = root / "bus" / "pci" / "devices"
    pci.mkdir(parents=True)
    for device in machine.devices:
        domain_bus = device.address.rsplit(":", 1)[0]
        real = root / "devices" / f"pci{domain_bus}" / device.address
        _write(real / "class", device.pci_class)
        _write(real / "numa_node", str(device.numa if device.numa is not None else -1))
        _link(pci / device.address, f"../../../devices/pci{domain_bus}/{device.address}")
    return root


# -- what the reader must say ---------------------------------------------------------------
def expected_json(machine: FakeMachine) -> dict[str, Any]:
    """The ``podpin topology --output json`` document for ``machine``, derived from its description."""
    online = machine.online
    by_id = {cpu.id: cpu for cpu in machine.cpus}
    siblings = machine.write_core_cpus_list or machine.write_thread_siblings_list
    cpus: list[dict[str, Any]] = []
    for cpu_id in machine.all_possible:
        cpu = by_id.get(cpu_id)
        if cpu is None or cpu_id not in online:
            cpus.append(
                {"id": cpu_id, "core": None, "socket": None, "die": None, "cluster": None, "numa": None, "l3": None}
                | {"online": False, "isolated": cpu_id in machine.isolated}
            )
            continue
        l3: int | None = None
        if machine.write_cache and cpu.l3 is not None:
            l3 = cpu.l3 if machine.write_l3_id else _l3_sharers(machine, cpu.l3).min()
        cpus.append(
            {
                "id": cpu_id,
                "core": _threads(machine, cpu).min() if siblings else cpu_id,
                "socket": cpu.socket,
                "die": cpu.die if machine.write_die_id else None,
                "cluster": cpu.cluster if machine.write_cluster_id else None,
                "numa": cpu.numa if machine.write_node_dir else 0,
                "l3": l3,
                "online": True,
                "isolated": cpu_id in machine.isolated,
            }
        )
    nodes = [
        {
            "id": node.id,
            "cpus": str(CPUSet(c.id for c in machine.cpus if c.numa == node.id and c.id in online)),
            "memory_bytes": node.memory_bytes,
            "distances": {str(other.id): d for other, d in zip(machine.nodes, node.distances, strict=True)},
            "hugepages": {f"{size}kB": count for size, count in node.hugepages.items()},
        }
        for node in machine.nodes
        if machine.write_node_dir
    ]
    devices = [
        {"address": d.address, "class": d.pci_class, "numa": d.numa}
        for d in sorted(machine.devices, key=lambda d: (d.numa is None, d.numa or 0, d.address))
    ]
    return {"cpus": cpus, "numa_nodes": nodes, "devices": devices}


# -- named machines ---------------------------------------------------------------------
NIC = "0x020000"
GPU = "0x030200"
NVME = "0x010802"


def _example_2s() -> FakeMachine:
    """The README quick-start machine: 2 sockets x 8 cores x 2 threads, one node each, 64 GiB, a NIC on node 0."""
    return make_machine(
        sockets=2,
        cores_per_socket=8,
        hugepage_sizes=(),
        far=21,
        devices=[FakePCIDevice(address="0000:17:00.0", pci_class=NIC, numa=0)],
    )


def _intel_spr_2s_snc2() -> FakeMachine:
    """The captured ``intel-spr-2s-snc2`` machine rebuilt from its description (checks the builder)."""
    return make_machine(
        sockets=2,
        cores_per_socket=28,
        numa_per_socket=2,
        core_id_stride=2,
        memory_per_node=128 * GiB,
        hugepages={0: {2048: 1024, 1048576: 4}, 1: {2048: 1024, 1048576: 4}},
        devices=[
            FakePCIDevice(address="0000:00:1f.3", pci_class="0x040300", numa=None),
            FakePCIDevice(address="0000:17:00.0", pci_class=NIC, numa=0),
            FakePCIDevice(address="0000:b1:00.0", pci_class=GPU, numa=3),
        ],
    )


def _arm_altra_1s() -> FakeMachine:
    """The captured ``arm-altra-1s`` machine: 80 cores, no SMT, 2-core clusters, no L3, no die_id."""
    machine = make_machine(
        cores_per_socket=80, threads_per_core=1, l3_per_socket=None, cores_per_cluster=2, memory_per_node=256 * GiB
    )
    return replace(machine, write_die_id=False)


def _amd_genoa_1s_4ccd() -> FakeMachine:
    """EPYC 9124-like: 1 socket, NPS1, 16 cores in 4 CCDs, each CCD its own L3 (4 L3s on one node)."""
    return make_machine(cores_per_socket=16, l3_per_socket=4, memory_per_node=384 * GiB)


def _amd_milan_2s_nps4() -> FakeMachine:
    """EPYC 7313-like x2 in NPS4: 8 NUMA nodes, one 4-core CCD (one L3) per node, distances 10/12/32."""
    return make_machine(
        sockets=2,
        cores_per_socket=16,
        numa_per_socket=4,
        l3_per_socket=4,
        far=32,
        memory_per_node=32 * GiB,
        devices=[
            FakePCIDevice(address="0000:41:00.0", pci_class=NIC, numa=1),
            FakePCIDevice(address="0000:c1:00.0", pci_class=NVME, numa=5),
        ],
    )


def _intel_4s_snc4() -> FakeMachine:
    """16 NUMA nodes: 4 sockets in SNC4, 2 cores x 2 threads per node (node10 sorts after node9)."""
    return make_machine(sockets=4, cores_per_socket=8, numa_per_socket=4, near=11, far=21, memory_per_node=16 * GiB)


def _offline_isolated() -> FakeMachine:
    """8 cores x 2 threads, 32 possible CPUs: cores 6-7 offline, CPU 5 offline but its sibling 13 online."""
    machine = make_machine(cores_per_socket=8, hugepage_sizes=(2048,))
    return replace(
        machine,
        possible=CPUSet.range(0, 31),
        offline=CPUSet.parse("5-7,14-15"),
        isolated=CPUSet.parse("2-3,6,10-11"),
    )


def _memory_only_nodes() -> FakeMachine:
    """2 sockets with CPUs on nodes 0-1 plus two CPU-less memory nodes 2-3 (CXL or HBM)."""
    return make_machine(sockets=2, cores_per_socket=4, memory_only_nodes=2, memory_per_node=32 * GiB)


def _power9_2s_sparse() -> FakeMachine:
    """POWER9-like: nodes 0 and 8, SMT4 numbered linearly, L3 per core pair without ``id`` files, no die/cluster."""
    machine = make_machine(
        sockets=2,
        cores_per_socket=4,
        threads_per_core=4,
        l3_per_socket=2,
        enumeration="linear",
        node_ids=[0, 8],
        far=40,
        hugepage_sizes=(2048, 1048576),
        hugepages={8: {2048: 512}},
    )
    return replace(machine, write_die_id=False, write_cluster_id=False, write_l3_id=False)


def _vm_bare() -> FakeMachine:
    """An old-kernel VM: no die_id, cluster_id, cache directory or core_cpus_list (thread_siblings_list only)."""
    machine = make_machine(cores_per_socket=2, hugepage_sizes=())
    return replace(machine, write_die_id=False, write_cluster_id=False, write_cache=False, write_core_cpus_list=False)


def _no_siblings_no_numa() -> FakeMachine:
    """A CONFIG_NUMA=n kernel without sibling lists: every CPU its own core, every CPU on node 0."""
    machine = make_machine(cores_per_socket=2, hugepage_sizes=())
    return replace(machine, write_core_cpus_list=False, write_thread_siblings_list=False, write_node_dir=False)


def _node_cpulists_only() -> FakeMachine:
    """No ``cpuN/nodeM`` links: NUMA nodes come from ``node/nodeM/cpulist``; no ``possible`` file either."""
    machine = make_machine(sockets=2, cores_per_socket=2)
    return replace(machine, write_cpu_node_links=False, write_possible=False, write_offline_file=False)


MACHINES: dict[str, Callable[[], FakeMachine]] = {
    "example-2s": _example_2s,
    "intel-spr-2s-snc2": _intel_spr_2s_snc2,
    "arm-altra-1s": _arm_altra_1s,
    "amd-genoa-1s-4ccd": _amd_genoa_1s_4ccd,
    "amd-milan-2s-nps4": _amd_milan_2s_nps4,
    "intel-4s-snc4-16node": _intel_4s_snc4,
    "offline-isolated": _offline_isolated,
    "memory-only-nodes": _memory_only_nodes,
    "power9-2s-sparse": _power9_2s_sparse,
    "vm-bare": _vm_bare,
    "no-siblings-no-numa": _no_siblings_no_numa,
    "node-cpulists-only": _node_cpulists_only,
}
"""Machines by name; each factory's docstring says which quirk it carries."""


def main(argv: Sequence[str]) -> int:
    """``python -m tests.support.sysfs_builder NAME DIR``: write a named machine's tree into DIR."""
    if len(argv) != 2 or argv[0] not in MACHINES:
        print(f"usage: sysfs_builder.py {{{','.join(MACHINES)}}} DIR", file=sys.stderr)
        return 2
    write_sysfs(Path(argv[1]), MACHINES[argv[0]]())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
