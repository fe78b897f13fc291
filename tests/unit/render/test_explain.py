"""``podpin plan --explain``: the walk-through of one admission, from the planner's trace to the words.

The planner records each merge only when asked (``admit(pod, explain=True)``);
these tests admit real pods through it on synthetic machines and check the
trace's values (hints in the kubelet's order, best hint, verdict) and the text
and JSON built from them.
"""

from __future__ import annotations

from typing import Any

from agent.alloc import AdmissionTrace, Planner, PodPlan
from agent.alloc.topologymanager import TopologyHint, mask_of
from agent.config import config_from_mapping
from agent.pods.model import pod_from_dict
from agent.render.explain import MAX_HINTS_SHOWN, explain_text, explain_to_dict
from agent.topology.model import Topology
from tests.support.machines import machine
from tests.support.podfactory import container, make_pod, resources


def _explain(
    raw: dict[str, Any], *, topology: Topology | None = None, before: tuple[dict[str, Any], ...] = (), **config: Any
) -> tuple[AdmissionTrace, PodPlan]:
    """Admit ``before`` then ``raw`` (explained) on a 2-NUMA, 16-CPU machine with CPU 0 reserved."""
    settings = {"reservedSystemCPUs": "0", **config}
    planner = Planner(topology or machine(threads=1), config_from_mapping(settings, env={}).planner)
    for other in before:
        assert planner.admit(pod_from_dict(other)).admitted
    pod = pod_from_dict(raw)
    decision = planner.admit(pod, explain=True)
    assert decision.trace is not None
    return decision.trace, planner.plan([pod], {pod.uid: decision}).pods[0]


def _hint(*nodes: int, preferred: bool) -> TopologyHint:
    return TopologyHint(mask_of(nodes), preferred)


_DB = make_pod(
    "db",
    containers=[container("db", cpu="4", memory="1Gi"), container("proxy", cpu="100m", memory="64Mi")],
    pod_resources=resources(cpu="5", memory="2Gi"),
)


def test_admissions_are_traced_only_when_asked() -> None:
    """A plain admission carries no trace: the agent's hot path records nothing."""
    planner = Planner(machine(threads=1), config_from_mapping({"reservedSystemCPUs": "0"}, env={}).planner)
    assert None is planner.admit(pod_from_dict(_DB)).trace


def test_pod_scope_one_merge_for_the_whole_pod() -> None:
    """Pod scope: one merge over the pod's CPU hints, in the kubelet's order, the best one preferred and admitted."""
    trace, plan = _explain(_DB)
    (step,) = trace.steps
    assert (
        True,
        None,
        [("cpu", "cpu", (_hint(0, preferred=True), _hint(1, preferred=True), _hint(0, 1, preferred=False)))],
        _hint(0, preferred=True),
        True,
        (0,),
    ) == (
        trace.pod_level,
        step.container,
        [(h.provider, h.resource, h.hints) for h in step.hints],
        step.best,
        step.admitted,
        plan.numa_affinity,
    )


def test_pod_scope_text_walks_through_request_hints_choice_and_cpus() -> None:
    """The text names the request, the policy and scope, the hints, the merge, the chosen node and the CPUs taken."""
    trace, plan = _explain(_DB)
    assert "default/db  (uid " in explain_text(trace, plan)
    lines = explain_text(trace, plan).splitlines()
    assert [
        (
            "  pod requests cpu 5 memory 2Gi: 5 CPUs of its own; containers: db cpu 4 memory 1Gi (4 exclusive), "
            "proxy cpu 100m memory 64Mi; free for exclusive use: NUMA 0 7 CPUs, NUMA 1 8 CPUs"
        ),
        "",
        (
            "topology manager: policy best-effort, scope pod: one merge for the whole pod, "
            "then the pod's CPUs are carved at once (KEP-5526); best-effort admits the best hint, preferred or not"
        ),
        "hints for the pod:",
        "  cpu  (CPU manager)  NUMA 0 (preferred), NUMA 1 (preferred), NUMA 0,1",
        "  merge: best hint NUMA 0 (preferred) -> admitted",
        (
            "  why: NUMA 0: the narrowest placement every resource allows and every provider prefers (ties go to the "
            "lowest-numbered nodes)"
        ),
        "",
        "chosen NUMA nodes: 0",
        "CPUs taken:",
        "  the pod's CPUs: 1-5",
    ] == lines[1:12]
    assert (["db", "exclusive", "1-4", "NUMA", "0"], ["proxy", "pod_shared", "5", "NUMA", "0"]) == (
        lines[12].split()[:5],
        lines[13].split()[:5],
    )


