"""The ``--devices`` file: which devices each container holds, offline, for ``podpin plan``.

The same facts the kubelet's PodResources API gives on a node, written by hand
so device alignment can be seen without one::

    - namespace: ml          # optional, "default" when left out
      pod: trainer
      container: train
      devices:
      - {resource: nvidia.com/gpu, ids: [gpu-2], numa: [2]}

``numa`` may be left out or empty: a device without NUMA affinity (the kubelet
then gives no hint for it). Every error names the entry (its index and who it
is) and the field, and the whole file is refused: a plan built on half a file
would be silently wrong.

:func:`parse_devices` is pure; :func:`load_devices` only reads the file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from agent.alloc import ContainerKey, DeviceAssignments, DeviceGroup

__all__ = ["DevicesFileError", "load_devices", "parse_devices"]

_ENTRY_KEYS = frozenset({"namespace", "pod", "container", "devices"})
_DEVICE_KEYS = frozenset({"resource", "ids", "numa"})
# An extended resource name: a domain prefix and a name (the API server's rule, simplified to its shape).
_RESOURCE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


class DevicesFileError(ValueError):
    """A devices file that cannot be used; the message names the file, the entry and the field."""


def _name(value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise DevicesFileError(f"{where}: {value!r} is not a non-empty string")
    return value


def _group(raw: object, where: str) -> DeviceGroup:
    if not isinstance(raw, Mapping):
        raise DevicesFileError(f"{where}: {raw!r} is not a mapping of resource, ids and numa")
    unknown = sorted(set(raw) - _DEVICE_KEYS)
    if unknown:
        raise DevicesFileError(f"{where}: unknown key {unknown[0]!r} (known: numa, ids, resource)")
    resource = _name(raw.get("resource"), f"{where}.resource")
    if not _RESOURCE.match(resource) or resource.startswith("kubernetes.io/"):
        raise DevicesFileError(
            f"{where}.resource: {resource!r} is not an extended resource name such as vendor.com/gpu"
        )
    ids = raw.get("ids")
    if not isinstance(ids, list) or not ids:
        raise DevicesFileError(f"{where}.ids: {ids!r} is not a non-empty list of device ids")
    names = tuple(_name(device, f"{where}.ids[{i}]") for i, device in enumerate(ids))
    if len(set(names)) != len(names):
        raise DevicesFileError(f"{where}.ids: {list(names)} names a device twice")
    numa = raw.get("numa", [])
    if not isinstance(numa, list):
        raise DevicesFileError(f"{where}.numa: {numa!r} is not a list of NUMA node ids")
    for i, node in enumerate(numa):
        if not isinstance(node, int) or isinstance(node, bool) or node < 0:
            raise DevicesFileError(f"{where}.numa[{i}]: {node!r} is not a NUMA node id")
    return DeviceGroup(resource=resource, ids=names, numa=tuple(sorted(set(numa))))


def _entry(raw: object, index: int) -> tuple[ContainerKey, tuple[DeviceGroup, ...]]:
    where = f"entry {index}"
    if not isinstance(raw, Mapping):
        raise DevicesFileError(f"{where}: {raw!r} is not a mapping of namespace, pod, container and devices")
    if isinstance(raw.get("pod"), str) and isinstance(raw.get("container"), str):
        where = f"entry {index} ({raw.get('namespace', 'default')}/{raw['pod']} container {raw['container']})"
    unknown = sorted(set(raw) - _ENTRY_KEYS)
    if unknown:
        raise DevicesFileError(f"{where}: unknown key {unknown[0]!r} (known: container, devices, namespace, pod)")
    key = ContainerKey(
        namespace=_name(raw.get("namespace", "default"), f"{where}.namespace"),
        pod=_name(raw.get("pod"), f"{where}.pod"),
        container=_name(raw.get("container"), f"{where}.container"),
    )
    devices = raw.get("devices")
    if not isinstance(devices, list) or not devices:
        raise DevicesFileError(f"{where}.devices: {devices!r} is not a non-empty list")
    return key, tuple(_group(group, f"{where}.devices[{i}]") for i, group in enumerate(devices))


def parse_devices(data: Any, source: str = "devices") -> DeviceAssignments:
    """Check a parsed devices document and build the assignments.

    Args:
        data: the parsed YAML (a list of entries; None or empty gives no devices).
        source: what to call the document in errors (the file name).

    Raises:
        DevicesFileError: naming the source, the entry and the field.
    """
    if data is None:
        return DeviceAssignments()
    if not isinstance(data, list):
        raise DevicesFileError(f"{source}: expected a list of entries (namespace, pod, container, devices)")
    entries: dict[ContainerKey, tuple[DeviceGroup, ...]] = {}
    first: dict[ContainerKey, int] = {}
    holder: dict[tuple[str, str], tuple[int, ContainerKey]] = {}
    for index, raw in enumerate(data):
        try:
            key, groups = _entry(raw, index)
        except DevicesFileError as err:
            raise DevicesFileError(f"{source}: {err}") from err
        who = f"{key.namespace}/{key.pod} container {key.container}"
        if key in first:
            raise DevicesFileError(f"{source}: entry {index} ({who}): the same container as entry {first[key]}")
        first[key] = index
        for group in groups:
            for device in group.ids:
                seen = holder.setdefault((group.resource, device), (index, key))
                if seen[1] != key:
                    raise DevicesFileError(
                        f"{source}: entry {index} ({who}): {group.resource} device {device!r} is already held by "
                        f"entry {seen[0]} ({seen[1].namespace}/{seen[1].pod} container {seen[1].container})"
                    )
        entries[key] = groups
    return DeviceAssignments.of(entries)


def load_devices(path: Path) -> DeviceAssignments:
    """Read and check a devices file.

    Raises:
        DevicesFileError: the file cannot be read, is not YAML, or holds a bad entry.
    """
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise DevicesFileError(f"{path}: cannot read the devices file: {err.strerror or err}") from err
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise DevicesFileError(f"{path}: not valid YAML: {err}") from err
    return parse_devices(data, str(path))
