"""A pod as the planner sees it: :func:`pod_from_dict` turns the raw API dict into a :class:`PodView`.

The input is the pod exactly as the API server returns it (camelCase keys, as
``json.loads`` of the response or a YAML manifest gives it), never a client
model object, so a field newer than the installed client survives. Reading it
does what the API server would have done before the kubelet saw the pod:
container and pod-level defaulting (``agent.pods.resources``), then validation
(``agent.pods.validation``), then the QoS class (``agent.pods.qos``).

Conventions, following how Go decodes the same JSON:

* A JSON ``null`` is the same as a missing field, and an empty string is the
  same as a missing string (``omitempty``); a present field of the wrong type
  is an error.
* A missing ``metadata.namespace`` is ``"default"``, as ``kubectl apply`` treats
  a manifest without one; the API server always fills it in.
* ``spec.resources`` without any request or limit is treated as absent
  (``IsPodLevelResourcesSet``): such a pod is handled as a classic pod.
* Any string ``restartPolicy`` is accepted on any container (newer APIs allow
  more values); only ``Always`` on an init container makes it a sidecar.
* ``kind``, when present, must be ``Pod``, so a Deployment manifest handed to
  ``podpin plan`` is named as such instead of failing on a missing field.
* Container status entries are matched by name; entries for containers not in
  the spec (a stale status) are ignored.
* The ``kubernetes.io/config.mirror`` annotation is honoured only on a pod the
  Node owns (an ``ownerReferences`` entry of kind ``Node``, named as the pod's
  ``spec.nodeName`` when that is set), as the kubelet creates every mirror pod
  (``pkg/kubelet/pod/mirror_client.go``). Any tenant can write the annotation on
  its own pod; honoured there it would map the pod onto another pod's cgroup.
  Elsewhere its value is kept as ``mirror_refused`` for the report and ignored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from agent.pods.errors import PodSpecError
from agent.pods.qos import QOSClass, pod_qos
from agent.pods.resources import (
    ContainerKind,
    ContainerResources,
    ExactResources,
    Resources,
    ResourceSpec,
    aggregate,
    default_pod_level,
    frozen_resources,
    parse_resource_list,
)
from agent.pods.validation import validate_pod

__all__ = ["MIRROR_ANNOTATION", "ContainerState", "ContainerView", "PodView", "effective_requests", "pod_from_dict"]

ContainerState = Literal["running", "waiting", "terminated", "unknown"]
"""The container's current state from its status; ``unknown`` when there is no status yet."""

_STATES: tuple[ContainerState, ...] = ("running", "waiting", "terminated")

#: The annotation the kubelet puts on a static pod's mirror pod: the static pod's own uid (its config hash).
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
_TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerView:
    """One container of a pod, with defaulted resources and its runtime identity.

    ``index`` is the position in its own list (``spec.initContainers`` for
    ``init`` and ``sidecar``, ``spec.containers`` for ``app``).
    ``container_id`` is the status ``containerID`` (``containerd://<64 hex>``),
    ``None`` until the runtime created the container.
    """

    name: str
    kind: ContainerKind
    index: int
    resources: ResourceSpec
    container_id: str | None = None
    state: ContainerState = "unknown"


@dataclass(frozen=True, slots=True, kw_only=True)
class PodView:
    """Everything podpin needs to know about one pod, defaulted and validated.

    ``qos`` is ``status.qosClass`` when set, else computed. ``pod_resources`` is
    ``spec.resources`` after pod-level defaulting, ``None`` when the pod has no
    pod-level requests or limits. ``init_containers`` holds regular init
    containers and sidecars in spec order.
    """

    uid: str
    namespace: str
    name: str
    node_name: str | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    phase: str | None = None
    qos: QOSClass
    init_containers: tuple[ContainerView, ...] = ()
    containers: tuple[ContainerView, ...]
    pod_resources: ResourceSpec | None = None
    overhead: Resources = field(default_factory=lambda: MappingProxyType({}))
    os_name: str | None = None
    mirror_of: str | None = None
    mirror_refused: str | None = None
    mirror_owner_uid: str | None = None
    """The uid in the Node ``ownerReferences`` entry that made ``mirror_of`` count (the agent compares it with
    its Node's uid, as the garbage collector would); None when no Node owns the pod."""
    mirror_owner_mismatch: str | None = None
    """Set by the agent when ``mirror_refused`` names a Node owner whose uid is not the Node's (the Node's uid)."""

    @property
    def cgroup_uid(self) -> str:
        """The uid the kubelet names the pod's cgroup after.

        A static pod is known to the API server as a *mirror* pod with its own
        uid; the kubelet keeps the static pod's uid (its config hash, named by the
        ``kubernetes.io/config.mirror`` annotation) and names the cgroup after it.
        """
        return self.mirror_of or self.uid

    @property
    def full_name(self) -> str:
        """``namespace/name``, as logs and Events name a pod."""
        return f"{self.namespace}/{self.name}"

    @property
    def all_containers(self) -> tuple[ContainerView, ...]:
        """Init containers (and sidecars) in spec order, then app containers."""
        return self.init_containers + self.containers

    @property
    def is_terminal(self) -> bool:
        """The pod has finished (phase ``Succeeded`` or ``Failed``) and will not run again."""
        return self.phase in _TERMINAL_PHASES

    @property
    def has_pod_level_resources(self) -> bool:
        """The pod sets ``spec.resources`` (KEP-2837), so pod-level rules apply."""
        return self.pod_resources is not None

    def container(self, name: str) -> ContainerView:
        """The container called ``name``.

        Raises:
            KeyError: the pod has no such container.
        """
        for container in self.all_containers:
            if container.name == name:
                return container
        raise KeyError(f"pod {self.full_name} has no container {name!r}")


