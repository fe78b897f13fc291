"""``podpin topology``: JSON and text output, error lines, and the bundled example machine.

The command is run through ``agent.cli.main`` (the same parser the installed
``podpin`` uses) and once as a real process, against captured and built
sysfs trees only; nothing here reads the test machine's own topology.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from agent.cli import build_parser, main
from agent.cpuset import CPUSet
from agent.topology.codec import topology_from_dict, topology_to_dict
from agent.topology.render import format_bytes
from tests.support import sysfs_builder as sb
from tests.support.paths import REPO

EXAMPLE = REPO / "deploy" / "examples" / "topology-2s.json"


@pytest.fixture(scope="session")
def captured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The captured machines' trees by name (unpacked once per session)."""
    return sb.unpack_captured(tmp_path_factory)


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """An empty directory for this test's trees (on tmpfs when the machine has one)."""
    with sb.scratch_dir(tmp_path) as path:
        yield path


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``podpin topology ARGV`` in-process: (exit status, stdout, stderr)."""
    status = main(["topology", *argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("name", sb.CAPTURED)
def test_json_output_equals_expected(captured: dict[str, Path], capsys: pytest.CaptureFixture[str], name: str) -> None:
    """``--output json`` prints exactly the captured machine's expected.json and exits 0."""
    root = captured[name]
    status, out, err = run_cli(capsys, "--sysfs-root", str(root), "--output", "json")
    assert (0, json.loads((root / "expected.json").read_text()), "") == (status, json.loads(out), err)


def test_defaults() -> None:
    """Without options the command reads /sys and prints text."""
    args = build_parser().parse_args(["topology"])
    assert (Path("/sys"), "text") == (args.sysfs_root, args.output)


SMALL_TEXT = """\
machine: 2 sockets, 3 NUMA nodes, 4 cores, 7 of 8 CPUs online
offline CPUs: 7
isolated CPUs: 1,5

socket 0: CPUs 0-1,4-5
  NUMA node 0: CPUs 0-1,4-5
    memory 16 GiB, hugepages 512 x 2 MiB, 2 x 1 GiB
    L3 cache 0: CPUs 0-1,4-5
      core 0: CPUs 0,4
      core 1: CPUs 1,5 (isolated 1,5)
socket 1: CPUs 2-3,6
  NUMA node 1: CPUs 2-3,6
    memory 16 GiB, hugepages none
    L3 cache 1: CPUs 2-3,6
      core 2: CPUs 2,6
      core 3: CPUs 3

memory-only NUMA nodes:
  NUMA node 2: memory 16 GiB, hugepages none

NUMA distances:
  node   0   1   2
     0  10  21  12
     1  21  10  21
     2  12  21  10

PCI devices:
  NUMA node 0: 0000:17:00.0 class 0x020000
  no NUMA node: 0000:00:1f.3 class 0x040300
"""


def _small_machine() -> sb.FakeMachine:
    machine = sb.make_machine(
        sockets=2,
        cores_per_socket=2,
        memory_only_nodes=1,
        memory_per_node=16 * sb.GiB,
        hugepages={0: {2048: 512, 1048576: 2}},
        devices=[
            sb.FakePCIDevice(address="0000:00:1f.3", pci_class="0x040300", numa=None),
            sb.FakePCIDevice(address="0000:17:00.0", pci_class=sb.NIC, numa=0),
        ],
    )
    return replace(machine, offline=CPUSet([7]), isolated=CPUSet([1, 5]))


VM_BARE_TEXT = """\
machine: 1 socket, 1 NUMA node, 2 cores, 4 of 4 CPUs online
offline CPUs: none
isolated CPUs: none

socket 0: CPUs 0-3
  NUMA node 0: CPUs 0-3
    memory 64 GiB, hugepages none
    core 0: CPUs 0,2
    core 1: CPUs 1,3

NUMA distances:
  node   0
     0  10

PCI devices: none
"""

NO_NUMA_TEXT = """\
machine: 1 socket, 1 NUMA node, 4 cores, 4 of 4 CPUs online
offline CPUs: none
isolated CPUs: none

socket 0: CPUs 0-3
  NUMA node 0: CPUs 0-3
    L3 cache 0: CPUs 0-3
      core 0: CPUs 0
      core 1: CPUs 1
      core 2: CPUs 2
      core 3: CPUs 3

NUMA distances: unknown (no NUMA node directory)

PCI devices: none
"""


