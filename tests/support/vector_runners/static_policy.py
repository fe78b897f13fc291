"""Runner for ``static_policy.json``: the static CPU policy against the kubelet's own test cases."""

from __future__ import annotations

from typing import Any

import pytest

from agent.alloc import OptionsError, PlacementError, parse_cpu_policy_options
from agent.alloc.cpumanager import CPUState, CPUStateError, StaticCPUPolicy, reserved_cpus_for, validate_cpu_state
from agent.alloc.topologymanager import mask_of
from agent.cpuset import CPUSet
from agent.pods.model import PodView, pod_from_dict
from tests.support import vectors

_ERROR_TYPES = {
    "error": "UnexpectedAdmissionError",
    "SMTAlignmentError": "SMTAlignmentError",
    "EmptyPodSharedPoolError": "EmptyPodSharedPoolError",
}


def _resources(
    request: str | None, limit: str | None, memory_request: str | None, memory_limit: str | None
) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", request), ("memory", memory_request)) if v is not None}
    limits = {k: v for k, v in (("cpu", limit), ("memory", memory_limit)) if v is not None}
    result: dict[str, Any] = {}
    if requests:
        result["requests"] = requests
    if limits:
        result["limits"] = limits
    return result


def _container(spec: dict[str, Any]) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "name": spec["name"],
        "image": "fake",
        "resources": _resources(spec["cpu_request"], spec["cpu_limit"], spec["memory_request"], spec["memory_limit"]),
    }
    if spec.get("restart_policy"):
        raw["restartPolicy"] = spec["restart_policy"]
    return raw


def pod_of(spec: dict[str, Any]) -> PodView:
    """The vector's pod as a raw API dict, read through the real pod model."""
    raw: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": spec["uid"], "namespace": "default", "uid": spec["uid"]},
        "spec": {
            "initContainers": [_container(c) for c in spec["init_containers"]],
            "containers": [_container(c) for c in spec["containers"]],
        },
    }
    pod_resources = spec.get("pod_resources")
    if pod_resources:
        raw["spec"]["resources"] = _resources(
            pod_resources["cpu_request"],
            pod_resources["cpu_limit"],
            pod_resources["memory_request"],
            pod_resources["memory_limit"],
        )
    return pod_from_dict(raw)


def _state(case: dict[str, Any]) -> CPUState:
    return CPUState(
        default=CPUSet.parse(case["default_cpuset"]),
        assignments={
            uid: {name: CPUSet.parse(cpus) for name, cpus in containers.items()}
            for uid, containers in case["initial_assignments"].items()
        },
    )


def _policy(case: dict[str, Any]) -> StaticCPUPolicy:
    topology = vectors.topology(case["topology"])
    options = parse_cpu_policy_options(case["options"]["raw"])
    explicit = CPUSet.parse(case["reserved_cpus"]) if case.get("reserved_cpus") else CPUSet()
    reserved = reserved_cpus_for(topology, options, case["num_reserved_cpus"], explicit)
    if case.get("reserved_cpus_derived") is not None and not explicit:
        assert CPUSet.parse(case["reserved_cpus_derived"]) == reserved
    return StaticCPUPolicy(topology, options, reserved)


def _assert_error(expected: dict[str, Any], error: PlacementError) -> None:
    assert _ERROR_TYPES[expected["type"]] == error.reason
    if "only asserts" not in expected.get("note", ""):
        assert expected["message"] == error.message


def _hint(case: dict[str, Any]) -> int | None:
    hint = case.get("topology_hint")
    return mask_of(hint["mask"]) if hint and hint.get("mask") is not None else None


def _run_allocate(case: dict[str, Any]) -> None:
    policy, state = _policy(case), _state(case)
    pod = pod_of(case["pod"])
    container = pod.container(case["container_to_allocate"])
    before = state.get(pod.uid, container.name)
    if case["expect_error"]:
        with pytest.raises(PlacementError) as err:
            policy.allocate(state, pod, container, _hint(case))
        _assert_error(case["expect_error"], err.value)
        return
    policy.allocate(state, pod, container, _hint(case))
    assigned = state.get(pod.uid, container.name)
    assert case["expect_allocation"] == (assigned is not None)
    if case["expect_allocation"]:
        assert CPUSet.parse(case["expect_assigned"]) == assigned
    if case.get("expect_default_cpuset") is not None:
        assert CPUSet.parse(case["expect_default_cpuset"]) == state.default
    if assigned is not None and before is None:
        assert state.default.is_disjoint(assigned)


