"""cgroup file reads, controller enabling and the ordered, verified writer, on fixture trees."""

from __future__ import annotations

import errno
import threading
from pathlib import Path

import pytest

from agent.cgroups.errors import (
    CgroupPathError,
    CgroupReadError,
    CgroupValueError,
    CgroupWriteError,
    EmptyCpusetError,
    MismatchError,
)
from agent.cgroups.fs import ApplyReport, CgroupFS, CpuStat, Effective, RealFileOps, WriteRecord
from agent.cpuset import CPUSet
from agent.vocabulary import CgroupValues, CpuMax
from tests.support.cgroupfs_builder import (
    FaultyOps,
    FixtureTree,
    RecordingOps,
    build_tree,
    container_hex,
    pod_uid,
    remove_cgroup,
)

C = CPUSet.parse
M = CpuMax.parse


class Pod:
    """A Guaranteed pod with containers A and B in a systemd fixture tree (0-7, mems 0-1)."""

    def __init__(self, tmp_path: Path, driver: str = "systemd") -> None:
        self.tree: FixtureTree = build_tree(tmp_path, driver=driver)
        self.root = self.tree.root
        self.pod = self.tree.add_pod(pod_uid(1), "Guaranteed")
        self.a = self.tree.add_container(self.pod, container_hex(1))
        self.b = self.tree.add_container(self.pod, container_hex(2))
        self.recorder = RecordingOps(self.tree.ops(), self.root)

    def rel(self, path: Path) -> str:
        return str(path.relative_to(self.root))

    def fs(self, faults: FaultyOps | None = None) -> CgroupFS:
        """A CgroupFS over kernel emulation, recording writes (through ``faults`` when given)."""
        if faults is not None:
            faults.inner = self.recorder
            return CgroupFS(self.root, faults)
        return CgroupFS(self.root, self.recorder)


@pytest.fixture
def pod(tmp_path: Path) -> Pod:
    return Pod(tmp_path)


class TestRealFileOps:
    def test_write_missing_file_is_enoent(self, tmp_path: Path) -> None:
        """Writing a file that does not exist fails with ENOENT and creates nothing."""
        with pytest.raises(FileNotFoundError):
            RealFileOps().write(tmp_path / "cpuset.cpus", "0-3")
        assert [] == list(tmp_path.iterdir())

    def test_write_replaces_content(self, tmp_path: Path) -> None:
        """A write replaces the whole content of an existing file."""
        (tmp_path / "cpu.max").write_text("max 100000\n")
        RealFileOps().write(tmp_path / "cpu.max", "5000 10000")
        assert "5000 10000" == (tmp_path / "cpu.max").read_text()

    def test_read_whole_file(self, tmp_path: Path) -> None:
        """A read returns the whole file, however long."""
        text = "\n".join(f"key{i} {i}" for i in range(20000))
        (tmp_path / "cpu.stat").write_text(text)
        assert text == RealFileOps().read(tmp_path / "cpu.stat")

    def test_symlink_not_followed(self, tmp_path: Path) -> None:
        """A cgroup file that is a symlink is neither read nor written (ELOOP)."""
        (tmp_path / "target").write_text("0-3")
        (tmp_path / "cpuset.cpus").symlink_to(tmp_path / "target")
        with pytest.raises(OSError) as caught:
            RealFileOps().write(tmp_path / "cpuset.cpus", "0")
        assert (errno.ELOOP, "0-3") == (caught.value.errno, (tmp_path / "target").read_text())


