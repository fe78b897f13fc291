"""The cluster node's container runtime is chosen from the runtime matrix (no cluster needed)."""

from __future__ import annotations

import pytest

from tests.cluster.node import cluster_runtime


@pytest.mark.parametrize(
    ("value", "name", "config_version"),
    [("", "containerd-1.7", 2), ("containerd-1.7", "containerd-1.7", 2), ("containerd-2.4", "containerd-2.4", 3)],
)
def test_the_node_runtime_comes_from_the_matrix(value: str, name: str, config_version: int) -> None:
    """``PODPIN_CLUSTER_RUNTIME`` names a runtime of the matrix; unset, the node runs Debian's containerd 1.7."""
    choice = cluster_runtime({"PODPIN_CLUSTER_RUNTIME": value})
    assert (name, config_version) == (choice.name, choice.config_version)


def test_an_unknown_runtime_is_refused_with_the_known_ones() -> None:
    """A name outside the matrix fails before any boot, naming the names it knows."""
    with pytest.raises(ValueError, match=r"'containerd-1.6' is not in the runtime matrix: \['containerd-1.7'"):
        cluster_runtime({"PODPIN_CLUSTER_RUNTIME": "containerd-1.6"})
