"""The only reader of the kubelet test vectors (``kubelet-vectors/*.json``).

The directory is ``$KUBELET_VECTORS`` when set, else ``../shared/kubelet-vectors``
next to the checkout when present, else the project's own copy in
``tests/data/kubelet-vectors`` (so the suite runs on a clean machine). A file, or a
topology fixture, that directory lacks is read from the project's copy: files
transcribed later live there first. Each case becomes one pytest parameter whose
id is the case's ``id``; code under test never sees ids, only the inputs.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from agent.cpuset import CPUSet
from agent.topology.model import CPU, Counters, NUMANode, Topology
from tests.support.paths import REPO

_OWN_COPY = REPO / "tests" / "data" / "kubelet-vectors"
_SHARED = REPO.parent / "shared" / "kubelet-vectors"


def vectors_dir() -> Path:
    """Where the vectors are read from (see the module docstring)."""
    named = os.environ.get("KUBELET_VECTORS")
    if named:
        return Path(named)
    return _SHARED if _SHARED.is_dir() else _OWN_COPY


def _path(name: str) -> Path:
    found = vectors_dir() / name
    return found if found.is_file() else _OWN_COPY / name


def names() -> list[str]:
    """Every vectors file: those of :func:`vectors_dir`, and those only the project's copy has."""
    return sorted({p.name for p in vectors_dir().glob("*.json")} | {p.name for p in _OWN_COPY.glob("*.json")})


@cache
def load(name: str) -> Any:
    """The parsed JSON of one vectors file (from the project's copy when :func:`vectors_dir` lacks it)."""
    return json.loads(_path(name).read_text())


@cache
def _own(name: str) -> Any:
    return json.loads((_OWN_COPY / name).read_text())


def topology_names() -> list[str]:
    """Every fixture of ``topologies.json``, the project's copy's included."""
    return sorted(set(load("topologies.json")) | set(_own("topologies.json")))


def cases(name: str, *, kind: str | None = None, key: str | None = None) -> list[Any]:
    """``pytest.param`` objects for the cases of a file, each with its case id.

    Args:
        name: the file name, e.g. ``"take_by_topology.json"``.
        kind: keep only cases whose ``kind`` equals this.
        key: for files that are an object of lists, the list to use.
    """
    data = load(name)
    items = data[key] if key is not None else data
    return [pytest.param(case, id=case["id"]) for case in items if kind is None or case.get("kind") == kind]


@cache
def topology(name: str) -> Topology:
    """A named kubelet fixture topology from ``topologies.json`` as a :class:`Topology`.

    The declared counters are kept as given; ``uncore`` becomes the L3 id.
    """
    fixtures = load("topologies.json")
    fixture = fixtures[name] if name in fixtures else _own("topologies.json")[name]
    cpus = tuple(
        CPU(id=c["cpu"], core=c["core"], socket=c["socket"], numa=c["numa"], l3=c["uncore"])
        for c in sorted(fixture["cpus"], key=lambda c: c["cpu"])
    )
    by_node: dict[int, list[int]] = {}
    for cpu in cpus:
        by_node.setdefault(cpu.numa or 0, []).append(cpu.id)
    nodes = tuple(NUMANode(id=n, cpus=CPUSet(ids)) for n, ids in sorted(by_node.items()))
    declared = fixture["declared"]
    counters = Counters(
        num_cpus=declared["num_cpus"],
        num_sockets=declared["num_sockets"],
        num_cores=declared["num_cores"],
        num_numa_nodes=declared["num_numa_nodes"],
        num_uncore_caches=declared["num_uncore_cache"],
    )
    return Topology(cpus=cpus, numa_nodes=nodes, declared=counters)


def cpuset(text: str) -> CPUSet:
    """A cpulist from a vector as a :class:`CPUSet`."""
    return CPUSet.parse(text)
