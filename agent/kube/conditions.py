"""The pod condition ``podpin.io/CPUsPinned``: whether a pod's CPUs are its own, on the pod's status.

An Event expires after an hour and few people read them; a condition stays on the pod while it runs, shows in
``kubectl describe pod`` and ``kubectl get pod -o wide`` (with a readiness gate), and can gate readiness: a pod
listing ``podpin.io/CPUsPinned`` in ``spec.readinessGates`` is not Ready until podpin sets it True
(``docs/design.md``, "Observability"). podpin sets it:

* ``True``, reason ``Pinned``, when every container of the pod that gets CPUs of its own (exclusive or the pod
  shared pool) runs on them; the message says where each container runs, as the ``Pinned`` Event;
* ``False`` with the kubelet's reason (``TopologyAffinityError``, ``SMTAlignmentError`` ...) and message when the
  pod was rejected and runs unpinned in the node shared pool;
* ``True``, reason ``NodeSharedPool``, for a pod that asks no CPU of its own, only when it lists the readiness gate
  (so it does not wait forever; no other such pod is written to).

Like Events, this must never block or fail the pinning path: :meth:`ConditionWriter.set` records the wanted
condition (the newest per pod wins) and one background thread patches the pod's status, a strategic merge patch
that touches only this condition and carries the pod's uid as a precondition (a pod recreated under the same name
is not written to). A condition already sent is not sent again; a pod that is gone (404) or replaced (409) is
dropped; other failures are retried a few times with back-off, then counted as failed. The agent's RBAC needs only
``pods/status`` ``patch``; the chart's ValidatingAdmissionPolicy keeps that to pods on the agent's own node and to
this one condition.
"""

from __future__ import annotations

import datetime
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass
from typing import Any, Literal

import structlog

from agent.kube.api import CoreCalls

__all__ = ["CONDITION", "ConditionOutcome", "ConditionWriter", "condition_patch", "readiness_gated"]

_log = structlog.get_logger("podpin.kube.conditions")

#: The condition's type.
CONDITION = "podpin.io/CPUsPinned"

ConditionOutcome = Literal["patched", "gone", "failed"]
"""What happened to one wanted condition (``podpin_condition_patches_total{result}``)."""

#: How many times a patch is tried before it counts as failed, and the first back-off (doubled each time).
_ATTEMPTS = 4
_BACKOFF = 0.5
#: The most pods waiting for a patch; beyond it the oldest wait is dropped (its newest state comes again).
_MAX_PENDING = 4096


@dataclass(frozen=True, slots=True, kw_only=True)
class _Wanted:
    namespace: str
    name: str
    uid: str
    status: bool
    reason: str
    message: str


def readiness_gated(raw: Mapping[str, Any] | None) -> bool:
    """Whether a raw pod lists ``podpin.io/CPUsPinned`` among its ``spec.readinessGates``."""
    spec = raw.get("spec") if isinstance(raw, Mapping) else None
    gates = spec.get("readinessGates") if isinstance(spec, Mapping) else None
    return isinstance(gates, list) and any(
        isinstance(gate, Mapping) and gate.get("conditionType") == CONDITION for gate in gates
    )


def condition_patch(uid: str, status: bool, reason: str, message: str, now: datetime.datetime) -> dict[str, Any]:
    """The status patch setting the condition (``metadata.uid`` is the precondition)."""
    return {
        "metadata": {"uid": uid},
        "status": {
            "conditions": [
                {
                    "type": CONDITION,
                    "status": "True" if status else "False",
                    "reason": reason,
                    "message": message,
                    "lastTransitionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                }
            ]
        },
    }


class ConditionWriter:
    """Patches ``podpin.io/CPUsPinned`` on pods from a thread of its own (module docstring).

    Args:
        api: the API calls.
        on_outcome: told each outcome (for the metric), from the writer's thread.
        clock: the wall clock for ``lastTransitionTime``.
    """

    def __init__(
        self,
        api: CoreCalls,
        *,
        on_outcome: Callable[[ConditionOutcome], None] | None = None,
        clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
    ) -> None:
        self.api = api
        self._on_outcome = on_outcome
        self._clock = clock
        self._cond = threading.Condition()
        self._pending: OrderedDict[str, _Wanted] = OrderedDict()
        self._sent: dict[str, tuple[bool, str, str]] = {}
        self._closing = False
        self._busy = False
        self._thread = threading.Thread(target=self._run, name="podpin-conditions", daemon=True)
        self._thread.start()

    def set(self, pod: tuple[str, str, str], status: bool, reason: str, message: str) -> None:
        """Want the condition on ``pod`` (namespace, name, uid); returns at once."""
        namespace, name, uid = pod
        wanted = _Wanted(namespace=namespace, name=name, uid=uid, status=status, reason=reason, message=message)
        with self._cond:
            if self._sent.get(uid) == (status, reason, message):
                self._pending.pop(uid, None)
                return
            self._pending[uid] = wanted
            self._pending.move_to_end(uid)
            while len(self._pending) > _MAX_PENDING:
                self._pending.popitem(last=False)
            self._cond.notify()

    def forget_gone(self, alive: Set[str]) -> None:
        """Forget what was sent to pods that left the node (and drop their waiting patches)."""
        with self._cond:
            for uid in [uid for uid in self._sent if uid not in alive]:
                del self._sent[uid]
            for uid in [uid for uid in self._pending if uid not in alive]:
                del self._pending[uid]

    def idle(self) -> bool:
        """Nothing waits and nothing is being sent (tests wait for it)."""
        with self._cond:
            return not self._pending and not self._busy

    def close(self, timeout: float = 2.0) -> None:
        """Stop the thread; a patch under way may finish within ``timeout``."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closing:
                    self._cond.wait()
                if self._closing:
                    return
                _, wanted = self._pending.popitem(last=False)
                self._busy = True
            try:
                outcome = self._deliver(wanted)
            finally:
                with self._cond:
                    self._busy = False
            if self._on_outcome is not None:
                self._on_outcome(outcome)

    def _deliver(self, wanted: _Wanted) -> ConditionOutcome:
        body = condition_patch(wanted.uid, wanted.status, wanted.reason, wanted.message, self._clock())
        delay = _BACKOFF
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                self.api.patch_namespaced_pod_status(wanted.name, wanted.namespace, body, _request_timeout=10)
            except Exception as err:  # the client's ApiException or a connection error: counted, never raised
                status = getattr(err, "status", None)
                if status in (404, 409):
                    return "gone"
                if attempt == _ATTEMPTS:
                    _log.warning(
                        "condition.failed",
                        namespace=wanted.namespace,
                        pod=wanted.name,
                        uid=wanted.uid,
                        condition=CONDITION,
                        error=" ".join(str(err).split())[:300],
                    )
                    return "failed"
                with self._cond:
                    if self._cond.wait_for(lambda: self._closing, timeout=delay):
                        return "failed"
                delay *= 2
                continue
            with self._cond:
                self._sent[wanted.uid] = (wanted.status, wanted.reason, wanted.message)
            return "patched"
        return "failed"
