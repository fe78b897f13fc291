"""A long-running agent forgets every pod that left: nothing it keeps per pod grows with the pods a node ever ran.

The soak (``scripts/soak.py --no-sigkill``) showed the agent's RSS growing
under pod churn. This test churns pods of every kind (exclusive, shared,
too big to fit, malformed) through the in-process :class:`~agent.runner.Agent`
with its pods and Events going through the API server emulator, deletes them
all, and then requires every per-pod structure of the agent to be empty: the
reconciler's, the planner's, the identity book's and the bundle namer's, the
reporter's, the Event recorder's correlation cache and the metric samples
labelled with a pod.
"""

# The point of this test is the agent's private per-pod state, which no public interface shows in full.
# ruff: noqa: SLF001

from __future__ import annotations

import time
from collections.abc import Iterable
from functools import partial
from typing import Any

from agent.runner import Agent
from tests.support.agentfixture import AgentNode, kubeconfig, running, wait_until
from tests.support.apiserver_emulator import ApiServerEmulator
from tests.support.podfactory import container, make_pod

ROUNDS = 3


def _pods(round_: int) -> list[dict[str, Any]]:
    """One round's pods: two exclusive, one Burstable, one too big to fit, one malformed (a bad CPU limit)."""
    running_ = {"app": "running"}
    malformed = make_pod(f"bad-{round_}", containers=[container("app", cpu="1", memory="64Mi")], states=running_)
    malformed["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "1.5.0"
    return [
        make_pod(f"one-{round_}", containers=[container("app", cpu="1", memory="64Mi")], states=running_),
        make_pod(f"four-{round_}", containers=[container("app", cpu="4", memory="64Mi")], states=running_),
        make_pod(
            f"shared-{round_}",
            containers=[container("app", cpu_request="250m", cpu_limit="1", memory="64Mi")],
            states=running_,
        ),
        make_pod(f"huge-{round_}", containers=[container("app", cpu="40", memory="1Gi")], states=running_),
        malformed,
    ]


def _known(agent: Agent, uid: str) -> bool:
    """The agent has decided about the pod: planned, rejected or reported malformed."""
    reconciler = agent.reconciler
    plan = reconciler.plan
    planned = plan is not None and any(p.uid == uid for p in plan.pods)
    return planned or reconciler.decider.rejected(uid) or uid in agent.reconciler.reporter._malformed


def _all_known(agent: Agent, uids: set[str]) -> bool:
    return all(_known(agent, uid) for uid in uids)


def _evented(api: ApiServerEmulator, uids: set[str]) -> bool:
    """The API server holds an Event about each pod of ``uids``."""
    return uids <= {str(e["involvedObject"].get("uid")) for e in api.events}


def _per_pod(agent: Agent, uids: set[str], names: set[str]) -> dict[str, int]:
    """How many entries each per-pod structure of the agent holds about the pods ``uids`` (named ``names``)."""
    r = agent.reconciler
    reporter = agent.reconciler.reporter
    namer = r.namer
    assert namer is not None
    assert agent.recorder is not None
    identities = r.identities

    def about(keys: Iterable[object]) -> int:
        return sum(1 for key in keys if any(uid in str(key) or uid.replace("-", "_") in str(key) for uid in uids))

    samples = [s for family in agent.metrics.registry.collect() for s in family.samples]
    return {
        "decider._observations": len(r.decider._observations),
        "decider._decisions": len(r.decider._decisions),
        "decider._rejected_at": len(r.decider._rejected_at),
        "reconciler._new_cgroups": len(r._new_cgroups),
        "applier._pending": len(r.applier._pending),
        "applier._applied": about(path for path, _ in r.applier._applied),
        "applier._controllers": about(r.applier._controllers),
        "applier._usage": about(r.applier.usage),
        "claims._holders": len(r._claims._holders),
        "statuses._fed": len(r._statuses._fed),
        "identities._entries": sum(len(entries) for entries in identities._entries.values()),
        "identities._pod_ids": len(identities._pod_ids),
        "namer._retry": len(namer._retry),
        "namer._settled": len(namer._settled),
        "namer._unavailable": about(namer._unavailable),  # keyed by runtime directory, not by pod
        "pods._raw": len(r.pods._raw),
        "pods._parsed": len(r.pods._parsed),
        "pods._good": len(r.pods._good),
        "planner pods": len(r.planner.snapshot().pods),
        "planner cpu assignments": len(r.planner.snapshot().cpu.assignments),
        "reporter._warned": len(reporter._warned),
        "reporter._pinned": len(reporter._pinned),
        "reporter._malformed": len(reporter._malformed),
        "reporter._rejections": len(reporter._rejections),
        "reporter._claims": len(reporter._claims),
        "recorder._cache": about(key[2] for key in agent.recorder._cache),
        "metric samples": sum(1 for s in samples if s.labels.get("pod") in names or s.labels.get("uid") in uids),
    }


def _settled_per_pod(agent: Agent, uids: set[str], names: set[str], timeout: float = 10.0) -> dict[str, int]:
    """:func:`_per_pod` once it is all zeros (the Event recorder forgets in its own thread), or after ``timeout``."""
    deadline = time.monotonic() + timeout
    left = _per_pod(agent, uids, names)
    while any(left.values()) and time.monotonic() < deadline:
        time.sleep(0.05)
        left = _per_pod(agent, uids, names)
    return left


def test_pods_that_left_leave_nothing_behind(node: AgentNode, api: ApiServerEmulator) -> None:
    """Three rounds of five pods (exclusive, shared, unfit, malformed) created, decided, Evented and deleted: then
    every per-pod structure of the running agent holds nothing about them, the Event cache included."""
    uids: set[str] = set()
    names: set[str] = set()
    agent = node.agent(pods_dir=None, kubeconfig=str(kubeconfig(node.base / "kubeconfig", api.url)))
    with running(agent):
        for round_ in range(ROUNDS):
            created = [api.add_pod(raw) for raw in _pods(round_)]
            for raw in created:
                if not raw["metadata"]["name"].startswith("bad-"):
                    node.add_pod(raw, manifest=False)
            batch = {raw["metadata"]["uid"] for raw in created}
            uids |= batch
            names |= {raw["metadata"]["name"] for raw in created}
            evented = {raw["metadata"]["uid"] for raw in created if not raw["metadata"]["name"].startswith("shared-")}
            wait_until(partial(_all_known, agent, batch), timeout=10, what="every pod decided")
            wait_until(partial(_evented, api, evented), timeout=10, what="an Event on each pod")
            for raw in created:
                api.delete_pod(raw["metadata"]["namespace"], raw["metadata"]["name"])
                if not raw["metadata"]["name"].startswith("bad-"):
                    node.remove_pod_cgroup(raw)
        left = _settled_per_pod(agent, uids, names)
    assert dict.fromkeys(left, 0) == left
