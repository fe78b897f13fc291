"""A restart over a checkpoint whose CPUs break the stale rule: released, the pod allocated afresh, and said.

Issue 17 item 1. A checkpoint written by a podpin with the overlap bug holds two exclusive containers on one
CPU; ``agent/alloc/cpumanager/restore.py`` finds it stale, the pod is admitted again, and the agent says so once:
a ``pod.stale_allocation`` warning line, a ``PodpinStaleAllocation`` Warning Event and
``podpin_stale_allocations_total{cause="shared_cpu"}``.
"""

from __future__ import annotations

import json
from dataclasses import replace

from structlog.testing import capture_logs

from agent.alloc.state import state_from_checkpoint, state_to_checkpoint
from agent.cpuset import CPUSet
from agent.runner import Agent
from agent.state_store import CHECKPOINT_NAME
from tests.support.agentfixture import AgentNode, kubeconfig, lines, running, sample, wait_until
from tests.support.apiserver_emulator import ApiServerEmulator
from tests.support.podfactory import container, make_pod


def _agent(node: AgentNode, api: ApiServerEmulator) -> Agent:
    return node.agent(pods_dir=None, kubeconfig=str(kubeconfig(node.base / "kubeconfig", api.url)))


def _warnings(api: ApiServerEmulator) -> list[tuple[str, str]]:
    return [(e["reason"], e["message"]) for e in api.events if e["type"] == "Warning"]


def test_two_containers_on_one_cpu_in_the_checkpoint_are_allocated_again_and_reported(
    node: AgentNode, api: ApiServerEmulator
) -> None:
    """``b`` holds ``a``'s CPUs in the checkpoint: after the restart they hold disjoint CPUs, with one log line,
    one Warning Event naming both and the metric at 1.

    Failed before the rule: the restored pod was taken as admitted, both containers stayed on 1,17.
    """
    raw = make_pod(
        "twin",
        containers=[container("a", cpu="2", memory="1Gi"), container("b", cpu="2", memory="1Gi")],
        states={"a": "running", "b": "running"},
        creation_timestamp="2026-01-01T00:00:01Z",
    )
    api.add_pod(raw)
    node.add_pod(raw, manifest=False)
    with running(_agent(node, api)):
        wait_until(lambda: node.cpus(raw, "b") == "2,18", what="b pinned")
    path = node.state_dir / CHECKPOINT_NAME
    state = state_from_checkpoint(json.loads(path.read_text()))
    cpu = state.cpu.copy()
    cpu.assignments[raw["metadata"]["uid"]]["b"] = CPUSet.parse("1,17")
    cpu.default = state.online - cpu.assigned()
    path.write_text(json.dumps(state_to_checkpoint(replace(state, cpu=cpu))))
    with capture_logs() as logs, running(_agent(node, api)) as agent:
        wait_until(lambda: _warnings(api), what="the Event")
        wait_until(lambda: node.cpus(raw, "b") != "1,17", what="b re-pinned")
        counted = sample(agent, "podpin_stale_allocations_total", cause="shared_cpu")
    held = (CPUSet.parse(node.cpus(raw, "a")), CPUSet.parse(node.cpus(raw, "b")))
    assert (
        (CPUSet(), 2, 2),
        [("PodpinStaleAllocation", True)],
        [("shared_cpu", "containers a and b both hold CPUs 1,17")],
        1.0,
    ) == (
        (held[0] & held[1], len(held[0]), len(held[1])),
        [(reason, "containers a and b both hold CPUs 1,17" in message) for reason, message in _warnings(api)],
        [(line["cause"], line["detail"]) for line in lines(logs, "pod.stale_allocation")],
        counted,
    )
