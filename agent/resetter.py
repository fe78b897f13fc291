"""``podpin reset``'s imperative shell: observe the kubepods tree and the pods, decide (pure), write, report.

The decision is :func:`agent.restore.plan_restore`'s; this module only gathers
its inputs (configuration, node name, topology, cgroup layout, the node's lock,
the pod list, every QoS level, pod and container cgroup with its cpuset and
``cpu.max`` files), hands the result to the agent's ordered writer
(:meth:`agent.cgroups.fs.CgroupFS.apply`: parents widened before children,
values already there never rewritten, the effective sets read back), prints
one line per write and says what it could not do. The behaviour, the flags and
the exit statuses are described in ``agent/commands/reset.py``.

``--dry-run`` runs the same writer over file operations that read the real
files and record the writes instead of making them, so the lines it prints are
exactly the writes a reset would make, in the order it would make them.

``--hold`` keeps the node's lock after the reset until the process is told to
stop: no podpin agent can start on the node meanwhile, so nothing pins again
what was just given back (the uninstall manifest holds it until it is deleted).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from agent.agent_lock import LOCK_NAME, AgentLock, LockHeldError, acquire_lock
from agent.cgroups import (
    CgroupError,
    CgroupFileError,
    CgroupLayout,
    CgroupReadError,
    CgroupValueError,
    detect_layout,
    scan,
)
from agent.cgroups.fs import CPUS, MEMS, ApplyReport, CgroupFS, FileOps, RealFileOps
from agent.config import AgentConfig, ConfigError, load_config
from agent.config_flags import with_flags
from agent.cpuset import CPUSet
from agent.kube import DirSource, KubeConfigError, KubeSource, load_api
from agent.pods import ManifestError, PodSpecError, PodView, pod_from_dict
from agent.restore import CgroupFacts, Restore, RestorePlan, plan_restore
from agent.state_store import CHECKPOINT_NAME
from agent.topology import Topology, TopologyError
from agent.topology.load import DEFAULT_SYSFS_ROOT, load_topology
from agent.vocabulary import CgroupLevel, CpuMax

__all__ = ["ResetError", "ResetOptions", "reset_node"]

#: Exit statuses (``agent/commands/reset.py``).
OK, NOT_RESTORED, CANNOT_START, AGENT_RUNNING = 0, 1, 2, 3


class ResetError(RuntimeError):
    """The reset cannot start; ``status`` is the exit status, the message the one line to print."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True, kw_only=True)
class ResetOptions:
    """The ``podpin reset`` flags (None = the configuration's value); ``env`` replaces ``os.environ`` (tests)."""

    config: Path | None = None
    kubeconfig: str | None = None
    pods_dir: Path | None = None
    sysfs_root: Path = DEFAULT_SYSFS_ROOT
    cgroup_root: Path | None = None
    state_dir: Path | None = None
    dry_run: bool = False
    forget_state: bool = False
    wait_for_agent: float = 0.0
    hold: bool = False
    env: dict[str, str] | None = None


@dataclass(slots=True)
class _DryRunOps:
    """Reads the real files; records each write instead of making it."""

    inner: FileOps
    writes: list[tuple[Path, str]] = field(default_factory=list)

    def read(self, path: Path) -> str:
        return self.inner.read(path)

    def write(self, path: Path, text: str) -> None:
        self.writes.append((path, text))


def _configure(options: ResetOptions) -> AgentConfig:
    try:
        config = load_config(options.config, env=options.env)
    except ConfigError as err:
        raise ResetError(CANNOT_START, f"configuration: {err}") from err
    # --dry-run is the reset's own (it prints the writes): the configuration's dryRun plays no part in a reset.
    config = with_flags(config, replace(options, dry_run=False))
    if not config.node_name:
        raise ResetError(
            CANNOT_START, "no node name: set nodeName in the configuration or the NODE_NAME environment variable"
        )
    return config


def _lock(config: AgentConfig, options: ResetOptions, out: TextIO) -> AgentLock | None:
    """Take the node's lock (refusing while an agent holds it); a dry run only looks."""
    wait = 0.0 if options.dry_run else options.wait_for_agent
    try:
        lock = acquire_lock(config.state_dir, "podpin reset", wait=wait)
    except LockHeldError as err:
        if options.dry_run:
            print(f"note: another podpin process works on this node ({err}): a reset would be refused", file=out)
            return None
        raise ResetError(
            AGENT_RUNNING,
            f"another podpin process works on this node (an agent or a reset): {err}; stop the agent first (delete "
            "the DaemonSet or unlabel the node), or wait for it with --wait-for-agent SECONDS",
        ) from err
    except OSError as err:
        print(f"note: cannot take the node's lock in {config.state_dir} ({err.strerror or err}); going on", file=out)
        return None
    if options.dry_run:
        lock.release()
        return None
    return lock