@pytest.mark.parametrize(
    ("machine", "expected"),
    [
        pytest.param(_small_machine, SMALL_TEXT, id="offline-isolated-memory-only-devices"),
        pytest.param(sb.MACHINES["vm-bare"], VM_BARE_TEXT, id="no-l3-cores-under-node"),
        pytest.param(sb.MACHINES["no-siblings-no-numa"], NO_NUMA_TEXT, id="no-node-directory"),
    ],
)
def test_text_output(
    scratch: Path, capsys: pytest.CaptureFixture[str], machine: Callable[[], sb.FakeMachine], expected: str
) -> None:
    """The default text output lists socket -> node -> L3 -> cores, memory, distances and devices."""
    root = sb.write_sysfs(scratch / "sys", machine())
    assert (0, expected, "") == run_cli(capsys, "--sysfs-root", str(root))


def test_missing_root_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing root prints one line naming it on stderr, nothing on stdout, and exits 1."""
    root = tmp_path / "nowhere"
    assert (1, "", f"podpin topology: {root}: no such directory\n") == run_cli(capsys, "--sysfs-root", str(root))


def test_missing_required_file_is_one_error_line(scratch: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing required file prints one line naming the file on stderr and exits 1, for JSON output too."""
    root = sb.write_sysfs(scratch / "sys", sb.MACHINES["vm-bare"]())
    path = root / "devices/system/cpu/cpu3/topology/core_id"
    path.unlink()
    expected = (1, "", f"podpin topology: {path}: no such file\n")
    assert expected == run_cli(capsys, "--sysfs-root", str(root), "--output", "json")


def test_error_exit_status_of_the_process(tmp_path: Path) -> None:
    """``python -m agent topology`` on an unreadable root exits 1 with the one-line message."""
    root = tmp_path / "file"
    root.write_text("not a directory\n")
    done = subprocess.run(
        [sys.executable, "-m", "agent", "topology", "--sysfs-root", str(root)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert (1, "", f"podpin topology: {root}: not a directory\n") == (done.returncode, done.stdout, done.stderr)


def test_bundled_example_is_what_the_reader_gives(scratch: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """deploy/examples/topology-2s.json is ``podpin topology --output json`` of the builder's example-2s tree."""
    root = sb.write_sysfs(scratch / "sys", sb.MACHINES["example-2s"]())
    status, out, _ = run_cli(capsys, "--sysfs-root", str(root), "--output", "json")
    assert (0, json.loads(EXAMPLE.read_text())) == (status, json.loads(out))


def test_bundled_example_round_trips_through_the_codec() -> None:
    """The example loads as a Topology (as ``podpin plan --topology`` will) and renders back unchanged."""
    example = json.loads(EXAMPLE.read_text())
    assert example == topology_to_dict(topology_from_dict(example))


def test_bundled_example_facts() -> None:
    """The example is 2 sockets x 8 cores x 2 threads, Intel numbering, 64 GiB per node, a NIC on node 0."""
    topology = topology_from_dict(json.loads(EXAMPLE.read_text()))
    facts = (
        str(topology.cpus_in_sockets(0)),
        str(topology.cpus_in_sockets(1)),
        [str(node.cpus) for node in topology.numa_nodes],
        [node.memory_bytes for node in topology.numa_nodes],
        [dict(node.hugepages) for node in topology.numa_nodes],
        topology.distance(0, 1),
        [(d.numa, d.pci_class) for d in topology.devices],
        topology.cpus_per_core(),
    )
    expected: tuple[object, ...] = (
        "0-7,16-23",
        "8-15,24-31",
        ["0-7,16-23", "8-15,24-31"],
        [64 * sb.GiB] * 2,
        [{}, {}],
        21,
        [(0, "0x020000")],
        2,
    )
    assert expected == facts


@pytest.mark.parametrize(
    ("amount", "expected"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1 KiB"),
        (1536, "1.5 KiB"),
        (2 << 20, "2 MiB"),
        (128 * sb.GiB, "128 GiB"),
        (3 << 39, "1.5 TiB"),
    ],
)
def test_format_bytes(amount: int, expected: str) -> None:
    """Byte counts print in the largest binary unit, whole numbers without a decimal."""
    assert expected == format_bytes(amount)
