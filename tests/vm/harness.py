"""Host side: boot the test VM once per test module, run a guest scenario, and hand its results to the tests.

A VM test module declares one fixture with :func:`scenario_fixture`. The fixture boots the VM
(``run-in-vm.sh``, ~3 s under TCG) with the module's layout, runs the module's guest scenario
(``scenario_<x>.py``, see ``scenario.py``) with the project venv's interpreter by absolute path, and
returns a :class:`GuestRun`; each test then asserts one fact from it::

    facts = harness.scenario_fixture("scenario_kernel_facts.py", harness.VMConfig(nodes=2))

    def test_x(facts: harness.GuestRun) -> None:
        step = facts.step("cpu_max")
        assert "max 100000" == step["after_max"], step.explain

Failures explain themselves: :meth:`GuestRun.step` raises :class:`GuestStepError` with the guest's
traceback and stderr tail when the step failed in the guest, ``step.explain`` carries every value the
step recorded plus the stderr tail, and a VM that does not boot or finish raises :class:`VMRunError` with
the console tail. When qemu or the kernel is missing the tests fail with "run tests/vm/vm-setup.sh",
unless ``PODPIN_SKIP_VM=1`` (then they skip with that reason).

Environment: ``PODPIN_VM_DIR`` (default ``/tmp/podpin-vm``, where ``vm-setup.sh`` puts kernel and
initramfs), ``PODPIN_SKIP_VM``, ``VM_KERNEL_SUITE`` (must match the one given to ``vm-setup.sh``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.vm.bytecode import precompile_checkout
from tests.vm.scenario import HEARTBEAT_FILE

__all__ = [
    "SETUP_HINT",
    "TIMINGS",
    "HEARTBEAT_STALL_SECONDS",
    "GuestFrozenError",
    "GuestRun",
    "GuestStepError",
    "Step",
    "VMConfig",
    "VMRunError",
    "heartbeat_stall_seconds",
    "kernel_stalled",
    "kill_session",
    "missing_setup",
    "require_vm",
    "VM_TESTS",
    "run_scenario",
    "scenario_fixture",
    "setup_id",
    "vm_dir",
]

VM_TESTS = Path(__file__).resolve().parent
"""``tests/vm``: the scripts, guest helpers and scenarios."""

REPO = VM_TESTS.parent.parent
SETUP_HINT = "run tests/vm/vm-setup.sh"
_TAIL_LINES = 25


def vm_dir() -> Path:
    """Where ``vm-setup.sh`` put the kernel and initramfs (``$PODPIN_VM_DIR``, default ``/tmp/podpin-vm``)."""
    return Path(os.environ.get("PODPIN_VM_DIR") or "/tmp/podpin-vm")


def missing_setup(directory: Path | None = None) -> str | None:
    """Why the VM cannot boot here, or None when qemu, kernel and an up-to-date setup are present."""
    directory = directory or vm_dir()
    if shutil.which("qemu-system-x86_64") is None:
        return f"qemu-system-x86_64 is not installed: {SETUP_HINT}"
    for name in ("kernel", "initramfs.cpio"):
        if not (directory / name).is_file() or (directory / name).stat().st_size == 0:
            return f"{directory / name} is missing: {SETUP_HINT} (PODPIN_VM_DIR={directory})"
    expected = setup_id()
    try:
        actual = (directory / "setup-id").read_text().strip()
    except OSError:
        actual = "(none)"
    if actual != expected:
        return (
            f"{directory} was built by another version of vm-setup.sh (setup-id {actual!r}, "
            f"expected {expected!r}): {SETUP_HINT}"
        )
    return None


def setup_id() -> str:
    """The id ``vm-setup.sh`` writes: its own sha256 prefix and the kernel suite."""
    digest = hashlib.sha256((VM_TESTS / "vm-setup.sh").read_bytes()).hexdigest()[:16]
    return f"{digest} suite={os.environ.get('VM_KERNEL_SUITE') or 'default'}"


def require_vm() -> Path:
    """The VM dir, ready to boot; otherwise fail the test (skip only with ``PODPIN_SKIP_VM=1``)."""
    reason = missing_setup()
    if reason is None:
        return vm_dir()
    if os.environ.get("PODPIN_SKIP_VM") == "1":
        pytest.skip(f"{reason} (skipped: PODPIN_SKIP_VM=1)")
    pytest.fail(f"real-kernel VM tests cannot run: {reason}; or set PODPIN_SKIP_VM=1 to skip them", pytrace=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class VMConfig:
    """The guest machine: ``cpus`` vCPUs on ``nodes`` NUMA nodes (node N = a contiguous CPU range),
    ``sockets`` packages (default one per node), ``threads`` per core (2 = SMT siblings with consecutive ids).
    """

    cpus: int = 8
    nodes: int = 2
    threads: int = 1
    sockets: int | None = None
    mem_mb: int = 2048
    timeout_s: int = 240
    """Whole run limit: boot + scenario. A scenario takes ~10-40 s here; CPU-bound code is ~13x slower."""
    boot_timeout_s: int = 60
    """A boot that has not started the scenario by then is hung (seen ~2 in 300) and is retried."""
    boot_retries: int = 1

    def __post_init__(self) -> None:
        sockets = self.sockets or self.nodes
        if self.cpus % self.nodes or (self.cpus // self.nodes) % self.threads or self.cpus % (sockets * self.threads):
            raise ValueError(
                f"VMConfig: {self.cpus} vCPUs do not split into {self.nodes} nodes x {self.threads} threads"
            )

    @property
    def label(self) -> str:
        """A short name for ids and reports, e.g. ``8cpu-2numa`` or ``8cpu-2numa-smt2``."""
        smt = f"-smt{self.threads}" if self.threads > 1 else ""
        sockets = f"-{self.sockets}s" if self.sockets not in (None, self.nodes) else ""
        return f"{self.cpus}cpu-{self.nodes}numa{sockets}{smt}"

    def node_cpulists(self) -> dict[str, str]:
        """The cpulist qemu gives each NUMA node (what the guest's ``nodeN/cpulist`` must read)."""
        per = self.cpus // self.nodes
        return {str(n): f"{n * per}-{(n + 1) * per - 1}" if per > 1 else str(n * per) for n in range(self.nodes)}

    def env(self) -> dict[str, str]:
        """The ``run-in-vm.sh`` knobs for this machine."""
        return {
            "VM_CPUS": str(self.cpus),
            "VM_NODES": str(self.nodes),
            "VM_THREADS": str(self.threads),
            "VM_SOCKETS": str(self.sockets or self.nodes),
            "VM_MEM_MB": str(self.mem_mb),
            "VM_TIMEOUT": str(self.timeout_s),
            "VM_BOOT_TIMEOUT": str(self.boot_timeout_s),
            "VM_BOOT_RETRIES": str(self.boot_retries),
        }


class VMRunError(RuntimeError):
    """The VM did not boot, timed out, or the scenario crashed before finishing; carries the evidence."""


class GuestFrozenError(VMRunError):
    """The guest's heartbeat (``scenario.HEARTBEAT_FILE``) stood still for :func:`heartbeat_stall_seconds`: the
    guest froze whole and the run was killed, the emulator's failure like a kernel stall (:func:`run_scenario`
    may boot once more for it)."""


HEARTBEAT_STALL_SECONDS = 240.0
"""A guest whose heartbeat (rewritten every 5 s) stood still this long is frozen. Seen: a TCG guest running
containerd 2.2 froze 30 s into its scenario with nothing on its console and waited out its 30 min hang guard."""

_HEARTBEAT_POLL_SECONDS = 5.0


KERNEL_STALL_MARKERS = ("BUG: soft lockup", "detected stalls on CPUs/tasks")
"""What the guest's kernel prints when its vCPUs were starved: a soft lockup, an RCU stall."""


def kernel_stalled(console: str) -> bool:
    """Whether the guest's kernel reported a soft lockup or an RCU stall.

    Under TCG on a loaded two-core host an 8-vCPU guest can livelock in the kernel itself (seen: every vCPU spinning
    in page allocation and text patching from 50 s after boot, the scenario frozen until its hang guard, 30 min):
    the emulator's failure, not the scenario's, which is why :func:`run_scenario` may boot once more for it.
    """
    return any(marker in console for marker in KERNEL_STALL_MARKERS)


class GuestStepError(AssertionError):
    """A scenario step raised inside the guest; the message holds its traceback and the stderr tail."""


def _tail(text: str, lines: int = _TAIL_LINES) -> str:
    kept = text.rstrip("\n").splitlines()[-lines:]
    return "\n".join(kept) if kept else "(empty)"


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """What one guest step observed. ``step["key"]`` reads a value; ``step.explain`` is an assert message."""

    name: str
    values: Mapping[str, Any]
    seconds: float
    explain: str

    def __getitem__(self, key: str) -> Any:
        try:
            return self.values[key]
        except KeyError:
            raise GuestStepError(f"step {self.name!r} recorded no value {key!r}\n{self.explain}") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class GuestRun:
    """One boot of the VM running one scenario, and everything it left behind."""

    scenario: str
    config: VMConfig
    returncode: int
    wall_seconds: float
    stdout: str
    stderr: str
    console: str
    results: Mapping[str, Any]
    workdir: Path

    @property
    def meta(self) -> Mapping[str, Any]:
        """Scenario metadata: kernel, interpreter, guest uptime at scenario start, scenario duration."""
        meta: Mapping[str, Any] = self.results.get("meta", {})
        return meta

    def step(self, name: str) -> Step:
        """The values step ``name`` recorded.

        Raises:
            GuestStepError: the step is unknown or failed in the guest (with its traceback).
        """
        steps: Mapping[str, Any] = self.results.get("steps", {})
        if name not in steps:
            raise GuestStepError(
                f"scenario {self.scenario} has no step {name!r} (steps: {sorted(steps)})\n{self._stderr_block()}"
            )
        record = steps[name]
        values = json.dumps(record.get("values"), indent=1, sort_keys=True)
        if not record.get("ok"):
            raise GuestStepError(
                f"guest step {name!r} of scenario {self.scenario} ({self.config.label}) failed:\n"
                f"{record.get('error')}\nvalues recorded before the failure: {values}\n{self._stderr_block()}"
            )
        explain = (
            f"guest step {name!r} of {self.scenario} ({self.config.label}) recorded: {values}\n{self._stderr_block()}"
        )
        return Step(
            name=name, values=record.get("values", {}), seconds=float(record.get("seconds", 0.0)), explain=explain
        )

    def _stderr_block(self) -> str:
        return f"--- guest stderr (last {_TAIL_LINES} lines) ---\n{_tail(self.stderr)}"


@dataclass(frozen=True, slots=True, kw_only=True)
class _Timing:
    """How long one VM run took (wall on the host; guest uptime when the scenario began; scenario only)."""

    scenario: str
    label: str
    wall_seconds: float
    guest_uptime_at_start: float
    scenario_seconds: float


TIMINGS: list[_Timing] = []
"""Every VM run of this session, for the terminal summary (``tests/vm/conftest.py``)."""


def run_scenario(
    script: Path,
    config: VMConfig,
    workdir: Path,
    *,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    python: str | None = None,
    stall_retries: int = 0,
) -> GuestRun:
    """Boot the VM, run ``script`` in it with the venv's interpreter, and collect the results.

    ``workdir`` is shared read-write with the guest (``VM_RW``): the results file, the guest console copy
    and any logs the scenario writes land there. With ``stall_retries``, a run that failed while the guest's kernel
    reported a lockup (:func:`kernel_stalled`) or froze whole (:class:`GuestFrozenError`) is run again, at most that
    many times, each in a fresh sibling directory ``<workdir>-stalled-retry<N>`` (the failed run's files stay where
    they are, for the record); only for scenarios that write all their files themselves. Each retry is said on
    stderr with the failed run's message.

    Raises:
        VMRunError: the VM did not boot or finish, or the scenario crashed before completing its results;
            the message has the exit status, the steps recorded, and the guest stderr and console tails.
    """
    for attempt in range(stall_retries + 1):
        directory = workdir if attempt == 0 else workdir.with_name(f"{workdir.name}-stalled-retry{attempt}")
        directory.mkdir(parents=True, exist_ok=True)
        try:
            return _run_once(script, config, directory, args=args, env=env, python=python)
        except VMRunError as err:
            console = directory / "console.log"
            stalled = isinstance(err, GuestFrozenError) or (
                console.exists() and kernel_stalled(console.read_text(errors="replace"))
            )
            if not stalled or attempt == stall_retries:
                raise
            sys.stderr.write(
                f"run_scenario: the guest stalled (a soft lockup / RCU stall, or a still heartbeat) in {script.stem}; "
                f"booting again (retry {attempt + 1} of {stall_retries}). The failed run: {str(err)[:2000]}\n"
            )
    raise AssertionError("unreachable: the last attempt returns or raises")


def _run_once(
    script: Path,
    config: VMConfig,
    workdir: Path,
    *,
    args: Sequence[str],
    env: Mapping[str, str] | None,
    python: str | None,
) -> GuestRun:
    """One boot of :func:`run_scenario`."""
    directory = vm_dir()
    workdir = workdir.resolve()
    if any(c in str(workdir) for c in " ,"):
        raise VMRunError(f"VM_RW directory {workdir} must not contain spaces or commas (run-in-vm.sh limitation)")
    results_path = workdir / "results.json"
    console_path = workdir / "console.log"
    for stale in (results_path, console_path):
        stale.unlink(missing_ok=True)
    interpreter = python or os.path.abspath(sys.executable)
    precompile_checkout()  # the guest imports the checkout and cannot cache its bytecode (tests/vm/bytecode.py)
    command = ["bash", str(VM_TESTS / "run-in-vm.sh"), interpreter, str(script), "--results", str(results_path), *args]
    run_env = {**os.environ, **config.env(), **(env or {})}
    run_env.update({"VM_DIR": str(directory), "VM_RW": str(workdir), "VM_CONSOLE_LOG": str(console_path)})
    # The scenario imports its helpers as ``tests.vm.*``: the guest needs the checkout's root on its path.
    run_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), run_env.get("PYTHONPATH")]))
    heartbeat = workdir / HEARTBEAT_FILE
    heartbeat.unlink(missing_ok=True)
    started = time.monotonic()
    proc = _run_watched(command, run_env, heartbeat, heartbeat_stall_seconds())
    wall = round(time.monotonic() - started, 2)
    console = console_path.read_text(errors="replace") if console_path.exists() else ""
    results: dict[str, Any] = {}
    if results_path.exists():
        results = json.loads(results_path.read_text())
    run = GuestRun(
        scenario=script.stem,
        config=config,
        returncode=proc.returncode,
        wall_seconds=wall,
        stdout=proc.stdout,
        stderr=proc.stderr,
        console=console,
        results=results,
        workdir=workdir,
    )
    TIMINGS.append(
        _Timing(
            scenario=script.stem,
            label=config.label,
            wall_seconds=wall,
            guest_uptime_at_start=float(run.meta.get("uptime_at_start_s", -1.0)),
            scenario_seconds=float(run.meta.get("scenario_seconds", -1.0)),
        )
    )
    if proc.frozen_for is not None:
        raise GuestFrozenError(
            f"the guest's heartbeat stopped for {proc.frozen_for:.0f} s (a guest frozen whole: TCG livelock); "
            f"qemu killed\n{_failure_message(run, directory)}"
        )
    if proc.returncode != 0 or not results.get("complete"):
        raise VMRunError(_failure_message(run, directory))
    return run


