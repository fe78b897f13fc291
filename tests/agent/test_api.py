"""The agent against the API server emulator: pods from list+watch, Events on pods, relists, deletes.

The agent is the in-process :class:`~agent.runner.Agent` built from a kubeconfig
that points at :class:`ApiServerEmulator` on 127.0.0.1, so every request goes
through the official client (``ApiClient``, urllib3, ``kubernetes.watch``) and
Events are real POSTs and PATCHes the emulator stores.
"""

from __future__ import annotations

from typing import Any

from structlog.testing import capture_logs

from agent.runner import Agent
from tests.support.agentfixture import AgentNode, kubeconfig, lines, running, sample, wait_until
from tests.support.apiserver_emulator import ApiServerEmulator
from tests.support.podfactory import container, make_pod, resources


def gu(name: str, cpus: str = "2", *, ts: int = 1, states: dict[str, str] | None = None) -> dict[str, Any]:
    """A Guaranteed pod with one container ``app``, running unless ``states`` says otherwise."""
    return make_pod(
        name,
        containers=[container("app", cpu=cpus, memory="1Gi")],
        states=states or {"app": "running"},
        creation_timestamp=f"2026-01-01T00:00:{ts:02d}Z",
    )


def agent_for(node: AgentNode, api: ApiServerEmulator, **changes: Any) -> Agent:
    """An in-process agent whose pods and Events go through the emulator."""
    return node.agent(pods_dir=None, kubeconfig=str(kubeconfig(node.base / "kubeconfig", api.url)), **changes)


def add(node: AgentNode, api: ApiServerEmulator, raw: dict[str, Any]) -> None:
    """Create a pod in the API server and its cgroups on the node."""
    api.add_pod(raw)
    node.add_pod(raw, manifest=False)


def events(api: ApiServerEmulator) -> list[tuple[str, str, str, str, int]]:
    """(pod, type, reason, message, count) of every Event, in creation order."""
    return [(e["involvedObject"]["name"], e["type"], e["reason"], e["message"], e["count"]) for e in api.events]


def _more_passes(agent: Agent, n: int) -> None:
    passes = agent.reconciler.passes
    wait_until(lambda: agent.reconciler.passes >= passes + n, what=f"{n} more passes")


def test_rejection_is_one_warning_with_the_kubelet_reason_and_message(node: AgentNode, api: ApiServerEmulator) -> None:
    """A pod that cannot fit gets one Warning: the kubelet's reason and message, then the pod's whole request and
    what each NUMA node had free (a 40-CPU pod is not "requested=9, available=0"), however many passes run."""
    add(node, api, gu("huge", "40"))
    with capture_logs() as logs, running(agent_for(node, api)) as agent:
        wait_until(lambda: api.events, what="the Event")
        _more_passes(agent, 3)
    message = (
        "Allocate failed due to not enough cpus available to satisfy request: requested=40, available=31, "
        "which is unexpected"
    )
    request = (
        "pod requests 40 exclusive CPUs; containers: app cpu 40 memory 1Gi (40 exclusive); "
        "free for exclusive use: NUMA 0 15 CPUs, NUMA 1 16 CPUs"
    )
    assert ([("huge", "Warning", "UnexpectedAdmissionError", f"{message}; {request}", 1)], [(message, request)]) == (
        events(api),
        [(e["message"], e["request"]) for e in lines(logs, "pod.rejected")],
    )


def test_pinned_is_posted_once_and_not_again_after_a_restart(node: AgentNode, api: ApiServerEmulator) -> None:
    """One Normal Pinned summary per pod, saying where each container runs and why: not on every resync, not again
    when the agent restarts."""
    db = make_pod(
        "db",
        containers=[container("db", cpu="4", memory="1Gi"), container("proxy", cpu="100m", memory="64Mi")],
        pod_resources=resources(cpu="5", memory="2Gi"),
        states={"db": "running", "proxy": "running"},
        creation_timestamp="2026-01-01T00:00:01Z",
    )
    add(node, api, db)
    with running(agent_for(node, api)) as agent:
        wait_until(lambda: api.events, what="the Event")
        _more_passes(agent, 3)
    with running(agent_for(node, api)) as agent:
        _more_passes(agent, 3)
    summary = (
        "db on 1-2,17-18 (NUMA 0): exclusive: 4 whole CPUs, cpu and memory request == limit → a slice of the pod's "
        "CPUs; proxy on 16: cpu 100m is not whole CPUs → pod shared pool"
    )
    assert [("db", "Normal", "Pinned", summary, 1)] == events(api)


