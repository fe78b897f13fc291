"""Pods from manifest files: YAML (multi-document) or JSON, single Pods or ``kind: List``.

Pure: bytes in, pod dicts out, no file access, so the rules can be tested on
strings and :class:`agent.kube.dirsource.DirSource` only adds the directory
scanning. A manifest is written by a person, so every error names the file and
the document that is wrong.

A pod without ``metadata.uid`` gets one derived from its namespace and name
(:func:`stable_uid`, a UUIDv5), so the same manifest keeps the same uid across
rescans and agent restarts, and the planner sees an edit as a change of the
same pod rather than a new pod. Two manifests with the same namespace/name
(and no explicit uid) therefore describe the same pod.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

import yaml

__all__ = ["ManifestError", "MANIFEST_SUFFIXES", "parse_manifest", "stable_uid", "on_node"]

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
"""File name endings read as manifests; other files in the directory are ignored."""

_UID_NAMESPACE = uuid.UUID("6f0c3f2e-7a43-5d1e-9b8a-5e0d1c2b3a41")
"""The UUIDv5 namespace of derived pod uids (a fixed constant: changing it changes every derived uid)."""

_LIST_KINDS = ("List", "PodList")


class ManifestError(ValueError):
    """A manifest file that cannot be read or parsed; ``path`` names it."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


def stable_uid(namespace: str, name: str) -> str:
    """The uid of a manifest pod without one: UUIDv5 of ``namespace/name``."""
    return str(uuid.uuid5(_UID_NAMESPACE, f"{namespace}/{name}"))


def on_node(pod: Mapping[str, Any], node_name: str) -> bool:
    """Whether a manifest pod belongs to this node: ``spec.nodeName`` unset, empty or equal."""
    spec = pod.get("spec")
    node = spec.get("nodeName") if isinstance(spec, Mapping) else None
    return not node or node == node_name


def parse_manifest(path: str, data: bytes) -> tuple[dict[str, Any], ...]:
    """The Pods in one manifest file, in document order, each with a uid.

    ``.json`` files hold one JSON value; other files are YAML streams (``---``
    separated). A document is a Pod, a ``List``/``PodList`` of objects, or another
    kind; objects of other kinds are skipped (a file may also hold the pod's
    ConfigMap), as are empty documents. Items of a ``PodList`` may omit ``kind``.

    Raises:
        ManifestError: undecodable bytes, a syntax error, a document that is not
            an object or has no ``kind``, or a List whose ``items`` is not a list
            of objects with a ``kind``.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ManifestError(path, f"not UTF-8 text ({err.reason} at byte {err.start})") from None
    try:
        if path.endswith(".json"):
            docs: list[Any] = [json.loads(text)] if text.strip() else []
        else:
            docs = list(yaml.safe_load_all(text))
    except (ValueError, yaml.YAMLError) as err:
        raise ManifestError(path, f"cannot parse: {_describe(err)}") from None
    pods: list[dict[str, Any]] = []
    for number, doc in enumerate(docs, start=1):
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise ManifestError(path, f"document {number} is a {type(doc).__name__}, not an object")
        kind = doc.get("kind")
        if not kind:
            raise ManifestError(path, f"document {number} has no kind")
        if kind == "Pod":
            pods.append(doc)
        elif kind in _LIST_KINDS:
            pods.extend(_list_items(path, number, doc))
    for pod in pods:
        _fill_uid(pod)
    return tuple(pods)


def _list_items(path: str, number: int, doc: dict[str, Any]) -> list[dict[str, Any]]:
    items = doc.get("items") or []
    if not isinstance(items, list):
        raise ManifestError(path, f"document {number}: items is a {type(items).__name__}, not a list")
    pods = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise ManifestError(path, f"document {number}: items[{index}] is a {type(item).__name__}, not an object")
        kind = item.get("kind", "Pod" if doc["kind"] == "PodList" else None)
        if not kind:
            raise ManifestError(path, f"document {number}: items[{index}] has no kind")
        if kind == "Pod":
            pods.append(item)
    return pods


def _fill_uid(pod: dict[str, Any]) -> None:
    metadata = pod.get("metadata")
    if isinstance(metadata, dict) and not metadata.get("uid"):
        namespace = metadata.get("namespace") or "default"
        metadata["uid"] = stable_uid(str(namespace), str(metadata.get("name") or ""))


def _describe(err: Exception) -> str:
    """One line: YAML errors as ``line L, column C: problem (context)``, others as their text."""
    if isinstance(err, yaml.MarkedYAMLError) and err.problem_mark is not None:
        mark = err.problem_mark
        context = f" ({err.context})" if err.context else ""
        return f"line {mark.line + 1}, column {mark.column + 1}: {err.problem}{context}"
    return " ".join(str(err).split())
