"""One file for every node: the default section, a group section chosen by a node label, a node section."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.config import ConfigError, config_from_mapping, load_config
from agent.config_layers import LayerError, flatten_layers, wants_labels

FILE: dict[str, Any] = {
    "topologyManagerPolicy": "best-effort",
    "systemReserved": {"cpu": "1"},
    "groups": {
        "trading": {"topologyManagerPolicy": "single-numa-node", "reservedSystemCPUs": "0,16"},
        "batch": {"topologyManagerPolicy": "none"},
    },
    "nodes": {"worker-7": {"reservedSystemCPUs": "0-1", "logLevel": "debug"}},
}
TRADING = {"podpin.io/config-group": "trading"}


def _policy_and_reserved(node: str | None, labels: dict[str, str] | None) -> tuple[str, str, str | None]:
    layered = flatten_layers(FILE, node, labels)
    config = config_from_mapping(layered.mapping, env={"NODE_NAME": node or "n"})
    return (str(config.planner.topology_manager_policy), str(config.planner.reserved_system_cpus), layered.group)


@pytest.mark.parametrize(
    ("node", "labels", "expected"),
    [
        ("worker-1", {}, ("best-effort", "", None)),
        ("worker-1", TRADING, ("single-numa-node", "0,16", "trading")),
        ("worker-7", TRADING, ("single-numa-node", "0-1", "trading")),
        ("worker-7", None, ("best-effort", "0-1", None)),
    ],
    ids=["default", "group", "node-over-group", "labels-unknown"],
)
def test_sections_lay_over_the_default(
    node: str, labels: dict[str, str] | None, expected: tuple[str, str, str | None]
) -> None:
    """The group's section replaces the default's keys, the node's section replaces the group's; without the node's
    labels only the node section applies."""
    assert expected == _policy_and_reserved(node, labels)


def test_a_label_naming_no_section_keeps_the_default_and_says_so() -> None:
    """A node labelled with a group the file has no section for runs the default, and the result says so."""
    layered = flatten_layers(FILE, "worker-1", {"podpin.io/config-group": "gpu"})
    assert ("gpu", False, "best-effort") == (
        layered.group,
        layered.group_known,
        layered.mapping["topologyManagerPolicy"],
    )


def test_the_group_label_is_configurable() -> None:
    """nodeGroupLabel names the label that chooses the group."""
    data = {**FILE, "nodeGroupLabel": "example.com/pool"}
    assert ("trading", "single-numa-node") == (
        flatten_layers(data, "w", {"example.com/pool": "trading"}).group,
        flatten_layers(data, "w", {"example.com/pool": "trading"}).mapping["topologyManagerPolicy"],
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"groups": ["trading"]}, "groups: ['trading'] is not a map of names to configuration sections"),
        ({"groups": {"a": "x"}}, "groups.a: 'x' is not a map of configuration keys"),
        ({"nodes": {"w": {"nodeName": "other"}}}, "nodes.w.nodeName: only the top level of the file may hold it"),
        ({"groups": {"a": {"nodes": {}}}}, "groups.a.nodes: only the top level of the file may hold it"),
        ({"nodeGroupLabel": ""}, "nodeGroupLabel: '' is not a node label key"),
    ],
)
def test_bad_sections_are_named(data: dict[str, Any], message: str) -> None:
    """A section that cannot be used is refused naming it."""
    with pytest.raises(LayerError) as err:
        flatten_layers(data, "w", {})
    assert message == str(err.value)


def test_load_config_takes_the_node_section_by_name(tmp_path: Path) -> None:
    """``load_config`` (podpin plan and reset) applies the node's section by NODE_NAME, never a group's."""
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(FILE))
    config = load_config(path, env={"NODE_NAME": "worker-7"})
    assert ("best-effort", "0-1") == (
        str(config.planner.topology_manager_policy),
        str(config.planner.reserved_system_cpus),
    )


def test_sections_are_not_keys_of_a_section_mapping() -> None:
    """``config_from_mapping`` takes one flattened section: ``groups`` there is named as a file-level key."""
    with pytest.raises(ConfigError) as err:
        config_from_mapping({"groups": {}}, env={})
    assert "unknown configuration key 'groups' (only in the file, for its sections)" == str(err.value)


def test_labels_are_wanted_only_with_group_sections() -> None:
    """The agent asks the API server for its node's labels only when the file has group sections."""
    assert (True, False) == (wants_labels(FILE), wants_labels({"nodes": {"w": {}}}))
