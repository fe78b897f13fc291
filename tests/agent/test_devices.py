"""The agent with the kubelet's PodResources API: GPU pods get CPUs on their GPU's NUMA node, or a bounded wait.

The real :class:`~agent.runner.Agent` (pods-dir source, fixture cgroup tree)
with the PodResources emulator on a unix socket of its own. The machine is the
2-socket example (NUMA 1 holds CPUs 8-15 and 24-31).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from structlog.testing import capture_logs

from agent.cpuset import CPUSet
from tests.support.agentfixture import AgentNode, lines, make_node, running, sample, wait_until
from tests.support.podfactory import container, make_pod
from tests.support.podresources_emulator import PodResourcesEmulator

GPU = "example.com/gpu"
NUMA1 = CPUSet.parse("8-15,24-31")


@pytest.fixture
def kubelet() -> Iterator[PodResourcesEmulator]:
    with PodResourcesEmulator() as emulator:
        emulator.set_allocatable([(GPU, ("gpu0",), (0,)), (GPU, ("gpu1",), (1,))])
        yield emulator


def gpu_pod() -> dict[str, Any]:
    """A Guaranteed pod whose container ``train`` asks for 2 CPUs and one GPU."""
    limits = {GPU: 1}
    return make_pod(
        "trainer",
        containers=[container("train", cpu="2", memory="1Gi", limits=limits, requests=limits)],
        states={"train": "running"},
        creation_timestamp="2026-01-01T00:00:01Z",
    )


def node_with(tmp_path: Any, kubelet: PodResourcesEmulator, wait: str) -> AgentNode:
    """A node whose agent reads PodResources from the emulator and waits ``wait`` for devices."""
    node = make_node(tmp_path)
    node.write_config(reconcilePeriod="500ms", podResourcesSocket=str(kubelet.socket), deviceWaitTimeout=wait)
    return node


def _admitted(agent: Any, raw: dict[str, Any]) -> bool:
    return bool(agent.reconciler.planner.is_admitted(raw["metadata"]["uid"]))


def test_gpu_on_numa1_pins_the_container_to_numa1(tmp_path: Any, kubelet: PodResourcesEmulator) -> None:
    """Devices known at once: the exclusive CPUs come from its GPU's NUMA node; ``pod.admitted`` says aligned."""
    pod = gpu_pod()
    kubelet.set_pod("default", "trainer", {"train": [(GPU, ("gpu1",), (1,))]})
    node = node_with(tmp_path, kubelet, "5s")
    node.add_pod(pod)
    path = node.container_cgroup(pod, "train")
    with capture_logs() as logs, running(node.agent()) as agent:
        wait_until(lambda: node.read(path) not in ("", "0-31"), what="the container pinned")
        assert (True, True) == (_admitted(agent, pod), CPUSet.parse(node.read(path)) <= NUMA1)
    admitted = lines(logs, "pod.admitted", pod="trainer")
    assert [{"train": {"numa": [1], "alignment": "aligned"}}] == [entry["devices"] for entry in admitted]


def test_devices_named_late_are_waited_for(tmp_path: Any, kubelet: PodResourcesEmulator) -> None:
    """The pod waits, unadmitted, while PodResources lacks its devices; once named, its CPUs follow its GPU."""
    pod = gpu_pod()
    node = node_with(tmp_path, kubelet, "20s")
    node.add_pod(pod)
    path = node.container_cgroup(pod, "train")
    with capture_logs() as logs, running(node.agent()) as agent:
        wait_until(lambda: agent.reconciler.passes >= 2, what="two passes")
        waiting = (_admitted(agent, pod), agent.reconciler.devices is not None and agent.reconciler.devices.waiting)
        kubelet.set_pod("default", "trainer", {"train": [(GPU, ("gpu1",), (1,))]})
        wait_until(lambda: _admitted(agent, pod), what="admitted once its devices are named")
        wait_until(lambda: node.read(path) not in ("", "0-31"), what="the container pinned")
        cpus = CPUSet.parse(node.read(path))
    assert ((False, (pod["metadata"]["uid"],)), True, []) == (
        waiting,
        cpus <= NUMA1,
        lines(logs, "pod.devices_unknown"),
    )


def test_devices_never_named_are_admitted_after_the_timeout(tmp_path: Any, kubelet: PodResourcesEmulator) -> None:
    """After deviceWaitTimeout the pod is admitted without device hints: a warning line and the metric say so."""
    pod = gpu_pod()
    node = node_with(tmp_path, kubelet, "1s")
    node.add_pod(pod)
    with capture_logs() as logs, running(node.agent()) as agent:
        wait_until(lambda: _admitted(agent, pod), what="admitted after the wait")
        count = sample(agent, "podpin_devices_unknown_total")
    found = lines(logs, "pod.devices_unknown", pod="trainer")
    # The wait as the agent measured it from its first sight of the pod (a clock started here, after the agent
    # started, undercounts it on a loaded machine).
    assert (1.0, 1, True) == (count, len(found), found[0]["waited_seconds"] >= 1.0 if found else None)
    assert f"PodResources names no device of {GPU} for container train" == found[0]["problem"]


def _plan_devices(agent: Any) -> list[Any]:
    """The ``devices`` of container ``train`` in the ``/state`` plan (None until the pod is planned)."""
    for pod in agent.state().get("plan", {}).get("pods", []):
        for c in pod["containers"]:
            if pod["name"] == "trainer" and c["name"] == "train":
                return [c["devices"], c["device_alignment"]]
    return []


def test_a_restarted_agent_still_names_the_devices_of_a_restored_pod(
    tmp_path: Any, kubelet: PodResourcesEmulator
) -> None:
    """After a restart the pod comes back from the checkpoint (not admitted again); its plan still names its GPU."""
    pod = gpu_pod()
    kubelet.set_pod("default", "trainer", {"train": [(GPU, ("gpu1",), (1,))]})
    node = node_with(tmp_path, kubelet, "5s")
    node.add_pod(pod)
    expected = [[{"resource": GPU, "ids": ["gpu1"], "numa": [1]}], "aligned"]
    with running(node.agent()) as agent:
        wait_until(lambda: _plan_devices(agent) == expected, what="the GPU in the plan")
        before = node.read(node.container_cgroup(pod, "train"))
    with capture_logs() as logs, running(node.agent()) as agent:
        wait_until(lambda: _plan_devices(agent) != [], what="the restored pod planned")
        assert expected == _plan_devices(agent)
        assert before == node.read(node.container_cgroup(pod, "train"))
    assert [] == lines(logs, "pod.admitted")