@dataclass(frozen=True, slots=True, kw_only=True)
class _Finished:
    returncode: int
    stdout: str
    stderr: str
    frozen_for: float | None
    """Seconds the heartbeat had been still when the run was killed for it; None when it ended by itself."""


def _run_watched(command: list[str], env: Mapping[str, str], heartbeat: Path, stall_after: float) -> _Finished:
    """Run ``command`` (``run-in-vm.sh``) to its end, or kill its session once ``heartbeat`` exists and has not been
    rewritten for ``stall_after`` seconds (host clock: the 9p share's writes stamp host time)."""
    proc = subprocess.Popen(
        command,
        cwd=REPO,
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    stdout: list[str] = []
    stderr: list[str] = []
    frozen_for: float | None = None
    while True:
        try:
            out, err = proc.communicate(timeout=_HEARTBEAT_POLL_SECONDS)
        except subprocess.TimeoutExpired:
            try:
                still = time.time() - heartbeat.stat().st_mtime
            except OSError:
                continue  # not booted yet, or a scenario without a heartbeat: run-in-vm.sh's own guards hold
            if still < stall_after:
                continue
            frozen_for = still
            kill_session(proc.pid)
            out, err = proc.communicate()
        stdout.append(out or "")
        stderr.append(err or "")
        return _Finished(
            returncode=proc.returncode, stdout="".join(stdout), stderr="".join(stderr), frozen_for=frozen_for
        )


def kill_session(sid: int) -> None:
    """SIGKILL every process of session ``sid``: ``run-in-vm.sh`` runs QEMU under ``timeout``, which puts it in a
    process group of its own, so killing the script's group would leave the guest running to its hang guard."""
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) == sid:
                proc.kill()
        except (psutil.Error, OSError):
            continue


