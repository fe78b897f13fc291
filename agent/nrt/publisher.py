"""Publishing the node's NodeResourceTopology: its own thread, the latest state only, rate-limited, retried.

The reconcile loop must never wait on the API server, so it only *offers* the
planner's snapshot after a pass (:meth:`NRTPublisher.offer`: a reference put
in a one-item slot, newer replacing older). The publisher's thread takes the
slot's latest content at most once per ``nrt.minInterval`` (a burst of
admissions becomes one write of the final state) and:

1. reads the Node once (its uid for the ownerReference, and whether it
   advertises extended resources, i.e. devices);
2. when it does, asks the kubelet's PodResources API for the devices and who
   holds them (a missing socket or a kubelet that does not answer within the
   client's timeout: published without devices, with a warning); gRPC is
   therefore loaded only on nodes that have devices;
3. computes the object (:mod:`agent.nrt.compute`) and, if it differs from what
   was last published, reads the stored one and writes it by server-side apply
   with the field manager ``podpin`` (forced: the fields podpin's older
   versions wrote under the client's name become podpin's).

**Another writer.** When the stored object's content is managed by someone else
(:mod:`agent.nrt.ownership`: NFD's topology-updater, say), two writers would make
it flap: podpin leaves it alone, and says so once per episode — a warning
``nrt.other_writer``, the gauge ``podpin_nrt_other_writer`` at 1 and a Warning
Event ``NRTManagedByOther`` on the Node — until the other writer is gone (then it
writes again) or ``nrt.takeOver`` is set (then it applies with force and takes the
fields; the other writer, if it still runs, takes them back: turn one of them off).

A failure (API server down, CRD missing, RBAC) is logged and counted, and the
latest state is tried again after a backoff doubling from 1 s to 60 s; a newer
offer never waits longer than that. Every ``refresh_period`` (60 s) without a
new offer the last state is published again, re-reading the Node and the
stored object: devices change without podpin's state changing, and the object
may have been deleted (a Node recreated under the same name takes its objects
with it) or edited by someone else; an unchanged object costs two GETs. The
thread is a daemon and ends when the agent's stop event is set.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge

from agent.alloc import PlannerConfig
from agent.config import NRTSettings
from agent.kube.official import ApiException
from agent.nrt.calls import TopologyCalls
from agent.nrt.compute import attributes_of, node_resource_topology
from agent.nrt.occupancy import occupancy_of
from agent.nrt.ownership import FIELD_MANAGER, other_writers
from agent.podresources import AllocatableDevices, DeviceAssignments, PodResourcesClient, PodResourcesError
from agent.topology import Topology

if TYPE_CHECKING:
    from agent.alloc import NodeState
    from agent.kube import CoreCalls

__all__ = ["NRTPublisher", "PublishResult", "has_extended_resources", "nrt_publisher_for"]

_BACKOFF_START = 1.0
_BACKOFF_MAX = 60.0
_NATIVE_PREFIXES = ("hugepages-", "requests.", "kubernetes.io/")
_NATIVE = frozenset({"cpu", "memory", "pods", "ephemeral-storage", "storage"})


class PublishResult(StrEnum):
    """What one publish attempt did: the ``result`` label of ``podpin_nrt_publishes_total``."""

    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    OTHER_WRITER = "other_writer"
    ERROR = "error"


def has_extended_resources(node: Mapping[str, Any]) -> bool:
    """True when the Node's status lists an extended resource (a device plugin's ``vendor.com/name``)."""
    status = node.get("status") or {}
    names = set(status.get("capacity") or {}) | set(status.get("allocatable") or {})
    return any(n not in _NATIVE and "/" in n and not n.startswith(_NATIVE_PREFIXES) for n in names)


class NRTPublisher:
    """Keeps the node's NodeResourceTopology equal to the latest offered state."""

    def __init__(
        self,
        calls: TopologyCalls,
        planner: PlannerConfig,
        settings: NRTSettings,
        *,
        node_name: str,
        stop: threading.Event,
        devices: PodResourcesClient | None = None,
        registry: CollectorRegistry | None = None,
        refresh_period: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.calls = calls
        self.planner = planner
        self.settings = settings
        self.node_name = node_name
        self.stop_event = stop
        self.devices = devices
        self.refresh_period = refresh_period
        self.clock = clock
        self.log = structlog.get_logger("podpin.nrt").bind(node=node_name)
        self.publishes = Counter(
            "podpin_nrt_publishes_total",
            f"NodeResourceTopology publish attempts by result ({', '.join(PublishResult)}).",
            ["result"],
            registry=registry,
        )
        self.other_writer = Gauge(
            "podpin_nrt_other_writer",
            "1 while the node's NodeResourceTopology is managed by another writer and podpin leaves it alone.",
            registry=registry,
        )
        self._said_other: tuple[str, ...] = ()
        self._cond = threading.Condition()
        self._pending: tuple[NodeState, Topology] | None = None
        self._offered: tuple[NodeState, Topology] | None = None
        self._thread: threading.Thread | None = None
        self._last_body: dict[str, Any] | None = None
        self._node: Mapping[str, Any] | None = None
        self._device_warning: str | None = None
        self.published = 0  # successful writes (created or updated)

    # -- the loop's side ---------------------------------------------------------------------
    def offer(self, state: NodeState, topology: Topology) -> None:
        """Hand over the latest snapshot (never blocks; the same snapshot twice is one offer)."""
        with self._cond:
            if self._offered is not None and self._offered[0] is state and self._offered[1] is topology:
                return
            self._offered = self._pending = (state, topology)
            self._cond.notify()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="podpin-nrt", daemon=True)
                self._thread.start()

    def join(self, timeout: float) -> None:
        """Wait for the thread to end (after the stop event is set)."""
        if self._thread is not None:
            with self._cond:
                self._cond.notify_all()
            self._thread.join(timeout)

    # -- the thread ----------------------------------------------------------------------------
    def _wait(self, until: float) -> bool:
        """Sleep until ``until`` (monotonic); False when stopped meanwhile."""
        while not self.stop_event.is_set():
            left = until - self.clock()
            if left <= 0:
                return True
            self.stop_event.wait(min(left, 1.0))
        return False

    def _run(self) -> None:
        next_allowed = self.clock()
        backoff = _BACKOFF_START
        last: tuple[NodeState, Topology] | None = None
        while not self.stop_event.is_set():
            refresh = False
            with self._cond:
                refresh_at = self.clock() + self.refresh_period
                while self._pending is None and not self.stop_event.is_set():
                    if last is not None and self.clock() >= refresh_at:
                        self._pending, refresh = last, True
                        break
                    self._cond.wait(max(0.01, min(1.0, refresh_at - self.clock())))
            if not self._wait(next_allowed):
                return
            with self._cond:
                item, self._pending = self._pending, None
            if item is None:
                continue
            try:
                result = self._publish(*item, refresh=refresh)
            except Exception as err:
                self.publishes.labels(result=PublishResult.ERROR).inc()
                self.log.warning("nrt.publish_failed", error=_describe(err), retry_in=backoff)
                with self._cond:
                    if self._pending is None:
                        self._pending = item
                next_allowed = self.clock() + backoff
                backoff = min(2 * backoff, _BACKOFF_MAX)
                continue
            last = item
            backoff = _BACKOFF_START
            next_allowed = self.clock() + self.settings.min_interval
            self.publishes.labels(result=result).inc()
            if result != PublishResult.UNCHANGED:
                self.published += 1
                self.log.info("nrt.published", result=result, refresh=refresh)

    def _uses_devices(self) -> bool:
        return self.devices is not None and self._node is not None and has_extended_resources(self._node)

    def _device_facts(self) -> tuple[AllocatableDevices | None, DeviceAssignments | None]:
        if not self._uses_devices() or self.devices is None:
            return None, None
        try:
            facts = self.devices.allocatable(), self.devices.list()
        except PodResourcesError as err:
            if self._device_warning != err.kind:
                self.log.warning("nrt.devices_unknown", reason=str(err), kind=err.kind)
            self._device_warning = err.kind
            return None, None
        self._device_warning = None
        return facts

    def _publish(self, state: NodeState, topology: Topology, *, refresh: bool = False) -> PublishResult:
        """Write the object for this state if the API server does not hold it already; what it did.

        ``refresh`` re-reads the Node and the stored object even when this very
        body was written last time (the object may have been deleted or edited).
        """
        if refresh:
            self._node = None
        if self._node is None:
            self._node = self.calls.read_node(self.node_name)
        node = self._node
        assert node is not None
        devices, assignments = self._device_facts()
        body = node_resource_topology(
            node_name=self.node_name,
            topology=topology,
            occupancy=occupancy_of(topology, self.planner, state),
            attributes=attributes_of(self.planner),
            devices=devices,
            assignments=assignments,
            owner_uid=str((node.get("metadata") or {}).get("uid") or "") or None,
            pods=[(record.namespace, record.name) for record in state.pods.values()],
        )
        if body == self._last_body and not refresh:
            return PublishResult.UNCHANGED
        try:
            existing = self.calls.read_topology(self.node_name)
        except ApiException as err:
            if err.status != 404:
                raise
            existing = None
        others = other_writers(existing) if existing is not None else ()
        self._tell_other_writers(others)
        if others and not self.settings.take_over:
            self._last_body = None  # read again next time: the other writer may be gone
            return PublishResult.OTHER_WRITER
        if existing is not None and not others and _same(existing, body):
            result = PublishResult.UNCHANGED
        else:
            try:
                self.calls.apply_topology(self.node_name, body, field_manager=FIELD_MANAGER, force=True)
            except ApiException:
                self._node = None  # the Node may have been recreated (a new uid): read it again next time
                raise
            result = PublishResult.CREATED if existing is None else PublishResult.UPDATED
        self._last_body = body
        return result

    def _tell_other_writers(self, others: tuple[str, ...]) -> None:
        """Say once per episode that another writer manages the object (log, gauge, Event on the Node)."""
        self.other_writer.set(1 if others and not self.settings.take_over else 0)
        if others == self._said_other:
            return
        self._said_other = others
        if not others:
            self.log.info("nrt.other_writer_gone", action="podpin publishes the object again")
            return
        take_over = self.settings.take_over
        action = (
            "nrt.takeOver is set: podpin applies with force and takes its fields (turn the other writer off)"
            if take_over
            else "left alone; set nrt.takeOver to publish podpin's view instead, or turn the other writer off"
        )
        self.log.warning("nrt.other_writer", managers=list(others), action=action)
        message = f"NodeResourceTopology {self.node_name} is managed by {', '.join(others)}: {action}"
        self._node_event("NRTManagedByOther", message)

    def _node_event(self, reason: str, message: str) -> None:
        """A Warning Event on the Node (namespace ``default``, as the kubelet posts node Events); never raises."""
        node = self._node or {}
        uid = str((node.get("metadata") or {}).get("uid") or "")
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        involved = {"kind": "Node", "apiVersion": "v1", "name": self.node_name, **({"uid": uid} if uid else {})}
        body = {
            "metadata": {"name": f"{self.node_name}.{time.time_ns():x}", "namespace": "default"},
            "involvedObject": involved,
            "type": "Warning",
            "reason": reason,
            "message": message,
            "source": {"component": "podpin", "host": self.node_name},
            "reportingComponent": "podpin",
            "reportingInstance": self.node_name,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            self.calls.create_namespaced_event("default", body)
        except Exception as err:
            self.log.warning("nrt.event_failed", reason=reason, error=_describe(err))


def _same(existing: Mapping[str, Any], body: Mapping[str, Any]) -> bool:
    """True when the stored object already says what ``body`` says (the fields podpin owns)."""
    for key in ("zones", "attributes", "topologyPolicies"):
        if existing.get(key) != body.get(key):
            return False
    old, new = existing.get("metadata") or {}, body["metadata"]
    return bool(
        old.get("ownerReferences") == new.get("ownerReferences")
        and old.get("labels") == new.get("labels")
        and all((old.get("annotations") or {}).get(k) == v for k, v in (new.get("annotations") or {}).items())
    )


def _describe(err: Exception) -> str:
    if isinstance(err, ApiException):
        return f"HTTP {err.status} {err.reason}: {' '.join(str(err.body or '').split())[:300]}"
    return f"{type(err).__name__}: {err}"


def nrt_publisher_for(
    planner: PlannerConfig,
    settings: NRTSettings,
    *,
    node_name: str | None,
    pod_resources_socket: Path,
    api: CoreCalls | None,
    stop: threading.Event,
    registry: CollectorRegistry | None = None,
) -> NRTPublisher | None:
    """The agent's publisher when ``nrt.enabled`` (None otherwise, or without an API server, with a warning).

    It takes the settings it reads (the planner's, ``nrt``, the node's name, the kubelet's PodResources socket),
    not the whole configuration.
    """
    if not settings.enabled:
        return None
    log = structlog.get_logger("podpin.nrt").bind(node=node_name)
    if api is None or not node_name:
        log.warning("nrt.disabled", reason="nrt.enabled needs the API server (not --pods-dir) and a node name")
        return None
    devices = PodResourcesClient(
        pod_resources_socket, on_problem=lambda problem: log.warning("podresources.malformed", problem=problem)
    )
    return NRTPublisher(
        TopologyCalls(api.configuration),
        planner,
        settings,
        node_name=node_name,
        stop=stop,
        devices=devices,
        registry=registry,
    )