def _run_allocate_cpus(case: dict[str, Any]) -> None:
    policy, state = _policy(case), _state(case)
    if case.get("call_start_first"):
        validate_cpu_state(
            state, policy.topology.online_cpus, policy.reserved, strict=policy.options.strict_cpu_reservation
        )
    affinity = mask_of(case["numa_affinity"]) if case["numa_affinity"] is not None else None
    assigned = policy.allocate_cpus(state, case["request"], affinity, CPUSet.parse(case["reusable_cpus"]))
    assert CPUSet.parse(case["expect_assigned"]) == assigned
    assert CPUSet.parse(case["expect_default_cpuset"]) == state.default


def _run_sequence(case: dict[str, Any]) -> None:
    policy, state = _policy(case), _state(case)
    pod = pod_of(case["pod"])
    for step in case["steps"]:
        if step["op"] == "allocate":
            container = pod.container(step["container"])
            if step.get("expect_error"):
                with pytest.raises(PlacementError) as err:
                    policy.allocate(state, pod, container, None)
                _assert_error(step["expect_error"], err.value)
                continue
            policy.allocate(state, pod, container, None)
            if "expect_assigned" in step:
                expected = step["expect_assigned"]
                actual = state.get(pod.uid, container.name)
                assert (CPUSet.parse(expected) if expected is not None else None) == actual
        elif step["op"] == "remove":
            policy.remove_container(state, pod.uid, step["container"])
        elif step["op"] == "check_default":
            assert CPUSet.parse(step["expect_default_cpuset"]) == state.default
        else:
            raise AssertionError(f"unknown step {step['op']!r}")
    if "expect_uncore_cache_ids" in case:
        assigned = CPUSet()
        for container in pod.containers:
            assigned = assigned | (state.get(pod.uid, container.name) or CPUSet())
        assert sorted(case["expect_uncore_cache_ids"]) == sorted(set(policy.topology.uncores_of(assigned)))


def _construction_error(case: dict[str, Any]) -> str | None:
    expected = case.get("expect_policy_construction_error")
    if isinstance(expected, dict):
        return str(expected["message"])
    return expected


def _run_start(case: dict[str, Any]) -> None:
    construction_error = _construction_error(case)
    if construction_error is not None:
        with pytest.raises((OptionsError, PlacementError)) as failure:
            _policy(case)
        actual = failure.value.message if isinstance(failure.value, PlacementError) else str(failure.value)
        assert construction_error == actual
        return
    policy, state = _policy(case), _state(case)
    strict = policy.options.strict_cpu_reservation
    if case["expect_error"]:
        with pytest.raises(CPUStateError) as err:
            validate_cpu_state(state, policy.topology.online_cpus, policy.reserved, strict=strict)
        assert case["expect_error"]["message"] == str(err.value)
        return
    validate_cpu_state(state, policy.topology.online_cpus, policy.reserved, strict=strict)
    assert CPUSet.parse(case["expect_default_cpuset"]) == state.default


def _run_remove(case: dict[str, Any]) -> None:
    policy, state = _policy(case), _state(case)
    policy.remove_container(state, case["remove"]["pod_uid"], case["remove"]["container"])
    assert CPUSet.parse(case["expect_default_cpuset"]) == state.default


def _run_allocate_pod(case: dict[str, Any]) -> None:
    policy, state = _policy(case), _state(case)
    pod = pod_of(case["pod"])
    metrics = case.get("expect_metrics", {})
    if case["expect_error"]:
        with pytest.raises(PlacementError) as err:
            policy.allocate_pod(state, pod, None)
        _assert_error(case["expect_error"], err.value)
        assert 1 == metrics.get("total_errors", 1)
        return
    result = policy.allocate_pod(state, pod, None)
    assert result is not None
    expected = {
        uid: {name: CPUSet.parse(cpus) for name, cpus in containers.items()}
        for uid, containers in case["expect_assignments"].items()
    }
    assert expected == {uid: dict(c) for uid, c in state.assignments.items()}
    assert CPUSet.parse(case["expect_default_cpuset"]) == state.default
    if metrics:
        assert metrics["total_allocs"] == len(result.exclusive) + len(result.pod_shared)
        assert metrics["exclusive_assignments"] == len(result.exclusive)
        assert metrics["pod_shared_pool_assignments"] == len(result.pod_shared)


_RUNNERS = {
    "allocate": _run_allocate,
    "allocate_cpus": _run_allocate_cpus,
    "sequence": _run_sequence,
    "start": _run_start,
    "remove": _run_remove,
    "allocate_pod": _run_allocate_pod,
}


def run(case: dict[str, Any], group: str | None) -> None:
    """Run one static-policy case by its kind."""
    assert group is None
    _RUNNERS[case["kind"]](case)
