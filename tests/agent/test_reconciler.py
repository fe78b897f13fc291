"""The long-running agent in-process: event-driven pinning, drift repair, releases, endpoints, hotplug.

Each test runs the real :class:`~agent.runner.Agent` (pods-dir source, inotify
watcher, HTTP server on an ephemeral port, a 1 s reconcile period) over a
fixture tree with the kernel emulation, changes the node the way the kubelet,
the runtime or systemd would, and waits for the agent to react.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from agent.cpuset import CPUSet
from tests.support.agentfixture import AgentNode, fetch, lines, make_node, running, sample, wait_until
from tests.support.paths import REPO
from tests.support.podfactory import container, make_pod
from tests.support.sysfs_builder import MACHINES, write_sysfs


def gu(name: str, cpus: str = "2", *, states: dict[str, str] | None = None, ts: int = 1, **kw: Any) -> dict[str, Any]:
    """A Guaranteed pod with one container ``app``, running unless ``states`` says otherwise."""
    return make_pod(
        name,
        containers=[container("app", cpu=cpus, memory="1Gi")],
        states=states or {"app": "running"},
        creation_timestamp=f"2026-01-01T00:00:{ts:02d}Z",
        **kw,
    )


@pytest.fixture
def node(tmp_path: Path) -> AgentNode:
    node = make_node(tmp_path)
    node.write_config(reconcilePeriod="500ms")
    return node


def _admitted(agent: Any, raw: dict[str, Any]) -> bool:
    return bool(agent.reconciler.planner.is_admitted(raw["metadata"]["uid"]))


def _settled(agent: Any) -> None:
    """Wait until the loop's queue stayed empty for 0.1 s (the watcher's events of the agent's own writes taken)."""
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        time.sleep(0.1)
        if not agent.work_waiting():
            return
    raise AssertionError("the agent's loop did not settle within 5 s")


@pytest.mark.parametrize("driver", ["systemd", "cgroupfs"])
def test_new_container_is_pinned_when_its_cgroup_appears(tmp_path: Path, driver: str) -> None:
    """The watcher reports the container cgroup; it gets its slice and no quota, and one pin latency is observed."""
    node = make_node(tmp_path, driver=driver)
    web = gu("web")
    node.add_pod(web, cgroups=False)
    node.tree.add_pod(web["metadata"]["uid"], "Guaranteed")
    with capture_logs() as logs, running(node.agent()) as agent:
        wait_until(lambda: _admitted(agent, web), what="web admitted")
        path = node.start_container(web, "app")
        wait_until(lambda: node.read(path) == "1,17", what="the container pinned")
        wait_until(lambda: sample(agent, "podpin_pin_latency_seconds_count"), what="the latency observed")
        count = sample(agent, "podpin_pin_latency_seconds_count")
    applied = [e["files"] for e in lines(logs, "cgroup.applied", container="app", pod="web")]
    expected_files = {
        "cpuset.cpus": {"old": "", "new": "1,17", "result": "ok"},
        "cpu.max": {"old": "200000 100000", "new": "max 100000", "result": "ok"},
    }
    assert ("max 100000", 1.0, [expected_files]) == (node.read(path, "cpu.max"), count, applied)


def test_a_new_container_writes_only_itself_and_its_pod(tmp_path: Path) -> None:
    """A container cgroup appearing is pinned without touching its siblings (a sibling's drift waits for the resync)."""
    node = make_node(tmp_path)
    node.write_config(reconcilePeriod="60s")
    pod = make_pod(
        "duo",
        containers=[container("a", cpu="1", memory="1Gi"), container("b", cpu="1", memory="1Gi")],
        states={"a": "running", "b": "running"},
        creation_timestamp="2026-01-01T00:00:01Z",
    )
    node.add_pod(pod, cgroups=False)
    node.tree.add_pod(pod["metadata"]["uid"], "Guaranteed")
    with running(node.agent()) as agent:
        wait_until(lambda: _admitted(agent, pod), what="the pod admitted")
        first = node.start_container(pod, "a")
        wait_until(lambda: node.read(first) not in ("", "0-31"), what="a pinned")
        pinned = node.read(first)
        _settled(agent)  # the watcher's events of that write taken, so none is left to look at ``a`` again
        # a drift the watcher does not report (a rename raises no IN_MODIFY): only a write to ``a`` could undo it
        staged = first.parent / "drifted-cpus"
        staged.write_text("0-31")
        os.replace(staged, first / "cpuset.cpus")
        second = node.start_container(pod, "b")
        wait_until(lambda: node.read(second) not in ("", "0-31"), what="b pinned")
        assert ("0-31", True) == (node.read(first), node.read(second) != pinned)


