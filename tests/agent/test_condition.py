"""The pod condition ``podpin.io/CPUsPinned`` on the pod's status, through the API server emulator.

A rejected pod shows False with the kubelet's reason where ``kubectl describe pod`` looks (finding 2: only an Event,
which expires, said it was unpinned); a pinned pod shows True and where its containers run; a pod asking no CPU of
its own is written to only when it waits for the condition in its readiness gates. Each is one strategic merge
patch of that condition alone, with the pod's uid as a precondition, sent once however many passes run.
"""

from __future__ import annotations

from typing import Any

from agent.kube.conditions import CONDITION
from tests.agent.test_api import _more_passes, add, agent_for, gu
from tests.support.agentfixture import AgentNode, running, sample, wait_until
from tests.support.apiserver_emulator import ApiServerEmulator
from tests.support.podfactory import container, make_pod


def _condition(api: ApiServerEmulator, name: str) -> dict[str, Any] | None:
    pod = next(p for p in api.pods if p["metadata"]["name"] == name)
    return next((c for c in (pod.get("status") or {}).get("conditions") or [] if c["type"] == CONDITION), None)


def _patched(api: ApiServerEmulator, name: str) -> list[dict[str, Any]]:
    return [patch for _, pod, patch in api.status_patches if pod == name]


def test_rejected_pod_shows_false_with_the_kubelets_reason(node: AgentNode, api: ApiServerEmulator) -> None:
    """A pod that cannot fit: False, the reason and message of its Warning Event, sent once."""
    add(node, api, gu("huge", "40"))
    with running(agent_for(node, api)) as agent:
        wait_until(lambda: _condition(api, "huge") is not None and api.events, what="the condition")
        _more_passes(agent, 3)
        patched = sample(agent, "podpin_condition_patches_total", result="patched")
    condition = _condition(api, "huge")
    event = api.events[0]
    assert condition is not None
    assert ("False", event["reason"], True, 1, 1.0) == (
        condition["status"],
        condition["reason"],
        event["message"].startswith(condition["message"].split("; pod requests")[0]),
        len(_patched(api, "huge")),
        patched,
    )


def test_pinned_pod_shows_true_and_where_it_runs(node: AgentNode, api: ApiServerEmulator) -> None:
    """A Guaranteed pod with exclusive CPUs: True, reason Pinned, the Pinned Event's words; the patch holds only
    the condition and the pod's uid."""
    raw = gu("db", "2")
    add(node, api, raw)
    with running(agent_for(node, api)):
        wait_until(lambda: _condition(api, "db") is not None, what="the condition")
    condition = _condition(api, "db")
    (patch,) = _patched(api, "db")
    assert condition is not None
    assert ("True", "Pinned", "app on 1,17 (NUMA 0): ", raw["metadata"]["uid"], [CONDITION]) == (
        condition["status"],
        condition["reason"],
        condition["message"][: len("app on 1,17 (NUMA 0): ")],
        patch["metadata"]["uid"],
        [c["type"] for c in patch["status"]["conditions"]],
    )


def test_a_shared_pod_is_written_only_when_it_waits_for_the_condition(node: AgentNode, api: ApiServerEmulator) -> None:
    """A Burstable pod gets no patch; one that lists the condition in its readiness gates gets True, NodeSharedPool
    (it would otherwise never be Ready)."""
    plain = make_pod("web", containers=[container("app", cpu_request="100m")], states={"app": "running"})
    gated = make_pod("gated", containers=[container("app", cpu_request="100m")], states={"app": "running"})
    gated["spec"]["readinessGates"] = [{"conditionType": CONDITION}]
    add(node, api, plain)
    add(node, api, gated)
    with running(agent_for(node, api)) as agent:
        wait_until(lambda: _condition(api, "gated") is not None, what="the gated pod's condition")
        _more_passes(agent, 3)
    condition = _condition(api, "gated")
    assert condition is not None
    assert (("True", "NodeSharedPool"), []) == ((condition["status"], condition["reason"]), _patched(api, "web"))


def test_a_pod_gone_or_replaced_is_dropped_not_retried(node: AgentNode, api: ApiServerEmulator) -> None:
    """A patch the API server refuses because the pod was replaced (uid precondition, 409) counts as gone."""
    raw = gu("db", "2")
    add(node, api, raw)
    api.fail_next(1, 409, method="PATCH")
    with running(agent_for(node, api)) as agent:
        wait_until(lambda: sample(agent, "podpin_condition_patches_total", result="gone") == 1.0, what="a gone patch")
        failed = sample(agent, "podpin_condition_patches_total", result="failed")
    assert (None, 0.0) == (_condition(api, "db"), failed)
