"""Why each container runs where it runs, in words: the planner's reasons rendered by ``agent/render/reasons.py``.

The planner decides the :class:`~agent.alloc.PoolReason`; these tests admit real pods
through it and check the one sentence every output (plan, log, Event) shows.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent.alloc import Planner, ReasonKind
from agent.config import config_from_mapping
from agent.pods.model import pod_from_dict
from agent.render.reasons import reason_text, rejection_text
from tests.support.machines import machine
from tests.support.podfactory import container, make_pod, resources


def _reasons(raw: dict[str, Any], *, admit: bool = True, **config: Any) -> dict[str, tuple[ReasonKind, str]]:
    """Admit ``raw`` on a 16-CPU, 2-NUMA machine (CPU 0 reserved) and return each container's reason kind and text."""
    planner = Planner(machine(threads=1), config_from_mapping({"reservedSystemCPUs": "0", **config}, env={}).planner)
    pod = pod_from_dict(raw)
    decisions = {pod.uid: planner.admit(pod)} if admit else {}
    plan = planner.plan([pod], decisions).pods[0]
    return {c.name: (c.reason.kind, reason_text(c.reason)) for c in plan.containers}


_POD_LEVEL = resources(cpu="8", memory="8Gi")


@pytest.mark.parametrize(
    ("raw", "config", "name", "kind", "text"),
    [
        pytest.param(
            make_pod(
                containers=[container("app", cpu="4", memory_request="1Gi", memory_limit="2Gi")],
                pod_resources=_POD_LEVEL,
            ),
            {},
            "app",
            ReasonKind.NOT_ELIGIBLE,
            "memory request 1Gi ≠ limit 2Gi: not eligible for exclusive CPUs → pod shared pool",
            id="memory-request-not-limit",
        ),
        pytest.param(
            make_pod(containers=[container("app", cpu="2500m", memory="1Gi")], pod_resources=_POD_LEVEL),
            {},
            "app",
            ReasonKind.NOT_ELIGIBLE,
            "cpu 2500m is not whole CPUs → pod shared pool",
            id="fractional-in-pod-pool",
        ),
        pytest.param(
            make_pod(containers=[container("app", cpu_request="1", cpu_limit="2", memory="1Gi")]),
            {},
            "app",
            ReasonKind.NOT_ELIGIBLE,
            "Burstable pod → node shared pool",
            id="burstable",
        ),
        pytest.param(
            make_pod(containers=[container("db", cpu="4", memory="1Gi")]),
            {},
            "db",
            ReasonKind.EXCLUSIVE,
            "exclusive: 4 whole CPUs, request == limit (Guaranteed pod)",
            id="classic-exclusive",
        ),
        pytest.param(
            make_pod(containers=[container("db", cpu="4", memory="1Gi")], pod_resources=_POD_LEVEL),
            {},
            "db",
            ReasonKind.EXCLUSIVE,
            "exclusive: 4 whole CPUs, cpu and memory request == limit → a slice of the pod's CPUs",
            id="pod-level-slice",
        ),
        pytest.param(
            make_pod(containers=[container("db", cpu="4", memory="1Gi")], pod_resources=_POD_LEVEL),
            {"topologyManagerScope": "container"},
            "db",
            ReasonKind.EXCLUSIVE,
            "exclusive: 4 whole CPUs, cpu and memory request == limit → from the node",
            id="container-scope-exclusive",
        ),
        pytest.param(
            make_pod(containers=[container("proxy", cpu="1500m", memory="1Gi")]),
            {},
            "proxy",
            ReasonKind.NOT_ELIGIBLE,
            "cpu 1500m is not whole CPUs → node shared pool",
            id="classic-fractional",
        ),
        pytest.param(
            make_pod(
                containers=[container("db", cpu="2", memory="1Gi"), container("log")],
                pod_resources=resources(cpu="4500m", memory="2Gi"),
            ),
            {},
            "db",
            ReasonKind.NO_POD_CPUS,
            "pod cpu 4500m is not whole CPUs: the pod gets no CPUs of its own → node shared pool",
            id="pod-cpu-not-whole",
        ),
        pytest.param(
            make_pod(containers=[container("log", cpu_request="100m")], pod_resources=_POD_LEVEL),
            {},
            "log",
            ReasonKind.NOT_ELIGIBLE,
            "cpu request 100m without a cpu limit: not eligible for exclusive CPUs → pod shared pool",
            id="no-cpu-limit",
        ),
        pytest.param(
            make_pod(containers=[container("huge", cpu="40", memory="1Gi")]),
            {},
            "huge",
            ReasonKind.POD_REJECTED,
            "pod rejected (UnexpectedAdmissionError) → node shared pool",
            id="rejected",
        ),
        pytest.param(
            make_pod(containers=[container("db", cpu="4", memory="1Gi")]),
            {"cpuManagerPolicy": "none"},
            "db",
            ReasonKind.NO_CPU_POLICY,
            "cpuManagerPolicy none: nothing is pinned → node shared pool",
            id="policy-none",
        ),
    ],
)
def test_reason_of_each_outcome(
    raw: dict[str, Any], config: dict[str, Any], name: str, kind: ReasonKind, text: str
) -> None:
    """Each way a container ends up in its pool has its own reason kind and sentence."""
    assert (kind, text) == _reasons(raw, **config)[name]


