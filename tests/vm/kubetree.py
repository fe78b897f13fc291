"""Guest side: a kubepods tree in the real cgroup2 hierarchy, laid out as the kubelet and containerd do.

The VM runs no systemd, no kubelet and no container runtime, so VM scenarios build the tree these would
have built on a node with the systemd cgroup driver and containerd, then start real processes in the
container cgroups. That is what the agent finds on a real node:

- ``kubepods.slice`` (Guaranteed pods directly below it),
  ``kubepods.slice/kubepods-burstable.slice`` and ``kubepods.slice/kubepods-besteffort.slice``;
- pod slices ``kubepods-pod<uid_>.slice`` (Guaranteed), ``kubepods-burstable-pod<uid_>.slice`` and
  ``kubepods-besteffort-pod<uid_>.slice``, the uid's ``-`` replaced by ``_`` as systemd's unit name escaping
  requires;
- container scopes ``cri-containerd-<64 hex>.scope`` inside the pod slice;
- ``cpuset cpu`` enabled in ``cgroup.subtree_control`` from the root down to every pod slice, so each
  container cgroup has ``cpuset.*`` and ``cpu.*`` files.

Processes join their container cgroup themselves before they exec (as runc's init does), so they never run
outside it, and the readers return what the kernel reports: ``sched_getaffinity``,
``cpuset.cpus.effective``, ``cpu.max`` and ``cpu.stat``.

Only this module and the scenarios in the guest touch ``/sys/fs/cgroup``; the host imports it for the pure
naming functions alone.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agent.cpuset import CPUSet

__all__ = [
    "CGROUP_ROOT",
    "Container",
    "CpuStat",
    "KubeTree",
    "KubeTreeError",
    "Pod",
    "QoS",
    "affinity",
    "cgroup_of",
    "container_scope_name",
    "cpu_max",
    "cpu_stat",
    "cpu_stat_window",
    "cpus",
    "cpus_effective",
    "enable_controllers",
    "pod_slice_name",
    "read",
    "write",
]

CGROUP_ROOT = Path("/sys/fs/cgroup")
"""Where the guest's ``/init`` mounts cgroup2."""

QoS = Literal["guaranteed", "burstable", "besteffort"]
"""A pod's QoS class, lower case as it appears in the slice names."""

CONTROLLERS = ("cpuset", "cpu")
"""The controllers podpin needs; enabled down to every pod slice like the kubelet does."""

_SUB_QOS: tuple[QoS, ...] = ("burstable", "besteffort")
SLEEP_COMMAND = ("/bin/sleep", "infinity")
BUSY_COMMAND = ("/bin/sh", "-c", "while :; do :; done")

_UID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_CONTAINER_ID = re.compile(r"^[0-9a-f]{64}$")
_JOIN_FAILED = 97


class KubeTreeError(RuntimeError):
    """A cgroup of the kubepods tree could not be created, written, read or joined; names the path."""


def pod_slice_name(uid: str, qos: QoS) -> str:
    """The systemd slice name the kubelet gives a pod's cgroup.

    Raises:
        KubeTreeError: the uid is not a lower-case RFC 4122 UUID.
    """
    if not _UID.match(uid):
        raise KubeTreeError(f"pod uid {uid!r} is not a lower-case RFC 4122 UUID")
    escaped = uid.replace("-", "_")
    if qos == "guaranteed":
        return f"kubepods-pod{escaped}.slice"
    return f"kubepods-{qos}-pod{escaped}.slice"


def container_scope_name(container_id: str) -> str:
    """The scope name containerd (systemd cgroup driver) gives a container's cgroup.

    Raises:
        KubeTreeError: the id is not 64 lower-case hex digits.
    """
    if not _CONTAINER_ID.match(container_id):
        raise KubeTreeError(f"container id {container_id!r} is not 64 lower-case hex digits")
    return f"cri-containerd-{container_id}.scope"


# -- reading and writing cgroup files -------------------------------------------------------------


