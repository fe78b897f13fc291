"""The node's current pods, as the sources report them, read into :class:`PodView`.

Sources hand over raw dicts (SYNC replaces the whole set; UPSERT and DELETE
change one pod). A raw pod is read with :func:`pod_from_dict` once per version
(its ``resourceVersion``, or its content when it has none; the very same dict
object as last time is known unchanged without either), so a resync of 110
unchanged pods costs no parsing. A pod that cannot be read is kept aside as
malformed, with the error naming the field; it is reported once per version and
never reaches the planner. A uid that is not a lower-case RFC 4122 UUID makes a
pod malformed too: its cgroup could never be found, so CPUs given to it would
be lost.

A pod that was readable and then receives an unreadable update (a bad status
field, say) is still running on the CPUs it was given: the cache keeps its last
readable view and hands it out next to the :class:`Malformed` report, so the
pod is neither released (its exclusive CPUs handed to another pod while it
still runs on them) nor moved when it becomes readable again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.cgroups import CgroupPathError, ContainerID, validate_uid
from agent.kube import PodEvent
from agent.pods import ContainerKind, PodSpecError
from agent.pods.model import MIRROR_ANNOTATION, PodView, pod_from_dict

__all__ = ["Malformed", "BadContainerID", "PodCache"]


@dataclass(frozen=True, slots=True)
class Malformed:
    """A pod that could not be read: who it claims to be and what is wrong."""

    uid: str
    namespace: str
    name: str
    error: str
    field: str


@dataclass(frozen=True, slots=True)
class BadContainerID:
    """A status containerID that can name no cgroup (``../``, an unknown runtime, not 64 hex digits).

    ``field`` is its place in the raw pod (``status.containerStatuses[0].containerID``).
    """

    namespace: str
    name: str
    uid: str
    container: str
    field: str
    container_id: str
    error: str


def _identity(raw: Mapping[str, Any]) -> tuple[str, str, str]:
    metadata = raw.get("metadata")
    if not isinstance(metadata, Mapping):
        metadata = {}
    uid = metadata.get("uid")
    namespace = metadata.get("namespace") or "default"
    name = metadata.get("name")
    return (
        uid if isinstance(uid, str) and uid else "",
        namespace if isinstance(namespace, str) else "default",
        name if isinstance(name, str) else "",
    )


def _version(raw: Mapping[str, Any]) -> str:
    metadata = raw.get("metadata")
    version = metadata.get("resourceVersion") if isinstance(metadata, Mapping) else None
    if isinstance(version, str) and version:
        return "rv:" + version
    return "sha:" + hashlib.sha256(json.dumps(raw, sort_keys=True, default=str).encode()).hexdigest()


def _key(raw: Mapping[str, Any]) -> str:
    uid, namespace, name = _identity(raw)
    return uid or f"{namespace}/{name}"


@dataclass(slots=True)
class PodCache:
    """Raw pods by key (uid, or namespace/name when the uid is missing), read on demand."""

    _raw: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    _parsed: dict[str, tuple[str, PodView | Malformed, Mapping[str, Any]]] = field(default_factory=dict)
    _good: dict[str, PodView] = field(default_factory=dict)
    _views: tuple[tuple[PodView, ...], tuple[Malformed, ...]] | None = None
    synced: bool = False

    def apply(self, event: PodEvent) -> None:
        """Take one source event into the cache."""
        self._views = None
        if event.kind == "SYNC":
            self._raw = {_key(raw): raw for raw in event.pods}
            self.synced = True
        elif event.kind == "UPSERT":
            for raw in event.pods:
                self._raw[_key(raw)] = raw
        else:
            for raw in event.pods:
                self._raw.pop(_key(raw), None)
        for key in [k for k in self._parsed if k not in self._raw]:
            del self._parsed[key]
        for key in [k for k in self._good if k not in self._raw]:
            del self._good[key]

    def _read(self, key: str, raw: Mapping[str, Any]) -> PodView | Malformed:
        cached = self._parsed.get(key)
        if cached is not None and cached[2] is raw:  # the source handed over the same object: unchanged
            return cached[1]
        version = _version(raw)
        if cached is not None and cached[0] == version:
            self._parsed[key] = (version, cached[1], raw)
            return cached[1]
        uid, namespace, name = _identity(raw)
        result: PodView | Malformed
        try:
            view = pod_from_dict(raw)
            validate_uid(view.uid)
            if view.mirror_of is not None:
                try:
                    validate_uid(view.mirror_of)
                except CgroupPathError as err:
                    field = f"metadata.annotations[{MIRROR_ANNOTATION}]"
                    raise PodSpecError(field, view.mirror_of, f"{field}: {err.message}") from err
        except PodSpecError as err:
            result = Malformed(uid, namespace, name, str(err), err.field)
        except CgroupPathError as err:
            result = Malformed(uid, namespace, name, f"metadata.uid: {err.message}", "metadata.uid")
        else:
            result = self._good[key] = view
        self._parsed[key] = (version, result, raw)
        return result

    def views(self) -> tuple[list[PodView], list[Malformed]]:
        """Readable pods in creation order (then namespace/name), and the malformed ones.

        A pod whose latest version is malformed but an earlier one was not is in
        both lists: reported, and still planned from its last readable version.

        Kept until the next event: a pass that only names a new container, and every periodic pass on a quiet
        node, reads the same pods (``docs/benchmarks.md``, "the bundle path's window").
        """
        if self._views is not None:
            return list(self._views[0]), list(self._views[1])
        views: list[PodView] = []
        malformed: list[Malformed] = []
        for key, raw in self._raw.items():
            result = self._read(key, raw)
            if isinstance(result, PodView):
                views.append(result)
                continue
            malformed.append(result)
            if key in self._good:
                views.append(self._good[key])
        views.sort(key=lambda p: (p.creation_timestamp or "", p.namespace, p.name))
        self._views = (tuple(views), tuple(malformed))
        return views, malformed

    def bad_container_ids(self, views: Iterable[PodView]) -> list[BadContainerID]:
        """Every status containerID of these pods that cannot name a cgroup.

        The pod stays readable and admitted (its spec is fine, and the status may
        be corrected by the next update); the container's real cgroup then counts
        as one not named in the status and gets the pod's interim set.
        """
        found: list[BadContainerID] = []
        for view in views:
            for container in view.all_containers:
                if not container.container_id:
                    continue
                try:
                    ContainerID.parse(container.container_id)
                except CgroupPathError as err:
                    field = self._status_field(view.uid, container.name, container.kind == ContainerKind.APP)
                    found.append(
                        BadContainerID(
                            view.namespace,
                            view.name,
                            view.uid,
                            container.name,
                            field,
                            container.container_id,
                            err.message,
                        )
                    )
        return found

    def _status_field(self, uid: str, name: str, app: bool) -> str:
        """``status.containerStatuses[i].containerID`` of container ``name`` in the raw pod."""
        key = "containerStatuses" if app else "initContainerStatuses"
        raw = self._raw.get(uid)
        status = raw.get("status") if raw is not None else None
        entries = status.get(key) if isinstance(status, Mapping) else None
        index = "?"
        if isinstance(entries, list):
            for i, entry in enumerate(entries):
                if isinstance(entry, Mapping) and entry.get("name") == name:
                    index = str(i)
                    break
        return f"status.{key}[{index}].containerID"

    def raw(self, uid: str) -> Mapping[str, Any] | None:
        """The raw dict of a pod (for Events), or None."""
        return self._raw.get(uid)

    def keys(self) -> Iterable[str]:
        """The keys of the pods held (uid, or namespace/name)."""
        return self._raw.keys()
