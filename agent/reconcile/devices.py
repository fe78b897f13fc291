"""Which devices a new pod holds, asked of the kubelet before the pod is admitted, with a bounded wait.

The kubelet's device manager allocates a pod's devices during its own
admission, before the container starts; its PodResources API
(``agent/podresources``) says which ones, but podpin may see the pod first. So
a pod that requests extended resources (``IsExtendedResourceName``:
``agent/alloc/devicemanager``) is admitted only when its devices are known:
the first pass that sees it asks PodResources (``List`` and
``GetAllocatableResources``, once per pass whatever the number of pods
waiting); while the answer lacks the pod's devices the pod is *parked* (not
admitted, no decision, its containers in the node shared pool as any new pod)
and asked about again on later passes, every :data:`RETRY_INTERVAL` seconds
(:meth:`DeviceGate.next_retry` wakes the loop). The reconcile loop never
sleeps on it: a pass only looks at what is known when it runs. After
``deviceWaitTimeout`` seconds the pod is admitted without device hints and the
caller reports it (Warning Event ``PodpinDevicesUnknown``, a log line, the
``podpin_devices_unknown_total`` metric).

A pod's devices are known when every container requesting a resource the
node has devices of (``GetAllocatableResources``) holds devices of it; a
resource no device on the node serves (an extended resource that is not a
device plugin's) needs nothing. Without the PodResources socket nothing waits:
podpin admits as it did before it knew about devices. A pod without extended
resources never causes a call.

A pod restored from the checkpoint is not admitted again, so it never waits:
the first pass asks once which devices it holds (:meth:`DeviceGate.held`), for
its plan only.

The gate is the reconciler's imperative shell around the deciding half
(``decider.py``, which does no I/O): each pass, before deciding, the reconciler
hands it the decider's questions (:class:`~agent.reconcile.device_answers.DeviceAsks`)
and :meth:`DeviceGate.answer` answers them all, on the reconcile loop's thread
as before; the answers go into the decision as a value. A pod's question that
raises an unexpected exception is answered with the exception, and the decider
ends that pod's admission at its fault boundary, as when it asked itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import structlog

from agent.alloc import AllocatableDevices, DeviceAssignments, PodDevices
from agent.alloc.devicemanager import container_device_requests
from agent.fault_boundary import FaultBoundary, Stage
from agent.podresources import PodResourcesClient, PodResourcesError
from agent.pods import PodView
from agent.reconcile.device_answers import DeviceAnswer, DeviceAnswers, DeviceAsks

__all__ = ["CALL_TIMEOUT", "RETRY_INTERVAL", "DeviceAnswer", "DeviceGate", "DeviceSource", "device_gate_for"]

#: Seconds between two asks for a parked pod's devices.
RETRY_INTERVAL = 0.5

#: Deadline of each PodResources call made from the reconcile loop (seconds): a hung kubelet costs a pass this much.
CALL_TIMEOUT = 1.0


class DeviceSource(Protocol):
    """What the gate needs from a PodResources client (:class:`agent.podresources.PodResourcesClient`)."""

    def present(self) -> bool: ...

    def list(self) -> DeviceAssignments: ...

    def allocatable(self) -> AllocatableDevices: ...


_NOTHING = DeviceAnswer(ready=True)
_PARKED = DeviceAnswer(ready=False)


@dataclass(frozen=True, slots=True)
class _Facts:
    assignments: DeviceAssignments
    node: AllocatableDevices | None


class DeviceGate:
    """Decides, pass by pass, whether a new pod's devices are known (the module docstring's rules)."""

    def __init__(self, source: DeviceSource, *, timeout: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.source = source
        self.timeout = timeout
        self.clock = clock
        self._facts: _Facts | str | None = None
        self._asked = False
        self.boundary: FaultBoundary | None = None
        """Where an exception the client does not expect stops (this pass's answer); None: it propagates."""
        self._first_seen: dict[str, float] = {}
        self._retry_at: dict[str, float] = {}

    @property
    def waiting(self) -> tuple[str, ...]:
        """The uids of the parked pods."""
        return tuple(self._first_seen)

    def begin_pass(self) -> None:
        """A new pass: the next pod that needs devices asks PodResources afresh."""
        self._asked = False
        self._facts = None

    def forget(self, alive: Iterable[str]) -> None:
        """Stop waiting for pods no longer on the node."""
        keep = set(alive)
        self._first_seen = {uid: at for uid, at in self._first_seen.items() if uid in keep}
        self._retry_at = {uid: at for uid, at in self._retry_at.items() if uid in keep}

    def next_retry(self) -> float | None:
        """When a parked pod is next due to be asked about (``clock()`` time), or None."""
        return min(self._retry_at.values(), default=None)

    def retry_due(self, now: float) -> bool:
        """Whether a parked pod is due (the loop then runs a pass)."""
        due = self.next_retry()
        return due is not None and due <= now

    def answer(self, asks: DeviceAsks) -> DeviceAnswers:
        """A pass's answers: stop waiting for pods no longer live, then ask about each pod, in order.

        At most one PodResources ``List`` (and ``GetAllocatableResources``) per pass, and none when no pod asked
        about requests devices (:meth:`check`, :meth:`held`).
        """
        self.begin_pass()
        self.forget(asks.live)
        new: dict[str, DeviceAnswer] = {}
        held: dict[str, PodDevices | None] = {}
        failed: dict[str, Exception] = {}
        for ask in asks.pods:
            uid = ask.view.uid
            try:
                if ask.restored:
                    held[uid] = self.held(ask.view)
                else:
                    new[uid] = self.check(ask.view)
            except MemoryError:
                raise
            except Exception as err:  # this pod's only: its admission ends at its fault boundary (decider.py)
                failed[uid] = err
        return DeviceAnswers(new=new, held=held, failed=failed)

    def check(self, pod: PodView) -> DeviceAnswer:
        """Whether ``pod`` may be admitted now, and with which devices."""
        requests = {c.name: found for c in pod.all_containers if (found := container_device_requests(c))}
        if not requests:
            return _NOTHING
        facts = self._ask()
        if facts is None:  # no PodResources on this node: admit as before devices were known
            self._done(pod.uid)
            return _NOTHING
        now = self.clock()
        if isinstance(facts, _Facts):
            devices = PodDevices.of(facts.assignments, pod.namespace, pod.name, facts.node)
            missing = _missing(requests, devices, facts.node)
            if not missing:
                waited = now - self._first_seen.get(pod.uid, now)
                self._done(pod.uid)
                return DeviceAnswer(ready=True, devices=devices, waited=waited)
            problem = f"PodResources names no device of {missing}"
        else:
            problem = facts
        first = self._first_seen.setdefault(pod.uid, now)
        if now - first < self.timeout:
            self._retry_at[pod.uid] = min(now + RETRY_INTERVAL, first + self.timeout)
            return _PARKED
        self._done(pod.uid)
        return DeviceAnswer(ready=True, unknown=problem, waited=now - first)

    def held(self, pod: PodView) -> PodDevices | None:
        """The devices an already admitted pod holds, asked once and never waited for (None: none known).

        A pod restored from the checkpoint keeps its CPUs whatever its devices
        are; this only lets its plan (``podpin plan``-like rows, the ``Pinned``
        Event, the alignment) name them, as it did before the restart.
        """
        if not any(container_device_requests(c) for c in pod.all_containers):
            return None
        facts = self._ask()
        if not isinstance(facts, _Facts):
            return None
        devices = PodDevices.of(facts.assignments, pod.namespace, pod.name, facts.node)
        return devices if devices.containers else None

    def _done(self, uid: str) -> None:
        self._first_seen.pop(uid, None)
        self._retry_at.pop(uid, None)

    def _ask(self) -> _Facts | str | None:
        """This pass's answer: the facts, an error message, or None when the node has no PodResources socket."""
        if self._asked:
            return self._facts
        self._asked = True
        if not self.source.present():
            self._facts = None
            return None
        try:
            assignments = self.source.list()
        except PodResourcesError as err:
            self._facts = f"PodResources List failed: {err}"
            return self._facts
        except Exception as err:  # an answer the client does not expect: this pass's answer only
            if self.boundary is None:
                raise
            self.boundary.caught(Stage.PODRESOURCES, err, "List")
            self._facts = f"PodResources List failed: {type(err).__name__}: {err}"
            return self._facts
        try:
            node: AllocatableDevices | None = self.source.allocatable()
        except PodResourcesError:
            node = None  # an older kubelet: the devices held stand for the node's
        self._facts = _Facts(assignments, node)
        return self._facts


def _missing(requests: dict[str, dict[str, int]], devices: PodDevices, node: AllocatableDevices | None) -> str:
    """``container resource`` pairs whose devices are not known, comma-separated ('' when none)."""
    served = set(node.resources) if node is not None else None
    missing = [
        f"{resource} for container {name}"
        for name, wanted in requests.items()
        for resource in sorted(wanted)
        if (served is None or resource in served) and not devices.held(resource, (name,))
    ]
    return ", ".join(missing)


def device_gate_for(socket: Path, timeout: float, node: str | None = None) -> DeviceGate:
    """The agent's gate: a PodResources client on ``socket`` (malformed answers logged) and the wait."""
    log = structlog.get_logger("podpin.devices").bind(node=node)
    client = PodResourcesClient(
        socket, timeout=CALL_TIMEOUT, on_problem=lambda problem: log.warning("podresources.malformed", problem=problem)
    )
    return DeviceGate(client, timeout=timeout)
