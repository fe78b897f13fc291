"""Nodes and cluster-scoped custom objects for the API server emulator.

Kept apart from ``apiserver_emulator.py`` (pods, watches, Events) so that file
stays as it was; the emulator owns one :class:`ClusterObjects` and routes
``/api/v1/nodes/{name}`` and ``/apis/{group}/{version}/{plural}[/{name}]`` to
it. What is emulated, as the real API server does it:

* ``GET`` of a Node (404 when unknown);
* custom objects of a CRD registered with :meth:`register_crd` (any other
  ``/apis`` path is 404, as for a cluster without the CRD): ``POST`` (409 when
  the name exists), ``GET``, ``PUT`` (409 when the body's
  ``metadata.resourceVersion`` is not the stored one), ``PATCH`` with a JSON
  merge patch or a server-side apply (``application/apply-patch+yaml``, which
  creates the object when missing; 415 for any other patch type), each write
  recording ``metadata.managedFields`` (``field_managers.py``); ``uid``, ``resourceVersion``
  (from the emulator's shared counter), ``generation`` and
  ``creationTimestamp`` are set by the server;
* every written object is validated against the CRD's ``openAPIV3Schema``
  (422 Invalid naming the field), as the real server validates structural
  schemas;
* :meth:`delete_node` deletes the objects whose ownerReferences name the Node's
  uid, as the garbage collector does.
"""

from __future__ import annotations

import copy
import datetime
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import jsonschema

from tests.support.field_managers import ApplyConflictError, apply, record_update

__all__ = ["ClusterObjects", "ObjectError"]

Obj = dict[str, Any]


