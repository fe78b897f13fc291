"""The affinity audit: every thread of every pinned container checked against the CPUs the plan gave it.

podpin writes a container's CPUs into its cgroup's ``cpuset.cpus``; the kernel
then keeps each thread's affinity inside the cgroup's effective set. What the
cgroup files cannot show is whether the threads really follow: a runtime that
rewrote the cpuset behind podpin's back (``runc update``, a restart), a child
cgroup or a thread that escaped to a wider set, an agent write that the kernel
ignored. Only ``sched_getaffinity(2)`` of each thread tells, so the audit reads
the thread ids from the container cgroup's ``cgroup.threads`` and asks the
:class:`~agent.audit.probe.NodeProbe` for each one's affinity.

A thread **violates** when its affinity reaches a CPU outside the container's
planned set (exclusive slice or pod shared pool): it can run where another
container's exclusive CPUs are. A thread that narrowed itself to part of its
set (an application pinning its workers) is fine. Node-shared containers are
not audited: their set is the whole shared pool, which changes with every
admission. Threads that exit during the audit are skipped.

The audit runs on a full pass, at most once per ``reconcilePeriod``
(:meth:`AffinityAudit.due`); its findings go to the reporter (a gauge by pool,
a log line and a Warning Event per container whose stray threads changed). The
kubelet has no counterpart: it trusts the runtime to apply the cpuset.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from agent.alloc import ContainerPlan, PodPlan, Pool
from agent.audit.probe import NodeProbe
from agent.cpuset import CPUSet
from agent.metrics import AUDITED_POOLS

__all__ = ["AUDITED_POOLS", "AffinityAudit", "AffinityFinding", "StrayThread", "ThreadReader", "stray_threads"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StrayThread:
    """One thread whose affinity reaches outside its container's planned CPUs."""

    tid: int
    affinity: CPUSet


@dataclass(frozen=True, slots=True, kw_only=True)
class AffinityFinding:
    """The stray threads of one audited container (``threads`` is empty when all of them follow the plan)."""

    namespace: str
    pod: str
    uid: str
    container: str
    pool: Pool
    cpus: CPUSet
    path: Path
    threads: tuple[StrayThread, ...]
    visible: bool = True
    """False when the cgroup lists no thread this process can see (another PID namespace: the agent needs hostPID)."""


def stray_threads(planned: CPUSet, affinities: Mapping[int, CPUSet | None]) -> tuple[StrayThread, ...]:
    """The threads whose affinity is not inside ``planned``, by thread id (gone ones, None, are skipped)."""
    return tuple(
        StrayThread(tid=tid, affinity=affinity)
        for tid, affinity in sorted(affinities.items())
        if affinity is not None and not affinity <= planned
    )


class ThreadReader:
    """Reads ``cgroup.threads`` of a cgroup (the thread ids in it, in this process's PID namespace)."""

    def threads(self, cgroup: Path) -> list[int] | None:
        """The thread ids, or None when the file cannot be read (the cgroup is gone)."""
        try:
            text = (cgroup / "cgroup.threads").read_text()
        except OSError:
            return None
        # A thread of another PID namespace reads as 0: it cannot be asked for its affinity.
        return [tid for tid in (int(word) for word in text.split() if word.isdigit()) if tid > 0]


class AffinityAudit:
    """Audits the pinned containers of the pods a full pass visits; :meth:`finish` hands the findings over."""

    def __init__(self, probe: NodeProbe, *, period: float, reader: ThreadReader | None = None) -> None:
        """Keep the probe and the cadence.

        Args:
            probe: where affinities come from.
            period: seconds between two audits at least (``reconcilePeriod``).
            reader: where thread ids come from (default: the cgroup's ``cgroup.threads``).
        """
        self.probe = probe
        self.period = period
        self.reader = reader if reader is not None else ThreadReader()
        self._last: float | None = None
        self._findings: dict[Path, AffinityFinding] = {}

    def due(self, now: float) -> bool:
        """True (and the audit started) when the last one began at least ``period`` seconds ago."""
        if self._last is not None and now - self._last < self.period:
            return False
        self._last = now
        self._findings = {}
        return True

    def audit(self, pod: PodPlan, containers: Iterable[tuple[ContainerPlan, Path]]) -> None:
        """Check every thread of each pinned container of ``pod`` (container plan, its cgroup).

        A container audited twice (a full pass that started over) keeps its latest finding.
        """
        for container, path in containers:
            if container.pool not in AUDITED_POOLS or not container.cpus:
                continue
            tids = self.reader.threads(path)
            if tids is None:
                continue
            affinities = {tid: self.probe.affinity(tid) for tid in tids}
            visible = any(affinity is not None for affinity in affinities.values())
            self._findings[path] = AffinityFinding(
                namespace=pod.namespace,
                pod=pod.name,
                uid=pod.uid,
                container=container.name,
                pool=container.pool,
                cpus=container.cpus,
                path=path,
                threads=stray_threads(container.cpus, affinities),
                visible=visible,
            )

    def finish(self) -> tuple[AffinityFinding, ...]:
        """The findings of the audit that just ended (every audited container, clean ones included)."""
        findings, self._findings = tuple(self._findings.values()), {}
        return findings
