"""Fixtures of the real-cluster tests: the built programs (missing: the test fails, naming the command), the
control plane."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster import build
from tests.cluster.controlplane import ControlPlane
from tests.cluster.node import GuestNode, guest_modules
from tests.cluster.procs import require_setup
from tests.vm.harness import require_vm


@pytest.fixture(scope="session")
def k8s_version() -> str:
    """The Kubernetes version under test, built (else the test fails naming the build command)."""
    chosen = build.version()
    if not build.built(chosen):
        require_setup(f"Kubernetes {chosen} is not built in {build.build_dir(chosen)}: run tests/cluster/k8s-build.sh")
    return chosen


@pytest.fixture(scope="module")
def control_plane(k8s_version: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A started control plane (no node), stopped after the module."""
    with ControlPlane(Path(tmp_path_factory.mktemp("controlplane")), version=k8s_version) as plane:
        yield plane


@pytest.fixture(scope="module")
def cluster(k8s_version: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, GuestNode]]:
    """The control plane and one Ready guest node (the default NodeSpec), stopped after the module."""
    require_vm()
    modules = guest_modules()
    if modules is not None:
        require_setup(modules)
    workdir = Path(tmp_path_factory.mktemp("cluster"))
    with ControlPlane(workdir / "plane", version=k8s_version) as plane:
        node = GuestNode(plane, workdir / "node")
        try:
            node.start()
            yield plane, node
        finally:
            node.stop()