# -- reading raw JSON ----------------------------------------------------------------------
def _mapping(value: object, path: str) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise PodSpecError.wrong_type(path, value, "a mapping")
    return value


def _required_mapping(value: object, path: str) -> Mapping[str, Any]:
    found = _mapping(value, path)
    if found is None:
        raise PodSpecError.missing(path)
    return found


def _entry(value: object, path: str) -> Mapping[str, Any]:
    """A list element that must be a mapping (``null`` included in the refusal)."""
    if not isinstance(value, Mapping):
        raise PodSpecError.wrong_type(path, value, "a mapping")
    return value


def _string(parent: Mapping[str, Any], key: str, path: str) -> str | None:
    value = parent.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise PodSpecError.wrong_type(f"{path}.{key}", value, "a string")
    return value


def _required_string(parent: Mapping[str, Any], key: str, path: str) -> str:
    value = _string(parent, key, path)
    if value is None:
        raise PodSpecError.missing(f"{path}.{key}")
    return value


def _list(parent: Mapping[str, Any], key: str, path: str) -> Sequence[Any]:
    value = parent.get(key)
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise PodSpecError.wrong_type(f"{path}.{key}", value, "a list")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class _Container:
    """A container read from the spec, its container-level defaults applied."""

    name: str
    index: int
    spec: ContainerResources


def _read_resources(raw: object, path: str) -> ExactResources:
    section = _mapping(raw, path) or {}
    return ExactResources(
        requests=parse_resource_list(section.get("requests"), f"{path}.requests"),
        limits=parse_resource_list(section.get("limits"), f"{path}.limits"),
    )


def _read_container(raw: object, key: str, index: int) -> _Container:
    path = f"spec.{key}[{index}]"
    item = _entry(raw, path)
    name = _required_string(item, "name", path)
    restart_policy = _string(item, "restartPolicy", path)
    kind: ContainerKind = ContainerKind.APP
    if key == "initContainers":
        kind = ContainerKind.SIDECAR if restart_policy == "Always" else ContainerKind.INIT
    resources = _read_resources(item.get("resources"), f"{path}.resources")
    spec = ContainerResources(path=path, kind=kind, resources=resources.with_container_defaults())
    return _Container(name=name, index=index, spec=spec)


def _read_containers(spec: Mapping[str, Any]) -> tuple[list[_Container], list[_Container]]:
    """App containers, then init containers; names unique across both lists."""
    if spec.get("containers") is None:
        raise PodSpecError.missing("spec.containers")
    app_raw = _list(spec, "containers", "spec")
    if not app_raw:
        raise PodSpecError.shape("spec.containers", app_raw, "must list at least one container, got an empty list")
    app = [_read_container(item, "containers", i) for i, item in enumerate(app_raw)]
    init = [_read_container(item, "initContainers", i) for i, item in enumerate(_list(spec, "initContainers", "spec"))]
    seen: dict[str, str] = {}
    for container in app + init:
        here = f"{container.spec.path}.name"
        if container.name in seen:
            raise PodSpecError.shape(
                here, container.name, f"duplicate container name {container.name!r}, also at {seen[container.name]}"
            )
        seen[container.name] = here
    return app, init


def _read_statuses(status: Mapping[str, Any], key: str) -> dict[str, tuple[str | None, ContainerState]]:
    """``status.<key>`` as name -> (containerID, state)."""
    found: dict[str, tuple[str | None, ContainerState]] = {}
    for i, raw in enumerate(_list(status, key, "status")):
        path = f"status.{key}[{i}]"
        item = _entry(raw, path)
        name = _required_string(item, "name", path)
        container_id = _string(item, "containerID", path)
        state_raw = _mapping(item.get("state"), f"{path}.state") or {}
        state: ContainerState = next((s for s in _STATES if state_raw.get(s) is not None), "unknown")
        found.setdefault(name, (container_id, state))
    return found


def _read_qos(status: Mapping[str, Any]) -> QOSClass | None:
    value = _string(status, "qosClass", "status")
    if value is None:
        return None
    if value in tuple(QOSClass):
        return QOSClass(value)
    expected = ", ".join(repr(q.value) for q in sorted(QOSClass))
    raise PodSpecError.shape("status.qosClass", value, f"unknown QoS class {value!r}, expected one of {expected}")