def heartbeat_stall_seconds() -> float:
    """How long a still heartbeat means a frozen guest: ``VM_HEARTBEAT_STALL`` or :data:`HEARTBEAT_STALL_SECONDS`."""
    return float(os.environ.get("VM_HEARTBEAT_STALL", HEARTBEAT_STALL_SECONDS))


def _failure_message(run: GuestRun, directory: Path) -> str:
    if run.returncode == 124:
        what = "timed out (VM_BOOT_TIMEOUT or VM_TIMEOUT, see stderr)"
    elif run.returncode == 125:
        what = "produced no exit code (the guest did not boot or died)"
    elif run.returncode != 0:
        what = f"exited with status {run.returncode}"
    else:
        what = "exited 0 without completing its results file"
    steps = run.results.get("steps", {})
    recorded = ", ".join(f"{name}={'ok' if rec.get('ok') else 'FAILED'}" for name, rec in steps.items()) or "none"
    return (
        f"VM run of {run.scenario} ({run.config.label}) {what} after {run.wall_seconds} s; steps recorded: {recorded}\n"
        f"--- stderr (last {_TAIL_LINES} lines) ---\n{_tail(run.stderr)}\n"
        f"--- guest console (last {_TAIL_LINES} lines; full log {run.workdir / 'console.log'}) "
        f"---\n{_tail(run.console)}\n"
        f"(VM dir {directory})"
    )


