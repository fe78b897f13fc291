"""The node's current pods, as the sources report them, read into :class:`PodView`.

Sources hand over raw dicts (SYNC replaces the whole set; UPSERT and DELETE
change one pod). A raw pod is read with :func:`pod_from_dict` once per version
(its ``resourceVersion``, or its content when it has none), so a resync of 110
unchanged pods costs no parsing. A pod that cannot be read is kept aside as
malformed, with the error naming the field; it is reported once per version and
never reaches the planner.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.kube.source import PodEvent
from agent.pods.errors import PodSpecError
from agent.pods.model import PodView, pod_from_dict

__all__ = ["Malformed", "PodCache"]


@dataclass(frozen=True, slots=True)
class Malformed:
    """A pod that could not be read: who it claims to be and what is wrong."""

    uid: str
    namespace: str
    name: str
    error: str
    field: str


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
    _parsed: dict[str, tuple[str, PodView | Malformed]] = field(default_factory=dict)
    synced: bool = False

    def apply(self, event: PodEvent) -> None:
        """Take one source event into the cache."""
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

    def _read(self, key: str, raw: Mapping[str, Any]) -> PodView | Malformed:
        version = _version(raw)
        cached = self._parsed.get(key)
        if cached is not None and cached[0] == version:
            return cached[1]
        try:
            result: PodView | Malformed = pod_from_dict(raw)
        except PodSpecError as err:
            uid, namespace, name = _identity(raw)
            result = Malformed(uid, namespace, name, str(err), err.field)
        self._parsed[key] = (version, result)
        return result

    def views(self) -> tuple[list[PodView], list[Malformed]]:
        """Readable pods in creation order (then namespace/name), and the malformed ones."""
        views: list[PodView] = []
        malformed: list[Malformed] = []
        for key, raw in self._raw.items():
            result = self._read(key, raw)
            (views if isinstance(result, PodView) else malformed).append(result)  # type: ignore[arg-type]
        views.sort(key=lambda p: (p.creation_timestamp or "", p.namespace, p.name))
        return views, malformed

    def raw(self, uid: str) -> Mapping[str, Any] | None:
        """The raw dict of a pod (for Events), or None."""
        return self._raw.get(uid)

    def keys(self) -> Iterable[str]:
        return self._raw.keys()