class TestReaders:
    def test_values_and_effective(self, pod: Pod) -> None:
        """Configured values and effective sets are read as CPUSets and a normalised cpu.max."""
        pod.tree.preset(pod.pod, "cpuset.cpus", "2-5")
        pod.tree.preset(pod.a, "cpuset.cpus", "2-3")
        pod.tree.preset(pod.a, "cpu.max", "50000 100000\n")
        fs = CgroupFS(pod.root)
        expected = (
            CgroupValues(cpuset_cpus=C("2-3"), cpuset_mems=C(""), cpu_max=M("50000 100000")),
            Effective(cpus=C("2-3"), mems=C("0-1")),
        )
        assert expected == (fs.read_values(pod.a), fs.read_effective(pod.a))

    def test_cpu_stat(self, pod: Pod) -> None:
        """cpu.stat gives usage and throttling counters."""
        stat = "usage_usec 912\nuser_usec 900\nsystem_usec 12\nnr_periods 40\nnr_throttled 7\nthrottled_usec 3300\n"
        (pod.a / "cpu.stat").write_text(stat + "nr_bursts 0\nburst_usec 0\n")
        assert CpuStat(usage_usec=912, nr_periods=40, nr_throttled=7, throttled_usec=3300) == CgroupFS(
            pod.root
        ).read_cpu_stat(pod.a)

    def test_root_cpu_stat(self, pod: Pod) -> None:
        """The root's cpu.stat has only usage keys; throttling reads as zero."""
        (pod.root / "cpu.stat").write_text("usage_usec 55\nuser_usec 50\nsystem_usec 5\n")
        assert CpuStat(usage_usec=55, nr_periods=0, nr_throttled=0, throttled_usec=0) == CgroupFS(
            pod.root
        ).read_cpu_stat(pod.root)

    def test_subtree_control(self, pod: Pod) -> None:
        """cgroup.subtree_control reads as the set of enabled controllers."""
        expected = frozenset({"cpuset", "cpu", "io", "memory", "hugetlb", "pids"})
        assert expected == CgroupFS(pod.root).read_subtree_control(pod.pod)

    def test_bad_cpulist(self, pod: Pod) -> None:
        """A cpulist that does not parse is an error naming the file and the text."""
        (pod.a / "cpuset.cpus").write_text("0-3,x\n")
        with pytest.raises(CgroupValueError) as caught:
            CgroupFS(pod.root).read_cpuset(pod.a, "cpuset.cpus")
        assert f"{pod.a}/cpuset.cpus: invalid cpulist '0-3,x': 'x' is not a CPU id" == str(caught.value)

    def test_missing_file(self, pod: Pod) -> None:
        """A missing file is a read error naming the file and ENOENT."""
        (pod.a / "cpu.stat").unlink()
        with pytest.raises(CgroupReadError) as caught:
            CgroupFS(pod.root).read_cpu_stat(pod.a)
        assert f"read {pod.a}/cpu.stat: No such file or directory (ENOENT)" == str(caught.value)

    def test_read_outside_root(self, pod: Pod, tmp_path: Path) -> None:
        """Reading a cgroup outside the root is refused before any I/O."""
        with pytest.raises(CgroupPathError) as caught:
            CgroupFS(pod.root).read_cpu_stat(tmp_path)
        assert f"cgroup path {tmp_path} resolves to {tmp_path}, outside the cgroup root {pod.root}" == str(caught.value)


class TestCpuMax:
    def test_short_read(self, pod: Pod) -> None:
        """A cpu.max read that lost its period is an error naming the file, not a guess."""
        faults = FaultyOps(RealFileOps(), short_reads={pod.a / "cpu.max": 3})
        with pytest.raises(CgroupValueError) as caught:
            CgroupFS(pod.root, faults).read_cpu_max(pod.a)
        assert f"{pod.a}/cpu.max: invalid cpu.max 'max': expected 'max|<quota> [<period>]' (µs)" == str(caught.value)


