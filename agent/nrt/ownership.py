"""Who writes the node's NodeResourceTopology object, read from its ``metadata.managedFields`` (pure).

podpin writes the object by server-side apply with the field manager :data:`FIELD_MANAGER`. Another writer
(NFD's topology-updater applies with force; an operator's controller) would make the object flap between
two truths, so podpin leaves an object it does not manage alone unless ``nrt.takeOver`` is set.

Another writer is a manager other than podpin that owns ``zones``, ``attributes`` or ``topologyPolicies``.
podpin before server-side apply (issue 18) wrote with POST and PUT, recorded under the Python client's
User-Agent (``OpenAPI-Generator``), not under ``podpin``: the manager that owns the label
``app.kubernetes.io/managed-by`` while it says ``podpin`` is podpin itself, never another writer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["FIELD_MANAGER", "MANAGED_BY", "other_writers"]

FIELD_MANAGER = "podpin"
MANAGED_BY = "app.kubernetes.io/managed-by"
_CONTENT = ("f:zones", "f:attributes", "f:topologyPolicies")


def _owns_label(fields: Mapping[str, Any]) -> bool:
    labels = (fields.get("f:metadata") or {}).get("f:labels") or {}
    return f"f:{MANAGED_BY}" in labels


def other_writers(obj: Mapping[str, Any]) -> tuple[str, ...]:
    """The managers other than podpin that own the object's content, sorted (empty: podpin's alone)."""
    metadata = obj.get("metadata") or {}
    ours_by_label = (metadata.get("labels") or {}).get(MANAGED_BY) == FIELD_MANAGER
    found = set()
    for entry in metadata.get("managedFields") or []:
        if not isinstance(entry, Mapping):
            continue
        manager = str(entry.get("manager") or "")
        fields = entry.get("fieldsV1") or {}
        if manager == FIELD_MANAGER or not isinstance(fields, Mapping):
            continue
        if ours_by_label and _owns_label(fields):
            continue
        if any(key in fields for key in _CONTENT):
            found.add(manager or "<unnamed>")
    return tuple(sorted(found))