def _view(container: _Container, statuses: Mapping[str, tuple[str | None, ContainerState]]) -> ContainerView:
    container_id, state = statuses.get(container.name, (None, "unknown"))
    return ContainerView(
        name=container.name,
        kind=container.spec.kind,
        index=container.index,
        resources=container.spec.resources.to_spec(),
        container_id=container_id,
        state=state,
    )


def pod_from_dict(raw: Mapping[str, Any]) -> PodView:
    """Read, default, validate and classify one raw pod.

    Args:
        raw: the pod as the API server returns it (or a Pod manifest).

    Raises:
        PodSpecError: the pod is malformed or breaks an API validation rule;
            ``field`` and ``value`` name the offending input.
    """
    if not isinstance(raw, Mapping):
        raise PodSpecError.wrong_type("", raw, "a mapping")
    kind = raw.get("kind")
    if kind is not None and kind != "Pod":
        raise PodSpecError.wrong_type("kind", kind, "'Pod'")
    metadata = _required_mapping(raw.get("metadata"), "metadata")
    spec = _required_mapping(raw.get("spec"), "spec")
    status = _mapping(raw.get("status"), "status") or {}

    uid = _required_string(metadata, "uid", "metadata")
    name = _required_string(metadata, "name", "metadata")
    namespace = _string(metadata, "namespace", "metadata") or "default"
    creation = _string(metadata, "creationTimestamp", "metadata")
    deletion = _string(metadata, "deletionTimestamp", "metadata")
    annotations = _mapping(metadata.get("annotations"), "metadata.annotations") or {}
    mirror_of = _string(annotations, MIRROR_ANNOTATION, "metadata.annotations")
    mirror_refused = None
    owner_uid = _node_owner_uid(metadata, _string(spec, "nodeName", "spec")) if mirror_of is not None else None
    if mirror_of is not None and owner_uid is None:
        mirror_refused, mirror_of = mirror_of, None

    app, init = _read_containers(spec)
    pod_raw = _read_resources(spec.get("resources"), "spec.resources")
    overhead = parse_resource_list(spec.get("overhead"), "spec.overhead")
    os_spec = _mapping(spec.get("os"), "spec.os") or {}
    os_name = _string(os_spec, "name", "spec.os")
    node_name = _string(spec, "nodeName", "spec")

    phase = _string(status, "phase", "status")
    status_qos = _read_qos(status)
    app_statuses = _read_statuses(status, "containerStatuses")
    init_statuses = _read_statuses(status, "initContainerStatuses")

    containers = [c.spec for c in app + init]
    pod_level = None if pod_raw.is_empty else default_pod_level(pod_raw, containers)
    validate_pod(containers=containers, pod_level=pod_level, overhead=overhead, os_name=os_name)
    qos = pod_qos(status_qos=status_qos, pod_level=pod_level, containers=[c.resources for c in containers])

    return PodView(
        uid=uid,
        namespace=namespace,
        name=name,
        node_name=node_name,
        creation_timestamp=creation,
        deletion_timestamp=deletion,
        phase=phase,
        qos=qos,
        init_containers=tuple(_view(c, init_statuses) for c in init),
        containers=tuple(_view(c, app_statuses) for c in app),
        pod_resources=None if pod_level is None else pod_level.to_spec(),
        overhead=MappingProxyType({n: a.as_int(n) for n, a in overhead.items()}),
        os_name=os_name,
        mirror_of=mirror_of,
        mirror_refused=mirror_refused,
        mirror_owner_uid=owner_uid,
    )


def _node_owner_uid(metadata: Mapping[str, Any], node_name: str | None) -> str | None:
    """The uid of the ``ownerReferences`` entry naming a Node (this pod's node when ``spec.nodeName`` is set);
    ``""`` for such an entry without a uid; None when no Node owns the pod.

    Any tenant can write such an entry with a made-up uid; the agent compares it with its Node's
    (``agent/kube/node_identity.py``). Malformed entries are not an error here (the API server validated them);
    they simply own nothing.
    """
    owners = metadata.get("ownerReferences")
    if not isinstance(owners, list | tuple):
        return None
    for owner in owners:
        if not isinstance(owner, Mapping) or owner.get("kind") != "Node" or owner.get("apiVersion") != "v1":
            continue
        name = owner.get("name")
        if isinstance(name, str) and name and (node_name is None or name == node_name):
            uid = owner.get("uid")
            return uid if isinstance(uid, str) else ""
    return None


def effective_requests(pod: PodView) -> Resources:
    """The pod's aggregate container requests (KEP-753), in the planner's integers.

    Pod-level ``spec.resources`` and overhead are not included; see :func:`~agent.pods.resources.aggregate`.
    """
    return frozen_resources(
        aggregate(
            (c.resources.requests for c in pod.containers),
            ((c.kind == ContainerKind.SIDECAR, c.resources.requests) for c in pod.init_containers),
        )
    )
