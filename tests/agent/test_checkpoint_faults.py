"""The checkpoint under faults, end to end: failed saves are retried and reported, a restart over a stale or
unparseable checkpoint moves no running container, debris and symlinks are dealt with at start.

The contract is ``docs/design.md``, "Restart". Each test names what the code before these changes did.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from agent.agent_lock import LOCK_NAME
from agent.cpuset import CPUSet
from agent.runner import Agent
from agent.state_store import CHECKPOINT_NAME, DiskOps, StateStore
from tests.support.agentfixture import AgentNode, fetch, lines, make_node, running, sample, wait_until
from tests.support.podfactory import container, make_pod


def gu(name: str, cpus: str = "2", *, ts: int = 1) -> dict[str, Any]:
    """A Guaranteed pod with one running container ``app``."""
    return make_pod(
        name,
        containers=[container("app", cpu=cpus, memory="1Gi")],
        states={"app": "running"},
        creation_timestamp=f"2026-01-01T00:00:{ts:02d}Z",
    )


class Disk(DiskOps):
    """The checkpoint disk; ``full`` makes every write fail with ENOSPC (a test flips it)."""

    def __init__(self) -> None:
        self.full = False

    def write(self, fd: int, data: bytes) -> int:
        if self.full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return super().write(fd, data)


@pytest.fixture
def node(tmp_path: Path) -> AgentNode:
    return make_node(tmp_path)


def _agent(node: AgentNode, disk: DiskOps | None = None, **changes: Any) -> Agent:
    """An in-process agent over the kernel emulation, writing its checkpoint through ``disk`` when given."""
    if disk is None:
        return node.agent(**changes)
    agent = Agent(node.options(**changes), file_ops=node.tree.ops(), disk_ops=disk)
    agent.prepare()
    return agent


def _uids(node: AgentNode) -> set[str]:
    return set(node.checkpoint()["pods"])


def test_failed_save_is_retried_every_pass_and_reported(node: AgentNode) -> None:
    """While the disk is full: pinning goes on, /readyz is 503 with the errno, the metrics say so, one log line;
    when it has room again the next pass saves, and everything says so.

    Failed before the fix: the failure was logged once, never retried, and /readyz stayed 200.
    """
    first, second = gu("first", ts=1), gu("second", ts=2)
    node.add_pod(first)
    disk = Disk()
    with capture_logs() as logs, running(_agent(node, disk)) as agent:
        base = f"http://{agent.metrics_address}"
        wait_until(lambda: fetch(base + "/readyz")[0] == 200, what="ready")
        disk.full = True
        node.add_pod(second)
        wait_until(lambda: node.cpus(second, "app") == "2,18", what="second pinned while the disk is full")
        wait_until(
            lambda: (sample(agent, "podpin_checkpoint_write_errors_total", errno="ENOSPC") or 0.0) >= 3.0,
            what="the save tried again on two more passes",
        )
        failing = (
            fetch(base + "/readyz"),
            sample(agent, "podpin_checkpoint_write_errors_total", errno="ENOSPC") or 0.0,
            sample(agent, "podpin_checkpoint_stale"),
            _uids(node),
        )
        disk.full = False
        wait_until(lambda: fetch(base + "/readyz")[0] == 200, what="ready again")
        recovered = (sample(agent, "podpin_checkpoint_stale"), _uids(node))
    status, reason = failing[0]
    assert (
        503,
        True,
        True,
        1.0,
        {first["metadata"]["uid"]},
        (0.0, {first["metadata"]["uid"], second["metadata"]["uid"]}),
        [("ENOSPC", 1)],
        1,
    ) == (
        status,
        reason.startswith(f"the checkpoint cannot be saved (ENOSPC: {node.state_dir}: No space left on device; "),
        failing[1] >= 3.0,  # the pass that admitted `second`, then one per pass
        failing[2],
        failing[3],
        recovered,
        [(e["errno"], e["attempts"]) for e in lines(logs, "state.checkpoint_failed")],
        len(lines(logs, "state.checkpoint_recovered")),
    )


def test_state_dir_replaced_by_a_file_is_retried_once_it_is_back(node: AgentNode) -> None:
    """Without any test seam: the state directory turns into a file; the save fails (EEXIST), /readyz says so;
    once the directory is back the next pass writes the checkpoint with the new pod.

    Failed before the fix: /readyz stayed 200 and the checkpoint was not written until some other change.
    """
    first, second = gu("first", ts=1), gu("second", ts=2)
    node.add_pod(first)
    with running(_agent(node)) as agent:
        base = f"http://{agent.metrics_address}"
        wait_until(lambda: fetch(base + "/readyz")[0] == 200, what="ready")
        shutil.rmtree(node.state_dir)
        node.state_dir.write_text("not a directory\n")
        node.add_pod(second)
        wait_until(lambda: fetch(base + "/readyz")[0] == 503, what="not ready")
        reason = fetch(base + "/readyz")[1]
        node.state_dir.unlink()
        wait_until(lambda: fetch(base + "/readyz")[0] == 200, what="ready again")
    assert (True, {first["metadata"]["uid"], second["metadata"]["uid"]}) == (
        reason.startswith("the checkpoint cannot be saved (EEXIST: "),
        _uids(node),
    )


def test_restart_over_a_stale_checkpoint_moves_no_running_container(node: AgentNode, tmp_path: Path) -> None:
    """The checkpoint could not be saved when ``recent`` was pinned (the state directory was unusable), so the
    checkpoint on disk lacks it; after a restart an older pod bound meanwhile must not take ``recent``'s CPUs.

    Failed before the fix: the restarted agent trusted the stale checkpoint and admitted the new pods in creation
    order, so ``early`` (created first) took 2,18 from the running ``recent``, which moved to 3,19.
    """
    steady, recent, early = gu("steady", ts=5), gu("recent", ts=6), gu("early", ts=1)
    node.add_pod(steady)
    node.run_once()
    saved = tmp_path / "saved-state"
    shutil.move(node.state_dir, saved)
    node.state_dir.write_text("not a directory\n")
    node.add_pod(recent)
    node.run_once()
    node.state_dir.unlink()
    shutil.move(saved, node.state_dir)
    before = (node.cpus(steady, "app"), node.cpus(recent, "app"), _uids(node))
    node.add_pod(early)
    with capture_logs() as logs:
        node.run_once()
    assert (
        ("1,17", "2,18", {steady["metadata"]["uid"]}),
        {"steady": "1,17", "recent": "2,18", "early": "3,19"},
        [["default/recent"]],
    ) == (
        before,
        {raw["metadata"]["name"]: node.cpus(raw, "app") for raw in (steady, recent, early)},
        [e["pods"] for e in lines(logs, "state.behind_cgroups")],
    )


def test_nested_brackets_checkpoint_is_set_aside_and_rebuilt(node: AgentNode) -> None:
    """100,000 opening brackets in the checkpoint: set aside, rebuilt from the cgroups, the pod keeps its CPUs.

    Failed before the fix: an uncaught RecursionError stopped the start-up (a crash loop).
    """
    web = gu("web")
    node.add_pod(web)
    node.run_once()
    (node.state_dir / CHECKPOINT_NAME).write_text("[" * 100_000)
    with capture_logs() as logs:
        agent = node.run_once()
    aside = sorted(p.name for p in node.state_dir.glob(f"{CHECKPOINT_NAME}.corrupt-*"))
    assert (1, 1.0, "1,17", [web["metadata"]["uid"]], 1) == (
        len(aside),
        sample(agent, "podpin_checkpoints_set_aside_total", reason="corrupt"),
        node.cpus(web, "app"),
        list(node.checkpoint()["pods"]),
        len(lines(logs, "state.rebuilt_from_cgroups")),
    )


def test_temp_files_of_a_crash_are_removed_at_start(node: AgentNode) -> None:
    """A 0-byte temp file left by a crash (or a failed write) is removed at start, with a log line.

    Failed before the fix: it stayed forever (and with pid 1 in a container, the next crash reused its name).
    """
    node.state_dir.mkdir()
    stale = node.state_dir / f".{CHECKPOINT_NAME}.1.tmp"
    stale.write_bytes(b"")
    node.add_pod(gu("web"))
    with capture_logs() as logs:
        node.run_once()
    assert (sorted([CHECKPOINT_NAME, LOCK_NAME]), [[stale.name]]) == (
        sorted(os.listdir(node.state_dir)),
        [e["files"] for e in lines(logs, "state.temp_removed")],
    )


def test_symlinked_state_dir_is_refused_at_start(node: AgentNode, tmp_path: Path) -> None:
    """A state directory that is a symlink stops ``podpin run`` with one line (exit 2); nothing is written there."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    node.state_dir.symlink_to(elsewhere)
    node.add_pod(gu("web"))
    result = node.cli("--once")
    message = (
        f"podpin run: stateDir: {node.state_dir} is a symbolic link; the checkpoint is kept only in a real directory"
    )
    assert (2, [message], []) == (
        result.returncode,
        [line for line in result.stderr.splitlines() if not line.startswith("{")],
        os.listdir(elsewhere),
    )


