"""Restarts after a CPU hotplug or a change of the reserved CPUs: only what must move moves, and the pod is told.

Issue "hold under attack" item 5, reproduced on the code before ``agent/alloc/state/readopt.py``: the
checkpoint was declared invalid (``state.invalid``), the reserved CPU was picked afresh and the running pods were
re-admitted one by one, so a running pod could take another's CPU and a pod the hotplug did not touch could be
rejected. Now the checkpoint is re-adopted: every exclusive CPU still online and not newly reserved stays; a lost
CPU is replaced (a ``PodpinCPUsMoved`` Warning Event on the pod names the CPUs and why).
"""

from __future__ import annotations

import dataclasses
import shutil
from typing import Any

from structlog.testing import capture_logs

from agent.cpuset import CPUSet
from agent.runner import Agent
from tests.support.agentfixture import AgentNode, kubeconfig, lines, running, sample, wait_until
from tests.support.apiserver_emulator import ApiServerEmulator
from tests.support.podfactory import running_pod
from tests.support.sysfs_builder import MACHINES, write_sysfs


def agent_for(node: AgentNode, api: ApiServerEmulator) -> Agent:
    return node.agent(pods_dir=None, kubeconfig=str(kubeconfig(node.base / "kubeconfig", api.url)))


def warnings(api: ApiServerEmulator) -> list[tuple[str, str, str]]:
    return [(e["involvedObject"]["name"], e["reason"], e["message"]) for e in api.events if e["type"] == "Warning"]


def three_pinned(node: AgentNode, api: ApiServerEmulator) -> list[dict[str, Any]]:
    """Pods a, b, c pinned to 1,17 / 2,18 / 3,19 by a first agent run, which then stops."""
    pods = [running_pod("a", ts=1), running_pod("b", ts=2), running_pod("c", ts=3)]
    for raw in pods:
        api.add_pod(raw)
        node.add_pod(raw, manifest=False)
    with running(agent_for(node, api)):
        expected = ["1,17", "2,18", "3,19"]
        wait_until(lambda: [node.cpus(raw, "app") for raw in pods] == expected, what="a, b, c pinned")
    return pods


def test_restart_after_a_hotplug_moves_only_the_offline_cpu(node: AgentNode, api: ApiServerEmulator) -> None:
    """CPU 19 went offline while the agent was down: a and b keep theirs, c keeps 3 and gets one CPU in its place,
    one Warning Event says which CPU went offline; nothing is rejected and the checkpoint is not set aside."""
    pods = three_pinned(node, api)
    shutil.rmtree(node.sysfs)
    write_sysfs(node.sysfs, dataclasses.replace(MACHINES["example-2s"](), offline=CPUSet([19])))
    node.tree.preset(node.tree.root, "cpuset.cpus.effective", "0-18,20-31")
    with capture_logs() as logs, running(agent_for(node, api)) as agent:
        wait_until(lambda: warnings(api), what="the Event")
        wait_until(lambda: "19" not in node.cpus(pods[2], "app").split(","), what="c re-pinned")
        c_cpus = CPUSet.parse(node.cpus(pods[2], "app"))
        moved = sample(agent, "podpin_cpus_moved_total")
    assert (
        ["1,17", "2,18"],
        (2, True),
        [("c", "PodpinCPUsMoved")],
        "podpin moved container app from 3,19 to ",
        [],
        [],
        1.0,
    ) == (
        [node.cpus(raw, "app") for raw in pods[:2]],
        (len(c_cpus), 3 in c_cpus),
        [(name, reason) for name, reason, _ in warnings(api)],
        warnings(api)[0][2][: len("podpin moved container app from 3,19 to ")],
        lines(logs, "pod.rejected"),
        lines(logs, "state.invalid"),
        moved,
    )
    assert warnings(api)[0][2].endswith(": CPUs 19 went offline; every other CPU stayed")


def test_restart_after_reserved_cpus_change_moves_only_the_newly_reserved(
    node: AgentNode, api: ApiServerEmulator
) -> None:
    """reservedSystemCPUs now 0,2: b gives up CPU 2 and keeps 18; a and c keep theirs; the Event names CPU 2."""
    pods = three_pinned(node, api)
    node.write_config(systemReserved=None, reservedSystemCPUs="0,2", kubeReserved={"cpu": "1"})
    with capture_logs() as logs, running(agent_for(node, api)):
        wait_until(lambda: warnings(api), what="the Event")
        wait_until(lambda: "2" not in node.cpus(pods[1], "app").split(","), what="b re-pinned")
        b_cpus = CPUSet.parse(node.cpus(pods[1], "app"))
    assert (["1,17", "3,19"], (2, True), [("b", "PodpinCPUsMoved")], [], []) == (
        [node.cpus(pods[0], "app"), node.cpus(pods[2], "app")],
        (len(b_cpus), 18 in b_cpus),
        [(name, reason) for name, reason, _ in warnings(api)],
        lines(logs, "pod.rejected"),
        lines(logs, "state.invalid"),
    )
    assert warnings(api)[0][2].endswith(": CPUs 2 are now reserved; every other CPU stayed")
