"""The topology manager merge with the device manager's hints: where a pod's devices decide its CPUs' NUMA node.

The machine is two NUMA nodes of 8 single-thread cores (CPUs 0-7 and 8-15,
CPU 0 reserved). The cases are the kubelet's topology manager behaviour with a
device hint provider (``pkg/kubelet/cm/topologymanager``: each policy's merge
over the CPU and device managers' hints), stated in our own words: a GPU on
NUMA 1 pulls the exclusive CPUs to NUMA 1 under best-effort, restricted and
single-numa-node, in both scopes; ``none`` ignores it; a device on both nodes
or on none leaves the CPU manager's choice alone; a GPU on a node that cannot
hold the CPUs is rejected by restricted and single-numa-node and admitted
unaligned by best-effort.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.alloc import DeviceGroup, Planner
from agent.cpuset import CPUSet
from agent.pods.model import pod_from_dict
from tests.support.gpu_node import GPU, NODE_GPUS, gpu_pod, holding, planner
from tests.support.podfactory import container, make_pod

NUMA0 = CPUSet.parse("0-7")
NUMA1 = CPUSet.parse("8-15")
ALIGNING = ("best-effort", "restricted", "single-numa-node")


def cpus_of(p: Planner, pod: Any, decision: Any, name: str = "main") -> CPUSet:
    """The exclusive CPUs the plan gives the container."""
    return p.plan([pod], {pod.uid: decision}).pods[0].container(name).cpus


@pytest.mark.parametrize("scope", ["container", "pod"])
@pytest.mark.parametrize("policy", ALIGNING)
def test_gpu_on_numa1_pulls_cpus_to_numa1(policy: str, scope: str) -> None:
    """A GPU on NUMA 1 puts the container's exclusive CPUs on NUMA 1 (without it they go to NUMA 0)."""
    p, pod = planner(policy, scope), gpu_pod()
    decision = p.admit(pod, devices=holding({"main": [NODE_GPUS[1]]}))
    assert (True, (1,)) == (decision.admitted, decision.numa_affinity)
    assert CPUSet.parse("8-9") == cpus_of(p, pod, decision)
    assert (1,) == p.plan([pod], {pod.uid: decision}).pods[0].container("main").device_numa


@pytest.mark.parametrize("policy", ALIGNING)
def test_without_devices_cpus_go_where_the_cpu_manager_puts_them(policy: str) -> None:
    """The same pod without device facts: CPUs on NUMA 0, as before the device manager existed."""
    p, pod = planner(policy), gpu_pod()
    decision = p.admit(pod)
    assert CPUSet.parse("1-2") == cpus_of(p, pod, decision)


def test_policy_none_ignores_device_hints() -> None:
    """Policy ``none`` merges nothing: the GPU on NUMA 1 does not move the CPUs."""
    p, pod = planner("none"), gpu_pod()
    decision = p.admit(pod, devices=holding({"main": [NODE_GPUS[1]]}))
    assert CPUSet.parse("1-2") == cpus_of(p, pod, decision)


@pytest.mark.parametrize("policy", ALIGNING)
def test_device_spanning_both_nodes_leaves_cpu_choice(policy: str) -> None:
    """A device on NUMA 0 and 1 fits either node alone: the CPU manager's NUMA 0 stands."""
    spanning = (DeviceGroup(resource=GPU, ids=("wide",), numa=(0, 1)),)
    p, pod = planner(policy), gpu_pod()
    decision = p.admit(pod, devices=holding({"main": spanning}, node=spanning))
    assert (True, CPUSet.parse("1-2")) == (decision.admitted, cpus_of(p, pod, decision))


@pytest.mark.parametrize("policy", ALIGNING)
def test_device_without_numa_gives_no_preference(policy: str) -> None:
    """Devices that report no NUMA node give no preference: the CPU manager's NUMA 0 stands."""
    blind = (DeviceGroup(resource=GPU, ids=("g",), numa=()),)
    p, pod = planner(policy), gpu_pod()
    decision = p.admit(pod, devices=holding({"main": blind}, node=blind))
    assert (True, CPUSet.parse("1-2")) == (decision.admitted, cpus_of(p, pod, decision))