def _manifest_pods(directory: Path, node: str, out: TextIO) -> tuple[Mapping[str, Any], ...]:
    """The node's pods in a manifests directory, read once by the agent's own directory source (bounded reads).

    A file it cannot read or parse, or a pod a file before it already defines, is one note and is left out: a pod
    no file gives counts as unknown, its cgroups keep their quotas.
    """
    if not directory.is_dir():
        raise ResetError(CANNOT_START, f"--pods-dir {directory}: not a directory")

    def note(err: ManifestError) -> None:
        print(f"note: {err} (the reset goes on without them)", file=out)

    return DirSource(directory, node, on_error=note, quiet=True).scan()


def _no_pod_list(problem: str, out: TextIO) -> None:
    """Say that the reset goes on without the pods, and what that leaves undone.

    A node whose API access is broken is when a reset is needed most: every cpuset can be widened without the pods
    (it needs only the online CPUs), only the quotas need each pod's limits.
    """
    print(
        f"note: no pod list ({problem}): every cpuset is widened, but the cpu.max of each pod's cgroups is left as "
        "it is (run the reset again with API access, or with --pods-dir DIR of the node's pod manifests, to give "
        "the quotas back)",
        file=out,
    )


def _pods(config: AgentConfig, options: ResetOptions, out: TextIO) -> list[PodView]:
    """This node's pods, from the manifests directory or the API server; unreadable ones are named and skipped.

    Without a pod list (no API configuration, an API server that cannot be reached) the reset goes on with none
    and says so: the cpusets are widened all the same, each pod's quota stays as it is.
    """
    node = config.node_name or ""
    raw: tuple[Any, ...]
    if options.pods_dir is not None:
        raw = _manifest_pods(options.pods_dir, node, out)
    else:
        try:
            raw = KubeSource(node, load_api(options.kubeconfig)).list_pods()
        except KubeConfigError as err:
            _no_pod_list(f"API server: {err}", out)
            raw = ()
        except Exception as err:
            _no_pod_list(f"cannot list this node's pods from the API server: {' '.join(str(err).split())}", out)
            raw = ()
    pods: list[PodView] = []
    for item in raw:
        try:
            pods.append(pod_from_dict(item))
        except PodSpecError as err:
            metadata = item.get("metadata") if isinstance(item, dict) else None
            name = metadata.get("name") if isinstance(metadata, dict) else "?"
            print(f"note: pod {name} cannot be read ({err}); its cgroups count as unknown", file=out)
    return pods


def _read_set(fs: CgroupFS, cgroup: Path, file: str) -> CPUSet | None:
    try:
        return fs.read_cpuset(cgroup, file)
    except CgroupReadError as err:
        if err.vanished:
            return None
        raise


def _read_cpu_max(fs: CgroupFS, cgroup: Path) -> CpuMax | None:
    try:
        return fs.read_cpu_max(cgroup)
    except CgroupReadError as err:
        if err.vanished:
            return None
        raise


def _cgroups(layout: CgroupLayout) -> Iterator[tuple[Path, CgroupLevel, str | None, str | None]]:
    """Every QoS level, pod and container cgroup, parents first: (path, level, pod uid, container id)."""
    for level in layout.qos_dirs():
        if level.is_dir():
            yield level, CgroupLevel.QOS, None, None
    for pod in scan(layout):
        yield pod.path, CgroupLevel.POD, pod.uid, None
        for child in pod.containers:
            yield child.path, CgroupLevel.CONTAINER, pod.uid, child.id


def _observe(layout: CgroupLayout, fs: CgroupFS) -> tuple[list[CgroupFacts], list[CgroupError]]:
    """The cgroups as found; a cgroup whose files cannot be read is left out and reported."""
    found: list[CgroupFacts] = []
    failures: list[CgroupError] = []
    for path, level, uid, cid in _cgroups(layout):
        try:
            facts = CgroupFacts(
                path=str(path.relative_to(layout.root)),
                level=level,
                pod_uid=uid,
                container_id=cid,
                cpus=_read_set(fs, path, CPUS),
                mems=_read_set(fs, path, MEMS),
                cpu_max=_read_cpu_max(fs, path) if level is not CgroupLevel.QOS else None,
            )
        except (CgroupReadError, CgroupValueError) as err:
            failures.append(err)
            continue
        found.append(facts)
    return found, failures


def _who(restore: Restore | None) -> str:
    if restore is None or restore.pod is None:
        return ""
    return f"  ({restore.pod}{'/' + restore.container if restore.container else ''})"


def _report(
    plan: RestorePlan, report: ApplyReport, root: Path, *, dry_run: bool, out: TextIO, err: TextIO
) -> tuple[int, int]:
    """Print each write, the pods left as found and each failure; returns (writes made, failures)."""
    by_path = {root / r.path: r for r in plan.restores}
    verb = "would write" if dry_run else "wrote"
    written = 0
    for record in report.writes:
        if record.result != "ok":
            continue
        written += 1
        where = record.path.relative_to(root)
        print(
            f"{verb} {where}  {record.file}  {record.old or '(unset)'} -> {record.new}{_who(by_path.get(record.path))}",
            file=out,
        )
    for unknown in plan.unknown:
        print(
            f"left as is: cpu.max of {unknown.path} and its {unknown.containers} container(s): pod {unknown.uid} "
            "is not in the pod list (its cpusets are widened)",
            file=out,
        )
    problems = 0
    for failure in report.failures:
        if isinstance(failure, CgroupFileError) and failure.vanished:
            print(f"gone: {failure.path}: the cgroup went away during the reset (its container exited)", file=out)
            continue
        problems += 1
        print(f"podpin reset: not restored: {failure}", file=err)
    if not dry_run:
        for mismatch in report.mismatches:
            problems += 1
            print(f"podpin reset: not restored: {mismatch}", file=err)
    return written, problems


