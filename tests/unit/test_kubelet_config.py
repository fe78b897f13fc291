"""The node's kubelet configuration: its reservations taken where podpin states none; refusals with the reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.kubelet_config import KubeletConfigError, parse_kubelet_config, read_kubelet_config
from agent.node_config import KubeletRefusalError, node_config


def _kubelet(tmp_path: Path, **fields: Any) -> Path:
    path = tmp_path / "kubelet.yaml"
    path.write_text(
        yaml.safe_dump({"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", **fields})
    )
    return path


def _podpin(tmp_path: Path, kubelet: Path, **keys: Any) -> Path:
    path = tmp_path / "podpin.yaml"
    path.write_text(yaml.safe_dump({"nodeName": "n1", "kubeletConfigPath": str(kubelet), **keys}))
    return path


def test_reservations_are_taken_from_the_kubelet_when_podpin_states_none(tmp_path: Path) -> None:
    """kubeReserved cpu 500m + systemReserved cpu 1 in the kubelet: podpin reserves ceil(1.5) = 2 CPUs too, and
    says which keys it took (failed before: the assumed 1 CPU, the kubelet's copied by hand or not at all)."""
    kubelet = _kubelet(tmp_path, kubeReserved={"cpu": "500m", "memory": "1Gi"}, systemReserved={"cpu": "1"})
    made = node_config(_podpin(tmp_path, kubelet), env={})
    assert (2, ("kubeReserved", "systemReserved"), (), [("config.inherited", ["kubeReserved", "systemReserved"])]) == (
        made.config.planner.num_reserved_cpus(),
        made.config.inherited,
        made.config.assumed,
        [(event, fields["keys"]) for event, fields in made.events],
    )


def test_explicit_reserved_cpus_are_taken_as_a_set(tmp_path: Path) -> None:
    """The kubelet's reservedSystemCPUs become podpin's."""
    made = node_config(_podpin(tmp_path, _kubelet(tmp_path, reservedSystemCPUs="0,16")), env={})
    assert "0,16" == str(made.config.planner.reserved_system_cpus)


@pytest.mark.parametrize(
    ("kubelet", "podpin", "reason"),
    [
        (
            {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0"},
            {},
            (
                "the kubelet pins CPUs itself (cpuManagerPolicy: static in {path}): two writers would fight over the "
                "cpusets; set cpuManagerPolicy: none on this node (drain, remove cpu_manager_state, restart the "
                "kubelet) or do not run podpin here"
            ),
        ),
        (
            {"reservedSystemCPUs": "0,16"},
            {"reservedSystemCPUs": "0-1"},
            (
                "the kubelet reserves CPUs 0,16 (reservedSystemCPUs in {path}) and podpin reserves CPUs 0-1: podpin "
                "would hand out CPUs the kubelet keeps for the system; give podpin the kubelet's value, or leave "
                "podpin's reservations unset to take the kubelet's"
            ),
        ),
        (
            {"systemReserved": {"cpu": "2"}},
            {"systemReserved": {"cpu": "1"}},
            (
                "the kubelet reserves 2 CPU(s) (systemReserved in {path}) and podpin reserves 1: the scheduler counts "
                "the node's CPUs from the kubelet's reservation, so podpin would refuse pods it placed or give away "
                "reserved CPUs; give podpin the kubelet's values, or leave podpin's reservations unset to take the "
                "kubelet's"
            ),
        ),
    ],
    ids=["kubelet-pins", "other-cpus", "other-count"],
)
def test_refused_next_to_a_kubelet_that_pins_or_reserves_otherwise(
    tmp_path: Path, kubelet: dict[str, Any], podpin: dict[str, Any], reason: str
) -> None:
    """Each refusal is one KubeletRefusalError saying why and what to do."""
    path = _kubelet(tmp_path, **kubelet)
    with pytest.raises(KubeletRefusalError) as err:
        node_config(_podpin(tmp_path, path, **podpin), env={})
    assert reason.format(path=path) == str(err.value)


def test_agreeing_reservations_and_the_assumed_one_are_no_refusal(tmp_path: Path) -> None:
    """Equal reservations stated twice start; so does podpin's assumed CPU next to a kubelet that reserves none."""
    agreeing = node_config(
        _podpin(tmp_path, _kubelet(tmp_path, kubeReserved={"cpu": "1"}), systemReserved={"cpu": "1000m"}), env={}
    )
    (tmp_path / "nothing").mkdir()
    assumed = node_config(_podpin(tmp_path / "nothing", _kubelet(tmp_path / "nothing")), env={})
    assert (1, 1, True) == (
        agreeing.config.planner.num_reserved_cpus(),
        assumed.config.planner.num_reserved_cpus(),
        bool(assumed.config.assumed),
    )


def test_a_missing_or_unreadable_kubelet_file_is_said_not_refused(tmp_path: Path) -> None:
    """No file (a kubelet configured by flags): podpin goes on and says so; an unreadable one too, as a warning."""
    missing = node_config(_podpin(tmp_path, tmp_path / "absent.yaml"), env={})
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: [")
    unreadable = node_config(_podpin(tmp_path, broken), env={})
    assert (["kubelet.config_missing"], ["kubelet.config_unreadable"]) == (
        [event for event, _ in missing.events],
        [event for event, _ in unreadable.events],
    )


def test_no_kubelet_file_to_read_is_said_once_at_start(tmp_path: Path) -> None:
    """``kubeletConfigPath: ""`` (the chart's default): nothing is read, and the events say so with what it costs
    (failed before: silence, so an operator could not tell the comparison was off)."""
    path = tmp_path / "podpin.yaml"
    path.write_text(yaml.safe_dump({"nodeName": "n1", "kubeletConfigPath": ""}))
    made = node_config(path, env={})
    assert (None, [("kubelet.config_not_read", "kubeletConfigPath is empty (chart: kubeletState.configFile)")]) == (
        made.config.kubelet_config_path,
        [(event, fields["reason"]) for event, fields in made.events],
    )


def test_parse_refuses_another_kind(tmp_path: Path) -> None:
    """A file of another kind is not read as the kubelet's configuration."""
    with pytest.raises(KubeletConfigError) as err:
        parse_kubelet_config("kind: Pod\n", "x.yaml")
    assert (None, "x.yaml: kind 'Pod', not KubeletConfiguration") == (
        read_kubelet_config(tmp_path / "none.yaml"),
        str(err.value),
    )
