"""Pods from manifest files: YAML (multi-document) or JSON, single Pods or ``kind: List``, and workload templates.

Pure: bytes in, pod dicts out, no file access, so the rules can be tested on
strings and :class:`agent.kube.dirsource.DirSource` only adds the directory
scanning. A manifest is written by a person, so every error names the file and
the document that is wrong.

Workloads (``podpin plan`` only; a pods directory holds pods, so the directory
source leaves them out): the pod template of a Deployment, ReplicaSet,
StatefulSet, DaemonSet or Job (``spec.template``) and of a CronJob
(``spec.jobTemplate.spec.template``) becomes a pod named ``<workload>-<n>``
(n from 0, as a StatefulSet names its pods), in the workload's namespace, with
the workload's ``creationTimestamp``. How many: one per workload by default —
the question is what *a* pod of it gets on one node, and a scheduler spreads
the replicas over nodes; with ``workload_replicas=N`` the workload's
``spec.replicas`` (``spec.parallelism`` for a Job, the job template's for a
CronJob; 1 when absent; a DaemonSet always 1), capped at N.

The text goes through the bounded loaders of :mod:`agent.safeparse`: at most
1 MiB per file, aliases expanded within bounds, bounded nesting and numbers, so a
hostile or broken file is one clean :class:`ManifestError` and never a
``MemoryError``, a ``RecursionError`` or a cycle in the pod dict.

A pod without ``metadata.uid`` gets one derived from its namespace and name
(:func:`stable_uid`, a UUIDv5), so the same manifest keeps the same uid across
rescans and agent restarts, and the planner sees an edit as a change of the
same pod rather than a new pod. Two manifests with the same namespace/name
(and no explicit uid) therefore describe the same pod.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from agent.safeparse import MAX_DOCUMENT_BYTES, DocumentError, load_json, load_yaml_documents

__all__ = [
    "MANIFEST_SUFFIXES",
    "MAX_MANIFEST_BYTES",
    "WORKLOAD_KINDS",
    "ManifestError",
    "on_node",
    "parse_manifest",
    "stable_uid",
]

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
"""File name endings read as manifests; other files in the directory are ignored."""

MAX_MANIFEST_BYTES = MAX_DOCUMENT_BYTES
"""Largest manifest file read (1 MiB); a larger one is refused unparsed."""

_UID_NAMESPACE = uuid.UUID("6f0c3f2e-7a43-5d1e-9b8a-5e0d1c2b3a41")
"""The UUIDv5 namespace of derived pod uids (a fixed constant: changing it changes every derived uid)."""

_LIST_KINDS = ("List", "PodList")

#: Workload kinds whose pod template ``podpin plan`` turns into pods, and where their replica count is.
WORKLOAD_KINDS: dict[str, tuple[str, ...] | None] = {
    "Deployment": ("spec", "replicas"),
    "ReplicaSet": ("spec", "replicas"),
    "StatefulSet": ("spec", "replicas"),
    "DaemonSet": None,
    "Job": ("spec", "parallelism"),
    "CronJob": ("spec", "jobTemplate", "spec", "parallelism"),
}


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


def parse_manifest(path: str, data: bytes, *, workload_replicas: int = 0) -> tuple[dict[str, Any], ...]:
    """The Pods in one manifest file, in document order, each with a uid.

    ``.json`` files hold one JSON value; other files are YAML streams (``---``
    separated). A document is a Pod, a ``List``/``PodList`` of objects, or another
    kind; objects of other kinds are skipped (a file may also hold the pod's
    ConfigMap), as are empty documents. Items of a ``PodList`` may omit ``kind``.

    Args:
        path: the file's name, for the errors and to tell JSON from YAML.
        data: the file's bytes.
        workload_replicas: 0 skips workloads like any other kind; N >= 1 turns
            each workload's pod template into pods, at most N of them (module docstring).

    Raises:
        ManifestError: more than :data:`MAX_MANIFEST_BYTES`, undecodable bytes, a
            syntax error, a cyclic YAML alias, values, nesting or numbers beyond the
            bounds of :mod:`agent.safeparse`, a document that is not an object or
            has no ``kind``, a List whose ``items`` is not a list of objects
            with a ``kind``, or (with ``workload_replicas``) a workload without a
            pod template or with a replica count that is not a number.
    """
    if len(data) > MAX_MANIFEST_BYTES:
        raise ManifestError(path, f"larger than {MAX_MANIFEST_BYTES} bytes; not read")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ManifestError(path, f"not UTF-8 text ({err.reason} at byte {err.start})") from None
    try:
        if path.endswith(".json"):
            docs: list[Any] = [load_json(text)] if text.strip() else []
        else:
            docs = load_yaml_documents(text)
    except DocumentError as err:
        raise ManifestError(path, f"cannot parse: {err}") from None
    pods: list[dict[str, Any]] = []
    for number, doc in enumerate(docs, start=1):
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise ManifestError(path, f"document {number} is a {type(doc).__name__}, not an object")
        kind = doc.get("kind")
        if not kind:
            raise ManifestError(path, f"document {number} has no kind")
        if not isinstance(kind, str):
            raise ManifestError(path, f"document {number}: kind is a {type(kind).__name__}, not a string")
        if kind == "Pod":
            pods.append(doc)
        elif kind in _LIST_KINDS:
            pods.extend(_list_items(path, number, doc, workload_replicas))
        elif kind in WORKLOAD_KINDS and workload_replicas > 0:
            pods.extend(_workload_pods(path, f"document {number}", doc, workload_replicas))
    for pod in pods:
        _fill_uid(pod)
    return tuple(pods)


def _list_items(path: str, number: int, doc: dict[str, Any], workload_replicas: int) -> list[dict[str, Any]]:
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
        if not isinstance(kind, str):
            raise ManifestError(
                path, f"document {number}: items[{index}]: kind is a {type(kind).__name__}, not a string"
            )
        if kind == "Pod":
            pods.append(item)
        elif kind in WORKLOAD_KINDS and workload_replicas > 0:
            pods.extend(_workload_pods(path, f"document {number}: items[{index}]", item, workload_replicas))
    return pods


def _field(doc: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    """``doc[keys[0]][keys[1]]...``, or None where a step is missing or not an object."""
    value: Any = doc
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _object(value: object) -> Mapping[str, Any]:
    """``value`` when it is an object, else an empty one (a missing or malformed ``metadata``)."""
    return value if isinstance(value, Mapping) else {}


def _workload_pods(path: str, where: str, doc: dict[str, Any], cap: int) -> list[dict[str, Any]]:
    """The pods a workload's template stands for: ``<name>-0`` ... (see the module docstring)."""
    kind = str(doc["kind"])
    metadata = _object(doc.get("metadata"))
    name = metadata.get("name")
    label = f"{where} ({kind} {name or '<unnamed>'})"
    if not isinstance(name, str) or not name:
        raise ManifestError(path, f"{label}: metadata.name is missing")
    spec_path = ("spec", "jobTemplate", "spec", "template") if kind == "CronJob" else ("spec", "template")
    template = _field(doc, spec_path)
    if not isinstance(template, Mapping) or not isinstance(template.get("spec"), Mapping):
        raise ManifestError(path, f"{label}: {'.'.join(spec_path)}.spec is missing: no pod template to plan")
    count_path = WORKLOAD_KINDS[kind]
    count = 1 if count_path is None else _field(doc, count_path)
    if count is None:
        count = 1
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ManifestError(path, f"{label}: {'.'.join(count_path or ())} is {count!r}, not a replica count")
    template_metadata = _object(template.get("metadata"))
    namespace = metadata.get("namespace") or template_metadata.get("namespace") or "default"
    pods = []
    for index in range(min(count, cap)):
        pod_metadata = {key: value for key, value in template_metadata.items() if key in ("labels", "annotations")}
        pod_metadata.update(name=f"{name}-{index}", namespace=namespace)
        if metadata.get("creationTimestamp"):
            pod_metadata["creationTimestamp"] = metadata["creationTimestamp"]
        pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": pod_metadata, "spec": dict(template["spec"])})
    return pods


def _fill_uid(pod: dict[str, Any]) -> None:
    metadata = pod.get("metadata")
    if isinstance(metadata, dict) and not metadata.get("uid"):
        namespace = metadata.get("namespace") or "default"
        metadata["uid"] = stable_uid(str(namespace), str(metadata.get("name") or ""))
