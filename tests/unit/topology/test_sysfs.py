"""The sysfs reader (``agent.topology.sysfs``) and the device/hotplug helpers (``agent.topology.devices``).

Captured machines (``tests/data/sysfs/*.tar.gz``) are unpacked once per session
and must read as their ``expected.json``. Every quirk of other machines is a
named tree from ``tests/support/sysfs_builder.py`` whose expected JSON is derived from
its description, plus a few hand-computed facts per quirk. Broken trees must
fail with a message that starts with the path of the file to look at.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import pyudev  # type: ignore[import-untyped]

from agent.topology.codec import topology_to_dict
from agent.topology.devices import (
    CPUHotplugEvent,
    _read_devices_sysfs,
    _use_udev,
    cpu_hotplug_event,
    cpu_hotplug_handler,
    devices_from_udev,
    read_devices,
)
from agent.topology.model import Device
from agent.topology.sysfs import SysfsError, read_topology
from tests.support import sysfs_builder as sb


@pytest.fixture(scope="session")
def captured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The captured machines' trees by name (unpacked once per session)."""
    return sb.unpack_captured(tmp_path_factory)


def as_json(root: Path) -> dict[str, Any]:
    """What ``podpin topology --output json`` prints for the tree, as parsed JSON."""
    return topology_to_dict(read_topology(root))


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """An empty directory for this test's trees (on tmpfs when the machine has one)."""
    with sb.scratch_dir(tmp_path) as path:
        yield path


def build(scratch: Path, name: str) -> tuple[sb.FakeMachine, Path]:
    """A fresh tree of a named machine, for tests that change files."""
    machine = sb.MACHINES[name]()
    return machine, sb.write_sysfs(scratch / name, machine)


Read = Callable[[str], tuple[sb.FakeMachine, dict[str, Any]]]


@pytest.fixture(scope="session")
def read_named(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Read]:
    """Write each named machine once per session and read it once: name -> (machine, JSON read)."""
    cache: dict[str, tuple[sb.FakeMachine, dict[str, Any]]] = {}
    with sb.scratch_dir(tmp_path_factory.mktemp("named")) as base:

        def get(name: str) -> tuple[sb.FakeMachine, dict[str, Any]]:
            if name not in cache:
                machine = sb.MACHINES[name]()
                cache[name] = (machine, as_json(sb.write_sysfs(base / name, machine)))
            return cache[name]

        yield get


# -- captured machines --------------------------------------------------------------------
def test_captured_fixtures_present() -> None:
    """Both captured machines of the fixture README ship with the project."""
    assert ["arm-altra-1s", "intel-spr-2s-snc2"] == sb.CAPTURED


@pytest.mark.parametrize("name", sb.CAPTURED)
def test_captured_machine_reads_as_expected_json(captured: dict[str, Path], name: str) -> None:
    """A captured sysfs tree reads as exactly its expected.json."""
    root = captured[name]
    expected = json.loads((root / "expected.json").read_text())
    assert expected == as_json(root)


@pytest.mark.parametrize("name", sb.CAPTURED)
def test_builder_replica_of_captured_machine(captured: dict[str, Path], read_named: Read, name: str) -> None:
    """The builder's description of a captured machine gives the same JSON, so built trees are realistic."""
    machine, read = read_named(name)
    expected = json.loads((captured[name] / "expected.json").read_text())
    assert (expected, expected) == (sb.expected_json(machine), read)


# -- built machines, one per quirk ----------------------------------------------------------
@pytest.mark.parametrize("name", sorted(sb.MACHINES))
def test_built_machine_reads_as_described(read_named: Read, name: str) -> None:
    """Every named machine reads as the JSON derived from its description."""
    machine, read = read_named(name)
    assert sb.expected_json(machine) == read


def _cpu_field(key: str, ids: range | list[int]) -> Callable[[dict[str, Any]], list[Any]]:
    return lambda doc: [doc["cpus"][i][key] for i in ids]


def _nodes(key: str) -> Callable[[dict[str, Any]], list[Any]]:
    return lambda doc: [node[key] for node in doc["numa_nodes"]]