def test_pinned_waits_for_every_container_id(node: AgentNode, api: ApiServerEmulator) -> None:
    """No Pinned while a container has no ID yet; its status update (a watch MODIFIED) gets it pinned and announced."""
    waiting = gu("web", states={"app": "waiting"})
    api.add_pod(waiting)
    node.tree.add_pod(waiting["metadata"]["uid"], "Guaranteed")
    started = gu("web")
    with running(agent_for(node, api)) as agent:
        wait_until(lambda: agent.reconciler.planner.is_admitted(started["metadata"]["uid"]), what="web admitted")
        _more_passes(agent, 2)
        before = events(api)
        node.start_container(started, "app")
        api.update_pod(started)
        wait_until(lambda: node.cpus(started, "app") == "1,17", what="web pinned")
        wait_until(lambda: api.events, what="the Event")
    summary = "app on 1,17 (NUMA 0): exclusive: 2 whole CPUs, request == limit (Guaranteed pod)"
    assert ([], [("web", "Normal", "Pinned", summary, 1)]) == (before, events(api))


def test_deleted_pod_is_released(node: AgentNode, api: ApiServerEmulator) -> None:
    """A DELETED watch event releases the pod: logged, its CPUs back in the node shared pool."""
    keep, gone = gu("keep", ts=1), gu("gone", ts=2)
    add(node, api, keep)
    add(node, api, gone)
    with capture_logs() as logs, running(agent_for(node, api)) as agent:
        wait_until(lambda: node.cpus(gone, "app") == "2,18", what="gone pinned")
        api.delete_pod("default", "gone")
        wait_until(lambda: lines(logs, "pod.released"), what="the release")
        wait_until(lambda: node.read(node.tree.qos_dir("Burstable")) == "0,2-16,18-31", what="the pool widened")
        wait_until(lambda: sample(agent, "podpin_shared_pool_size_millicores") == 29000.0, what="the pool metric")
    assert ["gone"] == [e["pod"] for e in lines(logs, "pod.released")]


def test_expired_watch_relists_and_goes_on(node: AgentNode, api: ApiServerEmulator) -> None:
    """410 Gone after a compaction: watch.relisted is logged, and a pod created afterwards is pinned."""
    add(node, api, gu("first", ts=1))
    with capture_logs() as logs, running(agent_for(node, api)):
        wait_until(lambda: any(r.query.get("watch") == "true" for r in api.requests), what="the watch")
        api.compact_history()

        def ended() -> bool:  # the stream is registered just after its request is recorded: end it until it ends
            api.drop_watches(abrupt=False)
            return bool(lines(logs, "watch.relisted"))

        wait_until(ended, what="the relist line")
        late = gu("late", ts=2)
        add(node, api, late)
        wait_until(lambda: node.cpus(late, "app") == "2,18", what="late pinned")
    assert [("node-1", "gone")] == [(e["node"], e["reason"]) for e in lines(logs, "watch.relisted")]


def test_events_that_cannot_be_posted_never_block_pinning(node: AgentNode, api: ApiServerEmulator) -> None:
    """Every Event POST fails (500): all pods are pinned anyway and each failed Event is counted."""
    pods = [gu(f"p{i}", ts=i) for i in range(4)] + [gu("huge", "40", ts=9)]
    for raw in pods:
        add(node, api, raw)
    api.fail_next(100, 500, method="POST")
    with running(agent_for(node, api)) as agent:
        wait_until(lambda: all(node.cpus(raw, "app") for raw in pods[:4]), what="every pod pinned")
        wait_until(lambda: sample(agent, "podpin_events_total", type="Normal", result="failed") == 4.0, what="counts")
        counted = (
            sample(agent, "podpin_events_total", type="Normal", result="failed"),
            sample(agent, "podpin_events_total", type="Warning", result="failed"),
        )
    assert (["1,17", "2,18", "3,19", "4,20"], (4.0, 1.0), []) == (
        [node.cpus(raw, "app") for raw in pods[:4]],
        counted,
        api.events,
    )


def test_cli_once_with_kubeconfig_from_the_environment(node: AgentNode, api: ApiServerEmulator) -> None:
    """``podpin run --once`` without --kubeconfig uses $KUBECONFIG: pods come from the API, Events go to it.

    The subprocess writes plain files, whose effective sets do not follow (read-back
    mismatches, reported as PodpinPinningFailed); only the rejection is looked at.
    """
    add(node, api, gu("web", ts=1))
    add(node, api, gu("huge", "40", ts=2))
    path = kubeconfig(node.base / "kubeconfig", api.url)
    result = node.cli("--once", env={"KUBECONFIG": str(path)}, pods_dir=False)
    rejections = [e[:3] for e in events(api) if e[2] != "PodpinPinningFailed"]
    assert (0, "1,17", [("huge", "Warning", "UnexpectedAdmissionError")]) == (
        result.returncode,
        node.cpus(gu("web"), "app"),
        rejections,
    )
