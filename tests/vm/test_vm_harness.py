"""The host-side VM harness: layouts, the "run tests/vm/vm-setup.sh" failure, the opt-in skip, and a boot
that times out (one short real boot); everything else here runs without a VM.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.vm import harness
from tests.vm.harness import VMConfig, VMRunError


def _fake_qemu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Put an executable named qemu-system-x86_64 first on PATH, so only the VM dir decides."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    qemu = bin_dir / "qemu-system-x86_64"
    qemu.write_text("#!/bin/sh\nexit 1\n")
    qemu.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))


class TestVMConfig:
    """Layouts given to run-in-vm.sh."""

    def test_labels(self) -> None:
        """Labels name CPUs, NUMA nodes, sockets when they differ from nodes, and SMT."""
        actual = [
            VMConfig().label,
            VMConfig(nodes=4).label,
            VMConfig(nodes=2, threads=2).label,
            VMConfig(nodes=2, sockets=1).label,
        ]
        assert ["8cpu-2numa", "8cpu-4numa", "8cpu-2numa-smt2", "8cpu-2numa-1s"] == actual

    def test_node_cpulists(self) -> None:
        """qemu gives node N the N-th contiguous block of CPUs."""
        actual = (VMConfig(nodes=4).node_cpulists(), VMConfig(cpus=4, nodes=4).node_cpulists())
        assert ({"0": "0-1", "1": "2-3", "2": "4-5", "3": "6-7"}, {"0": "0", "1": "1", "2": "2", "3": "3"}) == actual

    def test_env(self) -> None:
        """The knobs passed to run-in-vm.sh."""
        expected = {
            "VM_CPUS": "8",
            "VM_NODES": "4",
            "VM_THREADS": "2",
            "VM_SOCKETS": "4",
            "VM_MEM_MB": "2048",
            "VM_TIMEOUT": "240",
            "VM_BOOT_TIMEOUT": "60",
            "VM_BOOT_RETRIES": "1",
        }
        assert expected == VMConfig(nodes=4, threads=2).env()

    def test_core_split_across_nodes_is_refused(self) -> None:
        """6 CPUs on 2 nodes with 2 threads per core would split a core over two nodes."""
        with pytest.raises(ValueError) as info:
            VMConfig(cpus=6, nodes=2, threads=2)
        assert "VMConfig: 6 vCPUs do not split into 2 nodes x 2 threads" == str(info.value)


class TestSetupCheck:
    """Missing qemu or kernel fails the VM tests with the setup hint; PODPIN_SKIP_VM=1 turns that into a skip."""

    def test_missing_qemu(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without qemu on PATH the reason names it and the setup script."""
        monkeypatch.setenv("PATH", str(tmp_path))
        assert "qemu-system-x86_64 is not installed: run tests/vm/vm-setup.sh" == harness.missing_setup(tmp_path)

    def test_missing_kernel(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """An empty VM dir: the kernel is missing."""
        _fake_qemu(tmp_path, monkeypatch)
        vm = tmp_path / "vm"
        vm.mkdir()
        expected = f"{vm}/kernel is missing: run tests/vm/vm-setup.sh (PODPIN_VM_DIR={vm})"
        assert expected == harness.missing_setup(vm)

    def test_outdated_setup(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A VM dir built by another version of vm-setup.sh must be rebuilt."""
        _fake_qemu(tmp_path, monkeypatch)
        monkeypatch.delenv("VM_KERNEL_SUITE", raising=False)
        vm = tmp_path / "vm"
        vm.mkdir()
        for name in ("kernel", "initramfs.cpio"):
            (vm / name).write_bytes(b"x")
        (vm / "setup-id").write_text("0123456789abcdef suite=default\n")
        current = harness.setup_id()
        expected = (
            f"{vm} was built by another version of vm-setup.sh (setup-id '0123456789abcdef suite=default', "
            f"expected {current!r}): run tests/vm/vm-setup.sh"
        )
        assert expected == harness.missing_setup(vm)

    def test_complete_setup(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Kernel, initramfs and a matching setup-id: nothing is missing."""
        _fake_qemu(tmp_path, monkeypatch)
        monkeypatch.delenv("VM_KERNEL_SUITE", raising=False)
        for name in ("kernel", "initramfs.cpio"):
            (tmp_path / name).write_bytes(b"x")
        (tmp_path / "setup-id").write_text(harness.setup_id() + "\n")
        assert None is harness.missing_setup(tmp_path)

    def test_require_vm_fails_without_setup(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without PODPIN_SKIP_VM the test fails (never a silent skip), telling how to set up."""
        _fake_qemu(tmp_path, monkeypatch)
        monkeypatch.setenv("PODPIN_VM_DIR", str(tmp_path))
        monkeypatch.delenv("PODPIN_SKIP_VM", raising=False)
        with pytest.raises(pytest.fail.Exception) as info:
            harness.require_vm()
        expected = (
            f"real-kernel VM tests cannot run: {tmp_path}/kernel is missing: run tests/vm/vm-setup.sh "
            f"(PODPIN_VM_DIR={tmp_path}); or set PODPIN_SKIP_VM=1 to skip them"
        )
        assert expected == str(info.value)

    def test_require_vm_skips_when_asked(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """With PODPIN_SKIP_VM=1 the same condition is a skip that gives the reason."""
        _fake_qemu(tmp_path, monkeypatch)
        monkeypatch.setenv("PODPIN_VM_DIR", str(tmp_path))
        monkeypatch.setenv("PODPIN_SKIP_VM", "1")
        with pytest.raises(pytest.skip.Exception) as info:
            harness.require_vm()
        expected = (
            f"{tmp_path}/kernel is missing: run tests/vm/vm-setup.sh (PODPIN_VM_DIR={tmp_path}) "
            "(skipped: PODPIN_SKIP_VM=1)"
        )
        assert expected == str(info.value)

    def test_vm_dir_default(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without PODPIN_VM_DIR the harness uses /tmp/podpin-vm, vm-setup.sh's default."""
        monkeypatch.delenv("PODPIN_VM_DIR", raising=False)
        assert Path("/tmp/podpin-vm") == harness.vm_dir()


def test_workdir_with_comma_is_refused(tmp_path: Path) -> None:
    """run-in-vm.sh cannot share a directory whose path has a comma; the harness says so before booting."""
    workdir = tmp_path / "a,b"
    workdir.mkdir()
    with pytest.raises(VMRunError) as info:
        harness.run_scenario(harness.VM_TESTS / "scenario_layout.py", VMConfig(), workdir)
    assert f"VM_RW directory {workdir} must not contain spaces or commas (run-in-vm.sh limitation)" == str(info.value)


def test_scenario_crash_reports_exit_status_and_stderr(tmp_path: Path) -> None:
    """A guest command that exits non-zero without results raises VMRunError with its status and stderr."""
    harness.require_vm()
    missing = harness.VM_TESTS / "scenario_that_does_not_exist.py"
    with pytest.raises(VMRunError) as info:
        harness.run_scenario(missing, VMConfig(), tmp_path)
    lines = str(info.value).splitlines()
    actual = (re.sub(r"after [0-9.]+ s", "after N s", lines[0]), lines[1], lines[2])
    expected = (
        "VM run of scenario_that_does_not_exist (8cpu-2numa) exited with status 2 after N s; steps recorded: none",
        "--- stderr (last 25 lines) ---",
        f"{sys.executable}: can't open file '{missing}': [Errno 2] No such file or directory",
    )
    assert expected == actual, str(info.value)


def test_boot_timeout_reports_console_tail(tmp_path: Path) -> None:
    """A boot that does not reach the scenario within VM_BOOT_TIMEOUT (1 s here, no retry) raises VMRunError
    naming the timeout, the steps recorded (none) and the guest console tail."""
    harness.require_vm()
    config = VMConfig(boot_timeout_s=1, boot_retries=0)
    with pytest.raises(VMRunError) as info:
        harness.run_scenario(harness.VM_TESTS / "scenario_layout.py", config, tmp_path)
    lines = str(info.value).splitlines()
    console_at = next(i for i, line in enumerate(lines) if line.startswith("--- guest console"))
    actual = {
        "first line": re.sub(r"after [0-9.]+ s", "after N s", lines[0]),
        "stderr says why": "run-in-vm: guest did not reach CMD within VM_BOOT_TIMEOUT=1 s" in lines,
        "console has kernel lines": bool(re.match(r"^\[ *[0-9]+\.[0-9]+\] ", lines[console_at + 1])),
    }
    expected = {
        "first line": "VM run of scenario_layout (8cpu-2numa) timed out (VM_BOOT_TIMEOUT or VM_TIMEOUT, see stderr) "
        "after N s; steps recorded: none",
        "stderr says why": True,
        "console has kernel lines": True,
    }
    assert expected == actual, str(info.value)


def _run_in_vm_true(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``run-in-vm.sh true`` with ``env`` (a stand-in qemu on its PATH), bounded at 60 s."""
    return subprocess.run(
        ["bash", str(harness.VM_TESTS / "run-in-vm.sh"), "true"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_unterminated_console_line_does_not_swallow_the_reason(tmp_path: Path) -> None:
    """A guest stopped mid-line leaves its console without a final newline; run-in-vm.sh's own message still starts
    a line of its own (a QEMU stand-in writes half a line to the console file and hangs past the boot timeout)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    qemu = bin_dir / "qemu-system-x86_64"
    qemu.write_text(
        "#!/bin/bash\n"
        'for a in "$@"; do case $a in file:*console.log)\n'
        '  printf "[    0.8] PCI: half a li" > "${a#file:}";; esac; done\n'
        "exec sleep 30\n"
    )
    qemu.chmod(0o755)
    vm = tmp_path / "vm"
    vm.mkdir()
    for name in ("kernel", "initramfs.cpio"):
        (vm / name).write_bytes(b"x")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "VM_DIR": str(vm), "VM_BOOT_TIMEOUT": "1", "VM_BOOT_RETRIES": "0"}
    run = _run_in_vm_true(env)
    lines = run.stderr.splitlines()
    expected = (124, True, True)
    actual = (
        run.returncode,
        "[    0.8] PCI: half a li" in lines,
        "run-in-vm: guest did not reach CMD within VM_BOOT_TIMEOUT=1 s" in lines,
    )
    assert expected == actual, run.stderr


def _fake_runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, outcomes: list[str]) -> Path:
    """A run-in-vm.sh stand-in whose Nth call acts out ``outcomes[N-1]``: ``stall`` (the kernel's RCU stall on the
    console, no exit code), ``crash`` (a plain failure, no stall), ``freeze`` (one heartbeat, then a ``timeout``
    child that sleeps 10 min, as run-in-vm.sh runs QEMU), ``beat`` (2 s of heartbeats, then complete) or ``ok``
    (a complete results file). Returns the file counting the calls."""
    tests_dir, calls = tmp_path / "fake-vm-tests", tmp_path / "calls"
    tests_dir.mkdir()
    script = tests_dir / "run-in-vm.sh"
    cases = "".join(f"  {n}) act={act} ;;\n" for n, act in enumerate(outcomes, 1))
    script.write_text(
        "#!/usr/bin/env bash\n"
        f'n=$(( $(cat "{calls}" 2>/dev/null || echo 0) + 1 )); echo "$n" > "{calls}"\n'
        f'case "$n" in\n{cases}  *) act=crash ;;\nesac\n'
        'case "$act" in\n'
        "  stall) printf '[ 51.5] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:\\n' > \"$VM_CONSOLE_LOG\"\n"
        "         exit 125 ;;\n"
        "  crash) printf '[    9.0] an ordinary console\\n' > \"$VM_CONSOLE_LOG\"; exit 3 ;;\n"
        # a guest frozen whole: one heartbeat, then nothing; its QEMU under `timeout`, in a process group of its own
        '  freeze) echo 1.0 > "$VM_RW/heartbeat"; timeout 600 sleep 600 & echo $! > "$VM_RW/sleeper"; wait; exit 0 ;;\n'
        # a slow guest that lives: heartbeats throughout, then a complete results file
        '  beat) for _ in 1 2 3 4 5 6 7 8 9 10; do echo 1.0 > "$VM_RW/heartbeat"; sleep 0.2; done\n'
        '        printf \'{"complete": true, "steps": {}, "meta": {}}\' > "$4"; exit 0 ;;\n'
        '  ok) printf \'{"complete": true, "steps": {}, "meta": {}}\' > "$4"; exit 0 ;;\n'
        "esac\n"
    )
    monkeypatch.setattr(harness, "VM_TESTS", tests_dir)
    monkeypatch.setattr(harness, "TIMINGS", [])  # no fake runs in the session's table of VM runs
    monkeypatch.setattr(harness, "_HEARTBEAT_POLL_SECONDS", 0.1)
    monkeypatch.setenv("VM_HEARTBEAT_STALL", "1")
    return calls


class TestKernelStallRetry:
    """A run that failed while the guest's kernel reported a lockup boots again in a fresh directory, once."""

    def test_a_stalled_run_is_booted_again_in_a_fresh_directory(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """First boot stalls, the second completes: its run is returned, from <workdir>-stalled-retry1, and the
        first run's console stays in the workdir; stderr says why it booted again."""
        calls = _fake_runner(tmp_path, monkeypatch, ["stall", "ok"])
        run = harness.run_scenario(Path("scenario_x.py"), VMConfig(), tmp_path / "work", stall_retries=1)
        assert ("2", tmp_path / "work-stalled-retry1", True, True) == (
            calls.read_text().strip(),
            run.workdir,
            harness.kernel_stalled((tmp_path / "work" / "console.log").read_text()),
            "the guest stalled" in capsys.readouterr().err,
        )

    def test_a_failure_without_a_stall_is_not_retried(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A scenario that fails on its own (no lockup on the console) fails at once, even with retries allowed."""
        calls = _fake_runner(tmp_path, monkeypatch, ["crash", "ok"])
        with pytest.raises(VMRunError, match="exited with status 3"):
            harness.run_scenario(Path("scenario_x.py"), VMConfig(), tmp_path / "work", stall_retries=1)
        assert "1" == calls.read_text().strip()

    def test_retries_are_bounded(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A guest that stalls every time fails after 1 + stall_retries boots; without retries after one."""
        calls = _fake_runner(tmp_path, monkeypatch, ["stall", "stall", "stall"])
        with pytest.raises(VMRunError, match="produced no exit code"):
            harness.run_scenario(Path("scenario_x.py"), VMConfig(), tmp_path / "a", stall_retries=1)
        first = calls.read_text().strip()
        calls.unlink()
        with pytest.raises(VMRunError):
            harness.run_scenario(Path("scenario_x.py"), VMConfig(), tmp_path / "b")
        assert ("2", "1") == (first, calls.read_text().strip())


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its reaper does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class TestFrozenGuest:
    """A guest whose heartbeat stands still for ``VM_HEARTBEAT_STALL`` seconds is killed, not waited for."""

    def test_a_frozen_guest_is_killed_with_its_children_and_booted_again(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The first boot beats once and freezes: killed about a second later (not at its 10 min), its ``timeout``
        child (a process group of its own, as QEMU's) with it; the retry completes and stderr says the heartbeat
        stopped."""
        calls = _fake_runner(tmp_path, monkeypatch, ["freeze", "ok"])
        started = time.monotonic()
        run = harness.run_scenario(Path("scenario_x.py"), VMConfig(), tmp_path / "work", stall_retries=1)
        took = time.monotonic() - started
        sleeper = int((tmp_path / "work" / "sleeper").read_text())
        err = capsys.readouterr().err
        assert ("2", tmp_path / "work-stalled-retry1", False, True, True) == (
            calls.read_text().strip(),
            run.workdir,
            _alive(sleeper),
            "the guest's heartbeat stopped" in err,
            took < 30,
        )

    def test_without_retries_a_frozen_guest_fails_as_frozen(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The error is a :class:`harness.GuestFrozenError`, a kind of VMRunError, and says how long it stood still."""
        _fake_runner(tmp_path, monkeypatch, ["freeze"])
        with pytest.raises(harness.GuestFrozenError, match=r"heartbeat stopped for \d+ s"):
            harness.run_scenario(Path("scenario_x.py"), VMConfig(), tmp_path / "work")

    def test_a_guest_that_keeps_beating_is_left_alone(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Two seconds of heartbeats every 0.2 s, with 1 s as the limit: the run completes on its first boot."""
        calls = _fake_runner(tmp_path, monkeypatch, ["beat"])
        run = harness.run_scenario(Path("scenario_x.py"), VMConfig(), tmp_path / "work", stall_retries=1)
        assert ("1", tmp_path / "work") == (calls.read_text().strip(), run.workdir)


_LINGERING_QEMU = r"""#!/bin/bash
# A stand-in qemu whose guest runs CMD (exit 3, one line on stderr) and then never powers off.
for arg in "$@"; do
  case "$arg" in file,id=err,path=*) err=${arg#*path=} ;; file,id=rc,path=*) rc=${arg#*path=} ;; esac
done
trap 'echo "qemu-system-x86_64: terminating on signal 15 from pid 1 (bash)" >&2; exit 0' TERM
echo started > "$rc"
echo "the guest's own complaint" > "$err"
echo "rc=3" >> "$rc"
mkfifo "$rc.never"; exec 9<>"$rc.never"   # a builtin wait on a pipe nobody writes: no child for SIGTERM to kill
while :; do read -r -t 0.2 -u 9 || :; done
"""


def test_a_guest_that_does_not_power_off_is_stopped_after_the_grace(tmp_path: Path) -> None:
    """A guest that recorded CMD's exit code but never powers off is stopped VM_POWEROFF_GRACE s later, not at
    VM_TIMEOUT: run-in-vm.sh exits with CMD's code, the guest's stderr first, then why qemu was stopped, and
    without qemu's own "terminating on signal" (CI once waited out the 300 s VM_TIMEOUT this way, and qemu's line
    came before the guest's)."""
    bin_dir, vm_dir = tmp_path / "bin", tmp_path / "vm"
    bin_dir.mkdir()
    vm_dir.mkdir()
    for name in ("kernel", "initramfs.cpio"):
        (vm_dir / name).write_text("not a kernel\n")
    qemu = bin_dir / "qemu-system-x86_64"
    qemu.write_text(_LINGERING_QEMU)
    qemu.chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "VM_DIR": str(vm_dir),
        "VM_POWEROFF_GRACE": "1",
        "VM_TIMEOUT": "120",
    }
    proc = _run_in_vm_true(env)
    assert (
        3,
        [
            "the guest's own complaint",
            "run-in-vm: the guest recorded its exit code but did not power off within 1 s; qemu stopped",
        ],
    ) == (proc.returncode, proc.stderr.splitlines())