def scenario_fixture(
    script_name: str,
    config: VMConfig | None = None,
    *,
    params: Sequence[VMConfig] | None = None,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> Callable[..., GuestRun]:
    """A module-scoped fixture that boots the VM once and runs ``tests/vm/<script_name>`` in it.

    With ``params``, the module runs once per layout (the fixture is parametrized, ids = layout labels).
    ``args`` go to the scenario after ``--results``; ``env`` adds ``run-in-vm.sh`` knobs (for example
    ``VM_CGROUP_ENABLE`` or ``VM_KERNEL_SUITE``). A guest whose kernel stalled or that froze whole boots once more
    (``stall_retries=1`` of :func:`run_scenario`).
    """
    layouts = list(params) if params is not None else [config or VMConfig()]

    @pytest.fixture(scope="module", params=layouts, ids=[c.label for c in layouts])
    def _fixture(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> GuestRun:
        require_vm()
        chosen: VMConfig = request.param
        workdir = tmp_path_factory.mktemp(f"vm-{Path(script_name).stem}-{chosen.label}")
        # the host writes nothing into workdir, so a stalled or frozen guest may boot once more in a sibling
        return run_scenario(VM_TESTS / script_name, chosen, workdir, args=args, env=env, stall_retries=1)

    return _fixture
