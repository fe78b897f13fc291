"""Lifetimes and restarts: SIGTERM, SIGKILL mid-run, a lost or corrupt checkpoint, pods that came and went.

The real ``podpin run`` process where signals matter (it writes plain fixture
files, so read-back mismatches in its log are expected and ignored); the
in-process agent over the kernel emulation for the checkpoint cases.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from agent.cpuset import CPUSet
from tests.support.agentfixture import AgentNode, Spawned, fetch, lines, make_node, wait_until
from tests.support.podfactory import container, make_pod, resources


def gu(name: str, cpus: str = "2", *, ts: int = 1, **kw: Any) -> dict[str, Any]:
    """A Guaranteed pod with one running container ``app``."""
    return make_pod(
        name,
        containers=[container("app", cpu=cpus, memory="1Gi")],
        states={"app": "running"},
        creation_timestamp=f"2026-01-01T00:00:{ts:02d}Z",
        **kw,
    )


@pytest.fixture
def node(tmp_path: Path) -> AgentNode:
    return make_node(tmp_path)


@pytest.fixture
def spawned() -> Iterator[list[Spawned]]:
    """Background agents started by a test; any still running at the end is killed."""
    started: list[Spawned] = []
    yield started
    for agent in started:
        agent.kill()


def _pinned(node: AgentNode, pods: list[dict[str, Any]]) -> dict[str, str]:
    """Pod name -> its container's cpuset.cpus (empty when not written)."""
    return {raw["metadata"]["name"]: node.cpus(raw, "app") for raw in pods}


def test_sigterm_after_serving_readyz_and_metrics(node: AgentNode, spawned: list[Spawned]) -> None:
    """The long-running agent gets ready, serves /readyz and /metrics, and exits 0 within 5 s of SIGTERM."""
    node.add_pod(gu("web"))
    agent = node.spawn()
    spawned.append(agent)
    base = agent.base_url
    wait_until(lambda: fetch(base + "/readyz")[0] == 200, 10.0, "/readyz 200")
    wait_until(lambda: "podpin_ready 1.0" in fetch(base + "/metrics")[1].splitlines(), 5.0, "the ready gauge")
    ready, (status, metrics) = fetch(base + "/readyz"), fetch(base + "/metrics")
    sent = time.monotonic()
    agent.process.send_signal(signal.SIGTERM)
    code = agent.finish(timeout=5.0)
    took = time.monotonic() - sent
    assert ((200, "ok\n"), 200, True, 0, True, ["SIGTERM"]) == (
        ready,
        status,
        "podpin_ready 1.0" in metrics.splitlines(),
        code,
        took < 5.0,
        [e["signal"] for e in lines(agent.logs, "agent.stopping")],
    )


def test_readyz_is_503_until_the_first_pass(node: AgentNode, spawned: list[Spawned], tmp_path: Path) -> None:
    """Before any pod list arrives (the API server refuses connections) /readyz is 503 with the reason, /healthz 200."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    agent = node.spawn("--kubeconfig", str(kubeconfig), pods_dir=False)
    spawned.append(agent)
    base = agent.base_url
    ready, health = fetch(base + "/readyz"), fetch(base + "/healthz")
    agent.wait_log("watch.list_failed")
    agent.process.send_signal(signal.SIGTERM)
    assert ((503, "starting: no pod list yet\n"), (200, "ok\n"), 0) == (ready, health, agent.finish(5.0))


def test_once_against_an_unreachable_api_server_exits_2(node: AgentNode, tmp_path: Path) -> None:
    """--once with no API server: after three reconcile periods, exit 2 with one line saying no pod list came."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    node.write_config(reconcilePeriod="500ms")
    result = node.cli("--once", "--kubeconfig", str(kubeconfig), pods_dir=False)
    reasons = [line for line in result.stderr.splitlines() if not line.startswith("{")]
    assert (2, ["podpin run: no pod list from the pod source within 1.5s (3 x reconcilePeriod)"]) == (
        result.returncode,
        reasons,
    )


def test_sigkill_mid_run_then_restart_moves_no_exclusive_set(node: AgentNode, spawned: list[Spawned]) -> None:
    """SIGKILL while pods arrive; after the restart every cpuset written before the kill is unchanged.

    Meanwhile one pod went away and another arrived: the restarted agent releases
    the first and pins the second, and no two pods share an exclusive CPU.
    """
    first = [gu(f"steady{i}", ts=i) for i in range(3)]
    burst = [gu(f"burst{i}", ts=10 + i) for i in range(5)]
    for raw in first:
        node.add_pod(raw)
    agent = node.spawn()
    spawned.append(agent)
    wait_until(lambda: all(_pinned(node, first).values()), 10.0, "the first pods pinned")
    for raw in burst:
        node.add_pod(raw)
    agent.wait_log("pod.admitted", pod="burst0")
    agent.process.send_signal(signal.SIGKILL)
    agent.finish()
    before = _pinned(node, first + burst)
    gone, late = first[0], gu("late", ts=30)
    node.remove_pod(gone)
    node.add_pod(late)
    restarted = node.spawn()
    spawned.append(restarted)
    survivors = first[1:] + burst
    wait_until(lambda: all(_pinned(node, [*survivors, late]).values()), 10.0, "every pod pinned again")
    restarted.wait_log("pod.released", pod=gone["metadata"]["name"])
    after = _pinned(node, [*survivors, late])
    restarted.process.send_signal(signal.SIGTERM)
    assert 0 == restarted.finish(5.0)
    kept = {name: cpus for name, cpus in before.items() if cpus and name != gone["metadata"]["name"]}
    sets = [CPUSet.parse(cpus) for cpus in after.values()]
    assert (kept, len(sets) * 2) == ({name: after[name] for name in kept}, len(CPUSet().union(*sets)))


