"""Raw pod dicts, shaped as the API server returns them, built in one line.

Every test in podpin that needs a pod should build it here, so all of them feed
``pod_from_dict`` the same JSON shape the sources do (camelCase keys, quantity
strings). A container is given compactly as a tuple::

    ("db", "4", "4", "1Gi", "1Gi")      # name, cpu request, cpu limit, memory request, memory limit
    ("proxy", "100m")                   # trailing fields may be left out; None = not set
    ("log",)                            # no resources at all

or as a full raw container mapping (passed through unchanged), e.g. from
:func:`container` or :func:`sidecar`::

    make_pod("web", containers=[("app", "2", "2", "1Gi", "1Gi")],
             init_containers=[sidecar(("proxy", "100m", "100m", "64Mi", "64Mi"))],
             pod_resources=("4", "4", "2Gi", "2Gi"))

Unset arguments stay out of the dict entirely, so a test sees exactly the
fields it asked for. Uids and container ids are derived from the names, so the
same call always builds the same pod.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "ContainerSpec",
    "container",
    "sidecar",
    "resources",
    "make_pod",
    "container_id",
    "pod_uid",
    "from_vector",
]

ContainerSpec = tuple[str | None, ...] | Mapping[str, Any]
"""``(name, cpu_request, cpu_limit, memory_request, memory_limit)`` (trailing parts optional) or a raw container."""

_UID_NAMESPACE = uuid.UUID("6f1d3c52-8a4e-4c1b-9b7e-0d2f5a6c7e80")


def pod_uid(namespace: str, name: str) -> str:
    """The uid :func:`make_pod` gives a pod when none is passed (a UUIDv5 of ``namespace/name``)."""
    return str(uuid.uuid5(_UID_NAMESPACE, f"{namespace}/{name}"))


def container_id(uid: str, name: str, runtime: str = "containerd") -> str:
    """A stable status ``containerID`` (``<runtime>://<64 hex>``) for one container of one pod."""
    return f"{runtime}://{hashlib.sha256(f'{uid}/{name}'.encode()).hexdigest()}"


def resources(
    cpu_request: str | None = None,
    cpu_limit: str | None = None,
    memory_request: str | None = None,
    memory_limit: str | None = None,
    *,
    requests: Mapping[str, Any] | None = None,
    limits: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A raw ``resources`` block; ``requests``/``limits`` add further entries (hugepages, devices)."""
    req = {k: v for k, v in (("cpu", cpu_request), ("memory", memory_request)) if v is not None}
    lim = {k: v for k, v in (("cpu", cpu_limit), ("memory", memory_limit)) if v is not None}
    req.update(requests or {})
    lim.update(limits or {})
    block: dict[str, Any] = {}
    if req:
        block["requests"] = req
    if lim:
        block["limits"] = lim
    return block


def container(
    name: str,
    cpu_request: str | None = None,
    cpu_limit: str | None = None,
    memory_request: str | None = None,
    memory_limit: str | None = None,
    *,
    requests: Mapping[str, Any] | None = None,
    limits: Mapping[str, Any] | None = None,
    restart_policy: str | None = None,
) -> dict[str, Any]:
    """A raw container with an image, the given resources and, if set, a ``restartPolicy``."""
    raw: dict[str, Any] = {"name": name, "image": f"registry.example/{name}:1"}
    block = resources(cpu_request, cpu_limit, memory_request, memory_limit, requests=requests, limits=limits)
    if block:
        raw["resources"] = block
    if restart_policy is not None:
        raw["restartPolicy"] = restart_policy
    return raw


def _container(spec: ContainerSpec) -> dict[str, Any]:
    if isinstance(spec, Mapping):
        return dict(spec)
    name, *amounts = spec
    if name is None or len(amounts) > 4:
        raise ValueError(f"container spec {spec!r}: expected (name, cpu_req, cpu_lim, mem_req, mem_lim)")
    return container(name, *amounts)


def sidecar(spec: ContainerSpec) -> dict[str, Any]:
    """A restartable init container (``restartPolicy: Always``) from a compact or raw spec."""
    raw = _container(spec)
    raw["restartPolicy"] = "Always"
    return raw


def _statuses(uid: str, names: Iterable[str], states: Mapping[str, str]) -> list[dict[str, Any]]:
    entries = []
    for name in names:
        if name not in states:
            continue
        state = states[name]
        entry: dict[str, Any] = {"name": name, "state": {state: {}}, "ready": state == "running"}
        if state != "waiting":
            entry["containerID"] = container_id(uid, name)
        entries.append(entry)
    return entries


def make_pod(
    name: str = "pod",
    containers: Iterable[ContainerSpec] = (("app",),),
    init_containers: Iterable[ContainerSpec] = (),
    pod_resources: tuple[str | None, ...] | Mapping[str, Any] | None = None,
    uid: str | None = None,
    *,
    namespace: str = "default",
    node_name: str | None = "node-1",
    phase: str | None = None,
    qos_class: str | None = None,
    os_name: str | None = None,
    overhead: Mapping[str, Any] | None = None,
    states: Mapping[str, str] | None = None,
    creation_timestamp: str | None = None,
    deletion_timestamp: str | None = None,
) -> dict[str, Any]:
    """A raw pod as the API server would return it.

    Args:
        name: ``metadata.name``.
        containers: app containers (compact tuples or raw mappings).
        init_containers: init containers; wrap sidecars in :func:`sidecar`.
        pod_resources: ``spec.resources`` as ``(cpu_req, cpu_lim, mem_req, mem_lim)``
            or a raw mapping; ``None`` leaves it out.
        uid: ``metadata.uid``; default :func:`pod_uid`.
        namespace, node_name, phase, qos_class, os_name, overhead: the fields of the same name.
        states: container name -> ``running``/``waiting``/``terminated``; each
            named container gets a status entry (with a :func:`container_id`
            unless waiting) in ``containerStatuses`` or ``initContainerStatuses``.
        creation_timestamp, deletion_timestamp: RFC 3339 strings.
    """
    uid = uid if uid is not None else pod_uid(namespace, name)
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid}
    if creation_timestamp is not None:
        metadata["creationTimestamp"] = creation_timestamp
    if deletion_timestamp is not None:
        metadata["deletionTimestamp"] = deletion_timestamp
    app = [_container(c) for c in containers]
    init = [_container(c) for c in init_containers]
    spec: dict[str, Any] = {"containers": app}
    if init:
        spec["initContainers"] = init
    if pod_resources is not None:
        spec["resources"] = dict(pod_resources) if isinstance(pod_resources, Mapping) else resources(*pod_resources)
    if node_name is not None:
        spec["nodeName"] = node_name
    if os_name is not None:
        spec["os"] = {"name": os_name}
    if overhead is not None:
        spec["overhead"] = dict(overhead)
    status: dict[str, Any] = {}
    if phase is not None:
        status["phase"] = phase
    if qos_class is not None:
        status["qosClass"] = qos_class
    if states:
        app_status = _statuses(uid, (c["name"] for c in app), states)
        init_status = _statuses(uid, (c["name"] for c in init), states)
        if app_status:
            status["containerStatuses"] = app_status
        if init_status:
            status["initContainerStatuses"] = init_status
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    if status:
        pod["status"] = status
    return pod


def _vector_container(raw: Mapping[str, Any]) -> dict[str, Any]:
    return container(
        raw["name"],
        raw.get("cpu_request"),
        raw.get("cpu_limit"),
        raw.get("memory_request"),
        raw.get("memory_limit"),
        restart_policy=raw.get("restart_policy"),
    )


def from_vector(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The raw pod for a kubelet vector's ``pod`` object (``static_policy.json``)."""
    pod_resources = pod.get("pod_resources")
    return make_pod(
        str(pod["uid"]),
        containers=[_vector_container(c) for c in pod["containers"]],
        init_containers=[_vector_container(c) for c in pod["init_containers"]],
        pod_resources=None
        if pod_resources is None
        else (
            pod_resources.get("cpu_request"),
            pod_resources.get("cpu_limit"),
            pod_resources.get("memory_request"),
            pod_resources.get("memory_limit"),
        ),
        uid=str(pod["uid"]),
    )
