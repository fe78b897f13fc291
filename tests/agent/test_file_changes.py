"""After podpin pinned a container, a rewrite of its ``cpu.max`` (runc applying the OCI spec's quota in bundle
mode, ``runc update``) is repaired at once through the watcher's file-change event, not at the next full pass.

Each test runs the real agent (real inotify) over a fixture cgroup tree and a containerd runtime root, with a
``reconcilePeriod`` of a minute, so a repair within a second or two can only come from the file-change path.
The rewrites come from the test, as another process's would: plain files raise IN_MODIFY as cgroup files do
(``tests/vm/test_kernel_facts.py`` shows it for cgroup2).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from agent.runner import Agent
from tests.support.agentfixture import AgentNode, lines, make_node, running, sample, wait_until
from tests.support.bundles import bundle_path, containerd_annotations, write_bundle
from tests.support.podfactory import runtime_id, waiting_pod

QUOTA = "100000 100000"
"""What runc writes from the OCI spec (a CPU's quota per 100 ms period), over podpin's ``max``."""
UNLIMITED = "max 100000"


def _pinned_container(node: AgentNode, agent: Agent, web: Mapping[str, Any]) -> Path:
    """``web`` admitted, its container ``app`` named from its bundle, its cgroup appeared (with its files, in one
    rename) and pinned by podpin: its own CPUs, no CFS quota."""
    wait_until(lambda: agent.reconciler.planner.is_admitted(web["metadata"]["uid"]), what="web admitted")
    rid = runtime_id(web, "app")
    write_bundle(node.runtime_root, rid, containerd_annotations(web["metadata"]["uid"], "app"))
    pod = node.pod_cgroup(web)
    staging = node.tree.mkcgroup(pod / f"staging-{rid[:8]}", procs="4242\n")
    (staging / "cpu.max").write_text(f"{QUOTA}\n")
    path = pod / node.tree.container_name(rid)
    os.rename(staging, path)
    wait_until(lambda: (node.read(path), node.read(path, "cpu.max")) == ("1,17", UNLIMITED), what="app pinned")
    return path


def _node(tmp_path: Path) -> tuple[AgentNode, dict[str, Any]]:
    node = make_node(tmp_path)
    node.write_config(reconcilePeriod="60s")
    web = waiting_pod("web")
    node.add_pod(web)
    bundle_path(node.runtime_root, "0" * 64).parent.parent.mkdir(parents=True, exist_ok=True)
    return node, web


def _repairs_are(agent: Agent, count: float) -> bool:
    return sample(agent, "podpin_drift_repairs_total") == count


def _rewrite(node: AgentNode, path: Path, value: str) -> None:
    """Another writer's ``echo VALUE > cpu.max``, replacing the value whole as the kernel does (the fixture's lock:
    the agent never reads the empty file between the truncation and the data)."""
    node.tree.preset(path, "cpu.max", f"{value}\n")


def test_quota_rewritten_after_the_pin_is_repaired_at_once_as_drift(tmp_path: Path) -> None:
    """runc rewrites ``cpu.max`` to the spec's quota after podpin pinned the exclusive container: podpin writes
    ``max`` back without a full pass (that is a minute away; no sweep ran), says so as drift (``cgroup.drift_repaired``,
    the drift metric), and observes no second pin latency (only a new cgroup has one)."""
    node, web = _node(tmp_path)
    with capture_logs() as logs, running(node.agent()) as agent:
        path = _pinned_container(node, agent, web)
        wait_until(lambda: sample(agent, "podpin_pin_latency_seconds_count") == 1.0, what="the pin observed")
        sweeps = agent.reconciler.sweeps
        began = time.monotonic()
        _rewrite(node, path, QUOTA)
        wait_until(lambda: node.read(path, "cpu.max") == UNLIMITED, timeout=10.0, what="cpu.max repaired")
        took = time.monotonic() - began
        wait_until(lambda: sample(agent, "podpin_drift_repairs_total") == 1.0, what="the repair counted")
        actual = (
            took < 10.0,
            agent.reconciler.sweeps == sweeps,
            sample(agent, "podpin_pin_latency_seconds_count"),
            node.read(path),
        )
    repaired = [e["files"] for e in lines(logs, "cgroup.drift_repaired", path=str(path))]
    assert ((True, True, 1.0, "1,17"), [{"cpu.max": {"old": QUOTA, "new": UNLIMITED, "result": "ok"}}]) == (
        actual,
        repaired,
    ), took


def test_a_writer_that_insists_gets_one_repair_a_second_and_loses_when_it_stops(tmp_path: Path) -> None:
    """Something rewrites the quota every 5 ms for 2 s (a write fight): podpin does not spin — a few repairs
    at once, then about one a second, and a change it defers runs no pass (a few dozen passes at most for
    the hundreds of events) — and once the other writer stops, podpin's value is back without a full pass (a
    minute away), within a second or so when the machine is idle (the bound here leaves room for a loaded CI)."""
    node, web = _node(tmp_path)
    with running(node.agent()) as agent:
        path = _pinned_container(node, agent, web)
        sweeps, passes = agent.reconciler.sweeps, agent.reconciler.passes
        stop = threading.Event()

        def insist() -> None:
            while not stop.wait(0.005):
                _rewrite(node, path, QUOTA)

        fighter = threading.Thread(target=insist, daemon=True)
        fighter.start()
        time.sleep(2.0)
        stop.set()
        fighter.join()
        during = sample(agent, "podpin_drift_repairs_total") or 0.0
        passes = agent.reconciler.passes - passes
        stopped = time.monotonic()
        wait_until(lambda: node.read(path, "cpu.max") == UNLIMITED, timeout=10.0, what="podpin's value back")
        back = time.monotonic() - stopped
        swept = agent.reconciler.sweeps - sweeps
    assert (True, True, True, 0) == (1 <= during <= 4 + 3, passes <= 30, back < 10.0, swept), (during, passes, back)


def test_a_container_whose_files_cannot_be_watched_is_said_once_and_counted(tmp_path: Path) -> None:
    """The watcher could not watch a container's files (the inotify watch limit): the agent says so once
    (``cgroup.file_watch_failed``, with the reason and what it means) and ``podpin_cgroup_unwatched_containers``
    counts them, however many cgroup events follow (two rewrites here, each repaired, so each was handled)."""
    node, web = _node(tmp_path)
    with capture_logs() as logs, running(node.agent()) as agent:
        path = _pinned_container(node, agent, web)
        before = sample(agent, "podpin_cgroup_unwatched_containers")
        reason = "/sys/fs/cgroup/kubepods/pod1/abc: No space left on device"
        agent.watcher.unwatched_containers, agent.watcher.unwatched_reason = 2, reason
        for repairs in (1.0, 2.0):
            _rewrite(node, path, QUOTA)
            wait_until(partial(_repairs_are, agent, repairs), what=f"repair {repairs}")
        said = lines(logs, "cgroup.file_watch_failed")
        after = sample(agent, "podpin_cgroup_unwatched_containers")
    assert (0.0, 2.0, 1, reason) == (before, after, len(said), said[0]["error"])