def test_checkpoint_disagreeing_with_a_cgroup_is_reported(node: AgentNode) -> None:
    """A checkpointed exclusive set that differs from what the container's cgroup holds is logged at start.

    The checkpoint is still what the planner keeps (a restart after a hotplug or configuration change, where
    the two legitimately differ, is the next step's); the point here is that the disagreement is never silent.
    """
    web = gu("web")
    node.add_pod(web)
    node.run_once()
    store = StateStore(node.state_dir)
    state = store.load()
    assert state is not None
    cpu = state.cpu.copy()
    uid = web["metadata"]["uid"]
    cpu.set(uid, "app", CPUSet.parse("3,19"))
    cpu.default = (cpu.default | CPUSet.parse("1,17")) - CPUSet.parse("3,19")
    store.save(dataclasses.replace(state, cpu=cpu))
    with capture_logs() as logs:
        node.run_once()
    assert [{f"{uid}/app": {"checkpoint": "3,19", "cgroup": "1,17"}}] == [
        e["containers"] for e in lines(logs, "state.disagrees_with_cgroups")
    ]


def test_restart_admits_the_pods_holding_their_cpus_before_a_rejected_earlier_one(node: AgentNode) -> None:
    """The soak's sequence (issue 22): while saves fail, ``early`` (created first) is rejected, two checkpointed
    pods go and ``recent`` is pinned; after a restart over that checkpoint, ``recent`` keeps its CPUs and ``early``
    is still refused.

    Failed before the fix: the restarted agent saw ``early`` on its cgroups too (its pod cgroup holds the node
    shared pool) and admitted the pods it saw in creation order, so ``early`` took ``recent``'s CPUs and
    ``recent`` was refused (``available=0``) and moved to the node shared pool.
    """
    filler, g1, g2 = gu("filler", "27", ts=9), gu("g1", "1", ts=7), gu("g2", "2", ts=8)
    early, recent = gu("early", "4", ts=1), gu("recent", "2", ts=10)
    for raw in (filler, g1, g2):
        node.add_pod(raw)
    node.run_once()
    saved = _uids(node)
    disk = Disk()

    def planned(agent: Agent, raw: dict[str, Any]) -> bool | None:
        plan = agent.reconciler.plan
        pod = next((p for p in plan.pods if p.uid == raw["metadata"]["uid"]), None) if plan is not None else None
        return pod.admitted if pod is not None else None

    with running(_agent(node, disk)) as agent:
        disk.full = True
        node.add_pod(early)
        wait_until(lambda: planned(agent, early) is False, what="early refused")
        node.remove_pod(g1)
        node.add_pod(recent)
        wait_until(lambda: len(CPUSet.parse(node.cpus(recent, "app"))) == 2, what="recent pinned")
        node.remove_pod(g2)
        wait_until(lambda: planned(agent, g2) is None, what="g2 released")
        before = (planned(agent, early), node.cpus(recent, "app"))
    disk.full = False
    after = node.run_once()
    assert (
        {filler["metadata"]["uid"], g1["metadata"]["uid"], g2["metadata"]["uid"]},
        (False, before[1]),
        (False, True, before[1]),
    ) == (
        saved,
        before,
        (planned(after, early), planned(after, recent), node.cpus(recent, "app")),
    )