def write(cgroup: Path, name: str, value: str) -> None:
    """Write ``value`` to an existing interface file in one ``write(2)``, as ``echo VALUE > FILE`` would.

    The file is opened without ``O_CREAT``, so a missing cgroup or file is an error instead of a new
    regular file. ``value`` is written as given (an empty string is a zero-byte write).

    Raises:
        KubeTreeError: naming the file, the value and the kernel's error.
    """
    path = cgroup / name
    try:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, value.encode())
        finally:
            os.close(fd)
    except OSError as err:
        raise KubeTreeError(f"{path}: cannot write {value!r}: {os.strerror(err.errno or 0)}") from err


def read(cgroup: Path, name: str) -> str:
    """The content of an interface file, without the trailing newline.

    Raises:
        KubeTreeError: naming the file and the kernel's error.
    """
    path = cgroup / name
    try:
        return path.read_text().rstrip("\n")
    except OSError as err:
        raise KubeTreeError(f"{path}: cannot read: {os.strerror(err.errno or 0)}") from err


def cpus(cgroup: Path) -> CPUSet:
    """``cpuset.cpus``: what was requested (empty = inherit)."""
    return CPUSet.parse(read(cgroup, "cpuset.cpus"))


def cpus_effective(cgroup: Path) -> CPUSet:
    """``cpuset.cpus.effective``: where the cgroup's tasks may actually run."""
    return CPUSet.parse(read(cgroup, "cpuset.cpus.effective"))


def cpu_max(cgroup: Path) -> str:
    """``cpu.max`` as the kernel prints it: ``"<quota> <period>"`` or ``"max <period>"``."""
    return read(cgroup, "cpu.max")


@dataclass(frozen=True, slots=True, kw_only=True)
class CpuStat:
    """The ``cpu.stat`` counters podpin reads (microseconds and period counts since creation)."""

    usage_usec: int
    nr_periods: int
    nr_throttled: int
    throttled_usec: int


def cpu_stat(cgroup: Path) -> CpuStat:
    """Parse ``cpu.stat``; the throttling counters are present only where the cpu controller is enabled.

    Raises:
        KubeTreeError: a counter is missing (the cpu controller is not enabled for this cgroup).
    """
    text = read(cgroup, "cpu.stat")
    values = {key: int(value) for key, value in (line.split() for line in text.splitlines() if line)}
    try:
        return CpuStat(
            usage_usec=values["usage_usec"],
            nr_periods=values["nr_periods"],
            nr_throttled=values["nr_throttled"],
            throttled_usec=values["throttled_usec"],
        )
    except KeyError as err:
        raise KubeTreeError(f"{cgroup / 'cpu.stat'}: no {err.args[0]} in {text!r}") from err