def _forget(state_dir: Path, *, lock_file: bool) -> list[Path]:
    """Remove podpin's checkpoint, its leftovers and (unless it is still held) the lock file; returns what went."""
    removed = []
    names = {CHECKPOINT_NAME, CHECKPOINT_NAME + ".corrupt"} | ({LOCK_NAME} if lock_file else set())
    try:
        entries = list(state_dir.iterdir())
    except FileNotFoundError:
        return []
    for path in entries:
        temp = path.name.startswith(f".{CHECKPOINT_NAME}.") and path.name.endswith(".tmp")
        if path.name in names or temp:
            path.unlink(missing_ok=True)
            removed.append(path)
    return sorted(removed)


def _topology(options: ResetOptions) -> Topology:
    try:
        return load_topology(None, options.sysfs_root)
    except TopologyError as err:
        raise ResetError(CANNOT_START, f"topology: {err}") from err


def _layout(config: AgentConfig) -> CgroupLayout:
    try:
        return detect_layout(config.cgroup_root, config.cgroup_driver)
    except CgroupError as err:
        raise ResetError(CANNOT_START, f"cgroups: {err}") from err


def _restore(
    config: AgentConfig,
    options: ResetOptions,
    file_ops: FileOps | None,
    out: TextIO,
    err: TextIO,
    stop: threading.Event,
) -> int:
    topology = _topology(options)
    layout = _layout(config)
    lock = _lock(config, options, out)
    try:
        pods = _pods(config, options, out)
        real_ops: FileOps = file_ops if file_ops is not None else RealFileOps()
        ops: FileOps = _DryRunOps(real_ops) if options.dry_run else real_ops
        fs = CgroupFS(config.cgroup_root, ops)
        found, read_failures = _observe(layout, fs)
        mems = CPUSet(topology.memory_numa_ids)
        plan = plan_restore(
            found,
            pods,
            online=topology.online_cpus,
            mems=mems,
            period_us=config.planner.cpu_cfs_quota_period_us,
        )
        print(
            f"podpin reset: node {config.node_name}, {layout.root} ({layout.driver} driver), online CPUs "
            f"{topology.online_cpus}, memory nodes {mems}, {len(pods)} pods, {len(found)} cgroups",
            file=out,
        )
        desired = {layout.root / r.path: r.values for r in plan.restores}
        report = fs.apply(desired)
        written, problems = _report(plan, report, layout.root, dry_run=options.dry_run, out=out, err=err)
        for failure in read_failures:
            problems += 1
            print(f"podpin reset: not restored: {failure}", file=err)
        status = _conclude(config, options, written, problems, out)
        if lock is not None and options.hold:
            print(f"holding {lock.path} until stopped: no podpin agent can start on this node", file=out, flush=True)
            stop.wait()
            if options.forget_state:
                lock.path.unlink(missing_ok=True)
        return status
    finally:
        if lock is not None:
            lock.release()


def _conclude(config: AgentConfig, options: ResetOptions, written: int, problems: int, out: TextIO) -> int:
    checkpoint = config.state_dir / CHECKPOINT_NAME
    if options.dry_run:
        print(f"dry run: {written} writes would be made; nothing was written", file=out)
        return OK
    if problems:
        print(f"{problems} value(s) could not be restored (see above); the checkpoint {checkpoint} is kept", file=out)
        return NOT_RESTORED
    if written:
        print(f"restored: {written} writes", file=out)
    else:
        print("nothing to restore: every cgroup already holds what the kubelet gives it", file=out)
    if options.forget_state:
        removed = _forget(config.state_dir, lock_file=not options.hold)
        print(f"forgot podpin's state: removed {', '.join(map(str, removed)) or 'nothing (there was none)'}", file=out)
    elif checkpoint.exists():
        print(f"the checkpoint {checkpoint} is kept for a re-install (--forget-state removes it)", file=out)
    return OK


def reset_node(
    options: ResetOptions,
    *,
    file_ops: FileOps | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
    stop: threading.Event | None = None,
) -> int:
    """Reset this node (see ``agent/commands/reset.py``).

    Args:
        options: the flags.
        file_ops: replaces the file access (tests emulate the kernel).
        out, err: where the lines go (default stdout, stderr).
        stop: with ``--hold``, set to end the hold (the command sets it on SIGTERM or SIGINT).

    Returns:
        the exit status.
    """
    stdout = out if out is not None else sys.stdout
    stderr = err if err is not None else sys.stderr
    try:
        config = _configure(replace(options, env=options.env if options.env is not None else dict(os.environ)))
        return _restore(config, options, file_ops, stdout, stderr, stop if stop is not None else threading.Event())
    except ResetError as error:
        print(f"podpin reset: {error}", file=stderr)
        return error.status