FACTS: list[Any] = [
    pytest.param(
        "amd-genoa-1s-4ccd",
        _cpu_field("l3", range(32)),
        [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4 + [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4,
        id="genoa-four-l3-per-node",
    ),
    pytest.param("amd-genoa-1s-4ccd", _nodes("cpus"), ["0-31"], id="genoa-one-node"),
    pytest.param(
        "amd-milan-2s-nps4",
        _nodes("cpus"),
        [
            "0-3,32-35",
            "4-7,36-39",
            "8-11,40-43",
            "12-15,44-47",
            "16-19,48-51",
            "20-23,52-55",
            "24-27,56-59",
            "28-31,60-63",
        ],
        id="milan-nps4-nodes",
    ),
    pytest.param("amd-milan-2s-nps4", _cpu_field("l3", [0, 4, 35, 63]), [0, 1, 0, 7], id="milan-l3-per-node"),
    pytest.param(
        "amd-milan-2s-nps4",
        lambda d: d["numa_nodes"][1]["distances"],
        {"0": 12, "1": 10, "2": 12, "3": 12, "4": 32, "5": 32, "6": 32, "7": 32},
        id="milan-distances",
    ),
    pytest.param(
        "amd-milan-2s-nps4",
        lambda d: d["devices"],
        [
            {"address": "0000:41:00.0", "class": "0x020000", "numa": 1},
            {"address": "0000:c1:00.0", "class": "0x010802", "numa": 5},
        ],
        id="milan-devices",
    ),
    pytest.param("intel-4s-snc4-16node", _nodes("id"), list(range(16)), id="16-nodes-ascending"),
    pytest.param(
        "intel-4s-snc4-16node",
        lambda d: (
            d["numa_nodes"][10]["cpus"],
            d["numa_nodes"][10]["distances"]["11"],
            d["numa_nodes"][10]["distances"]["2"],
            len(d["numa_nodes"][10]["distances"]),
        ),
        ("20-21,52-53", 11, 21, 16),
        id="16-nodes-node10",
    ),
    pytest.param("offline-isolated", lambda d: len(d["cpus"]), 32, id="offline-every-possible-cpu"),
    pytest.param(
        "offline-isolated",
        lambda d: d["cpus"][5],
        {
            "id": 5,
            "core": None,
            "socket": None,
            "die": None,
            "cluster": None,
            "numa": None,
            "l3": None,
            "online": False,
            "isolated": False,
        },
        id="offline-cpu-has-no-ids",
    ),
    pytest.param(
        "offline-isolated",
        lambda d: (d["cpus"][6]["online"], d["cpus"][6]["isolated"]),
        (False, True),
        id="offline-and-isolated",
    ),
    pytest.param(
        "offline-isolated", _cpu_field("core", [4, 12, 13]), [4, 4, 13], id="offline-core-is-lowest-online-thread"
    ),
    pytest.param(
        "offline-isolated",
        _cpu_field("isolated", [1, 2, 3, 10, 11, 12]),
        [False, True, True, True, True, False],
        id="isolated-cpus",
    ),
    pytest.param("offline-isolated", _nodes("cpus"), ["0-4,8-13"], id="offline-not-in-node"),
    pytest.param(
        "memory-only-nodes",
        lambda d: [(n["id"], n["cpus"], n["memory_bytes"]) for n in d["numa_nodes"]],
        [(0, "0-3,8-11", 32 * sb.GiB), (1, "4-7,12-15", 32 * sb.GiB), (2, "", 32 * sb.GiB), (3, "", 32 * sb.GiB)],
        id="memory-only-nodes-empty-cpus",
    ),
    pytest.param("power9-2s-sparse", _nodes("id"), [0, 8], id="sparse-node-ids"),
    pytest.param("power9-2s-sparse", _cpu_field("numa", [15, 16]), [0, 8], id="sparse-node-of-cpu"),
    pytest.param(
        "power9-2s-sparse", lambda d: d["numa_nodes"][1]["distances"], {"0": 40, "8": 10}, id="sparse-distances-by-id"
    ),
    pytest.param("power9-2s-sparse", _cpu_field("core", [0, 3, 4, 7, 30]), [0, 0, 4, 4, 28], id="smt4-linear-cores"),
    pytest.param(
        "power9-2s-sparse",
        _cpu_field("l3", [0, 7, 8, 15, 16, 31]),
        [0, 0, 8, 8, 16, 24],
        id="l3-without-id-is-lowest-sharer",
    ),
    pytest.param(
        "power9-2s-sparse",
        lambda d: {(c["die"], c["cluster"]) for c in d["cpus"]},
        {(None, None)},
        id="no-die-no-cluster",
    ),
    pytest.param(
        "power9-2s-sparse",
        lambda d: d["numa_nodes"][1]["hugepages"],
        {"2048kB": 512, "1048576kB": 0},
        id="hugepages-on-sparse-node",
    ),
    pytest.param(
        "vm-bare",
        lambda d: [(c["core"], c["die"], c["cluster"], c["l3"]) for c in d["cpus"]],
        [(0, None, None, None), (1, None, None, None), (0, None, None, None), (1, None, None, None)],
        id="thread-siblings-fallback-no-cache",
    ),
    pytest.param(
        "no-siblings-no-numa",
        lambda d: ([c["core"] for c in d["cpus"]], {c["numa"] for c in d["cpus"]}, d["numa_nodes"]),
        ([0, 1, 2, 3], {0}, []),
        id="alone-cores-node-0",
    ),
    pytest.param(
        "node-cpulists-only", _cpu_field("numa", [0, 1, 2, 3, 4, 6]), [0, 0, 1, 1, 0, 1], id="numa-from-node-cpulist"
    ),
]


@pytest.mark.parametrize(("name", "extract", "expected"), FACTS)
def test_quirk_fact(read_named: Read, name: str, extract: Callable[[dict[str, Any]], Any], expected: Any) -> None:
    """A hand-computed fact about a quirky machine holds in what the reader gives."""
    assert expected == extract(read_named(name)[1])


def test_sibling_list_naming_offline_thread(scratch: Path) -> None:
    """A sibling list that still names an offline thread counts online threads only."""
    _, root = build(scratch, "offline-isolated")
    (root / "devices/system/cpu/cpu13/topology/core_cpus_list").write_text("5,13\n")
    assert 13 == read_topology(root).cpu(13).core


def test_node_cpulist_naming_offline_cpu(scratch: Path) -> None:
    """A node cpulist that still names an offline CPU is read as its online CPUs."""
    machine, root = build(scratch, "offline-isolated")
    (root / "devices/system/node/node0/cpulist").write_text("0-15\n")
    assert sb.expected_json(machine) == as_json(root)


def test_no_pci_directory(scratch: Path) -> None:
    """A tree without bus/pci/devices has no devices."""
    _, root = build(scratch, "vm-bare")
    shutil.rmtree(root / "bus")
    assert () == read_topology(root).devices


def test_device_without_numa_node_file(scratch: Path) -> None:
    """A PCI device without a numa_node file (kernel without NUMA) is on no node."""
    _, root = build(scratch, "example-2s")
    (root / "bus/pci/devices/0000:17:00.0/numa_node").unlink()
    assert (Device(address="0000:17:00.0", pci_class="0x020000", numa=None),) == read_devices(root)


# -- broken trees ---------------------------------------------------------------------------
CPU = "devices/system/cpu"
NODE = "devices/system/node"


def _write(rel: str, text: str) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        (root / rel).write_text(text + "\n")

    return mutate


def _remove(*rels: str) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        for rel in rels:
            (root / rel).unlink()

    return mutate


def _link(rel: str, target: str) -> Callable[[Path], None]:
    return lambda root: (root / rel).symlink_to(target)


def _both(*mutations: Callable[[Path], None]) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        for m in mutations:
            m(root)

    return mutate


# The base tree is 2 sockets x 2 cores x 2 threads: node0 = CPUs 0,1,4,5; node1 = CPUs 2,3,6,7.
BROKEN: list[Any] = [
    pytest.param(_remove(f"{CPU}/online"), f"{{root}}/{CPU}/online: no such file", id="no-online"),
    pytest.param(
        _remove(f"{CPU}/possible", f"{CPU}/present"),
        f"{{root}}/{CPU}/possible: no such file (nor a 'present' file beside it)",
        id="no-possible-no-present",
    ),
    pytest.param(
        _remove(f"{CPU}/cpu1/topology/physical_package_id"),
        f"{{root}}/{CPU}/cpu1/topology/physical_package_id: no such file",
        id="no-package-id",
    ),
    pytest.param(
        _remove(f"{CPU}/cpu6/topology/core_id"), f"{{root}}/{CPU}/cpu6/topology/core_id: no such file", id="no-core-id"
    ),
    pytest.param(
        _write(f"{CPU}/cpu1/topology/core_id", "abc"),
        f"{{root}}/{CPU}/cpu1/topology/core_id: not an integer: 'abc'",
        id="core-id-not-int",
    ),
    pytest.param(
        _write(f"{CPU}/online", "0-x"),
        f"{{root}}/{CPU}/online: invalid cpulist '0-x': 'x' is not a CPU id",
        id="online-not-cpulist",
    ),
    pytest.param(
        _write(f"{CPU}/online", "0-8"),
        f"{{root}}/{CPU}/online: lists CPU 8, which {{root}}/{CPU}/possible does not",
        id="online-not-possible",
    ),
    pytest.param(
        _write(f"{CPU}/offline", "3"),
        f"{{root}}/{CPU}/offline: lists CPU 3, which {{root}}/{CPU}/online lists too",
        id="offline-and-online",
    ),
    pytest.param(
        _write(f"{CPU}/cpu4/topology/core_cpus_list", "4"),
        f"{{root}}/{CPU}/cpu0/topology/core_cpus_list: lists CPU 4 as a thread of CPU 0's core, "
        f"but {{root}}/{CPU}/cpu4/topology/core_cpus_list does not list CPU 0",
        id="asymmetric-siblings",
    ),
    pytest.param(
        _write(f"{CPU}/cpu4/topology/core_cpus_list", "0-1,4"),
        f"{{root}}/{CPU}/cpu0/topology/core_cpus_list: "
        "CPU 0 and CPU 4 are threads of one core but list different threads (0,4 and 0-1,4)",
        id="siblings-differ",
    ),
    pytest.param(
        _write(f"{CPU}/cpu0/topology/core_cpus_list", "4"),
        f"{{root}}/{CPU}/cpu0/topology/core_cpus_list: does not list CPU 0 itself",
        id="siblings-without-self",
    ),
    pytest.param(
        _write(f"{CPU}/cpu4/topology/physical_package_id", "1"),
        f"{{root}}/{CPU}/cpu4/topology: "
        "CPU 4 is a thread of CPU 0's core but has physical_package_id 1 and core_id 0, not 0 and 0",
        id="thread-on-other-package",
    ),
    pytest.param(
        _link(f"{CPU}/cpu0/node1", "../../node/node1"),
        f"{{root}}/{CPU}/cpu0: links to NUMA nodes node0 and node1; a CPU is in exactly one node",
        id="two-node-links",
    ),
    pytest.param(
        _both(_remove(f"{CPU}/cpu0/node0"), _link(f"{CPU}/cpu0/node7", "../../node/node7")),
        f"{{root}}/{CPU}/cpu0/node7: links CPU 0 to NUMA node 7, which has no {{root}}/{NODE}/node7 directory",
        id="link-to-missing-node",
    ),
    pytest.param(
        _both(_remove(f"{CPU}/cpu0/node0"), _write(f"{NODE}/node0/cpulist", "1,4-5")),
        f"{{root}}/{CPU}/cpu0: has no nodeM link and CPU 0 is listed by no node cpulist; a CPU is in exactly one node",
        id="cpu-in-no-node",
    ),
    pytest.param(
        _both(_remove(f"{CPU}/cpu0/node0"), _write(f"{NODE}/node1/cpulist", "0,2-3,6-7")),
        f"{{root}}/{CPU}/cpu0: has no nodeM link and CPU 0 is listed by node0/cpulist and node1/cpulist; "
        "a CPU is in exactly one node",
        id="cpu-in-two-cpulists",
    ),
    pytest.param(
        _write(f"{NODE}/node0/cpulist", "0-2,4-5"),
        f"{{root}}/{NODE}/node0/cpulist: lists CPU 2, which is on NUMA node 1 ({{root}}/{CPU}/cpu2 links node1)",
        id="cpulist-lists-foreign-cpu",
    ),
    pytest.param(
        _write(f"{NODE}/node0/cpulist", "0-1,5"),
        f"{{root}}/{NODE}/node0/cpulist: does not list CPU 4, which {{root}}/{CPU}/cpu4 links to node0",
        id="cpulist-misses-cpu",
    ),
    pytest.param(
        _write(f"{NODE}/node0/distance", "10 21 21"),
        f"{{root}}/{NODE}/node0/distance: has 3 distances for 2 NUMA nodes",
        id="distance-count",
    ),
    pytest.param(
        _write(f"{NODE}/node1/distance", "21 ten"),
        f"{{root}}/{NODE}/node1/distance: not a list of integers: '21 ten'",
        id="distance-not-int",
    ),
    pytest.param(
        _write(f"{NODE}/node1/meminfo", "Node 1 MemFree: 5 kB"),
        f"{{root}}/{NODE}/node1/meminfo: has no 'MemTotal: <n> kB' line",
        id="no-memtotal",
    ),
    pytest.param(_remove(f"{NODE}/node0/meminfo"), f"{{root}}/{NODE}/node0/meminfo: no such file", id="no-meminfo"),
    pytest.param(
        _remove(f"{NODE}/node1/hugepages/hugepages-2048kB/nr_hugepages"),
        f"{{root}}/{NODE}/node1/hugepages/hugepages-2048kB/nr_hugepages: no such file",
        id="no-nr-hugepages",
    ),
    pytest.param(
        _remove(f"{CPU}/cpu3/cache/index3/level"),
        f"{{root}}/{CPU}/cpu3/cache/index3/level: no such file",
        id="cache-without-level",
    ),
    pytest.param(
        _both(_remove(f"{CPU}/cpu3/cache/index3/id"), _write(f"{CPU}/cpu3/cache/index3/shared_cpu_list", "")),
        f"{{root}}/{CPU}/cpu3/cache/index3/shared_cpu_list: is empty; expected the CPUs sharing this L3 cache",
        id="l3-without-id-or-sharers",
    ),
    pytest.param(
        _remove("bus/pci/devices/0000:17:00.0/class"),
        "{root}/bus/pci/devices/0000:17:00.0/class: no such file",
        id="device-without-class",
    ),
    pytest.param(
        _write("bus/pci/devices/0000:17:00.0/numa_node", "zero"),
        "{root}/bus/pci/devices/0000:17:00.0/numa_node: not an integer: 'zero'",
        id="device-numa-not-int",
    ),
]


@pytest.mark.parametrize(("mutate", "message"), BROKEN)
def test_broken_tree_names_the_file(scratch: Path, mutate: Callable[[Path], None], message: str) -> None:
    """A missing, malformed or contradicting file raises SysfsError starting with that file's path."""
    machine = sb.make_machine(
        sockets=2, cores_per_socket=2, devices=[sb.FakePCIDevice(address="0000:17:00.0", pci_class=sb.NIC, numa=0)]
    )
    root = sb.write_sysfs(scratch / "sys", machine)
    mutate(root)
    with pytest.raises(SysfsError) as caught:
        read_topology(root)
    assert message.format(root=root) == str(caught.value)


def _missing(tmp_path: Path) -> Path:
    return tmp_path / "missing"


def _regular_file(tmp_path: Path) -> Path:
    (tmp_path / "file").write_text("x\n")
    return tmp_path / "file"


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        pytest.param(_missing, "no such directory", id="missing"),
        pytest.param(_regular_file, "not a directory", id="file"),
    ],
)
def test_bad_root(tmp_path: Path, make: Callable[[Path], Path], reason: str) -> None:
    """A root that is missing or not a directory is named with the reason."""
    root = make(tmp_path)
    with pytest.raises(SysfsError) as caught:
        read_topology(root)
    assert (f"{root}: {reason}", root, reason) == (str(caught.value), caught.value.path, caught.value.reason)


