"""A full pass is done in steps and yields to targeted work: a new container never waits for all of it.

The first test runs the real agent (its loop, the inotify watcher, the kernel emulation) and makes a container
cgroup appear while the agent's first full pass is in its first step; the order of the agent's writes shows
the new container pinned before any pod of that full pass. The others drive the reconciler pass by pass,
with a ``pending()`` that always says targeted work waits, to show each step and where the pass resumes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.kube.source import PodEvent
from agent.runner import Agent
from tests.support.agentfixture import AgentNode, make_node, running, wait_until
from tests.support.cgroupfs_builder import FaultyOps, RecordingOps
from tests.support.podfactory import running_pod

SHARED = "0,2-16,18-31"
"""The node shared pool of the example machine with CPUs 0 and 16 reserved and one pod holding 1 and 17."""


def planned(agent: Agent, raw: dict[str, Any]) -> str:
    """The set the agent's latest plan gives container ``app`` of ``raw``."""
    snapshot = agent.reconciler.snapshot
    assert snapshot is not None
    pod = next(p for p in snapshot.plan.pods if p.uid == raw["metadata"]["uid"])
    return str(pod.container("app").desired.cpuset_cpus)


def once(action: Callable[[], None]) -> Callable[[], None]:
    """``action`` on the first call only."""
    calls: list[None] = []

    def run() -> None:
        if not calls:
            calls.append(None)
            action()

    return run


def relative(node: AgentNode, path: Path) -> str:
    """A cgroup's path as :class:`RecordingOps` records it."""
    return str(path.relative_to(node.tree.root))


def test_a_container_cgroup_created_during_a_full_pass_is_pinned_before_the_pass_goes_on(tmp_path: Path) -> None:
    """A container cgroup appearing while the first full pass writes the QoS levels is pinned before any pod of
    that pass: the pass stops after its step, the targeted work runs, then the pass resumes."""
    node = make_node(tmp_path)
    pods = [running_pod(f"p{i}", ts=i + 1) for i in range(6)]
    for raw in pods:
        node.add_pod(raw)
    late = running_pod("late", ts=9)
    node.add_pod(late, cgroups=False)
    node.tree.add_pod(late["metadata"]["uid"], "Guaranteed")
    agents: list[Agent] = []
    marks: list[int] = []

    def appear() -> None:
        marks.append(len(recorder.writes))
        node.start_container(late, "app")
        wait_until(agents[0].work_waiting, what="the watcher queued the new container cgroup")

    qos_read = node.tree.qos_dir("Burstable") / "cpuset.cpus"
    faulty = FaultyOps(node.tree.ops(), before_read={qos_read: once(appear)})
    recorder = RecordingOps(inner=faulty, root=node.tree.root)
    agents.append(node.agent(ops=recorder))
    with running(agents[0]) as agent:
        wait_until(lambda: agent.reconciler.sweeps > 0, what="the first full pass finished")
        wait_until(lambda: node.cpus(late, "app") == planned(agent, late), what="the late container pinned")
        expected = {relative(node, node.container_cgroup(raw, "app")): planned(agent, raw) for raw in [*pods, late]}
    order = [path for path, file, _text in recorder.writes if file == "cpuset.cpus" and path in expected]
    late_path = relative(node, node.container_cgroup(late, "app"))
    written_first = order[: order.index(late_path)]
    actual = {path: node.read(node.tree.root / path) for path in expected}
    assert ([0], [], expected) == (marks, written_first, actual)


def _pass_until_pending(agent: Agent) -> None:
    agent.reconciler.run_pass(pending=lambda: True)


def test_each_step_of_a_full_pass_and_the_resume(tmp_path: Path) -> None:
    """With targeted work always waiting, a full pass takes one step per call: the QoS levels, then one pod; a
    pass with nothing else to do resumes it; it counts as done (and the agent ready) only at the end."""
    node = make_node(tmp_path)
    first, second = running_pod("first", ts=1), running_pod("second", ts=2)
    node.add_pod(first)
    node.add_pod(second)
    agent = node.agent()
    reconciler = agent.reconciler
    reconciler.on_pods(PodEvent("SYNC", (first, second)))
    burstable = node.tree.qos_dir("Burstable")
    seen = []
    for step in (lambda: _pass_until_pending(agent), lambda: reconciler.sweep(lambda: True)) * 2:
        step()
        seen.append(
            (
                reconciler.sweeping,
                reconciler.sweeps,
                agent.ready()[0],
                node.read(burstable),
                node.cpus(first, "app"),
                node.cpus(second, "app"),
            )
        )
    assert [
        (True, 0, False, "0,3-16,19-31", "", ""),
        (True, 0, False, "0,3-16,19-31", "1,17", ""),
        (False, 1, True, "0,3-16,19-31", "1,17", "2,18"),
        (False, 1, True, "0,3-16,19-31", "1,17", "2,18"),
    ] == seen


def test_a_change_of_the_pools_starts_the_full_pass_again_from_the_qos_levels(tmp_path: Path) -> None:
    """A pod admitted while a full pass is under way restarts it: its exclusive CPUs leave the QoS levels in the
    first step, before any pod is written again."""
    node = make_node(tmp_path)
    first, second = running_pod("first", ts=1), running_pod("second", ts=2)
    node.add_pod(first)
    agent = node.agent()
    reconciler = agent.reconciler
    reconciler.on_pods(PodEvent("SYNC", (first,)))
    burstable = node.tree.qos_dir("Burstable")
    reconciler.run_pass(pending=lambda: True)
    before = node.read(burstable)
    node.add_pod(second)
    reconciler.on_pods(PodEvent("UPSERT", (second,)))
    reconciler.run_pass(pending=lambda: True)
    after = (node.read(burstable), node.cpus(first, "app"), node.cpus(second, "app"), reconciler.sweeping)
    reconciler.sweep()
    done = (node.cpus(first, "app"), node.cpus(second, "app"), reconciler.sweeping, reconciler.sweeps)
    assert (SHARED, ("0,3-16,19-31", "", "", True), ("1,17", "2,18", False, 1)) == (before, after, done)