def test_missing_checkpoint_keeps_the_running_cpusets(node: AgentNode) -> None:
    """The checkpoint is lost: the state is rebuilt from the cgroups, and every pod keeps the CPUs it runs on."""
    pods = [gu("a", ts=1), gu("b", "4", ts=2), gu("c", ts=3)]
    for raw in pods:
        node.add_pod(raw)
    node.run_once()
    before = _pinned(node, pods)
    (node.state_dir / "podpin_state.json").unlink()
    node.remove_pod(pods[0])
    with capture_logs() as logs:
        node.run_once()
    kept = sorted((e["pod"], e.get("kept_running_cpus")) for e in lines(logs, "pod.admitted"))
    assert (
        {"b": before["b"], "c": before["c"]},
        [("b", ["app"]), ("c", ["app"])],
        1,
        1,
    ) == (
        _pinned(node, pods[1:]),
        kept,
        len(lines(logs, "state.missing")),
        len(lines(logs, "state.rebuilt_from_cgroups")),
    )


def test_rebuild_adopts_running_pods_before_admitting_new_ones(node: AgentNode) -> None:
    """After a lost checkpoint, a pod created earlier but bound later cannot take a running pod's CPUs."""
    running_pod = gu("running", ts=5)
    node.add_pod(running_pod)
    node.run_once()
    assert "1,17" == node.cpus(running_pod, "app")
    (node.state_dir / "podpin_state.json").unlink()
    early = gu("early", ts=1)  # created first, scheduled to this node only now
    node.add_pod(early)
    node.run_once()
    assert {"running": "1,17", "early": "2,18"} == _pinned(node, [running_pod, early])


def test_corrupt_checkpoint_is_moved_aside_and_rebuilt(node: AgentNode) -> None:
    """A checkpoint that is not JSON is kept as .corrupt for inspection; the pods keep their CPUs."""
    web = gu("web")
    node.add_pod(web)
    node.run_once()
    path = node.state_dir / "podpin_state.json"
    path.write_text('{"version": 1, "da')
    with capture_logs() as logs:
        node.run_once()
    corrupt = lines(logs, "state.corrupt")
    assert (
        '{"version": 1, "da',
        [str(path) + ".corrupt"],
        "1,17",
        ["web"],
    ) == (
        (node.state_dir / "podpin_state.json.corrupt").read_text(),
        [e["moved_to"] for e in corrupt],
        node.cpus(web, "app"),
        [node.checkpoint()["pods"][web["metadata"]["uid"]]["name"]],
    )


def test_restart_releases_the_gone_and_admits_the_new_in_creation_order(node: AgentNode) -> None:
    """With the checkpoint: a gone pod is released, new pods are admitted oldest first whatever their file order."""
    a, b = gu("a", ts=1), gu("b", ts=2)
    node.add_pod(a)
    node.add_pod(b)
    node.run_once()
    node.remove_pod(a)
    newer, older = gu("aa-newer", ts=9), gu("zz-older", ts=3)
    node.add_pod(newer)
    node.add_pod(older)
    with capture_logs() as logs:
        node.run_once()
    assert (["a"], ["zz-older", "aa-newer"], {"b": "2,18", "zz-older": "1,17", "aa-newer": "3,19"}) == (
        [e["pod"] for e in lines(logs, "pod.released")],
        [e["pod"] for e in lines(logs, "pod.admitted")],
        _pinned(node, [b, older, newer]),
    )


def test_lost_checkpoint_keeps_a_pod_bubble_and_its_slices(node: AgentNode) -> None:
    """Rebuilt from the cgroups, a pod-level pod keeps its bubble, its exclusive slice and its pod shared pool."""
    db = make_pod(
        "db",
        containers=[container("db", cpu="4", memory="1Gi"), container("proxy", cpu="100m", memory="64Mi")],
        pod_resources=resources(cpu="5", memory="2Gi"),
        states={"db": "running", "proxy": "running"},
        creation_timestamp="2026-01-01T00:00:05Z",
    )
    node.add_pod(db)
    node.run_once()
    before = (node.cpus(db), node.cpus(db, "db"), node.cpus(db, "proxy"))
    (node.state_dir / "podpin_state.json").unlink()
    early = gu("early", ts=1)
    node.add_pod(early)
    node.run_once()
    bubble = node.checkpoint()["cpus"]["podEntries"][db["metadata"]["uid"]]
    assert (("1-2,16-18", "1-2,17-18", "16"), before, "1-2,16-18", "3,19") == (
        before,
        (node.cpus(db), node.cpus(db, "db"), node.cpus(db, "proxy")),
        bubble,
        node.cpus(early, "app"),
    )