# -- devices through udev -------------------------------------------------------------------
def _udev_device(name: str, attrs: dict[str, bytes]) -> SimpleNamespace:
    return SimpleNamespace(sys_name=name, sys_path=f"/sys/devices/pci0000:00/{name}", attributes=attrs)


def test_devices_from_udev_translation() -> None:
    """udev PCI devices become Devices ordered by node (unknown last) then address; -1 and no attribute mean no node."""
    found = [
        _udev_device("0000:00:1f.3", {"class": b"0x040300\n", "numa_node": b"-1\n"}),
        _udev_device("0000:b1:00.0", {"class": b"0x030200", "numa_node": b"1"}),
        _udev_device("0000:17:00.0", {"class": b"0x020000", "numa_node": b"0"}),
        _udev_device("0000:00:00.0", {"class": b"0x060000"}),
    ]
    expected = (
        Device(address="0000:17:00.0", pci_class="0x020000", numa=0),
        Device(address="0000:b1:00.0", pci_class="0x030200", numa=1),
        Device(address="0000:00:00.0", pci_class="0x060000", numa=None),
        Device(address="0000:00:1f.3", pci_class="0x040300", numa=None),
    )
    assert expected == devices_from_udev(found)


@pytest.mark.parametrize(
    ("attrs", "message"),
    [
        pytest.param(
            {"numa_node": b"0"}, "/sys/devices/pci0000:00/0000:17:00.0/class: no such attribute", id="no-class"
        ),
        pytest.param(
            {"class": b"0x020000", "numa_node": b"x"},
            "/sys/devices/pci0000:00/0000:17:00.0/numa_node: not an integer: 'x'",
            id="bad-numa",
        ),
    ],
)
def test_devices_from_udev_errors(attrs: dict[str, bytes], message: str) -> None:
    """A udev device without a class or with a non-integer numa_node is named by its sysfs path."""
    with pytest.raises(SysfsError) as caught:
        devices_from_udev([_udev_device("0000:17:00.0", attrs)])
    assert message == str(caught.value)


