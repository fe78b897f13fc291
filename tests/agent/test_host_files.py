"""Issue 22, findings 3 and 4: files podpin opens under host directories it does not own (``agent/hostfile.py``).

A planted ``podpin.lock`` symlink made ``podpin run``, ``podpin reset`` and ``podpin reset --dry-run`` truncate
and overwrite the file it pointed to; a FIFO in place of the checkpoint blocked the agent forever at start (no
log line, no HTTP server). Now each is refused: the lock with a warning (the agent runs, the reset goes on, as
with any state directory that cannot hold the lock), the checkpoint set aside like any unreadable one.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from agent.agent_lock import LOCK_NAME
from agent.resetter import ResetOptions, reset_node
from agent.state_store import CHECKPOINT_NAME
from tests.support.agentfixture import AgentNode, json_lines, make_node
from tests.support.podfactory import container, make_pod

POD = make_pod("a", containers=[container("app", cpu="2", memory="1Gi")], states={"app": "running"})


@pytest.fixture
def node(tmp_path: Path) -> AgentNode:
    made = make_node(tmp_path)
    made.add_pod(POD)
    return made


def _plant(node: AgentNode) -> Path:
    victim = node.base / "victim"
    victim.write_text("precious\n")
    node.state_dir.mkdir(parents=True, exist_ok=True)
    (node.state_dir / LOCK_NAME).unlink(missing_ok=True)
    (node.state_dir / LOCK_NAME).symlink_to(victim)
    return victim


def _reset(node: AgentNode, *, dry_run: bool) -> tuple[int, str]:
    out = io.StringIO()
    options = ResetOptions(
        config=node.config_path,
        pods_dir=node.pods_dir,
        sysfs_root=node.sysfs,
        cgroup_root=node.tree.root,
        state_dir=node.state_dir,
        env={},
        dry_run=dry_run,
    )
    status = reset_node(options, file_ops=node.tree.ops(), out=out, err=io.StringIO())
    return status, out.getvalue()


def test_run_leaves_a_planted_lock_symlinks_target_alone(node: AgentNode) -> None:
    """``podpin run --once`` with ``podpin.lock`` a symlink: the target keeps its content, a warning says why, the
    pod is pinned."""
    victim = _plant(node)
    result = node.cli("--once")
    warnings = [line for line in json_lines(result.stderr) if line.get("event") == "agent.lock_failed"]
    assert (0, "precious\n", "1,17") == (result.returncode, victim.read_text(), node.cpus(POD, "app"))
    assert [True] == ["Too many levels of symbolic links" in line["error"] for line in warnings]


@pytest.mark.parametrize("dry_run", [False, True])
def test_reset_leaves_a_planted_lock_symlinks_target_alone(node: AgentNode, dry_run: bool) -> None:
    """``podpin reset`` and ``--dry-run`` with ``podpin.lock`` a symlink: the target keeps its content; the reset
    says it cannot take the lock and goes on."""
    node.run_once()
    victim = _plant(node)
    status, out = _reset(node, dry_run=dry_run)
    assert (0, "precious\n") == (status, victim.read_text())
    assert "cannot take the node's lock" in out


def test_a_fifo_checkpoint_is_set_aside_and_the_agent_starts(node: AgentNode) -> None:
    """A FIFO in place of the checkpoint: the agent does not wait on it; it sets it aside, rebuilds from the
    cgroups and pins the pod."""
    node.state_dir.mkdir(parents=True)
    os.mkfifo(node.state_dir / CHECKPOINT_NAME)
    result = node.cli("--once", timeout=30)
    corrupt = [line for line in json_lines(result.stderr) if line.get("event") == "state.corrupt"]
    assert (0, "1,17") == (result.returncode, node.cpus(POD, "app")), result.stderr[-2000:]
    assert [f"{node.state_dir / CHECKPOINT_NAME}: cannot read: not a regular file"] == [c["error"] for c in corrupt]
