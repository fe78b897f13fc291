"""Issue 22, finding 2: one unexpected input inside a pass never stops the agent.

Each case crash-looped the agent before (a traceback and exit 1, every restart, no pod pinned meanwhile). Now
only the start-up checks may stop it, with one line and exit 2; everything later is caught at the boundary of
the pass, pod, bundle, PodResources answer or cgroup directory it belongs to (``agent/fault_boundary.py``).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from tests.support.agentfixture import AgentNode, lines, make_node, running, sample, wait_until
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


def test_a_qos_directory_symlinked_while_running_costs_passes_not_the_agent(node: AgentNode) -> None:
    """The same symlink appearing after start-up: each pass fails at its boundary (logged once, counted), the
    agent stays up, and once the directory is back the next pod is pinned."""
    node.add_pod(_gu("a"))
    agent = node.agent()
    qos = node.tree.root / "kubepods.slice/kubepods-burstable.slice"
    moved = node.base / "elsewhere"
    with capture_logs() as logs, running(agent):
        wait_until(lambda: node.cpus(_gu("a"), "app") == "1,17", what="pod a pinned")
        shutil.move(qos, moved)
        qos.symlink_to(moved)
        agent.reconciler.request_full()
        wait_until(lambda: (sample(agent, "podpin_internal_errors_total", stage="pass") or 0) >= 1, what="a failure")
        node.add_pod(_gu("c"))  # one more pass, failing the same way (c is admitted, not yet written)
        wait_until(lambda: (sample(agent, "podpin_internal_errors_total", stage="pass") or 0) >= 2, what="again")
        ok, why = agent.health()
        qos.unlink()
        shutil.move(moved, qos)
        node.add_pod(_gu("b"))
        wait_until(lambda: node.cpus(_gu("b"), "app") == "3,19", what="pod b pinned after the repair")
        wait_until(lambda: node.cpus(_gu("c"), "app") == "2,18", what="pod c pinned after the repair")
    failures = lines(logs, "agent.internal_error", stage="pass")
    assert (True, 1) == (ok, len(failures)), (why, failures)
    assert failures[0]["error"].startswith("CgroupPathError: cgroup path "), failures[0]
    assert "exc_info" in failures[0]


def test_one_pods_unexpected_failure_leaves_the_others_pinned(node: AgentNode, monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception while admitting one pod is that pod's alone: logged with its name, counted, and the pod
    created after it is pinned in the same pass."""
    bad, good = _gu("bad"), _gu("good")
    bad["metadata"]["creationTimestamp"] = "2026-01-01T00:00:01Z"  # type: ignore[index]
    good["metadata"]["creationTimestamp"] = "2026-01-01T00:00:02Z"  # type: ignore[index]
    node.add_pod(bad)
    node.add_pod(good)
    agent = node.agent(once=True)
    admit = agent.reconciler.planner.admit

    def failing(view: Any, *args: Any, **kwargs: Any) -> Any:
        if view.name == "bad":
            raise KeyError("an input nobody thought of")
        return admit(view, *args, **kwargs)

    monkeypatch.setattr(agent.reconciler.planner, "admit", failing)
    with capture_logs() as logs:
        assert 0 == agent.run()
    failures = lines(logs, "agent.internal_error", stage="pod")
    assert [("bad", "KeyError: 'an input nobody thought of'")] == [(f["pod"], f["error"]) for f in failures]
    assert (1.0, "1,17") == (sample(agent, "podpin_internal_errors_total", stage="pod"), node.cpus(good, "app"))


def test_a_failed_once_pass_is_exit_1_naming_the_log_line(node: AgentNode, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--once`` runs one pass: when an unexpected error ends it, ``podpin run`` says so and exits 1 (not the
    3 x reconcilePeriod wait for a pod list that did arrive)."""
    node.add_pod(_gu("a"))
    agent = node.agent(once=True)

    def broken(*_args: Any) -> bool:
        raise RuntimeError("a bug")

    monkeypatch.setattr(agent.reconciler, "run_pass", broken)
    with capture_logs() as logs:
        status = agent.run()
    assert (1, "the pass failed: an unexpected error (agent.internal_error in the log)", 1) == (
        status,
        agent.failure,
        len(lines(logs, "agent.internal_error", stage="pass")),
    )