def test_container_id_arriving_after_the_cgroup(node: AgentNode) -> None:
    """A container cgroup not yet named in the status gets the interim set, then its slice once the status names it."""
    waiting = gu("web", states={"app": "waiting"})
    running_pod = gu("web")
    node.add_pod(waiting)
    path = node.container_cgroup(running_pod, "app")
    node.tree.add_container(node.pod_cgroup(waiting), path.name.removeprefix("cri-containerd-").removesuffix(".scope"))
    with running(node.agent()) as agent:
        wait_until(lambda: node.read(path) == "0,2-16,18-31", what="the interim set (node shared pool)")
        node.write_manifest(running_pod)
        wait_until(lambda: node.read(path) == "1,17", what="the container's own slice")
        wait_until(lambda: sample(agent, "podpin_pin_latency_seconds_count"), what="the latency observed")
        assert 1.0 == sample(agent, "podpin_pin_latency_seconds_count")


@pytest.mark.parametrize(
    ("file", "drifted", "repaired"),
    [("cpuset.cpus", "0-31", "1,17"), ("cpu.max", "200000 100000", "max 100000")],
)
def test_drift_is_repaired_and_counted(node: AgentNode, file: str, drifted: str, repaired: str) -> None:
    """A value rewritten behind the agent's back is restored by the next resync, logged and counted once."""
    web = gu("web")
    node.add_pod(web)
    path = node.container_cgroup(web, "app")
    with capture_logs() as logs, running(node.agent()) as agent:
        wait_until(lambda: node.read(path, file) == repaired, what="the container pinned")
        node.tree.preset(path, file, drifted)
        wait_until(lambda: node.read(path, file) == repaired, what="the drift repaired")
        wait_until(lambda: sample(agent, "podpin_drift_repairs_total"), what="the repair counted")
        repairs = sample(agent, "podpin_drift_repairs_total")
    logged = [e["files"][file]["old"] for e in lines(logs, "cgroup.drift_repaired", pod="web", container="app")]
    assert (1.0, [drifted]) == (repairs, logged)


def test_qos_level_drift_is_repaired(node: AgentNode) -> None:
    """systemd resetting the burstable slice's cpuset to empty (all CPUs) is repaired to the node shared pool."""
    node.add_pod(gu("web"))
    burstable = node.tree.qos_dir("Burstable")
    with running(node.agent()) as agent:
        wait_until(lambda: node.read(burstable) == "0,2-16,18-31", what="the QoS level confined")
        node.tree.preset(burstable, "cpuset.cpus", "")
        wait_until(lambda: node.read(burstable) == "0,2-16,18-31", what="the drift repaired")
        wait_until(lambda: sample(agent, "podpin_drift_repairs_total"), what="the repair counted")
        assert 1.0 == sample(agent, "podpin_drift_repairs_total")


def test_deleted_pod_is_released_and_the_shared_pool_widens(node: AgentNode) -> None:
    """A pod gone from the source is released: logged, out of the checkpoint, its CPUs back in the QoS levels."""
    keep, gone = gu("keep", ts=1), gu("gone", ts=2)
    node.add_pod(keep)
    node.add_pod(gone)
    burstable = node.tree.qos_dir("Burstable")
    with capture_logs() as logs, running(node.agent()) as agent:
        wait_until(lambda: node.read(burstable) == "0,3-16,19-31", what="both pods pinned")
        node.remove_pod(gone)
        wait_until(lambda: node.read(burstable) == "0,2-16,18-31", what="the shared pool widened")
        wait_until(lambda: gone["metadata"]["uid"] not in node.checkpoint()["cpus"]["entries"], what="the checkpoint")
        held = {uid: dict(c) for uid, c in node.checkpoint()["cpus"]["entries"].items()}
        assert agent.reconciler.passes > 0
    assert ([("gone", gone["metadata"]["uid"])], {keep["metadata"]["uid"]: {"app": "1,17"}}) == (
        [(e["pod"], e["uid"]) for e in lines(logs, "pod.released")],
        held,
    )