class TestEnableControllers:
    def test_enables_down_the_path(self, tmp_path: Path) -> None:
        """+cpuset +cpu is written from the root down to the parent, and the cgroup gets the files."""
        tree = build_tree(tmp_path, root_subtree="memory pids", subtree="memory pids")
        container = tree.add_container(tree.add_pod(pod_uid(1), "Burstable"), container_hex(1))
        recorder = RecordingOps(tree.ops(), tree.root)
        records = CgroupFS(tree.root, recorder).enable_controllers(container)
        levels = [
            ".",
            "kubepods.slice",
            "kubepods.slice/kubepods-burstable.slice",
            f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{pod_uid(1).replace('-', '_')}.slice",
        ]
        assert [(level, "cgroup.subtree_control", "+cpuset +cpu") for level in levels] == recorder.writes
        assert ["ok"] * 4 == [r.result for r in records]
        assert ("", "0-7", "max 100000") == (
            tree.read(container, "cpuset.cpus"),
            tree.read(container, "cpuset.cpus.effective"),
            tree.read(container, "cpu.max"),
        )

    def test_only_missing(self, tmp_path: Path) -> None:
        """Only the missing controller is added, only where it is missing."""
        tree = build_tree(tmp_path, root_subtree="cpuset memory", subtree="cpuset cpu memory")
        pod = tree.add_pod(pod_uid(1), "Guaranteed")
        recorder = RecordingOps(tree.ops(), tree.root)
        records = CgroupFS(tree.root, recorder).enable_controllers(pod)
        assert [(".", "cgroup.subtree_control", "+cpu")] == recorder.writes
        assert (
            WriteRecord(
                path=tree.root,
                file="cgroup.subtree_control",
                old="cpuset memory",
                new="+cpu",
                result="ok",
                phase="controllers",
            ),
        ) == records

    def test_the_walk_starts_below_the_deepest_known_level(self, tmp_path: Path) -> None:
        """Levels known to enable both already are not read again: with the QoS level known, a new pod's container
        costs one read of the pod's own ``subtree_control`` instead of one per level from the root."""
        tree = build_tree(tmp_path)
        pod = tree.add_pod(pod_uid(1), "Burstable")
        container = tree.add_container(pod, container_hex(1))
        reads: list[str] = []
        ops = tree.ops()

        class ReadRecorder:
            def read(self, path: Path) -> str:
                reads.append(str(path.parent.relative_to(tree.root)))
                return ops.read(path)

            def write(self, path: Path, text: str) -> None:
                ops.write(path, text)

        fs = CgroupFS(tree.root, ReadRecorder())
        assert () == fs.enable_controllers(container)
        walked = list(reads)
        reads.clear()
        assert () == fs.enable_controllers(container, {tree.root, tree.kubepods(), pod.parent})
        assert ([".", "kubepods.slice", str(pod.parent.relative_to(tree.root)), str(pod.relative_to(tree.root))]) == (
            walked
        )
        assert [str(pod.relative_to(tree.root))] == reads

    def test_already_enabled(self, pod: Pod) -> None:
        """Nothing is written when every level already enables cpuset and cpu."""
        assert ((), []) == (pod.fs().enable_controllers(pod.a), pod.recorder.writes)

    def test_unavailable_controller(self, tmp_path: Path) -> None:
        """A controller the root lacks fails with an error naming the cgroup, file, value and errno."""
        tree = build_tree(tmp_path, root_subtree="memory", subtree="memory")
        (tree.root / "cgroup.controllers").write_text("cpu io memory pids")
        with pytest.raises(CgroupWriteError) as caught:
            CgroupFS(tree.root, tree.ops()).enable_controllers(tree.kubepods())
        assert (
            f"write {tree.root}/cgroup.subtree_control value '+cpuset +cpu': No such file or directory (ENOENT)"
            == str(caught.value)
        )

    def test_outside_root(self, pod: Pod, tmp_path: Path) -> None:
        """A cgroup outside the root is refused."""
        with pytest.raises(CgroupPathError):
            pod.fs().enable_controllers(tmp_path)
        assert [] == pod.recorder.writes


def _writes(pod: Pod, report: ApplyReport) -> list[tuple[str, str, str, str, str]]:
    return [(pod.rel(w.path), w.file, w.old, w.new, w.phase) for w in report.writes]


