"""Field ownership for the API server emulator's custom objects: ``managedFields`` and server-side apply.

A coarse model of the real server's structured-merge-diff, enough for a writer that applies whole fields:

* a *field* is a top-level key of the object (``zones``, ``attributes``, ...; ``metadata`` and ``status``
  apart), one key of ``metadata.labels`` or ``metadata.annotations``, or ``metadata.ownerReferences``;
* ``metadata.managedFields`` lists per (manager, operation) the fields it owns, as ``FieldsV1``
  (``{"f:zones": {}, "f:metadata": {"f:labels": {"f:app": {}}}}``);
* an **update** (POST, PUT, merge PATCH) gives its manager the fields it set or changed and takes them from
  the others; the manager is the request's ``fieldManager`` or its User-Agent's product name (the Python
  client's: ``OpenAPI-Generator``);
* an **apply** (``application/apply-patch+yaml``; a ``fieldManager`` is required) sets the fields of the
  applied configuration: one another manager owns with a different value is a 409 conflict naming it and
  its fields, unless ``force=true`` takes it (a field applied with the value it has stays shared with its
  owners); a field the applier owned before and no longer applies is
  removed from the object when no other manager owns it. Values are replaced whole (lists atomically).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["ApplyConflictError", "apply", "owners", "record_update"]

Obj = dict[str, Any]
Field = tuple[str, ...]
_MAPS = ("labels", "annotations")


class ApplyConflictError(Exception):
    """An apply would take fields another manager owns (HTTP 409)."""


def _fields(obj: Mapping[str, Any]) -> Iterator[Field]:
    for key in obj:
        if key not in ("apiVersion", "kind", "metadata", "status"):
            yield (key,)
    meta = obj.get("metadata") or {}
    for group in _MAPS:
        for key in meta.get(group) or {}:
            yield ("metadata", group, key)
    if "ownerReferences" in meta:
        yield ("metadata", "ownerReferences")


def _get(obj: Mapping[str, Any], field: Field) -> Any:
    value: Any = obj
    for part in field:
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _set(obj: Obj, field: Field, value: Any) -> None:
    target = obj
    for part in field[:-1]:
        target = target.setdefault(part, {})
    target[field[-1]] = copy.deepcopy(value)


def _drop(obj: Obj, field: Field) -> None:
    target: Any = obj
    for part in field[:-1]:
        target = target.get(part) if isinstance(target, dict) else None
        if target is None:
            return
    target.pop(field[-1], None)
    if len(field) == 3 and not obj["metadata"].get(field[1]):
        obj["metadata"].pop(field[1], None)


def _to_v1(fields: set[Field]) -> Obj:
    tree: Obj = {}
    for field in sorted(fields):
        node = tree
        for part in field:
            node = node.setdefault(f"f:{part}", {})
    return tree


def _from_v1(tree: Mapping[str, Any], prefix: Field = ()) -> set[Field]:
    found: set[Field] = set()
    for key, sub in tree.items():
        field = (*prefix, key.removeprefix("f:"))
        inner = _from_v1(sub, field) if sub else set()
        found |= inner or {field}
    return found


def _table(obj: Mapping[str, Any]) -> dict[tuple[str, str], set[Field]]:
    entries = (obj.get("metadata") or {}).get("managedFields") or []
    return {(e["manager"], e["operation"]): _from_v1(e.get("fieldsV1") or {}) for e in entries}


def _store_table(obj: Obj, table: Mapping[tuple[str, str], set[Field]], api_version: str) -> None:
    obj.setdefault("metadata", {})["managedFields"] = [
        {
            "manager": manager,
            "operation": operation,
            "apiVersion": api_version,
            "fieldsType": "FieldsV1",
            "fieldsV1": _to_v1(fields),
        }
        for (manager, operation), fields in table.items()
        if fields
    ]


def owners(obj: Mapping[str, Any]) -> dict[str, set[Field]]:
    """Manager -> the fields it owns (both operations together)."""
    result: dict[str, set[Field]] = {}
    for (manager, _), fields in _table(obj).items():
        result.setdefault(manager, set()).update(fields)
    return result


def record_update(old: Mapping[str, Any] | None, new: Obj, manager: str) -> Obj:
    """``new`` with managedFields after an update by ``manager``: it owns what it set or changed."""
    table = _table(old) if old is not None else {}
    changed = {f for f in _fields(new) if old is None or _get(old, f) != _get(new, f)}
    present = set(_fields(new))
    table = {key: (fields - changed) & present for key, fields in table.items()}
    table[(manager, "Update")] = table.get((manager, "Update"), set()) | changed
    _store_table(new, table, str(new.get("apiVersion", "")))
    return new


def apply(stored: Mapping[str, Any] | None, config: Mapping[str, Any], manager: str, *, force: bool) -> Obj:
    """The object after ``manager`` applies ``config`` (``stored`` None: it is created).

    Raises:
        ApplyConflictError: another manager owns an applied field with a different value and ``force`` is False.
    """
    result: Obj = copy.deepcopy(dict(stored)) if stored is not None else {}
    table = _table(result)
    applied = set(_fields(config))
    conflicts: dict[str, list[Field]] = {}
    for (other, _), fields in table.items():
        if other == manager:
            continue
        for field in fields & applied:
            if _get(result, field) != _get(config, field):
                conflicts.setdefault(other, []).append(field)
    if conflicts and not force:
        named = "; ".join(
            f'conflict with "{m}": {", ".join(sorted(".".join(x) for x in f))}' for m, f in sorted(conflicts.items())
        )
        raise ApplyConflictError(f"Apply failed with {sum(len(f) for f in conflicts.values())} conflict(s): {named}")
    before = table.get((manager, "Apply"), set())
    others = set().union(*(f for k, f in table.items() if k != (manager, "Apply"))) if table else set()
    for field in before - applied:
        if field not in others:
            _drop(result, field)
    for field in applied:
        _set(result, field, _get(config, field))
    for key in ("apiVersion", "kind"):
        if key in config:
            result[key] = config[key]
    result.setdefault("metadata", {})["name"] = (config.get("metadata") or {}).get("name")
    taken = {(m, f) for m, fs in conflicts.items() for f in fs}
    table = {key: {f for f in fields if (key[0], f) not in taken} for key, fields in table.items() if key[0] != manager}
    table[(manager, "Apply")] = applied
    _store_table(result, table, str(result.get("apiVersion", "")))
    return result