def test_udev_and_sysfs_agree_on_this_machine() -> None:
    """pyudev's PCI enumeration of the real /sys (read only) gives what reading its files gives."""
    assert _read_devices_sysfs(Path("/sys")) == devices_from_udev(pyudev.Context().list_devices(subsystem="pci"))


@pytest.mark.parametrize(
    ("root", "database_exists", "expected"),
    [
        pytest.param(Path("/sys"), True, True, id="real-sys-with-udev"),
        pytest.param(Path("/sys/"), True, True, id="real-sys-trailing-slash"),
        pytest.param(Path("/sys"), False, False, id="real-sys-without-udev"),
        pytest.param(None, True, False, id="fixture-root"),
    ],
)
def test_udev_only_for_real_sys(tmp_path: Path, root: Path | None, database_exists: bool, expected: bool) -> None:
    """udev is used only for the real /sys and only when its database directory exists."""
    database = tmp_path / "udev-data"
    if database_exists:
        database.mkdir()
    assert expected == _use_udev(root if root is not None else tmp_path, database)


# -- CPU hotplug events ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("action", "name", "expected"),
    [
        pytest.param("online", "cpu12", CPUHotplugEvent(cpu=12, online=True), id="online"),
        pytest.param("offline", "cpu3", CPUHotplugEvent(cpu=3, online=False), id="offline"),
        pytest.param("add", "cpu3", None, id="add-is-not-online"),
        pytest.param("change", "cpu3", None, id="change"),
        pytest.param(None, "cpu3", None, id="no-action"),
        pytest.param("online", "cpufreq", None, id="not-a-cpu"),
        pytest.param("offline", "cpu3x", None, id="bad-name"),
    ],
)
def test_cpu_hotplug_event(action: str | None, name: str, expected: CPUHotplugEvent | None) -> None:
    """Only online/offline uevents of cpuN devices are hotplug events."""
    assert expected == cpu_hotplug_event(action, name)