def test_a_pod_not_admitted_yet_says_so() -> None:
    """A planned pod without a decision (not admitted yet) runs in the node shared pool, and says why."""
    raw = make_pod(containers=[container("db", cpu="4", memory="1Gi")])
    assert (ReasonKind.NOT_ADMITTED, "pod not admitted yet → node shared pool") == _reasons(raw, admit=False)["db"]


def test_rejection_text_states_the_whole_request() -> None:
    """A refused pod-level pod: pod cpu and memory, each container's request, and the free CPUs per NUMA node."""
    planner = Planner(machine(threads=1), config_from_mapping({"reservedSystemCPUs": "0"}, env={}).planner)
    raw = make_pod(
        "big",
        containers=[container("db", cpu="20", memory="4Gi"), container("proxy", cpu="100m", memory="64Mi")],
        pod_resources=resources(cpu="21", memory="5Gi"),
    )
    facts = planner.admit(pod_from_dict(raw)).facts
    assert facts is not None
    assert (
        "pod requests cpu 21 memory 5Gi: 21 CPUs of its own; containers: db cpu 20 memory 4Gi (20 exclusive), "
        "proxy cpu 100m memory 64Mi; free for exclusive use: NUMA 0 7 CPUs, NUMA 1 8 CPUs"
    ) == rejection_text(facts)


def test_rejection_text_names_free_memory_with_the_static_memory_policy() -> None:
    """With memoryManagerPolicy Static a refused pod also sees the memory each NUMA node had free."""
    config = config_from_mapping(
        {
            "reservedSystemCPUs": "0",
            "memoryManagerPolicy": "Static",
            "systemReserved": {"memory": "924Mi"},
            "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}],
            "topologyManagerPolicy": "single-numa-node",
        },
        env={},
    )
    planner = Planner(machine(threads=1), config.planner)
    raw = make_pod("wide", containers=[container("db", cpu="10", memory="4Gi")])
    facts = planner.admit(pod_from_dict(raw)).facts
    assert facts is not None
    assert rejection_text(facts).endswith("free for exclusive use: NUMA 0 7 CPUs and 63Gi, NUMA 1 8 CPUs and 64Gi")


@pytest.mark.parametrize(
    ("pod_resources", "expected"),
    [
        (
            None,
            (
                "pod requests 1 exclusive CPU; containers: db cpu 1 memory 1Gi (1 exclusive); free for exclusive use: "
                "NUMA 0 1 CPU, NUMA 1 2 CPUs"
            ),
        ),
        (
            resources(cpu="1", memory="1Gi"),
            (
                "pod requests cpu 1 memory 1Gi: 1 CPU of its own; containers: db cpu 1 memory 1Gi (1 exclusive); "
                "free for exclusive use: NUMA 0 1 CPU, NUMA 1 2 CPUs"
            ),
        ),
    ],
)
def test_rejection_text_says_one_cpu_in_the_singular(pod_resources: Any, expected: str) -> None:
    """A count of one reads "1 CPU", never "1 CPUs" (an odd CPU under full-pcpus-only, on one-core NUMA nodes)."""
    config = config_from_mapping(
        {"reservedSystemCPUs": "0", "cpuManagerPolicyOptions": {"full-pcpus-only": "true"}}, env={}
    )
    planner = Planner(machine(cores_per_numa=1, threads=2), config.planner)
    raw = make_pod("odd", containers=[container("db", cpu="1", memory="1Gi")], pod_resources=pod_resources)
    facts = planner.admit(pod_from_dict(raw)).facts
    assert facts is not None
    assert expected == rejection_text(facts)
