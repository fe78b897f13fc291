"""One configuration file for every node: a default section, group sections chosen by a node label, node sections.

The file's top-level keys are the default section, as a file without sections has always been. Two more
top-level keys hold sections of the same keys, each replacing the default's value key by key
(``docs/design.md``, "Configuration"):

* ``groups``: group name -> section; a node whose label ``nodeGroupLabel`` (default ``podpin.io/config-group``)
  names a group takes that group's section;
* ``nodes``: node name -> section; the node of that name takes it, after its group's.

So a pool of nodes with other reservations or another topology policy is one label and one section, not a second
release. A section replaces whole keys (a ``systemReserved`` map given in a group is the group's map, not a merge
with the default's), so what a node runs with can be read off the file. Sections may not hold ``groups``,
``nodes``, ``nodeGroupLabel`` or ``nodeName`` (which name the layering itself).

Pure: the node's labels are read by the shell and handed in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent.shortrepr import short_repr

__all__ = [
    "DEFAULT_GROUP_LABEL",
    "LAYER_KEYS",
    "Layered",
    "LayerError",
    "flatten_layers",
    "group_label_of",
    "wants_labels",
]

#: The node label whose value names a node's group.
DEFAULT_GROUP_LABEL = "podpin.io/config-group"
#: The top-level keys that describe the layering; no section may hold them.
LAYER_KEYS = ("groups", "nodes", "nodeGroupLabel")
_NOT_IN_SECTIONS = (*LAYER_KEYS, "nodeName")


class LayerError(ValueError):
    """A ``groups`` or ``nodes`` section that cannot be used; the message names it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Layered:
    """The node's own configuration mapping and where it came from.

    Attributes:
        mapping: the default section with the node's group section and node section laid over it.
        group: the group the node is in (by its label), or None.
        group_known: False when the node's label names a group the file has no section for.
        node_section: whether the file has a section for this node.
    """

    mapping: Mapping[str, Any]
    group: str | None
    group_known: bool
    node_section: bool


def _sections(data: Mapping[str, Any], key: str) -> Mapping[str, Mapping[str, Any]]:
    value = data.get(key, {})
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise LayerError(f"{key}: {short_repr(value)} is not a map of names to configuration sections")
    for name, section in value.items():
        if not isinstance(name, str) or not name:
            raise LayerError(f"{key}: {short_repr(name)} is not a name")
        if section is None:
            continue
        if not isinstance(section, Mapping):
            raise LayerError(f"{key}.{name}: {short_repr(section)} is not a map of configuration keys")
        inner = sorted(k for k in section if k in _NOT_IN_SECTIONS)
        if inner:
            raise LayerError(f"{key}.{name}.{inner[0]}: only the top level of the file may hold it")
    return value


def group_label_of(data: Mapping[str, Any]) -> str:
    """The label that names a node's group (``nodeGroupLabel``)."""
    label = data.get("nodeGroupLabel", DEFAULT_GROUP_LABEL)
    if not isinstance(label, str) or not label:
        raise LayerError(f"nodeGroupLabel: {short_repr(label)} is not a node label key")
    return label


def wants_labels(data: Mapping[str, Any]) -> bool:
    """Whether the file has group sections, so the node's labels are needed to choose one."""
    return bool(_sections(data, "groups"))


def flatten_layers(data: Mapping[str, Any], node: str | None, labels: Mapping[str, str] | None) -> Layered:
    """The configuration of ``node`` (with ``labels``, when known): default, then group, then node section.

    Args:
        data: the parsed file.
        node: the node's name (None: no node section applies).
        labels: the node's labels (None: unknown, no group section applies).

    Raises:
        LayerError: a section, or ``nodeGroupLabel``, that cannot be used.
    """
    groups = _sections(data, "groups")
    nodes = _sections(data, "nodes")
    label = group_label_of(data)
    merged = {key: value for key, value in data.items() if key not in LAYER_KEYS}
    group = labels.get(label) if labels is not None else None
    known = group is None or group in groups
    if group is not None and group in groups:
        merged.update(groups[group] or {})
    own = node is not None and node in nodes
    if own:
        merged.update(nodes[node] or {})  # type: ignore[index]
    return Layered(mapping=merged, group=group, group_known=known, node_section=own)