def test_cpu_hotplug_handler_calls_back_for_cpu_events_only() -> None:
    """The monitor callback passes CPU online/offline events on, in order, and drops the rest."""
    seen: list[CPUHotplugEvent] = []
    handle = cpu_hotplug_handler(seen.append)
    for action, name in [("offline", "cpu5"), ("add", "cpu6"), ("online", "cpu5"), ("online", "machinecheck0")]:
        handle(SimpleNamespace(action=action, sys_name=name))
    assert [CPUHotplugEvent(cpu=5, online=False), CPUHotplugEvent(cpu=5, online=True)] == seen


def test_builder_quirk_flags_leave_out_their_files(scratch: Path) -> None:
    """The builder leaves out exactly the files a quirk flag names, so each quirk test tests what it says."""
    machine = replace(sb.MACHINES["vm-bare"](), write_thread_siblings_list=False, write_offline_file=False)
    root = sb.write_sysfs(scratch / "sys", machine)
    cpu0 = root / CPU / "cpu0"
    written = (
        sorted(p.name for p in (root / CPU).iterdir() if p.is_file()),
        sorted(p.name for p in cpu0.iterdir()),
        sorted(p.name for p in (cpu0 / "topology").iterdir()),
    )
    expected = (
        ["isolated", "online", "possible", "present"],
        ["node0", "online", "topology"],
        ["core_id", "physical_package_id"],
    )
    assert expected == written