def test_checkpoint_claim_on_cpus_another_running_container_holds_is_released(node: AgentNode) -> None:
    """A checkpoint older than the cgroups gives ``web``'s CPUs to ``db``, whose container runs elsewhere (it moved
    after that save) and lacks ``web`` (pinned after it): ``db``'s claim is released as stale
    (``contradicted_by_cgroups``: log, metric, Event) and neither running container moves.

    Failed before the fix: the checkpoint's claim was honoured, so ``db``'s container was moved onto ``web``'s CPUs
    and ``web`` was admitted afresh elsewhere: two exclusive owners of 2,18 until ``web`` moved.
    """
    db, web = gu("db", ts=1), gu("web", ts=2)
    node.add_pod(db)
    node.add_pod(web)
    node.run_once()
    before = (node.cpus(db, "app"), node.cpus(web, "app"))
    store = StateStore(node.state_dir)
    state = store.load()
    assert state is not None
    cpu = state.cpu.copy()
    db_uid, web_uid = db["metadata"]["uid"], web["metadata"]["uid"]
    cpu.set(db_uid, "app", CPUSet.parse(before[1]))
    cpu.delete(web_uid, "app")
    cpu.default = (cpu.default | CPUSet.parse(before[0])) - CPUSet.parse(before[1])
    pods = {uid: record for uid, record in state.pods.items() if uid != web_uid}
    store.save(dataclasses.replace(state, cpu=cpu, pods=pods))
    with capture_logs() as logs:
        agent = node.run_once()
    stale = lines(logs, "pod.stale_allocation")
    assert (
        ("1,17", "2,18"),
        ("1,17", "2,18"),
        [("db", "contradicted_by_cgroups", "2,18")],
        1.0,
        {db_uid: {"app": "1,17"}, web_uid: {"app": "2,18"}},
    ) == (
        before,
        (node.cpus(db, "app"), node.cpus(web, "app")),
        [(e["pod"], e["cause"], e["released"]) for e in stale],
        sample(agent, "podpin_stale_allocations_total", cause="contradicted_by_cgroups"),
        node.checkpoint()["cpus"]["entries"],
    )