def test_rejected_pod_is_admitted_after_a_release(node: AgentNode) -> None:
    """A pod that did not fit is tried again when CPUs are released, and gets them."""
    big, waiting = gu("big", "16", ts=1), gu("later", "16", ts=2)
    node.add_pod(big)
    node.add_pod(waiting)
    path = node.container_cgroup(waiting, "app")
    with capture_logs() as logs, running(node.agent()) as agent:
        wait_until(lambda: lines(logs, "pod.rejected", pod="later"), what="later rejected")
        node.remove_pod(big)
        wait_until(lambda: _admitted(agent, waiting), what="later admitted")
        wait_until(lambda: len(CPUSet.parse(node.read(path))) == 16, what="later pinned")
    assert ["UnexpectedAdmissionError"] == [e["reason"] for e in lines(logs, "pod.rejected", pod="later")]


def test_terminal_pod_is_released(node: AgentNode) -> None:
    """A pod whose phase becomes Succeeded gives its CPUs back while its manifest still exists."""
    job = gu("job")
    node.add_pod(job)
    with capture_logs() as logs, running(node.agent()) as agent:
        wait_until(lambda: _admitted(agent, job), what="job admitted")
        node.write_manifest(
            make_pod(
                "job",
                containers=[container("app", cpu="2", memory="1Gi")],
                phase="Succeeded",
                creation_timestamp="2026-01-01T00:00:01Z",
            )
        )
        wait_until(lambda: not _admitted(agent, job), what="job released")
    assert ["job"] == [e["pod"] for e in lines(logs, "pod.released")]


def test_endpoints_of_the_running_agent(node: AgentNode) -> None:
    """/healthz and /readyz say ok, /metrics has the state families, /state (on its own address) the plan.

    agent.started names both ports; the metrics address does not serve /state.
    """
    web = gu("web")
    node.add_pod(web)
    with capture_logs() as logs, running(node.agent(state_bind_address="127.0.0.1:0")) as agent:
        started = lines(logs, "agent.started")[0]
        address, state_address = started["metrics"], started["state"]
        base = f"http://{address}"
        wait_until(lambda: fetch(base + "/readyz")[0] == 200, what="ready")
        wait_until(lambda: sample(agent, "podpin_ready") == 1.0, what="the ready gauge (set after the pass)")
        health, ready, (status, metrics), (_, state), (no_state, _) = (
            fetch(base + "/healthz"),
            fetch(base + "/readyz"),
            fetch(base + "/metrics"),
            fetch(f"http://{state_address}/state"),
            fetch(base + "/state"),
        )
        assert (address, state_address, 404) == (agent.metrics_address, agent.state_address, no_state)
    document = json.loads(state)
    wanted = [
        "podpin_ready 1.0",
        'podpin_containers{assignment_type="node_exclusive"} 1.0',
        "podpin_exclusive_cpu_allocation_count 2.0",
        "podpin_shared_pool_size_millicores 29000.0",
    ]
    assert (
        (200, "ok\n"),
        (200, "ok\n"),
        200,
        wanted,
        (True, "node-1"),
        {web["metadata"]["uid"]: {"app": "1,17"}},
        [{"name": "web", "admitted": True, "cpus": ["1,17"]}],
    ) == (
        health,
        ready,
        status,
        [w for w in wanted if w in metrics.splitlines()],
        (document["ready"], document["node"]),
        document["state"]["cpus"]["entries"],
        [
            {"name": p["name"], "admitted": p["admitted"], "cpus": [c["cpus"] for c in p["containers"]]}
            for p in document["plan"]["pods"]
        ],
    )