@pytest.mark.parametrize(
    ("policy", "admitted"), [("best-effort", True), ("restricted", False), ("single-numa-node", False)]
)
def test_gpu_on_a_node_too_small_for_the_cpus(policy: str, admitted: bool) -> None:
    """8 CPUs with the GPU on NUMA 0 (7 free there): best-effort admits unaligned, the others reject the pod."""
    p, pod = planner(policy), gpu_pod(cpus={"main": 8})
    decision = p.admit(pod, devices=holding({"main": [NODE_GPUS[0]]}))
    assert (admitted, None if admitted else "TopologyAffinityError") == (decision.admitted, decision.reason)


def test_container_scope_aligns_each_container_to_its_own_gpu() -> None:
    """Container scope: one container's GPU on NUMA 1, the other's on NUMA 0; each container's CPUs follow."""
    p = planner("single-numa-node")
    pod = gpu_pod(cpus={"a": 2, "b": 2}, gpus={"a": 1, "b": 1})
    decision = p.admit(pod, devices=holding({"a": [NODE_GPUS[1]], "b": [NODE_GPUS[0]]}))
    assert decision.admitted
    assert (CPUSet.parse("8-9"), CPUSet.parse("1-2")) == (
        cpus_of(p, pod, decision, "a"),
        cpus_of(p, pod, decision, "b"),
    )


@pytest.mark.parametrize(
    ("policy", "admitted"), [("best-effort", True), ("restricted", False), ("single-numa-node", False)]
)
def test_pod_scope_takes_the_union_of_the_pods_devices(policy: str, admitted: bool) -> None:
    """Pod scope: GPUs on both nodes make {0,1} the pod's only device hint; only best-effort admits.

    {0,1} is preferred (no single node holds two GPUs), but the merge prefers a
    permutation only when every affinity in it is equal, and the CPUs' {0,1} is
    not preferred: no preferred merge exists, so restricted rejects as well.
    """
    p = planner(policy, "pod")
    pod = gpu_pod(cpus={"a": 2, "b": 2}, gpus={"a": 1, "b": 1})
    decision = p.admit(pod, devices=holding({"a": [NODE_GPUS[1]], "b": [NODE_GPUS[0]]}))
    assert admitted == decision.admitted


def test_no_devices_same_decision_as_empty_facts() -> None:
    """A pod without device requests gets the same answer with or without (empty) device facts."""
    pod = pod_from_dict(make_pod("plain", containers=[container("main", cpu="3", memory="1Gi")]))
    with_facts = planner("single-numa-node").admit(pod, devices=holding({}))
    without = planner("single-numa-node").admit(pod)
    assert (without.admitted, without.numa_affinity) == (with_facts.admitted, with_facts.numa_affinity)


def test_explain_shows_the_device_hints_in_the_merge() -> None:
    """``explain`` records the device provider's hints next to the CPU manager's."""
    p, pod = planner("restricted"), gpu_pod()
    decision = p.admit(pod, explain=True, devices=holding({"main": [NODE_GPUS[1]]}))
    assert decision.trace is not None
    [step] = decision.trace.steps
    device = [entry for entry in step.hints if entry.provider == "device"]
    assert [GPU] == [entry.resource for entry in device]
    assert [((1,), True), ((0, 1), False)] == [(h.nodes, h.preferred) for h in device[0].hints or ()]


_PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_PROPERTY
@given(
    policy=st.sampled_from(ALIGNING),
    scope=st.sampled_from(["container", "pod"]),
    cpus=st.integers(min_value=1, max_value=10),
    gpu_numa=st.sampled_from([(0,), (1,), (0, 1)]),
    gpus=st.integers(min_value=1, max_value=2),
    first=st.integers(min_value=0, max_value=7),
)
def test_admitted_affinity_meets_every_held_device(
    policy: str, scope: str, cpus: int, gpu_numa: tuple[int, ...], gpus: int, first: int
) -> None:
    """When an aligning policy admits a GPU pod, its NUMA affinity touches the NUMA nodes of every device it holds."""
    p = planner(policy, scope)
    if first:
        p.admit(pod_from_dict(make_pod("before", containers=[container("x", cpu=str(first), memory="1Gi")])))
    held = tuple(DeviceGroup(resource=GPU, ids=(f"g{i}",), numa=gpu_numa) for i in range(gpus))
    node = (*held, DeviceGroup(resource=GPU, ids=("spare",), numa=(0,)))
    decision = p.admit(gpu_pod(cpus={"main": cpus}, gpus={"main": gpus}), devices=holding({"main": held}, node=node))
    if decision.admitted and decision.numa_affinity is not None:
        assert all(set(group.numa) & set(decision.numa_affinity) for group in held)