class TestApplyOrder:
    def test_first_pin(self, pod: Pod) -> None:
        """Unset cgroups get children first, then the pod; an already-right cpu.max is not rewritten."""
        desired = {
            pod.pod: CgroupValues(cpuset_cpus=C("2-5"), cpu_max=M("max")),
            pod.a: CgroupValues(cpuset_cpus=C("2-3"), cpu_max=M("max")),
            pod.b: CgroupValues(cpuset_cpus=C("4-5"), cpu_max=M("50000")),
        }
        report = pod.fs().apply(desired)
        expected = [
            (pod.rel(pod.a), "cpuset.cpus", "", "2-3", "exact"),
            (pod.rel(pod.b), "cpuset.cpus", "", "4-5", "exact"),
            (pod.rel(pod.b), "cpu.max", "max 100000", "50000 100000", "exact"),
            (pod.rel(pod.pod), "cpuset.cpus", "", "2-5", "exact"),
        ]
        assert (expected, True) == (_writes(pod, report), report.ok)
        assert ((pod.a, "cpu.max"), (pod.pod, "cpu.max")) == report.unchanged

    def test_parent_widened_before_child(self, pod: Pod) -> None:
        """A pod moving to new CPUs is widened to old ∪ new first, then the child moves, then the pod narrows."""
        pod.tree.preset(pod.pod, "cpuset.cpus", "0-3")
        pod.tree.preset(pod.a, "cpuset.cpus", "0-1")
        pod.tree.preset(pod.b, "cpuset.cpus", "2-3")
        desired = {
            pod.pod: CgroupValues(cpuset_cpus=C("2-5")),
            pod.a: CgroupValues(cpuset_cpus=C("4-5")),
            pod.b: CgroupValues(cpuset_cpus=C("2-3")),
        }
        report = pod.fs().apply(desired)
        expected = [
            (pod.rel(pod.pod), "cpuset.cpus", "0-3", "0-5", "widen"),
            (pod.rel(pod.a), "cpuset.cpus", "0-1", "4-5", "exact"),
            (pod.rel(pod.pod), "cpuset.cpus", "0-5", "2-5", "exact"),
        ]
        assert (expected, (), ()) == (_writes(pod, report), report.failures, report.mismatches)

    def test_child_narrowed_before_parent(self, pod: Pod) -> None:
        """Shrinking a pod narrows the containers first, then the pod; nothing is widened."""
        pod.tree.preset(pod.pod, "cpuset.cpus", "0-5")
        pod.tree.preset(pod.a, "cpuset.cpus", "0-2")
        pod.tree.preset(pod.b, "cpuset.cpus", "3-5")
        desired = {
            pod.pod: CgroupValues(cpuset_cpus=C("0-3")),
            pod.a: CgroupValues(cpuset_cpus=C("0-1")),
            pod.b: CgroupValues(cpuset_cpus=C("2-3")),
        }
        report = pod.fs().apply(desired)
        expected = [
            (pod.rel(pod.a), "cpuset.cpus", "0-2", "0-1", "exact"),
            (pod.rel(pod.b), "cpuset.cpus", "3-5", "2-3", "exact"),
            (pod.rel(pod.pod), "cpuset.cpus", "0-5", "0-3", "exact"),
        ]
        assert (expected, True) == (_writes(pod, report), report.ok)

    def test_levels_widened_top_down(self, pod: Pod) -> None:
        """Several levels are widened top-down before the leaf is written once."""
        kubepods = pod.tree.kubepods()
        for cgroup in (kubepods, pod.pod, pod.a):
            pod.tree.preset(cgroup, "cpuset.cpus", "0-3")
        desired = {
            pod.a: CgroupValues(cpuset_cpus=C("4-5")),
            pod.pod: CgroupValues(cpuset_cpus=C("0-5")),
            kubepods: CgroupValues(cpuset_cpus=C("0-5")),
        }
        report = pod.fs().apply(desired)
        expected = [
            ("kubepods.slice", "cpuset.cpus", "0-3", "0-5", "widen"),
            (pod.rel(pod.pod), "cpuset.cpus", "0-3", "0-5", "widen"),
            (pod.rel(pod.a), "cpuset.cpus", "0-3", "4-5", "exact"),
        ]
        assert (expected, True) == (_writes(pod, report), report.ok)

    def test_mems(self, pod: Pod) -> None:
        """cpuset.mems follows the same order and is verified against cpuset.mems.effective."""
        pod.tree.preset(pod.pod, "cpuset.mems", "0")
        pod.tree.preset(pod.a, "cpuset.mems", "0")
        desired = {pod.pod: CgroupValues(cpuset_mems=C("1")), pod.a: CgroupValues(cpuset_mems=C("1"))}
        report = pod.fs().apply(desired)
        expected = [
            (pod.rel(pod.pod), "cpuset.mems", "0", "0-1", "widen"),
            (pod.rel(pod.a), "cpuset.mems", "0", "1", "exact"),
            (pod.rel(pod.pod), "cpuset.mems", "0-1", "1", "exact"),
        ]
        assert (expected, True, "1") == (_writes(pod, report), report.ok, pod.tree.read(pod.a, "cpuset.mems.effective"))

    def test_unchanged_not_rewritten(self, pod: Pod) -> None:
        """Applying the same values again writes nothing and lists every value as unchanged."""
        desired = {
            pod.pod: CgroupValues(cpuset_cpus=C("2-5"), cpuset_mems=C("0"), cpu_max=M("max")),
            pod.a: CgroupValues(cpuset_cpus=C("2-3"), cpuset_mems=C("0"), cpu_max=M("max 100000")),
            pod.b: CgroupValues(cpuset_cpus=C("4-5"), cpuset_mems=C("0"), cpu_max=M("20000")),
        }
        pod.fs().apply(desired)
        pod.recorder.writes.clear()
        report = pod.fs().apply(desired)
        unchanged = {(p, f) for p in (pod.pod, pod.a, pod.b) for f in ("cpuset.cpus", "cpuset.mems", "cpu.max")}
        assert ([], (), unchanged, True) == (pod.recorder.writes, report.writes, set(report.unchanged), report.ok)

    @pytest.mark.parametrize(
        ("current", "desired", "written"),
        [
            ("20000 100000", "max", "max 100000"),
            ("max 100000", "50000 50000", "50000 50000"),
            ("max 50000", "150000", "150000 50000"),
        ],
    )
    def test_cpu_max_written_with_period(self, pod: Pod, current: str, desired: str, written: str) -> None:
        """cpu.max is always written as '<quota|max> <period>', keeping the current period when none is given."""
        pod.tree.preset(pod.a, "cpu.max", current)
        report = pod.fs().apply({pod.a: CgroupValues(cpu_max=M(desired))})
        assert ([(pod.rel(pod.a), "cpu.max", written)], written, True) == (
            pod.recorder.writes,
            pod.tree.read(pod.a, "cpu.max"),
            report.ok,
        )