def test_readyz_says_why_while_the_kubelet_pins(node: AgentNode) -> None:
    """With the kubelet's CPU manager static, /readyz is 503 with the reason and podpin_ready is 0."""
    node.add_pod(gu("web"))
    node.kubelet_state.parent.mkdir()
    node.kubelet_state.write_text('{"policyName":"static","defaultCpuSet":"0-31","checksum":1}')
    with running(node.agent()) as agent:
        status, body = fetch(f"http://{agent.metrics_address}/readyz")
        ready = sample(agent, "podpin_ready")
    assert (503, f"{agent.reconciler.blocked}\n", 0.0, "") == (status, body, ready, node.cpus(gu("web"), "app"))


def test_usage_is_reported_per_pool_and_pod(node: AgentNode) -> None:
    """cpu.stat of each container is summed per (pool, namespace, pod) at resync."""
    web = gu("web")
    node.add_pod(web)
    stat = node.container_cgroup(web, "app") / "cpu.stat"
    stat.write_text(stat.read_text().replace("usage_usec 0", "usage_usec 2500000"))
    with running(node.agent()) as agent:
        wait_until(
            lambda: sample(
                agent, "podpin_pool_cpu_usage_seconds_total", pool="exclusive", namespace="default", pod="web"
            ),
            what="the usage sample",
        )
        usage = sample(agent, "podpin_pool_cpu_usage_seconds_total", pool="exclusive", namespace="default", pod="web")
        assert 2.5 == usage


def test_dry_run_agent_writes_nothing(node: AgentNode) -> None:
    """A long-running --dry-run agent decides and serves /state but writes no cgroup file and no checkpoint."""
    node.add_pod(gu("web"))
    before = node.files()
    with capture_logs() as logs, running(node.agent(dry_run=True)) as agent:
        passes = agent.reconciler.passes
        wait_until(lambda: agent.reconciler.passes > passes + 1, what="two more passes")
        plan = agent.state()["plan"]["pods"][0]["containers"][0]["cpus"]
    assert (before, False, "1,17", True) == (
        node.files(),
        (node.state_dir / "podpin_state.json").exists(),
        plan,
        bool(lines(logs, "cgroup.dry_run")),
    )


def test_cpus_going_offline_replan_only_the_pods_holding_them(node: AgentNode, tmp_path: Path) -> None:
    """Core 3 (CPUs 3 and 19) goes offline: the pod that held it is moved, the others keep theirs, the pools shrink."""
    pods = [gu("a", ts=1), gu("b", ts=2), gu("c", ts=3)]
    for raw in pods:
        node.add_pod(raw)
    machine = dataclasses.replace(MACHINES["example-2s"](), offline=CPUSet([3, 19]))
    offline = write_sysfs(tmp_path / "sys-offline", machine)
    with capture_logs() as logs, running(node.agent()):
        wait_until(lambda: node.cpus(pods[2], "app") == "3,19", what="c pinned")
        shutil.move(str(node.sysfs), str(tmp_path / "sys-online"))
        os.rename(offline, node.sysfs)
        node.tree.preset(node.tree.root, "cpuset.cpus.effective", "0-2,4-18,20-31")
        wait_until(lambda: node.cpus(pods[2], "app") not in ("3,19", ""), what="c moved")
        wait_until(lambda: node.read(node.tree.qos_dir("Burstable")) == "0,5-16,21-31", what="the pool shrunk")
        changed = lines(logs, "topology.changed")
    assert (["1,17", "2,18", "4,20"], [[pods[2]["metadata"]["uid"]]], "0,5-16,21-31") == (
        [node.cpus(raw, "app") for raw in pods],
        [e["replanned"] for e in changed],
        node.read(node.tree.qos_dir("Burstable")),
    )


