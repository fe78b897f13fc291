"""Turning decisions and writes into log lines, metrics, Kubernetes Events and a pod condition (``docs/design.md``,
"Observability").

One structured line per decision, naming node, namespace, pod, uid and, where
it applies, container, pool, CPUs, NUMA nodes, ``cpu.max`` and reason. Events
go on the pod: a Warning with the kubelet's reason and message when a pod is
rejected (followed by the pod's whole request and what was free), a Warning
when its cgroups cannot be written, a Normal ``Pinned`` summary once per pod
saying where each container runs and why; and the pod condition
``podpin.io/CPUsPinned`` (``agent/kube/conditions.py``): True when its CPUs are
its own, False with the kubelet's reason when it was rejected. The words come from
``agent/render/reasons.py``. Each Warning is posted once per distinct message (the
recorder aggregates repeats); posting never blocks the pinning path. A rejection
is logged at warning level (and posted) once per change of its reason: the same
refusal met again when other pods release CPUs (its numbers aside) is a debug
line ``pod.rejected_again``, so 50 unfit pods under churn do not flood the log.

Pinning requests and errors count allocations as the kubelet's CPU manager
does (the planner's :class:`~agent.alloc.tally.AllocationEvent` values on each
decision), so their ratio means what the kubelet's means. Every cgroup failure
other than a cgroup that vanished (its container exited) counts in
``cgroup_write_errors`` by errno name: a write the kernel refused, a file that
could not be read (``E...``), a value that cannot be parsed (``invalid``), a
read-back that differs from the plan (``mismatch``). ``cgroup_writes`` counts
the writes themselves by result.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Set
from pathlib import Path
from typing import Any, Protocol

import structlog

from agent.alloc import Decision, PodPlan, PodRecord, Pool
from agent.alloc.state.readopt import Readoption
from agent.audit import AUDITED_POOLS, AffinityFinding
from agent.cgroups import ApplyReport, WriteRecord
from agent.cgroups.errors import CgroupError, CgroupFileError, MismatchError, errno_name
from agent.kubelet_state import KubeletCPUPolicy
from agent.metrics import AgentMetrics
from agent.pods import ContainerKind, PodView
from agent.reconcile.claims import Conflict
from agent.reconcile.pods import BadContainerID, Malformed
from agent.reconcile.targets import Target
from agent.render.devices import devices_text
from agent.render.reasons import reason_text, rejection_text
from agent.runtime import IdentityErrorReason
from agent.state_store import WriteFailure

__all__ = [
    "MAX_EVENT_MESSAGE",
    "PINNED_REASON",
    "SHARED_REASON",
    "ConditionSink",
    "EventSink",
    "PodRef",
    "Reporter",
    "event_message",
    "pinned_summary",
]

PodRef = tuple[str, str, str]
_DIGITS = re.compile(r"[0-9]+")
"""A pod as Events name it: (namespace, name, uid)."""

#: Longest Event message podpin posts (the size events.k8s.io allows a note); longer ones end in "…".
MAX_EVENT_MESSAGE = 1024


def event_message(text: str) -> str:
    """``text``, cut to :data:`MAX_EVENT_MESSAGE` characters."""
    return text if len(text) <= MAX_EVENT_MESSAGE else text[: MAX_EVENT_MESSAGE - 1] + "…"


class _Counter(Protocol):
    """A metric child that counts (a labelled ``Counter``)."""

    def inc(self, amount: float = 1) -> None: ...


class EventSink(Protocol):
    """What the reporter needs from an Event recorder."""

    def warning(self, pod: PodRef, reason: str, message: str) -> None: ...

    def normal(self, pod: PodRef, reason: str, message: str) -> None: ...

    def forget_gone(self, alive: Set[str]) -> None: ...


def _ref(pod: PodPlan | Decision | PodRecord | Malformed) -> PodRef:
    return (pod.namespace, pod.name, pod.uid)


def _error_label(error: CgroupError) -> str:
    """The ``errno`` label of a cgroup failure: its errno name, ``mismatch`` or ``invalid`` (``CGROUP_ERROR_KINDS``)."""
    if isinstance(error, CgroupFileError):
        return errno_name(error.errno)
    if isinstance(error, MismatchError):
        return "mismatch"
    return "invalid"


def _condition_message(text: str) -> str:
    """A condition's message: one line, at most :data:`MAX_EVENT_MESSAGE` characters."""
    return event_message(" ".join(text.split()))


