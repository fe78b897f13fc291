"""Planner invariants under random pod sequences and random restores (hypothesis)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.alloc import PlacementError, Plan, Planner, Pool
from agent.alloc.admission import Providers, admit_pod
from agent.alloc.cpumanager import CPUState, StaticCPUPolicy
from agent.alloc.memorymanager import MemoryState
from agent.alloc.state import Observed, state_from_checkpoint, state_to_checkpoint, validate_node_state
from agent.alloc.topologymanager import NUMAInfo, make_policy
from agent.config import config_from_mapping
from agent.cpuset import CPUSet
from agent.pods import ContainerKind, PodView, container_exclusive_cpus
from agent.pods.model import pod_from_dict
from tests.support.machines import machine
from tests.support.strategies import Damage, pod_specs, restore_damage

TOPOLOGY = machine(sockets=2, numa_per_socket=2, cores_per_numa=4, threads=2, memory_gib=8)


def _pod(raw: dict[str, Any]) -> PodView:
    return pod_from_dict(raw)


def _check(planner: Planner) -> None:
    state = planner.snapshot()
    validate_node_state(state, strict=False, expected_memory=None)
    held: dict[int, str] = {}
    for uid in set(state.cpu.assignments) | set(state.cpu.pod_entries):
        cpus = state.cpu.pod_entries.get(uid, CPUSet())
        for assigned in state.cpu.assignments.get(uid, {}).values():
            cpus = cpus | assigned
        for cpu in cpus:
            assert held.setdefault(cpu, uid) == uid
    assert state.online == state.cpu.default | state.cpu.assigned()
    assert state.cpu.default.is_disjoint(state.cpu.assigned())
    assert state == state_from_checkpoint(state_to_checkpoint(state))


operations = st.lists(st.tuples(st.sampled_from(["admit", "release"]), st.integers(0, 7)), min_size=1, max_size=16)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    ops=operations,
    policy=st.sampled_from(["best-effort", "restricted", "single-numa-node"]),
    scope=st.sampled_from(["pod", "container"]),
)
def test_random_sequences_keep_invariants(
    data: st.DataObject, ops: list[tuple[str, int]], policy: str, scope: str
) -> None:
    """No CPU in two pods, pools cover the CPUs, checkpoints round-trip, releasing all restores the start."""
    planner = Planner(
        TOPOLOGY,
        config_from_mapping(
            {"reservedSystemCPUs": "0,16", "topologyManagerPolicy": policy, "topologyManagerScope": scope}, env={}
        ).planner,
    )
    initial = planner.snapshot()
    pods = {i: _pod(data.draw(pod_specs(i))) for i in range(8)}
    for op, index in ops:
        pod = pods[index]
        if op == "admit":
            before = planner.snapshot()
            decision = planner.admit(pod)
            if decision.admitted and not decision.already_admitted:
                planner.release(pod.uid)
                after = planner.snapshot()
                assert (before.cpu.default, before.cpu.assignments, before.cpu.pod_entries) == (
                    after.cpu.default,
                    after.cpu.assignments,
                    after.cpu.pod_entries,
                )
                assert planner.admit(pod).admitted
            elif not decision.admitted:
                assert before is planner.snapshot()
        else:
            planner.release(pod.uid)
        _check(planner)
        plan = planner.plan(list(pods.values()))
        exclusive: dict[int, str] = {}
        for pod_plan in plan.pods:
            for c in pod_plan.containers:
                if c.pool == "exclusive" and c.kind != "init":
                    for cpu in c.cpus:
                        assert exclusive.setdefault(cpu, pod_plan.uid + c.name) == pod_plan.uid + c.name
                if c.pool == "pod_shared":
                    assert pod_plan.bubble is not None
                    assert c.cpus <= pod_plan.bubble
                if c.pool == "node_shared":
                    assert plan.shared_pool == c.cpus
    for pod in pods.values():
        planner.release(pod.uid)
    final = planner.snapshot()
    assert (initial.cpu.default, {}, {}) == (final.cpu.default, final.cpu.assignments, final.cpu.pod_entries)


# -- restores ---------------------------------------------------------------------------------
POLICIES = st.sampled_from(["best-effort", "restricted", "single-numa-node"])
SCOPES = st.sampled_from(["pod", "container"])


def _damage(pod: PodView, cpu: CPUState, damages: list[Damage]) -> None:
    """Apply ``damages`` to ``pod``'s entries in ``cpu`` (mutated); the shared set is what nobody holds, then leaks."""
    names = [c.name for c in pod.all_containers]
    entries = cpu.assignments.setdefault(pod.uid, {})
    leaked = CPUSet()
    for damage in damages:
        first, second = names[damage.first % len(names)], names[damage.second % len(names)]
        if damage.kind == "drop":
            entries.pop(first, None)
        elif damage.kind == "copy" and first in entries:
            entries[second] = entries[first]
        elif damage.kind == "leak" and first in entries:
            leaked = leaked | entries[first]
    if not entries:
        del cpu.assignments[pod.uid]
    cpu.default = TOPOLOGY.online_cpus - cpu.assigned() | leaked