class TestApplyRefusalsAndFailures:
    @pytest.mark.parametrize("file", ["cpuset.cpus", "cpuset.mems"])
    def test_empty_refused(self, pod: Pod, file: str) -> None:
        """An empty cpuset is refused: nothing at all is written to that cgroup, the others are written."""
        if file == "cpuset.cpus":
            refused = CgroupValues(cpuset_cpus=CPUSet(), cpu_max=M("max"))
        else:
            refused = CgroupValues(cpuset_cpus=C("2-3"), cpuset_mems=CPUSet(), cpu_max=M("max"))
        report = pod.fs().apply({pod.a: refused, pod.b: CgroupValues(cpuset_cpus=C("4-5"))})
        assert [(pod.rel(pod.b), "cpuset.cpus", "4-5")] == pod.recorder.writes
        assert [f"refused to write an empty {file} to {pod.a}: an empty cpuset un-pins the cgroup"] == [
            str(f) for f in report.failures
        ]
        assert [EmptyCpusetError] == [type(f) for f in report.failures]

    def test_child_outside_parent_detected(self, pod: Pod) -> None:
        """A child written outside a parent that is not being widened is caught by the effective read-back."""
        pod.tree.preset(pod.pod, "cpuset.cpus", "0-1")
        report = pod.fs().apply({pod.a: CgroupValues(cpuset_cpus=C("2-3"))})
        assert ["2-3", "0-1"] == [pod.tree.read(pod.a, "cpuset.cpus"), pod.tree.read(pod.a, "cpuset.cpus.effective")]
        assert [f"{pod.a}/cpuset.cpus.effective is '0-1', expected '2-3'"] == [str(m) for m in report.mismatches]
        assert ([MismatchError], False) == ([type(m) for m in report.mismatches], report.ok)

    def test_unset_parent_not_covering(self, pod: Pod) -> None:
        """An unset parent whose effective set lacks the desired CPUs is widened from its effective set."""
        pod.tree.preset(pod.tree.kubepods(), "cpuset.cpus", "0-3")
        report = pod.fs().apply(
            {pod.pod: CgroupValues(cpuset_cpus=C("4-5")), pod.a: CgroupValues(cpuset_cpus=C("4-5"))}
        )
        assert [
            (pod.rel(pod.pod), "cpuset.cpus", "", "0-5", "widen"),
            (pod.rel(pod.a), "cpuset.cpus", "", "4-5", "exact"),
            (pod.rel(pod.pod), "cpuset.cpus", "0-5", "4-5", "exact"),
        ] == _writes(pod, report)
        assert [
            f"{pod.pod}/cpuset.cpus.effective is '0-3', expected '4-5'",
            f"{pod.a}/cpuset.cpus.effective is '0-3', expected '4-5'",
        ] == [str(m) for m in report.mismatches]

    @pytest.mark.parametrize(
        ("code", "name", "text"),
        [
            (errno.EBUSY, "EBUSY", "Device or resource busy"),
            (errno.EINVAL, "EINVAL", "Invalid argument"),
            (errno.EACCES, "EACCES", "Permission denied"),
            (errno.ENOSPC, "ENOSPC", "No space left on device"),
        ],
    )
    def test_write_errno_reported(self, pod: Pod, code: int, name: str, text: str) -> None:
        """A failing write is reported with path, file, value and errno; that cgroup stops, the others go on."""
        faults = FaultyOps(RealFileOps(), write_errors={pod.a / "cpuset.cpus": code})
        desired = {
            pod.pod: CgroupValues(cpuset_cpus=C("2-5")),
            pod.a: CgroupValues(cpuset_cpus=C("2-3"), cpu_max=M("max")),
            pod.b: CgroupValues(cpuset_cpus=C("4-5")),
        }
        pod.tree.preset(pod.a, "cpu.max", "50000 100000")
        report = pod.fs(faults).apply(desired)
        assert [(pod.rel(pod.b), "cpuset.cpus", "4-5"), (pod.rel(pod.pod), "cpuset.cpus", "2-5")] == pod.recorder.writes
        assert [f"write {pod.a}/cpuset.cpus value '2-3': {text} ({name})"] == [str(f) for f in report.failures]
        assert [("cpuset.cpus", name), ("cpuset.cpus", "ok"), ("cpuset.cpus", "ok")] == [
            (w.file, w.result) for w in report.writes
        ]
        assert ("50000 100000", ()) == (pod.tree.read(pod.a, "cpu.max"), report.mismatches)

    def test_cgroup_vanishes_mid_apply(self, pod: Pod) -> None:
        """A container whose cgroup disappears before its write is reported as vanished (ENOENT), no file created."""
        faults = FaultyOps(RealFileOps(), before_write={pod.a / "cpuset.cpus": remove_cgroup(pod.a)})
        desired = {
            pod.pod: CgroupValues(cpuset_cpus=C("2-5")),
            pod.a: CgroupValues(cpuset_cpus=C("2-3")),
            pod.b: CgroupValues(cpuset_cpus=C("4-5")),
        }
        report = pod.fs(faults).apply(desired)
        failure = report.failures[0]
        assert type(failure) is CgroupWriteError
        assert (1, True, "ENOENT", False) == (
            len(report.failures),
            failure.vanished,
            failure.errno_name,
            pod.a.exists(),
        )
        assert [(pod.rel(pod.b), "cpuset.cpus", "4-5"), (pod.rel(pod.pod), "cpuset.cpus", "2-5")] == pod.recorder.writes
        assert () == report.mismatches

    @pytest.mark.parametrize(
        ("cpus", "mems", "name", "text"),
        [("6-9", "0-1", "ERANGE", "Numerical result out of range"), ("3", "0-1", "EINVAL", "Invalid argument")],
        ids=["beyond-nr-cpus", "cpu-not-in-machine"],
    )
    def test_invalid_cpu_rejected_by_kernel(self, tmp_path: Path, cpus: str, mems: str, name: str, text: str) -> None:
        """A CPU the machine lacks fails the write as the kernel fails it, and is reported with the errno."""
        tree = build_tree(tmp_path, cpus="0-2,4-7" if name == "EINVAL" else "0-7", mems=mems)
        container = tree.add_container(tree.add_pod(pod_uid(1)), container_hex(1))
        report = CgroupFS(tree.root, tree.ops()).apply({container: CgroupValues(cpuset_cpus=C(cpus))})
        assert [f"write {container}/cpuset.cpus value '{cpus}': {text} ({name})"] == [str(f) for f in report.failures]
        assert ("", name) == (tree.read(container, "cpuset.cpus"), report.writes[0].result)

    def test_read_error_writes_nothing(self, pod: Pod) -> None:
        """A cgroup whose current value cannot be read gets no write at all; the others do."""
        faults = FaultyOps(RealFileOps(), read_errors={pod.a / "cpu.max": errno.EACCES})
        desired = {
            pod.a: CgroupValues(cpuset_cpus=C("2-3"), cpu_max=M("max")),
            pod.b: CgroupValues(cpuset_cpus=C("4-5")),
        }
        report = pod.fs(faults).apply(desired)
        assert [(pod.rel(pod.b), "cpuset.cpus", "4-5")] == pod.recorder.writes
        assert [f"read {pod.a}/cpu.max: Permission denied (EACCES)"] == [str(f) for f in report.failures]

    def test_short_read_writes_nothing(self, pod: Pod) -> None:
        """A truncated read is reported with the file and text, and that cgroup is not written."""
        pod.tree.preset(pod.a, "cpuset.cpus", "0-1")
        faults = FaultyOps(RealFileOps(), short_reads={pod.a / "cpuset.cpus": 2})
        report = pod.fs(faults).apply(
            {pod.a: CgroupValues(cpuset_cpus=C("2-3")), pod.b: CgroupValues(cpuset_cpus=C("4-5"))}
        )
        assert [(pod.rel(pod.b), "cpuset.cpus", "4-5")] == pod.recorder.writes
        assert [f"{pod.a}/cpuset.cpus: invalid cpulist '0-': '' is not a CPU id"] == [str(f) for f in report.failures]

    def test_readback_error_reported(self, pod: Pod) -> None:
        """An effective file that cannot be read back is a failure naming it."""
        faults = FaultyOps(RealFileOps(), read_errors={pod.a / "cpuset.cpus.effective": errno.EIO})
        report = pod.fs(faults).apply({pod.a: CgroupValues(cpuset_cpus=C("2-3"))})
        assert [(pod.rel(pod.a), "cpuset.cpus", "2-3")] == pod.recorder.writes
        assert [f"read {pod.a}/cpuset.cpus.effective: Input/output error (EIO)"] == [str(f) for f in report.failures]

    def test_path_outside_root(self, pod: Pod, tmp_path: Path) -> None:
        """A desired path outside the root is refused and reported; the others are written."""
        outside = tmp_path / "elsewhere"
        outside.mkdir()
        (outside / "cpuset.cpus").write_text("")
        report = pod.fs().apply({outside: CgroupValues(cpuset_cpus=C("1")), pod.a: CgroupValues(cpuset_cpus=C("2"))})
        assert ([(pod.rel(pod.a), "cpuset.cpus", "2")], "") == (
            pod.recorder.writes,
            (outside / "cpuset.cpus").read_text(),
        )
        assert [f"cgroup path {outside} resolves to {outside}, outside the cgroup root {pod.root}"] == [
            str(f) for f in report.failures
        ]

    def test_cgroupfs_driver(self, tmp_path: Path) -> None:
        """The writer works the same on a cgroupfs-driver tree."""
        pod = Pod(tmp_path, driver="cgroupfs")
        report = pod.fs().apply({pod.pod: CgroupValues(cpuset_cpus=C("1-2")), pod.a: CgroupValues(cpuset_cpus=C("1"))})
        expected = [
            (f"kubepods/pod{pod_uid(1)}/{container_hex(1)}", "cpuset.cpus", "1"),
            (f"kubepods/pod{pod_uid(1)}", "cpuset.cpus", "1-2"),
        ]
        assert (expected, True) == (pod.recorder.writes, report.ok)

    def test_readback_trusts_effective_only(self, pod: Pod) -> None:
        """With plain files (no kernel behind them) cpuset.cpus is written but the unchanged effective is a mismatch."""
        report = CgroupFS(pod.root).apply({pod.a: CgroupValues(cpuset_cpus=C("3"), cpu_max=M("max"))})
        assert ("3", ["cpuset.cpus"]) == (pod.tree.read(pod.a, "cpuset.cpus"), [w.file for w in report.writes])
        assert [f"{pod.a}/cpuset.cpus.effective is '0-7', expected '3'"] == [str(m) for m in report.mismatches]


def test_kernel_emulation_replaces_a_value_whole_for_a_reader_on_another_thread(tmp_path: Path) -> None:
    """A test's write behind the agent's back and the agent's read never meet half-way: the reader sees the old
    value or the new one, never the empty file between a write's truncation and its data (a cgroup file never
    shows that; a drift test once logged ``old: ""``)."""
    tree = build_tree(tmp_path)
    pod = tree.add_pod(pod_uid(1))
    ops = tree.ops()
    values = ("0-3", "4-7")
    tree.preset(pod, "cpuset.cpus", values[0])
    done = threading.Event()

    def write_many() -> None:
        for n in range(400):
            tree.preset(pod, "cpuset.cpus", values[n % 2])
            ops.write(pod / "cpuset.cpus", values[(n + 1) % 2])
        done.set()

    writer = threading.Thread(target=write_many)
    writer.start()
    seen: set[str] = set()
    while not done.is_set() or not seen:  # at least one read, however fast the writer was
        seen.add(ops.read(pod / "cpuset.cpus"))
    writer.join()
    assert seen <= set(values)
