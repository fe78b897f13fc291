"""Planner invariants under random pod sequences (hypothesis)."""

from __future__ import annotations

from typing import Any, TypedDict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.alloc import Planner
from agent.alloc.state import state_from_checkpoint, state_to_checkpoint, validate_node_state
from agent.config import config_from_mapping
from agent.cpuset import CPUSet
from agent.pods.model import pod_from_dict
from agent.quantity import cpu_millis
from tests.support.machines import machine
from tests.support.podfactory import container, make_pod, resources, sidecar

TOPOLOGY = machine(sockets=2, numa_per_socket=2, cores_per_numa=4, threads=2, memory_gib=8)


class Amounts(TypedDict, total=False):
    """Container resources as keyword arguments of ``container``/``sidecar``."""

    cpu: str
    memory: str
    cpu_request: str
    cpu_limit: str
    memory_request: str
    memory_limit: str


#: An exclusive candidate, or one of three shared containers.
container_specs = st.one_of(
    st.integers(1, 4).map(lambda n: Amounts(cpu=str(n), memory="256Mi")),
    st.sampled_from(
        [
            Amounts(cpu_request="100m", cpu_limit="500m", memory_request="64Mi", memory_limit="128Mi"),
            Amounts(cpu="250m", memory="64Mi"),
            Amounts(),
        ]
    ),
)


@st.composite
def pod_specs(draw: st.DrawFn, index: int) -> dict[str, Any]:
    """A random pod: classic or pod-level, with app, init and sidecar containers."""
    apps = draw(st.lists(container_specs, min_size=1, max_size=3))
    inits = draw(st.lists(st.tuples(st.booleans(), container_specs), max_size=2))
    pod_level = draw(st.booleans())
    containers = [container(f"app{i}", **spec) for i, spec in enumerate(apps)]
    init_containers = [
        sidecar(f"side{i}", **spec) if restartable else container(f"init{i}", **spec)
        for i, (restartable, spec) in enumerate(inits)
    ]
    pod_resources = None
    if pod_level:
        # The API server's rules: pod requests >= aggregate container requests, no container limit above the pod's.
        requested = [spec.get("cpu_request") or spec.get("cpu") for spec in apps + [spec for _, spec in inits]]
        whole = [-(-cpu_millis(cpu) // 1000) for cpu in requested if cpu]
        budget = max(sum(whole), 4) + draw(st.integers(0, 3))
        pod_resources = resources(cpu=str(budget), memory="4Gi")
    return make_pod(f"pod{index}", containers=containers, init_containers=init_containers, pod_resources=pod_resources)


def _pod(raw: dict[str, Any]) -> Any:
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