def test_container_scope_one_merge_per_container() -> None:
    """Container scope: a merge for each container; a shared container's CPU provider has no preference, which the
    merge turns into every node, preferred (the kubelet's default affinity)."""
    trace, _ = _explain(_DB, topologyManagerScope="container")
    assert [("db", _hint(0, preferred=True)), ("proxy", _hint(0, 1, preferred=True))] == [
        (step.container, step.best) for step in trace.steps
    ]
    assert [None] == [h.hints for h in trace.steps[1].hints]


#: Two pods that leave 2 free CPUs on NUMA 0 and 3 on NUMA 1, and a pod that needs 4: no single node has room.
_BUSY = (
    make_pod("busy-0", containers=[container("c", cpu="5", memory="1Gi")]),
    make_pod("busy-1", containers=[container("c", cpu="5", memory="1Gi")]),
)
_WIDE = make_pod("wide", containers=[container("c", cpu="4", memory="1Gi")])


def test_restricted_rejection_says_why() -> None:
    """restricted: when no single node has room the best hint is not preferred, the pod is rejected, and it says so."""
    trace, plan = _explain(_WIDE, before=_BUSY, topologyManagerPolicy="restricted")
    text = explain_text(trace, plan)
    assert (False, "TopologyAffinityError", _hint(0, 1, preferred=False)) == (
        trace.admitted,
        trace.reason,
        trace.steps[0].best,
    )
    assert "  why: the best hint, NUMA 0,1, is not preferred: restricted rejects the pod" in text.splitlines()
    assert "REJECTED: TopologyAffinityError" in text.splitlines()


def test_best_effort_takes_a_hint_nobody_prefers() -> None:
    """best-effort admits a non-preferred best hint and says alignment is not guaranteed."""
    trace, plan = _explain(_WIDE, before=_BUSY)
    assert (True, _hint(0, 1, preferred=False)) == (trace.admitted, trace.steps[0].best)
    assert "alignment is not guaranteed" in explain_text(trace, plan)


def test_memory_hints_are_shown_with_the_static_memory_policy() -> None:
    """With memoryManagerPolicy Static the memory manager's hints are part of the merge."""
    config: dict[str, Any] = {
        "memoryManagerPolicy": "Static",
        "systemReserved": {"cpu": "1", "memory": "924Mi"},
        "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}],
    }
    trace, _ = _explain(_DB, **config)
    assert [("cpu", "cpu"), ("memory", "memory")] == [(h.provider, h.resource) for h in trace.steps[0].hints]


def test_policy_none_merges_nothing() -> None:
    """topologyManagerPolicy none: no merge steps, and the text says nothing is aligned."""
    trace, plan = _explain(_DB, topologyManagerPolicy="none")
    assert ((), True) == (trace.steps, "policy none: no hints are merged" in explain_text(trace, plan))


def test_hint_bitmaps_of_a_large_machine_are_listed_and_capped() -> None:
    """Beyond 8 NUMA nodes the CPU hints are a bitmap; the trace lists them in order and the text shows a few."""
    big = machine(sockets=2, numa_per_socket=8, cores_per_numa=2, threads=1)
    raw = make_pod("p", containers=[container("c", cpu="2", memory="1Gi")])
    trace, plan = _explain(raw, topology=big, topologyManagerPolicyOptions={"max-allowable-numa-nodes": "16"})
    hints = trace.steps[0].hints[0].hints
    assert hints is not None
    # CPU 0 is reserved, so NUMA 0 alone (2 CPUs) cannot hold 2: every other non-empty set of the 16 nodes can.
    assert (2**16 - 2, (_hint(1, preferred=True), _hint(2, preferred=True))) == (len(hints), hints[:2])
    line = next(line for line in explain_text(trace, plan).splitlines() if line.startswith("  cpu"))
    assert f"… and {len(hints) - MAX_HINTS_SHOWN} more (3 of them preferred)" in line


def test_json_form_holds_the_trace_and_the_sentences() -> None:
    """The JSON walk-through: policy, scope, request, each step's hints, best hint, verdict and why."""
    trace, plan = _explain(_DB)
    document = explain_to_dict(trace, plan)
    step = document["steps"][0]
    assert (
        "best-effort",
        "pod",
        "5",
        [{"numa": [0], "preferred": True}, {"numa": [1], "preferred": True}, {"numa": [0, 1], "preferred": False}],
        {"numa": [0], "preferred": True},
        [0],
    ) == (
        document["policy"],
        document["scope"],
        document["request"]["pod_cpu"],
        step["hints"][0]["hints"],
        step["best"],
        document["numa_affinity"],
    )
