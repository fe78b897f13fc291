"""Issue 22, finding 2: one unexpected input inside a pass never stops the agent.

Each case crash-looped the agent before (a traceback and exit 1, every restart, no pod pinned meanwhile). Now
only the start-up checks may stop it, with one line and exit 2; everything later is caught at the boundary of
the pass, pod, bundle, PodResources answer or cgroup directory it belongs to (``agent/fault_boundary.py``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.agentfixture import AgentNode, make_node
from tests.support.podfactory import container, make_pod


@pytest.fixture
def node(tmp_path: Path) -> AgentNode:
    return make_node(tmp_path)


def _gu(name: str) -> dict[str, object]:
    return make_pod(name, containers=[container("app", cpu="2", memory="1Gi")], states={"app": "running"})


@pytest.mark.parametrize("which", ["kubepods.slice", "kubepods.slice/kubepods-burstable.slice"])
def test_symlinked_kubepods_or_qos_directory_is_one_line_and_exit_2(node: AgentNode, which: str) -> None:
    """A kubepods or QoS directory that is a symlink out of the cgroup root: exit 2, one line, no traceback."""
    target = node.tree.root / which
    moved = node.base / "elsewhere"
    shutil.move(target, moved)
    target.symlink_to(moved)
    node.add_pod(_gu("a"))
    result = node.cli("--once")
    stderr = [line for line in result.stderr.splitlines() if not line.startswith("{")]
    assert (2, 1) == (result.returncode, len(stderr)), result.stderr[-2000:]
    assert stderr[0].startswith(f"podpin run: cgroups: cgroup path {target} resolves to {moved}, outside"), stderr