class ObjectError(Exception):
    """A request the server refuses: an HTTP status and the Status message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value)
    return result


class ClusterObjects:
    """The store: Nodes by name, custom objects by (group, plural, name)."""

    def __init__(self, cond: threading.Condition, next_version: Callable[[], int]) -> None:
        self._cond = cond
        self._next_version = next_version
        self._nodes: dict[str, Obj] = {}
        self._crds: dict[tuple[str, str], tuple[str, str, Mapping[str, Any]]] = {}
        self._objects: dict[tuple[str, str, str], Obj] = {}
        self._daemonsets: dict[tuple[str, str], Obj] = {}

    # -- control -------------------------------------------------------------------------------
    def add_node(
        self,
        name: str,
        *,
        uid: str | None = None,
        capacity: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Obj:
        """Create a Node with ``labels`` (its status lists ``capacity`` as both capacity and allocatable)."""
        node: Obj = {
            "kind": "Node",
            "apiVersion": "v1",
            "metadata": {"name": name, "uid": uid or str(uuid.uuid4()), "creationTimestamp": _now()},
            "status": {"capacity": dict(capacity or {}), "allocatable": dict(capacity or {})},
        }
        if labels:
            node["metadata"]["labels"] = dict(labels)
        with self._cond:
            node["metadata"]["resourceVersion"] = str(self._next_version())
            self._nodes[name] = node
            self._cond.notify_all()
            return copy.deepcopy(node)

    def delete_node(self, name: str) -> None:
        """Delete a Node and, as the garbage collector does, every object it owns."""
        with self._cond:
            node = self._nodes.pop(name)
            uid = node["metadata"]["uid"]
            for key, obj in list(self._objects.items()):
                if any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences") or []):
                    del self._objects[key]
            self._cond.notify_all()

    def register_crd(self, crd: Mapping[str, Any]) -> None:
        """Serve the custom objects of a CRD document (its stored version's schema validates them)."""
        spec = crd["spec"]
        version = next(v for v in spec["versions"] if v.get("storage"))
        with self._cond:
            self._crds[(spec["group"], spec["names"]["plural"])] = (
                version["name"],
                spec["names"]["kind"],
                version["schema"]["openAPIV3Schema"],
            )

    def custom(self, group: str, plural: str, name: str) -> Obj | None:
        """A copy of a stored custom object, or None."""
        with self._cond:
            found = self._objects.get((group, plural, name))
            return copy.deepcopy(found) if found is not None else None

    def customs(self, group: str, plural: str) -> list[Obj]:
        with self._cond:
            return [copy.deepcopy(o) for (g, p, _), o in self._objects.items() if (g, p) == (group, plural)]

    def put_daemonset(self, namespace: str, daemonset: Mapping[str, Any]) -> Obj:
        """Store (or replace) an apps/v1 DaemonSet as given, status included: the tests play its controller."""
        name = daemonset["metadata"]["name"]
        obj = copy.deepcopy(dict(daemonset))
        obj["metadata"] = {**obj["metadata"], "namespace": namespace}
        obj["metadata"].setdefault("generation", 1)
        with self._cond:
            obj["metadata"]["resourceVersion"] = str(self._next_version())
            self._daemonsets[(namespace, name)] = obj
            self._cond.notify_all()
            return copy.deepcopy(obj)

    def daemonset(self, namespace: str, name: str) -> Obj | None:
        """A copy of a stored DaemonSet, or None (deleted, never made)."""
        with self._cond:
            found = self._daemonsets.get((namespace, name))
            return copy.deepcopy(found) if found is not None else None

    # -- serving -------------------------------------------------------------------------------
    def serve_daemonset(self, method: str, namespace: str, name: str) -> tuple[int, Obj]:
        """``GET`` or ``DELETE`` of ``/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}``."""
        with self._cond:
            found = self._daemonsets.get((namespace, name))
            if found is None:
                raise ObjectError(404, f'daemonsets.apps "{name}" not found')
            if method == "GET":
                return 200, copy.deepcopy(found)
            if method == "DELETE":
                del self._daemonsets[(namespace, name)]
                self._cond.notify_all()
                return 200, {"kind": "Status", "apiVersion": "v1", "status": "Success"}
            raise ObjectError(405, f"{method} is not supported on daemonsets.apps")

    def get_node(self, name: str) -> Obj:
        with self._cond:
            node = self._nodes.get(name)
            if node is None:
                raise ObjectError(404, f'nodes "{name}" not found')
            return copy.deepcopy(node)

    def serve_custom(
        self,
        method: str,
        group: str,
        version: str,
        plural: str,
        name: str | None,
        body: Any,
        content_type: str,
        query: Mapping[str, str] | None = None,
        manager: str = "unknown",
    ) -> tuple[int, Obj]:
        """One request on ``/apis/{group}/{version}/{plural}[/{name}]``: (status, body).

        ``manager`` is the writer (``fieldManager`` or the User-Agent's product); ``query`` holds ``force``.
        """
        patch_type = content_type.split(";", maxsplit=1)[0].strip()
        with self._cond:
            known = self._crds.get((group, plural))
            if known is None or known[0] != version:
                raise ObjectError(
                    404, f"the server could not find the requested resource ({method} {group}/{version}/{plural})"
                )
            _, kind, schema = known
            if method == "POST" and name is None:
                return 201, self._create(group, plural, kind, schema, body, manager)
            if name is None:
                raise ObjectError(405, f"{method} of the {plural} collection is not supported")
            key = (group, plural, name)
            stored = self._objects.get(key)
            if method == "PATCH" and patch_type == "application/apply-patch+yaml":
                if not (query or {}).get("fieldManager"):
                    raise ObjectError(400, "PATCH, fieldManager is required for apply requests")
                return self._apply(key, kind, schema, stored, body, manager, (query or {}).get("force") == "true")
            if stored is None:
                raise ObjectError(404, f'{plural}.{group} "{name}" not found')
            if method == "GET":
                return 200, copy.deepcopy(stored)
            if method == "PUT":
                if not isinstance(body, dict):
                    raise ObjectError(400, "the request body is not an object")
                sent = (body.get("metadata") or {}).get("resourceVersion")
                if sent and sent != stored["metadata"]["resourceVersion"]:
                    raise ObjectError(
                        409,
                        f'Operation cannot be fulfilled on {plural}.{group} "{name}": the object has been modified; '
                        "please apply your changes to the latest version and try again",
                    )
                return 200, self._store(key, kind, schema, record_update(stored, copy.deepcopy(body), manager), stored)
            if method == "PATCH":
                if patch_type != "application/merge-patch+json":
                    raise ObjectError(415, f"the emulator supports only JSON merge patches, not {content_type!r}")
                return 200, self._store(key, kind, schema, record_update(stored, _merge(stored, body), manager), stored)
            raise ObjectError(405, f"{method} is not supported on {plural}.{group}")

    def _apply(
        self,
        key: tuple[str, str, str],
        kind: str,
        schema: Mapping[str, Any],
        stored: Obj | None,
        body: Any,
        manager: str,
        force: bool,
    ) -> tuple[int, Obj]:
        if not isinstance(body, dict):
            raise ObjectError(400, "the request body is not an object")
        if (body.get("metadata") or {}).get("name") != key[2]:
            raise ObjectError(400, f"the name of the applied object does not match the request's {key[2]!r}")
        try:
            new = apply(stored, body, manager, force=force)
        except ApplyConflictError as err:
            raise ObjectError(409, str(err)) from None
        return (201 if stored is None else 200), self._store(key, kind, schema, new, stored)

    def _create(
        self, group: str, plural: str, kind: str, schema: Mapping[str, Any], body: Any, manager: str = "unknown"
    ) -> Obj:
        if not isinstance(body, dict):
            raise ObjectError(400, "the request body is not an object")
        body = record_update(None, copy.deepcopy(body), manager)
        name = (body.get("metadata") or {}).get("name")
        if not name:
            raise ObjectError(422, f"{kind}.metadata.name: Required value")
        key = (group, plural, name)
        if key in self._objects:
            raise ObjectError(409, f'{plural}.{group} "{name}" already exists')
        return self._store(key, kind, schema, body, None)

    def _store(
        self, key: tuple[str, str, str], kind: str, schema: Mapping[str, Any], body: Obj, old: Obj | None
    ) -> Obj:
        new = copy.deepcopy(body)
        try:
            jsonschema.validate(new, schema)
        except jsonschema.ValidationError as err:
            where = ".".join(str(p) for p in err.absolute_path) or "<root>"
            raise ObjectError(422, f'{kind} "{key[2]}" is invalid: {where}: {err.message}') from None
        meta = new.setdefault("metadata", {})
        if old is None:
            meta.update(uid=str(uuid.uuid4()), creationTimestamp=_now(), generation=1)
        else:
            for field in ("uid", "creationTimestamp"):
                meta[field] = old["metadata"][field]
            changed = {k: v for k, v in new.items() if k != "metadata"} != {
                k: v for k, v in old.items() if k != "metadata"
            }
            meta["generation"] = old["metadata"]["generation"] + (1 if changed else 0)
        meta["resourceVersion"] = str(self._next_version())
        self._objects[key] = new
        self._cond.notify_all()
        return copy.deepcopy(new)
