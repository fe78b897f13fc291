"""Every case of every kubelet vector file, each as its own test named by its case id.

The directory is ``$KUBELET_VECTORS`` (default ``../shared/kubelet-vectors``, then
the project's copy; see ``tests/support/vectors.py``). Each ``<name>.json`` is run by
``tests/support/vector_runners/<name>.py``, whose ``run(case)`` asserts the kubelet's
expected outcome; a file without a runner fails rather than being skipped, so a
new vector file can never pass unnoticed.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from tests.support import vectors

_FIXTURE_FILES = {"topologies.json"}


def _all_cases() -> list[Any]:
    params: list[Any] = []
    for name in vectors.names():
        if name in _FIXTURE_FILES:
            continue
        stem = name.removesuffix(".json")
        data = vectors.load(name)
        groups = data.items() if isinstance(data, dict) else [(None, data)]
        for group, items in groups:
            for case in items:
                case_id = case["id"] if group is None else f"{group}:{case['id']}"
                params.append(pytest.param(stem, group, case, id=f"{stem}:{case_id}"))
    return params


@pytest.mark.parametrize(("file_stem", "group", "case"), _all_cases())
def test_kubelet_vector(file_stem: str, group: str | None, case: dict[str, Any]) -> None:
    """The allocator reproduces the kubelet's expected result for this case."""
    runner = importlib.import_module(f"tests.support.vector_runners.{file_stem}")
    runner.run(case, group)


def test_vectors_directory_has_cases() -> None:
    """The vectors directory exists and holds the files the allocator must pass."""
    expected = {"take_by_topology.json", "static_policy.json", "topology_merge.json", "topologies.json"}
    expected |= {"cpu_hints.json", "device_hints.json"}
    assert expected <= set(vectors.names())
