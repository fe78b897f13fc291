"""Raw pod dicts, shaped as the API server returns them, built in one line.

Every test in podpin that needs a pod should build it here, so all of them feed
``pod_from_dict`` the same JSON shape the sources do (camelCase keys, quantity
strings). Containers and resource blocks are built with keyword helpers::

    container("db", cpu="4", memory="1Gi")                  # request == limit for cpu and memory
    container("proxy", cpu_request="100m")                    # only what is named is set
    container("log")                                          # no resources at all
    sidecar("mesh", cpu="1", memory="64Mi")                   # an init container with restartPolicy Always

    make_pod("web", containers=[container("app", cpu="2", memory="1Gi")],
             init_containers=[sidecar("proxy", cpu="100m", memory="64Mi")],
             pod_resources=resources(cpu="4", memory="2Gi"))

``cpu=``/``memory=`` set request and limit alike (the Guaranteed shape);
``cpu_request=``/``cpu_limit=``/``memory_request=``/``memory_limit=`` set one
side, and win over ``cpu=``/``memory=``. Unset arguments stay out of the dict
entirely, so a test sees exactly the fields it asked for. Uids and container ids
are derived from the names, so the same call always builds the same pod.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "container",
    "container_id",
    "from_vector",
    "make_pod",
    "pod_uid",
    "resources",
    "running_pod",
    "runtime_id",
    "sidecar",
    "waiting_pod",
]

_UID_NAMESPACE = uuid.UUID("6f1d3c52-8a4e-4c1b-9b7e-0d2f5a6c7e80")


def pod_uid(namespace: str, name: str) -> str:
    """The uid :func:`make_pod` gives a pod when none is passed (a UUIDv5 of ``namespace/name``)."""
    return str(uuid.uuid5(_UID_NAMESPACE, f"{namespace}/{name}"))


def container_id(uid: str, name: str, runtime: str = "containerd") -> str:
    """A stable status ``containerID`` (``<runtime>://<64 hex>``) for one container of one pod."""
    return f"{runtime}://{hashlib.sha256(f'{uid}/{name}'.encode()).hexdigest()}"


def resources(
    *,
    cpu: str | None = None,
    memory: str | None = None,
    cpu_request: str | None = None,
    cpu_limit: str | None = None,
    memory_request: str | None = None,
    memory_limit: str | None = None,
    requests: Mapping[str, Any] | None = None,
    limits: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A raw ``resources`` block; ``requests``/``limits`` add further entries (hugepages, devices)."""
    req = {
        name: value
        for name, value in (("cpu", cpu_request or cpu), ("memory", memory_request or memory))
        if value is not None
    }
    lim = {
        name: value
        for name, value in (("cpu", cpu_limit or cpu), ("memory", memory_limit or memory))
        if value is not None
    }
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
    *,
    cpu: str | None = None,
    memory: str | None = None,
    cpu_request: str | None = None,
    cpu_limit: str | None = None,
    memory_request: str | None = None,
    memory_limit: str | None = None,
    requests: Mapping[str, Any] | None = None,
    limits: Mapping[str, Any] | None = None,
    restart_policy: str | None = None,
) -> dict[str, Any]:
    """A raw container with an image, the given resources and, if set, a ``restartPolicy``."""
    raw: dict[str, Any] = {"name": name, "image": f"registry.example/{name}:1"}
    block = resources(
        cpu=cpu,
        memory=memory,
        cpu_request=cpu_request,
        cpu_limit=cpu_limit,
        memory_request=memory_request,
        memory_limit=memory_limit,
        requests=requests,
        limits=limits,
    )
    if block:
        raw["resources"] = block
    if restart_policy is not None:
        raw["restartPolicy"] = restart_policy
    return raw


def sidecar(
    name: str,
    *,
    cpu: str | None = None,
    memory: str | None = None,
    cpu_request: str | None = None,
    cpu_limit: str | None = None,
    memory_request: str | None = None,
    memory_limit: str | None = None,
    requests: Mapping[str, Any] | None = None,
    limits: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A restartable init container (``restartPolicy: Always``): :func:`container` with that one field."""
    return container(
        name,
        cpu=cpu,
        memory=memory,
        cpu_request=cpu_request,
        cpu_limit=cpu_limit,
        memory_request=memory_request,
        memory_limit=memory_limit,
        requests=requests,
        limits=limits,
        restart_policy="Always",
    )


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
    *,
    containers: Iterable[Mapping[str, Any]] | None = None,
    init_containers: Iterable[Mapping[str, Any]] = (),
    pod_resources: Mapping[str, Any] | None = None,
    uid: str | None = None,
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
        containers: app containers (from :func:`container`, or raw mappings); default one ``app``
            container without resources.
        init_containers: init containers; build sidecars with :func:`sidecar`.
        pod_resources: ``spec.resources`` (from :func:`resources`, or a raw mapping); ``None`` leaves it out.
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
    app = [dict(c) for c in (containers if containers is not None else [container("app")])]
    init = [dict(c) for c in init_containers]
    spec: dict[str, Any] = {"containers": app}
    if init:
        spec["initContainers"] = init
    if pod_resources is not None:
        spec["resources"] = dict(pod_resources)
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
        cpu_request=raw.get("cpu_request"),
        cpu_limit=raw.get("cpu_limit"),
        memory_request=raw.get("memory_request"),
        memory_limit=raw.get("memory_limit"),
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
        else resources(
            cpu_request=pod_resources.get("cpu_request"),
            cpu_limit=pod_resources.get("cpu_limit"),
            memory_request=pod_resources.get("memory_request"),
            memory_limit=pod_resources.get("memory_limit"),
        ),
        uid=str(pod["uid"]),
    )


def waiting_pod(name: str, cpus: str = "2", *, ts: int = 1) -> dict[str, Any]:
    """A Guaranteed pod with one container ``app`` whose status has no containerID yet (as the API lags the runtime)."""
    return _app_pod(name, cpus, ts, "waiting")


def running_pod(name: str, cpus: str = "2", *, ts: int = 1) -> dict[str, Any]:
    """A running Guaranteed pod with one container ``app`` (2 CPUs: one exclusive core on the example machine)."""
    return _app_pod(name, cpus, ts, "running")


def _app_pod(name: str, cpus: str, ts: int, state: str) -> dict[str, Any]:
    """One container ``app`` with ``cpus`` and 1Gi, request == limit, created ``ts`` seconds into 2026."""
    return make_pod(
        name,
        containers=[container("app", cpu=cpus, memory="1Gi")],
        states={"app": state},
        creation_timestamp=f"2026-01-01T00:00:{ts:02d}Z",
    )


def runtime_id(raw: Mapping[str, Any], name: str) -> str:
    """The runtime's id of container ``name`` of pod ``raw`` (the 64 hex digits of its :func:`container_id`)."""
    return container_id(raw["metadata"]["uid"], name).split("://")[1]