def test_pods_that_arrived_while_the_kubelet_pinned_are_pinned_once_it_stops(node: AgentNode) -> None:
    """While blocked nothing is written; the first pass after the kubelet stops pinning writes every pod."""
    node.write_config(reconcilePeriod="60s")
    node.kubelet_state.parent.mkdir()
    node.kubelet_state.write_text('{"policyName":"static","defaultCpuSet":"0-31","checksum":1}')
    early, late = gu("early", ts=1), gu("late", ts=2)
    node.add_pod(early)
    node.add_pod(late, cgroups=False)
    node.tree.add_pod(late["metadata"]["uid"], "Guaranteed")
    with running(node.agent()) as agent:
        blocked = agent.reconciler.blocked is not None
        node.kubelet_state.unlink()
        node.start_container(late, "app")  # the next event: a new container cgroup (a targeted pass)
        wait_until(lambda: node.cpus(late, "app") == "2,18", what="late pinned")
        wait_until(lambda: node.cpus(early, "app") == "1,17", timeout=2.0, what="early pinned in the same pass")
    assert (True, None) == (blocked, agent.reconciler.blocked)


def test_a_pod_that_comes_back_is_reported_again(node: AgentNode) -> None:
    """A malformed manifest removed and written again is reported again (nothing is remembered of gone pods)."""
    bad = make_pod("bad", containers=[container("app", cpu_request="2", cpu_limit="2.5.1", memory="1Gi")])
    uid = bad["metadata"]["uid"]
    path = node.write_manifest(bad)
    with capture_logs() as logs, running(node.agent()) as agent:
        wait_until(lambda: lines(logs, "pod.malformed"), what="the first report")
        path.unlink()
        wait_until(lambda: agent.reconciler.pods.raw(uid) is None, what="the removal seen")
        passes = agent.reconciler.passes
        wait_until(lambda: agent.reconciler.passes > passes, what="a pass without the pod")
        reported_before = len(lines(logs, "pod.malformed"))
        node.write_manifest(bad)
        wait_until(lambda: len(lines(logs, "pod.malformed")) == 2, what="the second report")
    assert (1, ["bad", "bad"]) == (reported_before, [e["pod"] for e in lines(logs, "pod.malformed")])


def test_pin_latency_bench_reports_both_measures() -> None:
    """scripts/bench_pin_latency.py --json: every container pinned, both medians and p99s reported."""
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "bench_pin_latency.py"),
            "--pods",
            "5",
            "--machine",
            "example-2s",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    row = json.loads(result.stdout)
    keys = ["agent_median_ms", "agent_p99_ms", "observed_median_ms", "observed_p99_ms"]
    assert (0, 5, 5, "inotify", [True] * 4) == (
        result.returncode,
        row["containers"],
        row["agent_count"],
        row["watcher"],
        [row[k] > 0 for k in keys],
    )


def test_missing_controllers_are_enabled_down_the_path(node: AgentNode) -> None:
    """A pod cgroup without cpuset and cpu in its subtree_control gets them, then its container is pinned."""
    web = gu("web")
    node.add_pod(web, cgroups=False)
    pod_path = node.tree.add_pod(web["metadata"]["uid"], "Guaranteed")
    (pod_path / "cgroup.subtree_control").write_text("")
    container = node.start_container(web, "app")
    assert not (container / "cpuset.cpus").exists()
    agent = node.run_once()
    enabled = set(node.read(pod_path, "cgroup.subtree_control").split())
    assert ({"cpuset", "cpu"} <= enabled, "1,17") == (True, node.read(container))
    assert 1.0 == sample(agent, "podpin_cgroup_writes_total", file="cgroup.subtree_control", result="ok")


def test_an_unchanged_periodic_pass_reuses_the_plan(node: AgentNode) -> None:
    """A full pass with the same pods, state and decisions keeps the plan object; a release makes a new one."""
    web, db = gu("web"), gu("db", ts=2)
    node.add_pod(web)
    node.add_pod(db)
    agent = node.run_once()
    reconciler = agent.reconciler
    before = reconciler.plan
    reconciler.request_full()
    reconciler.run_pass()
    same = reconciler.plan
    reconciler.planner.release(db["metadata"]["uid"])
    reconciler.request_full()
    reconciler.run_pass()
    assert (True, False) == (same is before, reconciler.plan is before)