def cpu_stat_window(
    cgroups: Mapping[str, Path],
    *,
    seconds: float,
    until: Callable[[Mapping[str, CpuStat]], bool],
    deadline: float,
    poll: float = 0.1,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """``cpu.stat`` deltas of each cgroup over at least ``seconds``, longer (up to ``deadline``) until ``until``.

    Why not a fixed window: a guest on a busy host (TCG on CI's two cores, beside the Go builds) can give a
    spinning process a small share of a short window; CI once measured a 300m sidecar over 1.5 s that ran in 5
    periods for 6.5 % of a CPU and was never throttled, which says nothing about its quota. The window grows until
    the condition the step is about has been seen (a throttled period, say) or the deadline passes, and the
    result says how long it was.

    Returns:
        ``elapsed_s`` and, per name, the deltas of ``nr_periods``, ``nr_throttled`` and ``throttled_usec`` with
        ``usage_share`` (CPU seconds used per second of the window).
    """
    before = {name: cpu_stat(path) for name, path in cgroups.items()}
    started = clock()
    while True:
        sleep(poll)
        elapsed = clock() - started
        after = {name: cpu_stat(path) for name, path in cgroups.items()}
        deltas = {
            name: CpuStat(
                usage_usec=after[name].usage_usec - before[name].usage_usec,
                nr_periods=after[name].nr_periods - before[name].nr_periods,
                nr_throttled=after[name].nr_throttled - before[name].nr_throttled,
                throttled_usec=after[name].throttled_usec - before[name].throttled_usec,
            )
            for name in cgroups
        }
        if elapsed >= deadline or (elapsed >= seconds and until(deltas)):
            break
    out: dict[str, Any] = {"elapsed_s": round(elapsed, 3)}
    for name, delta in deltas.items():
        out[name] = {
            "nr_periods": delta.nr_periods,
            "nr_throttled": delta.nr_throttled,
            "throttled_usec": delta.throttled_usec,
            "usage_share": round(delta.usage_usec / (elapsed * 1e6), 3),
        }
    return out


def affinity(pid: int) -> CPUSet:
    """The CPUs the scheduler lets ``pid`` run on (``sched_getaffinity``)."""
    return CPUSet(os.sched_getaffinity(pid))


def cgroup_of(pid: int, root: Path = CGROUP_ROOT) -> Path:
    """The cgroup2 directory ``pid`` is in, from ``/proc/<pid>/cgroup`` (``0::/path``)."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return root / line[3:].lstrip("/")
    raise KubeTreeError(f"/proc/{pid}/cgroup has no cgroup2 line")


def enable_controllers(cgroup: Path, root: Path = CGROUP_ROOT) -> None:
    """Enable ``cpuset`` and ``cpu`` in ``cgroup.subtree_control`` of every cgroup from ``root`` to ``cgroup``.

    Only missing controllers are written, as the kubelet's libcontainer manager does.

    Raises:
        KubeTreeError: a write failed (names the cgroup).
    """
    parts = cgroup.relative_to(root).parts
    chain = [root.joinpath(*parts[:depth]) for depth in range(len(parts) + 1)]
    for node in chain:
        enabled = set(read(node, "cgroup.subtree_control").split())
        missing = [c for c in CONTROLLERS if c not in enabled]
        if missing:
            write(node, "cgroup.subtree_control", " ".join(f"+{c}" for c in missing))


BANDWIDTH_HOLDER = "podpin-tcg-cfs-bandwidth"
"""The guest cgroup that keeps a CFS quota for the guest's whole life (:func:`hold_cfs_bandwidth`)."""


def hold_cfs_bandwidth(root: Path = CGROUP_ROOT) -> Path:
    """Keep the kernel's CFS bandwidth static key on for the rest of the guest's life; returns the holder cgroup.

    The kernel switches a static key (``__cfs_bandwidth_used``) on when the first cgroup gets a ``cpu.max``
    quota and off when the last one drops it, and each switch patches kernel text on every CPU. Under TCG such
    patching can freeze the whole guest: a node where runc writes each new exclusive container's quota and podpin
    writes ``max`` back within milliseconds switched the key twice per container, and three 8-vCPU guests of
    ``scripts/bench_pin_window.py`` froze whole (heartbeat still, nothing on the console) within a few pods of
    bundle mode, none with podpin's repair held back (2026-12-07; ``docs/benchmarks.md``, issue 20's fifth
    round). An empty cgroup with a quota no one can use up keeps the key on, so the guest never patches it. Test
    infrastructure only: on hardware the switch costs microseconds, and podpin does not do this on nodes.
    """
    holder = root / BANDWIDTH_HOLDER
    holder.mkdir(exist_ok=True)
    enable_controllers(holder, root)
    write(holder, "cpu.max", "100000000 100000")
    return holder


# -- the tree ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Pod:
    """A pod slice created in the guest."""

    uid: str
    qos: QoS
    path: Path


@dataclass(frozen=True, slots=True, kw_only=True)
class Container:
    """A container scope created in a pod slice."""

    pod: Pod
    id: str
    path: Path


@dataclass(slots=True)
class KubeTree:
    """Builds and tears down a kubepods tree under ``root`` and the processes running in it.

    Every cgroup made and process started is remembered, so :meth:`close` leaves the hierarchy as it was
    (processes killed first, then cgroups removed deepest first).
    """

    root: Path = CGROUP_ROOT
    _made: list[Path] = field(default_factory=list)
    _procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def kubepods(self) -> Path:
        """``kubepods.slice``: the kubelet's node-allocatable cgroup, parent of every pod."""
        return self.root / "kubepods.slice"

    def qos_slice(self, qos: QoS) -> Path:
        """The QoS-level slice a pod of ``qos`` lives in (``kubepods.slice`` itself for Guaranteed)."""
        if qos == "guaranteed":
            return self.kubepods
        return self.kubepods / f"kubepods-{qos}.slice"

    def setup(self) -> None:
        """Create ``kubepods.slice`` and the burstable and besteffort slices with ``cpuset cpu`` enabled."""
        self._mkdir(self.kubepods)
        for qos in _SUB_QOS:
            self._mkdir(self.qos_slice(qos))
        enable_controllers(self.kubepods, self.root)
        for qos in _SUB_QOS:
            enable_controllers(self.qos_slice(qos), self.root)

    def add_pod(self, *, qos: QoS = "guaranteed", uid: str | None = None, cpu_max: str | None = None) -> Pod:
        """Create a pod slice (controllers enabled for its containers); ``cpu_max`` as the kubelet would set it."""
        uid = uid or str(uuid.uuid4())
        path = self.qos_slice(qos) / pod_slice_name(uid, qos)
        self._mkdir(path)
        enable_controllers(path, self.root)
        if cpu_max is not None:
            write(path, "cpu.max", cpu_max)
        return Pod(uid=uid, qos=qos, path=path)

    def add_container(
        self, pod: Pod, *, container_id: str | None = None, cpu_max: str | None = None, cpuset: str | None = None
    ) -> Container:
        """Create a container scope; ``cpu_max`` / ``cpuset`` as containerd would write them from the CRI request."""
        container_id = container_id or secrets.token_hex(32)
        path = pod.path / container_scope_name(container_id)
        self._mkdir(path)
        if cpu_max is not None:
            write(path, "cpu.max", cpu_max)
        if cpuset is not None:
            write(path, "cpuset.cpus", cpuset)
        return Container(pod=pod, id=container_id, path=path)

    def start_process(self, cgroup: Path, *, busy: bool = False, timeout: float = 10.0) -> subprocess.Popen[bytes]:
        """Start a sleeping (or CPU-busy) process that joins ``cgroup`` before it execs.

        A shell writes its own pid to ``cgroup.procs`` and then execs the command, keeping the pid, so the
        process never runs outside the cgroup, like a container's init.

        Raises:
            KubeTreeError: the process could not join the cgroup (with its stderr) or did not show up in it.
        """
        command = BUSY_COMMAND if busy else SLEEP_COMMAND
        script = f'echo $$ > "$1/cgroup.procs" || exit {_JOIN_FAILED}; shift; exec "$@"'
        proc = subprocess.Popen(
            ["/bin/sh", "-c", script, "kubetree-join", str(cgroup), *command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self._procs.append(proc)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                stderr = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
                raise KubeTreeError(f"{cgroup}: process exited with {proc.returncode} before running: {stderr}")
            with contextlib.suppress(OSError):  # /proc/<pid>/cgroup not readable yet: poll again
                if cgroup_of(proc.pid, self.root) == cgroup:
                    return proc
            time.sleep(0.005)
        raise KubeTreeError(f"{cgroup}: pid {proc.pid} did not appear in the cgroup within {timeout} s")

    def stop_process(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL a process started here and reap it."""
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait()
        if proc.stderr:
            proc.stderr.close()

    def remove(self, cgroup: Path) -> None:
        """Remove a cgroup made here (its processes must be gone), retrying while the kernel reports EBUSY."""
        deadline = time.monotonic() + 5.0
        while True:
            try:
                cgroup.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError as err:
                if err.errno != errno.EBUSY or time.monotonic() > deadline:
                    raise KubeTreeError(f"{cgroup}: cannot remove: {os.strerror(err.errno or 0)}") from err
                time.sleep(0.01)
        if cgroup in self._made:
            self._made.remove(cgroup)

    def close(self) -> None:
        """Kill every process started here, then remove every cgroup made here, deepest first."""
        for proc in self._procs:
            self.stop_process(proc)
        self._procs.clear()
        for path in sorted(self._made, key=lambda p: len(p.parts), reverse=True):
            self.remove(path)

    def _mkdir(self, path: Path) -> None:
        try:
            path.mkdir()
        except FileExistsError:
            return
        except OSError as err:
            raise KubeTreeError(f"{path}: cannot create cgroup: {os.strerror(err.errno or 0)}") from err
        self._made.append(path)
