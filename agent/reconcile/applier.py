"""The reconciler's applying half: a plan in, cgroup writes, read-backs and settles out.

It owns everything that touches the cgroup tree: scanning it, the targeted writes of the pods something happened
to, the full pass as a sweep (``sweep.py``) with its usage sampling and the affinity audit riding on it, the
controllers enabled once per parent, what was written (to tell drift from a first write), and the settles: the pin
latency of each new container, the ``Pinned`` Event of a pod whose containers all are, the condition of a pod with
nothing of its own to pin. It never decides: every set it writes comes from the plan it is handed
(``decider.py`` makes it), and who a container cgroup is comes from the identity book.

The order of a pass and why a full pass yields between its steps are in ``reconciler.py``'s docstring.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Iterable, Mapping, Set
from pathlib import Path
from typing import Any, TypeVar, cast

from agent.alloc import ContainerPlan, Observed, Plan, PodPlan, Pool
from agent.audit import AffinityAudit
from agent.cgroups import (
    ApplyReport,
    CgroupError,
    CgroupFS,
    CgroupLayout,
    ScannedPod,
    checked_once,
    list_containers,
    scan,
)
from agent.cpuset import CPUSet
from agent.fault_boundary import FaultBoundary, Stage
from agent.kube.conditions import readiness_gated
from agent.metrics import UsageKey
from agent.pods import ContainerKind, PodView, QOSClass
from agent.reconcile.identity import IdentityBook
from agent.reconcile.naming import BundleNamer
from agent.reconcile.pin_trace import PinTrace
from agent.reconcile.reporter import Reporter
from agent.reconcile.sweep import QoSLevels, Sweep
from agent.reconcile.targets import Target, pod_targets, qos_targets
from agent.runtime import IdentitySource
from agent.vocabulary import CgroupLevel

__all__ = ["Applier", "Pending"]

_PENDING_TTL = 300.0

Pending = Callable[[], bool]
"""Asked between the steps of a full pass: True when targeted work waits (the pass then returns early)."""


_Method = TypeVar("_Method", bound=Callable[..., Any])


def _paths_checked_once(method: _Method) -> _Method:
    """Run ``method`` in one :func:`checked_once` scope: each cgroup directory it touches is checked for symlinks
    once, not before every read and write (``agent/cgroups/path_guard.py``)."""

    @functools.wraps(method)
    def scoped(*args: Any, **kwargs: Any) -> Any:
        with checked_once():
            return method(*args, **kwargs)

    return cast("_Method", scoped)


class Applier:
    """Writes plans into the live cgroups (module docstring).

    Args:
        layout: where the node's cgroups are.
        fs: reads and writes cgroup files (the writer's order and read-backs).
        reporter: where writes, failures and settles are said.
        identities: who each container cgroup is.
        namer: names new container cgroups from the runtime's bundles (None: no runtime root).
        boundary: where an unexpected exception at one cgroup directory stops.
        log: the reconciler's logger.
        dry_run: say what would be written, write nothing.
        clock: monotonic seconds (pin latency, the audit's period).
        audit: the affinity audit that rides on full passes (None: none).
    """

    def __init__(
        self,
        *,
        layout: CgroupLayout,
        fs: CgroupFS,
        reporter: Reporter,
        identities: IdentityBook,
        namer: BundleNamer | None,
        boundary: FaultBoundary,
        log: Any,
        dry_run: bool = False,
        clock: Callable[[], float] = time.monotonic,
        audit: AffinityAudit | None = None,
    ) -> None:
        self.layout = layout
        self.fs = fs
        self.reporter = reporter
        self.identities = identities
        self.namer = namer
        self.boundary = boundary
        self.log = log
        self.dry_run = dry_run
        self.clock = clock
        self.audit = audit
        self._auditing = False
        self._pending: dict[Path, PinTrace] = {}
        self._pass_began: float | None = None
        self._applied: dict[tuple[Path, str], str] = {}
        self._controllers: set[Path] = set()
        self._sweep: Sweep | None = None
        self._usage: dict[UsageKey, float] = {}
        self._positions: tuple[Plan | None, dict[str, tuple[int, PodPlan]]] = (None, {})
        self.sweeps = 0
        """The full passes completed."""

    @property
    def usage(self) -> Mapping[UsageKey, float]:
        """CPU seconds per ``(pool, namespace, pod)`` sampled by the last completed full pass."""
        return self._usage

    @property
    def sweeping(self) -> bool:
        """Whether a full pass was left unfinished."""
        return self._sweep is not None

    # -- what the watcher saw ----------------------------------------------------------------------
    def cgroup_appeared(self, path: Path, seen_at: float, handled_at: float | None = None) -> None:
        """A container cgroup appeared at ``seen_at`` (taken by the loop at ``handled_at``): its pin latency is
        measured from then, its stages (``pin_trace.py``) stamped from here on."""
        self._pending[path] = PinTrace(seen=seen_at, handled=handled_at)

    def cgroup_named(self, path: Path, at: float) -> None:
        """The new container at ``path`` was named from its bundle at ``at`` (its ``name`` stage)."""
        trace = self._pending.get(path)
        if trace is not None:
            trace.named = at

    def begin_pass(self, at: float) -> None:
        """A pass began at ``at``: the containers it writes count their ``plan`` stage from there."""
        self._pass_began = at

    def cgroup_removed(self, path: Path) -> None:
        """A cgroup went: forget what was written there."""
        self._pending.pop(path, None)
        self._controllers.discard(path)
        for key in [k for k in self._applied if k[0] == path]:
            del self._applied[key]

    # -- reading the tree --------------------------------------------------------------------------
    @_paths_checked_once
    def observe_live(self, views: list[PodView]) -> dict[str, Observed]:
        """The explicit cpusets on the live cgroups of these pods (for rebuilding a lost checkpoint)."""
        observed: dict[str, Observed] = {}
        by_uid = {v.cgroup_uid: v for v in views}
        try:
            live = scan(self.layout)
        except (CgroupError, OSError) as err:
            self.log.error("cgroup.scan_failed", error=str(err))
            return observed
        if self.namer is not None:
            self.namer.identify_live(live)
        for scanned in live:
            view = by_uid.get(scanned.uid)
            if view is None:
                continue
            containers: dict[str, CPUSet] = {}
            for child in scanned.containers:
                identity = self.identities.in_pod(scanned.uid, child.id)
                name = identity.name if identity is not None else None
                cpus = self._explicit_cpus(child.path)
                if name is not None and cpus:
                    containers[name] = cpus
            pod_cpus = self._explicit_cpus(scanned.path)
            if containers or pod_cpus:
                observed[view.uid] = Observed(containers=containers, pod=pod_cpus or None)
        return observed

    def _explicit_cpus(self, path: Path) -> CPUSet:
        try:
            return self.fs.read_cpuset(path, "cpuset.cpus")
        except CgroupError:
            return CPUSet()

    def _qos_levels(self) -> dict[str, Path]:
        levels = {}
        for qos in (QOSClass.BURSTABLE, QOSClass.BESTEFFORT):
            path = self.layout.qos_dir(qos)
            if path.is_dir():
                levels[qos.value] = path
        return levels

    def _scan_pod(self, uid: str, qos: str) -> ScannedPod | None:
        with self.boundary.guard(Stage.CGROUP, f"pod cgroup of {uid}"):
            try:
                location = self.layout.find_pod(uid, qos)
            except CgroupError:
                return None
            if location is None:
                return None
            return self._rescan(ScannedPod(qos=location.qos, uid=uid, path=location.path, containers=()))
        return None  # an unexpected failure, caught at this cgroup directory's boundary

    def _rescan(self, pod: ScannedPod) -> ScannedPod | None:
        """``pod`` with its container cgroups as they are now; None when its cgroup is gone."""
        try:
            containers = list_containers(self.layout, pod.path)
        except OSError:
            return None
        return None if containers is None else dataclasses.replace(pod, containers=containers)

    # -- writing -----------------------------------------------------------------------------------
    @_paths_checked_once
    def write_pod_level(self, plan: Plan, pod: PodPlan) -> None:
        """Write ``pod``'s pod cgroup only (NRI: before the runtime creates a container in it)."""
        scanned = self._scan_pod(pod.cgroup_key, pod.qos)
        if scanned is not None:
            self._write(plan, [t for t in pod_targets(pod, scanned, self.identities) if t.level is CgroupLevel.POD])

    @_paths_checked_once
    def apply_targeted(self, plan: Plan, dirty: Set[str], new_cgroups: Mapping[str, set[Path]]) -> None:
        """Write the pods something happened to: their new container cgroups (and the pod), or all of a dirty pod."""
        targets: list[Target] = []
        for pod in plan.pods:
            new = new_cgroups.get(pod.cgroup_key)
            is_dirty = pod.uid in dirty or pod.cgroup_key in dirty
            if not is_dirty and new is None:
                continue
            scanned = self._scan_pod(pod.cgroup_key, pod.qos)
            if scanned is None:
                continue
            if self.namer is not None:
                self.namer.identify_live([scanned])
            found = pod_targets(pod, scanned, self.identities)
            if not is_dirty and new is not None:
                found = [t for t in found if t.level is CgroupLevel.POD or t.path in new]
            targets.extend(found)
        self._write(plan, targets)

    @_paths_checked_once
    def start_sweep(self, plan: Plan, dirty: Set[str], new_cgroups: Iterable[str]) -> None:
        """Scan the tree for a full pass: the pods with new container cgroups, then the dirty ones, go first."""
        try:
            live = scan(self.layout)
        except (CgroupError, OSError) as err:
            self.log.error("cgroup.scan_failed", error=str(err))
            live = []
        if self.namer is not None:
            self.namer.retain(live)
        first = [p.cgroup_key for p in plan.pods if p.uid in dirty or p.cgroup_key in dirty]
        if self.audit is not None and not self.dry_run and not self._auditing:
            self._auditing = self.audit.due(self.clock())  # the affinity audit rides on this full pass
        self._sweep = Sweep.of_scan(live, [*new_cgroups, *first])

    def drop_sweep(self) -> None:
        """Leave the full pass in progress (the kubelet pins CPUs: nothing is written)."""
        self._sweep = None

    @_paths_checked_once
    def continue_sweep(self, plan: Plan | None, pending: Pending | None) -> bool:
        """Take sweep steps until it is done or ``pending()`` says targeted work waits (after one step at least);
        True when the full pass completed here."""
        sweep = self._sweep
        if sweep is None or plan is None:
            return False
        by_key = {pod.cgroup_key: pod for pod in plan.pods}
        first = True
        while not sweep.done:
            if not first and pending is not None and pending():
                return False
            first = False
            step = sweep.next_step()
            if isinstance(step, QoSLevels):
                targets = qos_targets(plan, self._qos_levels())
            else:
                pod = by_key.get(step.uid)
                scanned = self._rescan(step) if pod is not None else None
                if pod is None or scanned is None:
                    continue
                if self.namer is not None:
                    self.namer.identify_live([scanned])
                targets = pod_targets(pod, scanned, self.identities)
                sweep.add_usage(self._sample_usage(pod, scanned))
            self._write(plan, targets)
            if self._auditing and self.audit is not None and not isinstance(step, QoSLevels) and pod is not None:
                self.audit.audit(pod, self._audited(pod, targets))
        self._finish_sweep(sweep)
        return True

    @staticmethod
    def _audited(pod: PodPlan, targets: list[Target]) -> list[tuple[ContainerPlan, Path]]:
        """The container targets of one pod, with their plans (for the affinity audit)."""
        return [
            (pod.container(t.container), t.path)
            for t in targets
            if t.level is CgroupLevel.CONTAINER and t.container is not None
        ]

    def _finish_sweep(self, sweep: Sweep) -> None:
        if self._auditing and self.audit is not None:
            self._auditing = False
            self.reporter.affinity_audited(self.audit.finish())
        self._sweep = None
        self.sweeps += 1
        self._usage = sweep.usage
        if not self.dry_run:  # forget cgroups no longer targeted (gone pods, a watcher that missed a removal)
            self._applied = {key: value for key, value in self._applied.items() if key[0] in sweep.seen}

    def _write(self, plan: Plan, targets: list[Target]) -> None:
        """Write ``targets`` (or say what would be written, in dry-run); a sweep in progress notes their paths."""
        desired = {t.path: t.values for t in targets}
        writing = self.clock()
        for target in targets:
            trace = self._pending.get(target.path)
            if trace is not None:
                trace.pass_began, trace.writing = self._pass_began, writing
        if self.dry_run:
            self._dry_run(targets)
            failed: set[Path | None] = set()
            now = self.clock()
        else:
            self._enable_controllers(targets)
            report = self.fs.apply(desired) if desired else ApplyReport()
            now = self.clock()
            failed = _failed_paths(report)
            drift = {
                (r.path, r.file)
                for r in report.writes
                if r.phase != "widen" and self._applied.get((r.path, r.file)) == r.new
            }
            self.reporter.applied(report, targets, drift, self._pin_stages(targets, failed, now))
            self._remember(report)
        self._settle(plan, targets, failed, now)
        if self._sweep is not None:
            self._sweep.seen.update(desired)

    def _enable_controllers(self, targets: list[Target]) -> None:
        """``+cpuset +cpu`` in ``cgroup.subtree_control`` down to each target's parent, where missing.

        The kubelet and the runtime normally enable both; a cgroup without them has
        no ``cpuset.*``/``cpu.*`` files to write. Checked once per parent cgroup.
        """
        for target in targets:
            parent = target.path.parent
            if parent in self._controllers:
                continue
            try:
                records = self.fs.enable_controllers(target.path, self._controllers)
            except CgroupError as err:
                self.reporter.controllers_failed(target, err)
                continue
            self._controllers.add(parent)
            self.reporter.controllers_enabled(records)

    def _remember(self, report: ApplyReport) -> None:
        failed = {getattr(f, "path", None) for f in (*report.failures, *report.mismatches)}
        for record in report.writes:
            if record.result == "ok" and record.phase != "widen" and record.path not in failed:
                self._applied[(record.path, record.file)] = record.new
        for path, file in report.unchanged:
            if path not in failed and (path, file) not in self._applied:  # read only what is not known yet
                self._applied[(path, file)] = self._current(path, file)

    def _current(self, path: Path, file: str) -> str:
        try:
            return self.fs.read_text(path, file).strip()
        except CgroupError:
            return ""

    def _dry_run(self, targets: Iterable[Target]) -> None:
        for target in targets:
            try:
                actual = self.fs.read_values(target.path)
            except CgroupError as err:
                self.log.info("cgroup.dry_run", path=str(target.path), error=str(err))
                continue
            if actual != target.values:
                self.log.info(
                    "cgroup.dry_run",
                    path=str(target.path),
                    cgroup_level=target.level,
                    would_write={
                        k: str(v)
                        for k, v in (
                            ("cpuset.cpus", target.values.cpuset_cpus),
                            ("cpuset.mems", target.values.cpuset_mems),
                            ("cpu.max", target.values.cpu_max),
                        )
                        if v is not None
                    },
                )

    def _pin_stages(self, targets: list[Target], bad: Set[Path | None], now: float) -> dict[Path, dict[str, float]]:
        """The stages of the new containers among ``targets`` that were written and verified, by path."""
        stages: dict[Path, dict[str, float]] = {}
        for target in targets:
            trace = self._pending.get(target.path)
            if trace is not None and target.level is CgroupLevel.CONTAINER and target.path not in bad:
                stages[target.path] = trace.stages_ms(now)
        return stages

    def _settle(self, plan: Plan, targets: list[Target], bad: Set[Path | None], now: float) -> None:
        """Pin latency for containers now pinned (``bad``: the paths that failed or did not verify); the
        ``Pinned`` Event for pods whose containers all are."""
        done_pods: dict[str, bool] = {}
        for target in targets:
            if target.level is not CgroupLevel.CONTAINER or target.pod is None:
                continue
            ok = target.path not in bad
            done_pods[target.pod.uid] = done_pods.get(target.pod.uid, True) and ok
            trace = self._pending.get(target.path)
            if ok and trace is not None and not self.dry_run:
                self.reporter.metrics.pin_latency.observe(max(0.0, now - trace.seen))
                self.reporter.metrics.container_pins.labels(source=target.source or IdentitySource.STATUS).inc()
                del self._pending[target.path]
        for path in [p for p, trace in self._pending.items() if now - trace.seen > _PENDING_TTL]:
            del self._pending[path]
        if self.dry_run:
            return
        # Only the pods written here (in plan order): looking at every pod on every write of a full pass made
        # the pass quadratic in the pods.
        positions = self._positions_in(plan)
        written = sorted((positions[uid] for uid, done in done_pods.items() if done and uid in positions))
        for _, pod in written:
            pinned = [c for c in pod.containers if c.pool != Pool.NODE_SHARED and c.kind != ContainerKind.INIT]
            if not pinned:
                continue
            named = self.identities.named(pod.cgroup_key)
            if all(c.name in named for c in pinned):
                self.reporter.pinned(pod)

    def _positions_in(self, plan: Plan) -> dict[str, tuple[int, PodPlan]]:
        """Each pod of ``plan`` by uid, with its place; made once per plan (a quiet node keeps its plan)."""
        known, positions = self._positions
        if known is not plan:
            positions = {p.uid: (i, p) for i, p in enumerate(plan.pods)}
            self._positions = (plan, positions)
        return positions

    def settle_shared_only(self, plan: Plan, raw: Callable[[str], Mapping[str, Any] | None]) -> None:
        """The condition for admitted pods with nothing of their own to pin (their CPUs are the node shared pool)
        that wait for it (a readiness gate); once per pass."""
        if self.dry_run:
            return
        for pod in plan.pods:
            if not pod.admitted or any(
                c.pool != Pool.NODE_SHARED and c.kind != ContainerKind.INIT for c in pod.containers
            ):
                continue
            if readiness_gated(raw(pod.uid)):
                self.reporter.shared_only(pod)

    def _sample_usage(self, pod: PodPlan, scanned: ScannedPod) -> dict[UsageKey, float]:
        """CPU seconds per (pool, namespace, pod) of one pod's containers, from their ``cpu.stat``."""
        pools = {c.name: c.pool for c in pod.containers}
        usage: dict[UsageKey, float] = {}
        for child in scanned.containers:
            identity = self.identities.in_pod(scanned.uid, child.id)
            pool = pools.get(identity.name) if identity is not None and identity.name is not None else None
            if pool is None:
                continue
            try:
                seconds = self.fs.read_cpu_stat(child.path).usage_usec / 1e6
            except CgroupError:
                continue
            key = (pool, pod.namespace, pod.name)
            usage[key] = usage.get(key, 0.0) + seconds
        return usage


def _failed_paths(report: ApplyReport) -> set[Path | None]:
    """The paths of ``report`` whose write failed or did not read back."""
    return {getattr(f, "path", None) for f in (*report.failures, *report.mismatches)}
