"""The running agent's configuration: the file's sections for this node, the kubelet's reservations, its refusals.

``podpin run`` configures itself in four steps (``docs/design.md``, "Configuration"):

1. read the file (``agent/config.py``);
2. take the default section, the section of the node's group (by its label ``nodeGroupLabel``; read from the
   API server only when the file has group sections) and the node's own section (``agent/config_layers.py``);
3. read the kubelet's configuration file (``kubeletConfigPath``) and take its reservations where podpin's states
   none (``agent/kubelet_config.py``);
4. validate the result (``config_from_mapping``) and refuse to start next to a kubelet that pins CPUs or
   reserves other CPUs than podpin (:class:`KubeletRefusalError`).

What happened on the way (the group chosen, a label naming no section, the keys taken from the kubelet, a
missing or unreadable kubelet file, none to read) comes back as log events for the runner to write: this module
logs nothing.
The same steps run again when the file or the labels change (``agent/config_follow.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agent.config import (
    ASSUMED_RESERVATION,
    AgentConfig,
    ConfigError,
    config_from_mapping,
    node_name_of,
    read_config_file,
)
from agent.config_layers import LayerError, flatten_layers, group_label_of, wants_labels
from agent.kubelet_config import (
    KubeletConfig,
    KubeletConfigError,
    inherit_reservations,
    kubelet_disagreement,
    read_kubelet_config,
)

__all__ = ["KubeletRefusalError", "LabelReader", "NodeConfig", "node_config"]

LabelReader = Callable[[str], Mapping[str, str]]
"""``node name -> its labels``; raises on failure (the message is shown as the reason)."""


class KubeletRefusalError(ConfigError):
    """podpin must not start next to this kubelet; the message says why."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeConfig:
    """The node's configuration and what the runner should say about how it was made.

    Attributes:
        config: the validated configuration.
        events: ``(event name, fields)`` log lines: ``config.group``, ``config.group_unknown``,
            ``config.inherited``, ``kubelet.config_missing``, ``kubelet.config_unreadable``,
            ``kubelet.config_not_read``.
        raw: the file's mapping and the node's labels it was made from (what a change is compared against).
    """

    config: AgentConfig
    events: tuple[tuple[str, dict[str, Any]], ...]
    raw: tuple[Mapping[str, Any], Mapping[str, str] | None]


def _labels(data: Mapping[str, Any], node: str | None, labels_of: LabelReader | None) -> Mapping[str, str] | None:
    if not wants_labels(data) or node is None or labels_of is None:
        return None
    try:
        return labels_of(node)
    except Exception as err:  # the API client's errors, whatever their type: one line naming the node
        raise ConfigError(
            f"cannot read the labels of node {node} to choose its group section (label {group_label_of(data)}): "
            f"{' '.join(str(err).split())}"
        ) from err


NOT_READ = (
    "kubelet.config_not_read",
    {
        "reason": "kubeletConfigPath is empty (chart: kubeletState.configFile)",
        "consequence": "the kubelet's reservations are not taken and not compared with podpin's",
    },
)
"""Said once at start when no kubelet configuration file is to be read: the chart's default, since a file mount of
a path the node lacks keeps the agent's pod from starting (kubeadm writes ``/var/lib/kubelet/config.yaml``; k3s,
EKS and GKE keep theirs elsewhere)."""


def _kubelet(path: Path | None, read: Callable[[Path], KubeletConfig | None]) -> tuple[KubeletConfig | None, Any]:
    """The kubelet's configuration, and the event to log when there is none to use."""
    if path is None:
        return None, NOT_READ
    try:
        found = read(path)
    except KubeletConfigError as err:
        return None, ("kubelet.config_unreadable", {"path": str(path), "error": str(err)})
    if found is None:
        return None, ("kubelet.config_missing", {"path": str(path)})
    return found, None


def node_config(
    path: Path | None,
    *,
    env: Mapping[str, str] | None = None,
    labels_of: LabelReader | None = None,
    read_kubelet: Callable[[Path], KubeletConfig | None] = read_kubelet_config,
) -> NodeConfig:
    """This node's configuration (module docstring).

    Args:
        path: the configuration file (None: the built-in defaults, and still the kubelet's file).
        env: the environment for ``NODE_NAME`` (default ``os.environ``).
        labels_of: reads a node's labels (the API server); None when there is no API server.
        read_kubelet: reads the kubelet's configuration file (tests pass their own).

    Raises:
        ConfigError: a bad file or section, or labels that cannot be read; :class:`KubeletRefusalError` when the
            kubelet pins CPUs itself or reserves other CPUs than podpin.
    """
    data = read_config_file(path) if path is not None else {}
    where = f"{path}: " if path is not None else ""
    node = node_name_of(data, env)
    labels = _labels(data, node, labels_of)
    events: list[tuple[str, dict[str, Any]]] = []
    try:
        layered = flatten_layers(data, node, labels)
        first = config_from_mapping(layered.mapping, env=env)
    except (ConfigError, LayerError) as err:
        raise ConfigError(f"{where}{err}") from err
    if layered.group is not None:
        event = "config.group" if layered.group_known else "config.group_unknown"
        events.append((event, {"group": layered.group, "label": group_label_of(data)}))
    kubelet, missing = _kubelet(first.kubelet_config_path, read_kubelet)
    if missing is not None:
        events.append(missing)
    if kubelet is None:
        return NodeConfig(config=replace(first, group=layered.group), events=tuple(events), raw=(data, labels))
    try:
        mapping, taken = inherit_reservations(layered.mapping, kubelet)
        config = config_from_mapping(mapping, env=env)
    except (ConfigError, KubeletConfigError) as err:
        raise ConfigError(f"{where}{err} (with the reservations of {kubelet.path})") from err
    if taken:
        events.append(("config.inherited", {"keys": list(taken), "from": kubelet.path}))
    try:
        reason = kubelet_disagreement(
            kubelet,
            config.planner.reserved_system_cpus,
            config.planner.num_reserved_cpus(),
            assumed=ASSUMED_RESERVATION in config.assumed,
        )
    except KubeletConfigError as err:
        raise KubeletRefusalError(str(err)) from err
    if reason is not None:
        raise KubeletRefusalError(reason)
    return NodeConfig(
        config=replace(config, group=layered.group, inherited=taken), events=tuple(events), raw=(data, labels)
    )
