"""Runner for ``cpu_hints.json``: the static CPU policy's topology hints and its pod CPU count.

``container_hints`` is the kubelet's ``GetTopologyHints`` (container scope), ``pod_hints`` its
``GetPodTopologyHints`` (pod scope), both on a policy without reserved CPUs, as the kubelet's tests build it;
``pod_guaranteed_cpus`` is ``podGuaranteedCPUs``. Hints compare as sets; ``null`` (no preference) and ``[]``
(impossible) differ unless the case says the kubelet's test let them pass for each other.
"""

from __future__ import annotations

from typing import Any

from agent.alloc import parse_cpu_policy_options
from agent.alloc.cpumanager import CPUState, StaticCPUPolicy
from agent.alloc.topologymanager import NUMAInfo, TopologyHint, ids_of
from agent.cpuset import CPUSet
from tests.support import vectors
from tests.support.vector_runners.static_policy import pod_of


def _policy(case: dict[str, Any]) -> StaticCPUPolicy:
    topology = vectors.topology(case["topology"])
    options = parse_cpu_policy_options(case.get("options", {}).get("raw", {}))
    return StaticCPUPolicy(topology, options, CPUSet(), NUMAInfo.from_topology(topology))


def _listed(hints: object) -> list[tuple[tuple[int, ...] | None, bool]] | None:
    if hints is None:
        return None
    assert isinstance(hints, list), f"expected a listed hint list on a small machine, got {hints!r}"
    found: list[tuple[tuple[int, ...] | None, bool]] = []
    for hint in hints:
        assert isinstance(hint, TopologyHint)
        found.append((None if hint.affinity is None else ids_of(hint.affinity), hint.preferred))
    return sorted(found, key=repr)


def run(case: dict[str, Any], group: str | None) -> None:
    """Run one case by its kind."""
    assert group is None
    policy, pod = _policy(case), pod_of(case["pod"])
    if case["kind"] == "pod_guaranteed_cpus":
        assert case["expect_cpus"] == policy.pod_guaranteed_cpus(pod)
        return
    state = CPUState(
        default=CPUSet.parse(case["default_cpuset"]),
        assignments={
            uid: {name: CPUSet.parse(cpus) for name, cpus in containers.items()}
            for uid, containers in case["initial_assignments"].items()
        },
    )
    if case["kind"] == "container_hints":
        given = policy.container_hints(state, pod, pod.container(case["container"]))
    else:
        assert case["kind"] == "pod_hints"
        given = policy.pod_hints(state, pod)
    actual = _listed(None if given is None else given.get("cpu"))
    raw = case["expect_hints"]
    expected = None if raw is None else sorted(((tuple(h["mask"]), h["preferred"]) for h in raw), key=repr)
    if case["nil_equals_empty"] and not expected and not actual:
        return
    assert expected == actual
