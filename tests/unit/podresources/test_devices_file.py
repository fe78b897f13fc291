"""The ``--devices`` file format: parsed into DeviceAssignments, or refused with the entry and field named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.podresources import (
    ContainerKey,
    DeviceAssignments,
    DeviceGroup,
    DevicesFileError,
    load_devices,
    parse_devices,
)

DOCUMENTED_EXAMPLE = """
- namespace: ml
  pod: trainer
  container: train
  devices:
  - {resource: nvidia.com/gpu, ids: [gpu-2], numa: [2]}
"""


def test_the_documented_example() -> None:
    """The module's example reads as one container holding gpu-2 on NUMA node 2."""
    expected = DeviceAssignments.of(
        {
            ContainerKey(namespace="ml", pod="trainer", container="train"): [
                DeviceGroup(resource="nvidia.com/gpu", ids=("gpu-2",), numa=(2,))
            ]
        }
    )
    assert expected == parse_devices(yaml.safe_load(DOCUMENTED_EXAMPLE))


def test_defaults_and_empty_documents(tmp_path: Path) -> None:
    """The namespace defaults to "default", numa to none; an empty file holds no devices."""
    path = tmp_path / "devices.yaml"
    path.write_text("- {pod: p, container: c, devices: [{resource: x.io/nic, ids: [vf-1, vf-0]}]}\n")
    value = load_devices(path)
    assert (DeviceGroup(resource="x.io/nic", ids=("vf-1", "vf-0"), numa=()),) == value.for_container(
        "default", "p", "c"
    )
    path.write_text("")
    assert DeviceAssignments() == load_devices(path)


ENTRY: dict[str, Any] = {
    "namespace": "ml",
    "pod": "p",
    "container": "c",
    "devices": [{"resource": "v.io/gpu", "ids": ["g0"], "numa": [0]}],
}


def with_(**changes: Any) -> list[dict[str, Any]]:
    entry = {**ENTRY, **changes}
    return [{k: v for k, v in entry.items() if v is not None}]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"pod": "p"}, "f: expected a list of entries (namespace, pod, container, devices)"),
        (["x"], "f: entry 0: 'x' is not a mapping of namespace, pod, container and devices"),
        (with_(pod=None), "f: entry 0.pod: None is not a non-empty string"),
        (with_(gpu=1), "f: entry 0 (ml/p container c): unknown key 'gpu' (known: container, devices, namespace, pod)"),
        (with_(devices=[]), "f: entry 0 (ml/p container c).devices: [] is not a non-empty list"),
        (
            with_(devices=[{"resource": "gpu", "ids": ["g"]}]),
            (
                "f: entry 0 (ml/p container c).devices[0].resource: 'gpu' is not an extended resource name such as "
                "vendor.com/gpu"
            ),
        ),
        (
            with_(devices=[{"resource": "v.io/gpu", "ids": []}]),
            "f: entry 0 (ml/p container c).devices[0].ids: [] is not a non-empty list of device ids",
        ),
        (
            with_(devices=[{"resource": "v.io/gpu", "ids": ["g", "g"]}]),
            "f: entry 0 (ml/p container c).devices[0].ids: ['g', 'g'] names a device twice",
        ),
        (
            with_(devices=[{"resource": "v.io/gpu", "ids": ["g"], "numa": [0, -1]}]),
            "f: entry 0 (ml/p container c).devices[0].numa[1]: -1 is not a NUMA node id",
        ),
        (
            with_(devices=[{"resource": "v.io/gpu", "ids": ["g"], "numa": 1}]),
            "f: entry 0 (ml/p container c).devices[0].numa: 1 is not a list of NUMA node ids",
        ),
        (
            with_(devices=[{"resource": "v.io/gpu", "ids": ["g"], "count": 1}]),
            "f: entry 0 (ml/p container c).devices[0]: unknown key 'count' (known: numa, ids, resource)",
        ),
        (with_() + with_(), "f: entry 1 (ml/p container c): the same container as entry 0"),
        (
            with_() + with_(container="d"),
            "f: entry 1 (ml/p container d): v.io/gpu device 'g0' is already held by entry 0 (ml/p container c)",
        ),
    ],
)
def test_bad_entries_are_named(data: Any, message: str) -> None:
    """Each kind of mistake is refused with the file, the entry (index and who) and the field."""
    with pytest.raises(DevicesFileError) as caught:
        parse_devices(data, "f")
    assert message == str(caught.value)


def test_unreadable_and_non_yaml_files(tmp_path: Path) -> None:
    """A missing file and a file that is not YAML are refused with the path named."""
    with pytest.raises(DevicesFileError) as caught:
        load_devices(tmp_path / "none.yaml")
    assert f"{tmp_path / 'none.yaml'}: cannot read the devices file: No such file or directory" == str(caught.value)
    bad = tmp_path / "bad.yaml"
    bad.write_text("- [unclosed\n")
    with pytest.raises(DevicesFileError) as caught:
        load_devices(bad)
    assert str(caught.value).startswith(f"{bad}: not valid YAML: ")