def pinned_summary(pod: PodPlan) -> str:
    """One line for the ``Pinned`` Event: where each container runs and why (finished init containers left out).

    e.g. ``database on 1-2,17-18 (NUMA 0): exclusive: 4 whole CPUs, cpu and memory request == limit → a slice
    of the pod's CPUs; envoy on 3,19: cpu request 100m ≠ limit 1500m: not eligible for exclusive CPUs → pod shared
    pool``. A container holding devices names them and whether its CPUs sit on them
    (``trainer on 4-7 (NUMA 1): ... [devices: nvidia.com/gpu gpu-1 (NUMA 1); CPUs aligned]``).
    """
    parts = []
    for c in pod.containers:
        if c.kind == ContainerKind.INIT and c.pool == Pool.EXCLUSIVE:
            continue
        if c.pool == Pool.EXCLUSIVE:
            where = f" on {c.cpus} (NUMA {','.join(map(str, c.numa))})"
        elif c.pool == Pool.POD_SHARED:
            where = f" on {c.cpus}"
        else:
            where = ""
        held = f" [devices: {devices_text(c)}]" if c.devices else ""
        parts.append(f"{c.name}{where}: {reason_text(c.reason)}{held}")
    return event_message("; ".join(parts) or "no containers")


class ConditionSink(Protocol):
    """What the reporter needs from the pod condition writer (``agent/kube/conditions.py``)."""

    def set(self, pod: PodRef, status: bool, reason: str, message: str) -> None: ...

    def forget_gone(self, alive: Set[str]) -> None: ...


#: The ``podpin.io/CPUsPinned`` reason of a pod whose CPUs are its own, and of one that asks none of its own.
PINNED_REASON = "Pinned"
SHARED_REASON = "NodeSharedPool"