def _no_double_owner(pods: list[PodView], cpu: CPUState) -> None:
    """No CPU of an exclusive sidecar or app container is another's, nor in the node shared pool or a pod shared
    pool (regular init containers run first and are left out)."""
    owners: dict[int, str] = {}
    pools = cpu.default
    for pod in pods:
        for c in pod.all_containers:
            cpus = cpu.get(pod.uid, c.name)
            if cpus is None or c.kind == ContainerKind.INIT:
                continue  # a regular init container runs before the others: its CPUs are theirs to reuse
            if container_exclusive_cpus(pod, c) == 0:
                pools = pools | cpus
            else:
                for cpu_id in cpus:
                    assert f"{pod.uid}/{c.name}" == owners.setdefault(cpu_id, f"{pod.uid}/{c.name}")
    assert CPUSet(owners).is_disjoint(pools)


def _plan_has_no_double_owner(plan: Plan) -> None:
    """The same, read from a plan."""
    owners: dict[int, str] = {}
    pools = plan.shared_pool
    for pod_plan in plan.pods:
        for c in pod_plan.containers:
            if c.kind == ContainerKind.INIT:
                continue
            if c.pool != Pool.EXCLUSIVE:
                pools = pools | c.cpus
            else:
                for cpu_id in c.cpus:
                    assert f"{pod_plan.uid}/{c.name}" == owners.setdefault(cpu_id, f"{pod_plan.uid}/{c.name}")
    assert CPUSet(owners).is_disjoint(pools)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    others=st.integers(0, 3),
    damages=restore_damage(leaks=False),
    stored=st.booleans(),
    policy=POLICIES,
    scope=SCOPES,
)
def test_a_restored_pod_never_shares_an_exclusive_cpu(
    data: st.DataObject, others: int, damages: list[Damage], stored: bool, policy: str, scope: str
) -> None:
    """A pod restored from a damaged checkpoint (stored) or from damaged cgroups (observed) — gaps, a shorter
    prefix, two containers on one set — is admitted without any CPU of an exclusive container going to a second
    exclusive container or to any pool; the state stays valid.

    Failed before the stale rule: a gap planned the earlier container on the CPUs a later one kept.
    """
    config = config_from_mapping(
        {"reservedSystemCPUs": "0,16", "topologyManagerPolicy": policy, "topologyManagerScope": scope}, env={}
    ).planner
    pods = [_pod(data.draw(pod_specs(i))) for i in range(others + 1)]
    target = pods[-1]
    first = Planner(TOPOLOGY, config)
    for pod in pods:
        first.admit(pod)
    cpu = first.snapshot().cpu.copy()
    _damage(target, cpu, damages)
    if stored:
        planner = Planner(TOPOLOGY, config, replace(first.snapshot(), cpu=cpu))
        for pod in pods[:-1]:
            planner.admit(pod)
        decision = planner.admit(target)
    else:
        planner = Planner(TOPOLOGY, config)
        for pod in pods[:-1]:
            planner.admit(pod)
        seen = Observed(containers=dict(cpu.assignments.get(target.uid, {})), pod=cpu.pod_entries.get(target.uid))
        decision = planner.admit(target, seen)
    _check(planner)
    plan = planner.plan(pods, {target.uid: decision})
    _plan_has_no_double_owner(plan)
    _no_double_owner(pods, planner.snapshot().cpu)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), damages=restore_damage(leaks=True), policy=POLICIES, scope=SCOPES)
def test_admission_from_a_damaged_state_never_shares_an_exclusive_cpu(
    data: st.DataObject, damages: list[Damage], policy: str, scope: str
) -> None:
    """The core alone (``admit_pod``), from states the planner would refuse to adopt as well (a pod's CPUs also in
    the shared pool): after the admission no CPU of an exclusive container is a second one's or in any pool.

    Failed before the stale rule: CPUs left in the shared pool stayed the pod's and the shared set's at once.
    """
    config = config_from_mapping(
        {"reservedSystemCPUs": "0,16", "topologyManagerPolicy": policy, "topologyManagerScope": scope}, env={}
    ).planner
    pod = _pod(data.draw(pod_specs(0)))
    planner = Planner(TOPOLOGY, config)
    planner.admit(pod)
    cpu = planner.snapshot().cpu.copy()
    _damage(pod, cpu, damages)
    numa = NUMAInfo.from_topology(TOPOLOGY)
    cpu_policy = StaticCPUPolicy(TOPOLOGY, config.cpu_policy_options, planner.reserved, numa)
    try:
        admit_pod(
            pod,
            policy=make_policy(config.topology_manager_policy, numa),
            scope=config.topology_manager_scope,
            providers=Providers(cpu=cpu_policy, memory=None),
            cpu=cpu,
            memory=MemoryState(),
        )
    except PlacementError:
        return  # a rejected admission's states are dropped
    _no_double_owner([pod], cpu)
