"""Following the configuration file while the agent runs: live keys taken, the others named as needing a restart."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from agent.config_follow import ConfigFollower
from agent.node_config import node_config

BASE: dict[str, Any] = {
    "nodeName": "n1",
    "systemReserved": {"cpu": "1"},
    "reconcilePeriod": "10s",
    "kubeletConfigPath": "",
}


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _write(path: Path, **changes: Any) -> None:
    path.write_text(yaml.safe_dump({**BASE, **changes}))
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # a new time, even within one tick


def _follower(tmp_path: Path) -> tuple[Path, ConfigFollower, Clock]:
    path = tmp_path / "config.yaml"
    _write(path)
    clock = Clock()
    return path, ConfigFollower(path, node_config(path, env={}), env={}, clock=clock), clock


def test_a_live_key_is_taken_and_a_restart_key_named(tmp_path: Path) -> None:
    """reconcilePeriod changes at once; topologyManagerPolicy waits for a restart and is named, the running value
    kept."""
    path, follower, clock = _follower(tmp_path)
    _write(path, reconcilePeriod="2s", topologyManagerPolicy="single-numa-node")
    clock.now += 10
    change = follower.look()
    assert change is not None
    assert (("reconcilePeriod",), ("topologyManagerPolicy",), 2.0, "best-effort") == (
        change.live,
        change.restart,
        follower.current.config.reconcile_period,
        str(follower.current.config.planner.topology_manager_policy),
    )


def test_nothing_before_the_period_and_a_restart_key_said_once(tmp_path: Path) -> None:
    """The file is looked at once per reconcilePeriod; a pending restart is said once, and cleared when the key is
    changed back."""
    path, follower, clock = _follower(tmp_path)
    _write(path, cgroupWatch="poll")
    clock.now += 5
    early = follower.look()
    clock.now += 5
    first = follower.look()
    _write(path, cgroupWatch="poll", logLevel="info")  # unchanged values, a new file
    clock.now += 10
    again = follower.look()
    _write(path)
    clock.now += 10
    back = follower.look()
    assert (None, ("cgroupWatch",), None, ((), ())) == (
        early,
        first.restart if first is not None else None,
        again,
        (back.restart, follower.pending_restart) if back is not None else None,
    )


def test_a_file_that_no_longer_loads_changes_nothing(tmp_path: Path) -> None:
    """A broken file is one error, said once; the agent keeps what it runs with."""
    path, follower, clock = _follower(tmp_path)
    _write(path, reconcilePeriod="0s")
    clock.now += 10
    first = follower.look()
    path.write_text(path.read_text() + "\n")
    clock.now += 10
    second = follower.look()
    assert first is not None
    assert (True, None, 10.0) == (
        "reconcilePeriod: '0s' must be positive" in (first.error or ""),
        second,
        follower.current.config.reconcile_period,
    )


def test_a_relabelled_node_changes_group(tmp_path: Path) -> None:
    """The node's labels are read again once per podResyncPeriod: moved into a group, its section's keys change."""
    path = tmp_path / "config.yaml"
    data = {**BASE, "podResyncPeriod": "30s", "groups": {"big": {"reconcilePeriod": "3s", "cgroupWatch": "poll"}}}
    path.write_text(yaml.safe_dump(data))
    labels: dict[str, str] = {}
    clock = Clock()
    follower = ConfigFollower(
        path, node_config(path, env={}, labels_of=lambda _: labels), env={}, labels_of=lambda _: labels, clock=clock
    )
    labels["podpin.io/config-group"] = "big"
    clock.now += 10
    early = follower.look()
    clock.now += 30
    change = follower.look()
    assert change is not None
    assert (None, ("reconcilePeriod",), ("cgroupWatch", "groups"), 3.0) == (
        early,
        change.live,
        change.restart,
        follower.current.config.reconcile_period,
    )