class Reporter:
    """Logs, metrics, Events and the pod condition ``podpin.io/CPUsPinned`` for one node."""

    def __init__(
        self, node: str, metrics: AgentMetrics, events: EventSink | None, conditions: ConditionSink | None = None
    ) -> None:
        self.node = node
        self.metrics = metrics
        self.events = events
        self.conditions = conditions
        self.log = structlog.get_logger("podpin").bind(node=node)
        self._warned: set[tuple[str, str, str]] = set()
        self._pinned: set[str] = set()
        self._malformed: dict[str, str] = {}
        self._kubelet_reason: str | None = None
        self._strays: set[tuple[str, str, str]] = set()
        self._blind = False
        self._rejections: dict[str, tuple[str, str]] = {}
        self._claims: dict[str, str] = {}

    # -- Events -----------------------------------------------------------------------------
    def _warn_once(self, ref: PodRef, reason: str, message: str) -> None:
        key = (ref[2], reason, message)
        if key in self._warned or self.events is None:
            return
        self._warned.add(key)
        self.events.warning(ref, reason, message)

    def _pod_problem(
        self,
        ref: PodRef,
        event: str,
        *,
        reason: str,
        message: str,
        count: _Counter | None = None,
        as_error: bool = False,
        **fields: Any,
    ) -> None:
        """The one shape of a pod's problem: count it, one log line naming the pod, one Warning Event.

        Args:
            ref: the pod (namespace, name, uid): the line's first fields and the Event's object.
            event: the log line's event name (``pod.cgroup_taken``...).
            reason: the Event's reason; ``message`` its text (posted once per distinct message).
            count: the metric child to increment first, if the problem is counted.
            as_error: an error line instead of a warning.
            fields: the line's other fields, after the pod's.
        """
        if count is not None:
            count.inc()
        (self.log.error if as_error else self.log.warning)(event, namespace=ref[0], pod=ref[1], uid=ref[2], **fields)
        self._warn_once(ref, reason, message)

    def pod_warning(self, ref: PodRef, reason: str, message: str) -> None:
        """A Warning Event on the pod, once per distinct message (the fault boundary's ``PodpinInternalError``)."""
        self._warn_once(ref, reason, message)

    # -- decisions --------------------------------------------------------------------------
    def _stale(self, decision: Decision) -> None:
        """A restored allocation the planner released as stale: a warning line and a Warning Event."""
        for event in decision.allocations:
            if event.stale is None:
                continue
            self._pod_problem(
                _ref(decision),
                "pod.stale_allocation",
                reason="PodpinStaleAllocation",
                message=event_message(event.stale.message()),
                cause=event.stale.cause,
                detail=event.stale.detail,
                released=str(event.stale.released),
            )

    def admitted(self, decision: Decision, plan: PodPlan | None, seconds: float) -> None:
        self._rejections.pop(decision.uid, None)
        self.metrics.admission_requests.inc()
        self.metrics.admission_duration.observe(seconds)
        self.metrics.count_allocations(decision.allocations)
        self._stale(decision)
        fields: dict[str, Any] = {"numa": list(decision.numa_affinity or ())}
        if plan is not None:
            fields["bubble"] = str(plan.bubble) if plan.bubble is not None else None
            fields["containers"] = {
                c.name: {"pool": c.pool, "cpus": str(c.cpus), "reason": reason_text(c.reason)} for c in plan.containers
            }
            devices = {
                c.name: {"numa": list(c.device_numa), "alignment": c.device_alignment}
                for c in plan.containers
                if c.devices
            }
            if devices:
                fields["devices"] = devices
        if decision.kept_observed:
            fields["kept_running_cpus"] = list(decision.kept_observed)
        self.log.info("pod.admitted", namespace=decision.namespace, pod=decision.name, uid=decision.uid, **fields)

    def rejected(self, decision: Decision, seconds: float) -> None:
        self.metrics.admission_requests.inc()
        self.metrics.admission_duration.observe(seconds)
        self.metrics.admission_errors.labels(reason=decision.reason or "UnexpectedAdmissionError").inc()
        self.metrics.count_allocations(decision.allocations)
        self._stale(decision)
        request = rejection_text(decision.facts) if decision.facts is not None else None
        # Once per change of its reason: the same refusal on every release of other pods is a debug line.
        shape = (decision.reason or "", _DIGITS.sub("N", decision.message or ""))
        repeat = self._rejections.get(decision.uid) == shape
        self._rejections[decision.uid] = shape
        (self.log.debug if repeat else self.log.warning)(
            "pod.rejected_again" if repeat else "pod.rejected",
            namespace=decision.namespace,
            pod=decision.name,
            uid=decision.uid,
            reason=decision.reason,
            message=decision.message,
            request=request,
            pool=Pool.NODE_SHARED,
        )
        message = decision.message or ""
        if self.conditions is not None:  # the writer sends a condition only when it changes
            self.conditions.set(
                _ref(decision), False, decision.reason or "UnexpectedAdmissionError", _condition_message(message)
            )
        if repeat:
            return
        self._warn_once(
            _ref(decision),
            decision.reason or "UnexpectedAdmissionError",
            event_message(f"{message}; {request}" if request else message),
        )

    def devices_unknown(self, decision: Decision, problem: str, waited: float) -> None:
        """A pod admitted without device hints: its devices were not known within ``deviceWaitTimeout``."""
        self._pod_problem(
            _ref(decision),
            "pod.devices_unknown",
            reason="PodpinDevicesUnknown",
            message=event_message(
                f"podpin placed the pod's CPUs without knowing its devices ({problem}, after {waited:.1f}s): "
                "its exclusive CPUs may not sit on its devices' NUMA nodes"
            ),
            count=self.metrics.devices_unknown,
            waited_seconds=round(waited, 3),
            problem=problem,
        )

    def released(self, record: PodRecord) -> None:
        self._rejections.pop(record.uid, None)
        self._pinned.discard(record.uid)
        self.log.info("pod.released", namespace=record.namespace, pod=record.name, uid=record.uid)

    def forget_gone(self, alive: set[str]) -> None:
        """Forget Warnings, Pinned and malformed reports of pods no longer on the node (uids, or namespace/name).

        Without this the sets grow with every pod the node ever ran; a pod that
        comes back (same uid) is reported afresh, which is what an operator wants.
        """
        self._warned = {key for key in self._warned if key[0] in alive}
        self._rejections = {uid: shape for uid, shape in self._rejections.items() if uid in alive}
        self._claims = {uid: claim for uid, claim in self._claims.items() if uid in alive}
        self._pinned &= alive
        self._malformed = {
            key: error for key, error in self._malformed.items() if key in alive or key.split("/")[0] in alive
        }
        if self.events is not None:
            self.events.forget_gone(alive)
        if self.conditions is not None:
            self.conditions.forget_gone(alive)

    def mark_pinned(self, uids: Iterable[str]) -> None:
        """Pods restored from the checkpoint were pinned (and announced) by an earlier run: no second ``Pinned``."""
        self._pinned.update(uids)

    def bad_container_id(self, bad: BadContainerID) -> None:
        """A status containerID that names no cgroup: the container runs in its pod's interim set, say so once."""
        key = f"{bad.uid}/{bad.container}"
        if self._malformed.get(key) == bad.error:
            return
        self._malformed[key] = bad.error
        self._pod_problem(
            (bad.namespace, bad.name, bad.uid),
            "pod.malformed",
            reason="PodpinInvalidPod",
            message=f"podpin cannot find the cgroup of container {bad.container}: {bad.error}; the container is "
            "not pinned to its own CPUs (its cgroup gets the pod's shared set)",
            count=self.metrics.malformed_pods.labels(reason="status"),
            as_error=True,
            container=bad.container,
            field=bad.field,
            container_id=bad.container_id,
            error=bad.error,
        )

    def readopted(self, readoption: Readoption, pods: Mapping[str, PodView]) -> None:
        """The checkpoint was re-adopted after a hotplug or a reservation change: a line, and a Warning per move."""
        state = readoption.state
        self.log.warning(
            "state.readopted",
            online=str(state.online),
            reserved=str(state.reserved),
            moved=[f"{m.namespace}/{m.name}/{m.container or '<pod>'}" for m in readoption.moves],
            dropped=list(readoption.dropped),
            kept="every CPU still online and not newly reserved",
        )
        for move in readoption.moves:
            where = f"container {move.container}" if move.container is not None else "the pod's CPUs"
            self._pod_problem(
                (move.namespace, move.name, move.uid),
                "pod.cpus_moved",
                reason="PodpinCPUsMoved",
                message=f"podpin moved {where} from {move.before} to {move.after}: {move.why()}; "
                "every other CPU stayed",
                count=self.metrics.cpus_moved,
                container=move.container,
                before=str(move.before),
                after=str(move.after),
                offline=str(move.offline),
                newly_reserved=str(move.reserved),
            )
        for uid in readoption.dropped:
            view = pods.get(uid)
            if view is None:
                continue
            self._pod_problem(
                (view.namespace, view.name, uid),
                "pod.readmitted",
                reason="PodpinCPUsMoved",
                message="podpin could not keep this pod's CPUs after CPUs went offline or became reserved (too few "
                "free CPUs to replace them): it is admitted again like a new pod",
            )

    def mirror_refused(self, pod: PodView) -> None:
        """A ``kubernetes.io/config.mirror`` annotation on a pod no Node owns: ignored, said once per value."""
        claim = f"mirror:{pod.mirror_refused}"
        if self._claims.get(pod.uid) == claim:
            return
        self._claims[pod.uid] = claim
        if pod.mirror_owner_mismatch is not None:
            self._mirror_owner_mismatch(pod)
            return
        self._pod_problem(
            (pod.namespace, pod.name, pod.uid),
            "pod.mirror_annotation_ignored",
            reason="PodpinMirrorAnnotationIgnored",
            message=f"podpin ignores kubernetes.io/config.mirror={pod.mirror_refused} on this pod: no Node owns it, "
            "so it is not a mirror pod; the pod is handled under its own uid",
            count=self.metrics.cgroup_claims_refused.labels(reason="mirror_not_node_owned"),
            annotation=pod.mirror_refused,
            why="no ownerReferences entry of kind Node: only the kubelet's mirror pods name another cgroup",
        )

    def _mirror_owner_mismatch(self, pod: PodView) -> None:
        """A pod whose Node owner reference carries another uid than the Node's: not a mirror pod."""
        self._pod_problem(
            (pod.namespace, pod.name, pod.uid),
            "pod.mirror_annotation_ignored",
            reason="PodpinMirrorAnnotationIgnored",
            message=f"podpin ignores kubernetes.io/config.mirror={pod.mirror_refused} on this pod: its Node owner "
            f"reference has uid {pod.mirror_owner_uid!r}, not the Node's {pod.mirror_owner_mismatch}, so it is not a "
            "mirror pod; the pod is handled under its own uid",
            count=self.metrics.cgroup_claims_refused.labels(reason="mirror_owner_uid_mismatch"),
            annotation=pod.mirror_refused,
            owner_uid=pod.mirror_owner_uid,
            node_uid=pod.mirror_owner_mismatch,
            why="its Node owner reference's uid is not the Node's: the kubelet did not create it",
        )

    def cgroup_taken(self, conflict: Conflict) -> None:
        """A pod maps to a cgroup another pod holds: left out (not pinned), said once per holder."""
        pod, holder = conflict.pod, conflict.holder
        claim = f"taken:{conflict.cgroup_uid}:{holder.uid}"
        if self._claims.get(pod.uid) == claim:
            return
        self._claims[pod.uid] = claim
        self._pod_problem(
            (pod.namespace, pod.name, pod.uid),
            "pod.cgroup_taken",
            reason="PodpinCgroupTaken",
            message=f"podpin leaves this pod unpinned: it maps to the cgroup of pod uid {conflict.cgroup_uid}, which "
            f"{holder.full_name} holds",
            count=self.metrics.cgroup_claims_refused.labels(reason="cgroup_taken"),
            cgroup_uid=conflict.cgroup_uid,
            holder=holder.full_name,
            holder_uid=holder.uid,
        )

    def identity_error(
        self, reason: IdentityErrorReason, message: str, *, path: Path, container_id: str, pod: PodRef | None
    ) -> None:
        """A container's runtime bundle cannot name it (or names another pod): it waits for the pod status."""
        self.metrics.runtime_identity_errors.labels(reason=reason).inc()
        fields: dict[str, Any] = {"path": str(path), "container_id": container_id, "reason": reason}
        if pod is not None:
            fields.update(namespace=pod[0], pod=pod[1], uid=pod[2])
        self.log.error("runtime.identity_error", **fields, error=message)
        if pod is not None:
            self._warn_once(
                pod,
                "PodpinUnknownContainer",
                f"podpin cannot tell from its runtime which container {container_id} is ({reason}): {message}; it "
                "runs on the pod's shared set until the pod status names it",
            )

    def malformed(self, bad: Malformed) -> None:
        key = bad.uid or f"{bad.namespace}/{bad.name}"
        if self._malformed.get(key) == bad.error:
            return
        self._malformed[key] = bad.error
        self.metrics.malformed_pods.labels(reason=bad.field.split(".")[0] or "pod").inc()
        self.log.error(
            "pod.malformed", namespace=bad.namespace, pod=bad.name, uid=bad.uid, field=bad.field, error=bad.error
        )
        if bad.uid and bad.name:
            self._warn_once(
                _ref(bad), "PodpinInvalidPod", f"podpin cannot read this pod and leaves it unpinned: {bad.error}"
            )

    def kubelet(self, policy: KubeletCPUPolicy) -> None:
        """Say once (per change) why podpin writes nothing while the kubelet pins."""
        self.metrics.kubelet_pinning.set(1 if policy.pinning else 0)
        reason = policy.reason if policy.pinning else None
        if reason != self._kubelet_reason:
            self._kubelet_reason = reason
            if policy.pinning:
                self.log.error("kubelet.pinning", policy=policy.policy, reason=policy.reason)
            else:
                self.log.info("kubelet.pinning", policy=policy.policy, reason=policy.reason, pinning=False)

    # -- writes -----------------------------------------------------------------------------
    def applied(
        self,
        report: ApplyReport,
        targets: Iterable[Target],
        drift: set[tuple[Path, str]],
        pins: Mapping[Path, Mapping[str, float]] | None = None,
    ) -> None:
        """Log one line per written cgroup, count writes, drift repairs and failures, warn the pods; a new
        container's line carries where its pin latency went (``pins``: ``pin_ms`` by path, ``pin_trace.py``)."""
        by_path = {t.path: t for t in targets}
        writes: dict[Path, list[WriteRecord]] = defaultdict(list)
        for record in report.writes:
            self.metrics.cgroup_writes.labels(file=record.file, result=record.result).inc()
            if record.phase != "widen" and record.result == "ok":
                writes[record.path].append(record)
        for path, records in writes.items():
            target = by_path.get(path)
            repaired = [r for r in records if (r.path, r.file) in drift and r.result == "ok"]
            if repaired:
                self.metrics.drift_repairs.inc(len(repaired))
            event = "cgroup.drift_repaired" if repaired else "cgroup.applied"
            pin = {} if pins is None or path not in pins else {"pin_ms": dict(pins[path])}
            self.log.info(
                event,
                **self._target_fields(target, path),
                files={r.file: {"old": r.old, "new": r.new, "result": r.result} for r in records},
                **pin,
            )
        for failure in (*report.failures, *report.mismatches):
            self._failure(failure, by_path)

    def controllers_enabled(self, records: Iterable[WriteRecord]) -> None:
        """Count and log each ``cgroup.subtree_control`` podpin had to complete."""
        for record in records:
            self.metrics.cgroup_writes.labels(file=record.file, result=record.result).inc()
            self.log.info("cgroup.controllers_enabled", path=str(record.path), old=record.old, new=record.new)

    def controllers_failed(self, target: Target, error: CgroupError) -> None:
        """A parent whose controllers cannot be enabled: its child has no cpuset files to write."""
        self.metrics.cgroup_write_errors.labels(errno=_error_label(error)).inc()
        self.log.error("cgroup.error", **self._target_fields(target, target.path), error=str(error), controllers=True)
        if target.pod is not None:
            self._warn_once(
                _ref(target.pod), "PodpinPinningFailed", f"podpin could not apply the pod's CPU placement: {error}"
            )

    def _target_fields(self, target: Target | None, path: Path) -> dict[str, Any]:
        fields: dict[str, Any] = {"path": str(path)}
        if target is None:
            return fields
        fields["cgroup_level"] = target.level
        if target.pod is not None:
            fields.update(namespace=target.pod.namespace, pod=target.pod.name, uid=target.pod.uid)
            if target.container is not None:
                container = target.pod.container(target.container)
                fields.update(
                    container=container.name,
                    pool=container.pool,
                    cpus=str(container.cpus),
                    numa=list(container.numa),
                    cpu_max=str(container.desired.cpu_max) if container.desired.cpu_max is not None else None,
                )
        return fields

    def _failure(self, failure: CgroupError, by_path: dict[Path, Target]) -> None:
        path = getattr(failure, "path", None)
        target = by_path.get(path) if isinstance(path, Path) else None
        vanished = isinstance(failure, CgroupFileError) and failure.vanished
        fields = self._target_fields(target, path) if isinstance(path, Path) else {}
        if vanished:
            self.log.info("cgroup.vanished", **fields, error=str(failure))
            return
        self.metrics.cgroup_write_errors.labels(errno=_error_label(failure)).inc()
        self.log.error("cgroup.error", **fields, error=str(failure), mismatch=isinstance(failure, MismatchError))
        if target is not None and target.pod is not None:
            self._warn_once(
                _ref(target.pod), "PodpinPinningFailed", f"podpin could not apply the pod's CPU placement: {failure}"
            )

    def pinned(self, pod: PodPlan) -> None:
        """The Normal ``Pinned`` Event, once per pod."""
        if pod.uid in self._pinned:
            return
        self._pinned.add(pod.uid)
        summary = pinned_summary(pod)
        if self.events is not None:
            self.events.normal(_ref(pod), "Pinned", summary)
        if self.conditions is not None:
            self.conditions.set(_ref(pod), True, PINNED_REASON, _condition_message(summary))

    def shared_only(self, pod: PodPlan) -> None:
        """A pod that asks no CPU of its own but waits for the condition (its readiness gate): True, as designed."""
        if pod.uid in self._pinned or self.conditions is None:
            return
        self._pinned.add(pod.uid)
        self.conditions.set(
            _ref(pod), True, SHARED_REASON, "no container asks for CPUs of its own: all run in the node shared pool"
        )

    # -- the affinity audit -----------------------------------------------------------------
    def affinity_audited(self, findings: Iterable[AffinityFinding]) -> None:
        """Set the violations gauge; log and warn (once per distinct set of stray threads) per violating container.

        A container whose stray threads are the same as at the previous audit is
        not reported again; one that is clean and strays again later is.
        """
        counts = dict.fromkeys(AUDITED_POOLS, 0)
        strays: set[tuple[str, str, str]] = set()
        blind = 0
        for finding in findings:
            blind += 0 if finding.visible else 1
            if not finding.threads:
                continue
            counts[finding.pool] = counts.get(finding.pool, 0) + len(finding.threads)
            shown = ", ".join(f"{t.tid} on {t.affinity}" for t in finding.threads[:8])
            more = f" and {len(finding.threads) - 8} more" if len(finding.threads) > 8 else ""
            key = (finding.uid, finding.container, shown + more)
            strays.add(key)
            if key in self._strays:
                continue
            self._pod_problem(
                (finding.namespace, finding.pod, finding.uid),
                "affinity.violation",
                reason="PodpinAffinityViolation",
                message=event_message(
                    f"{len(finding.threads)} thread(s) of container {finding.container} may run outside its CPUs "
                    f"{finding.cpus} ({finding.pool}): {shown}{more}"
                ),
                container=finding.container,
                pool=finding.pool,
                cpus=str(finding.cpus),
                path=str(finding.path),
                threads={t.tid: str(t.affinity) for t in finding.threads},
            )
        self._strays = strays
        for pool, count in counts.items():
            self.metrics.affinity_violations.labels(pool=pool).set(count)
        self.metrics.affinity_audits.inc()
        if blind and not self._blind:
            self.log.warning(
                "affinity.audit_blind",
                containers=blind,
                reason="their threads are in another PID namespace: run the agent with hostPID to audit them",
            )
        self._blind = bool(blind)

    # -- the checkpoint ---------------------------------------------------------------------
    def checkpoint_failed(self, path: Path, failure: WriteFailure, previous: WriteFailure | None) -> None:
        """A save failed: count it; log it when it starts failing or the errno changes (it is retried every pass)."""
        self.metrics.checkpoint_write_errors.labels(errno=failure.errno_name).inc()
        self.metrics.checkpoint_stale.set(1)
        if previous is None or previous.errno_name != failure.errno_name:
            self.log.error(
                "state.checkpoint_failed",
                path=str(path),
                errno=failure.errno_name,
                error=failure.message,
                attempts=failure.attempts,
            )

    def checkpoint_recovered(self, path: Path, attempts: int) -> None:
        """A save succeeded after ``attempts`` failed ones."""
        self.metrics.checkpoint_stale.set(0)
        self.log.warning("state.checkpoint_recovered", path=str(path), failed_attempts=attempts)
