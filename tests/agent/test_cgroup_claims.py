"""Mirror-annotation spoofing and two pods claiming one cgroup, against the API server emulator.

Issue "hold under attack" item 1, reproduced on the code before ``claims.py``: any pod could write
``kubernetes.io/config.mirror: <victim uid>``; podpin then planned the attacker onto the victim's cgroup,
re-pinned the victim's containers into the attacker's interim set and never wrote the attacker's own pod
cgroup (its ``cpu.max`` stayed whatever it was). Now the annotation counts only on a pod its Node owns (as the
kubelet's mirror pods are), and when two pods still map to one cgroup the first keeps it and the second is
reported (log line, ``podpin_cgroup_claims_refused_total``, a Warning Event) and left unpinned.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from agent.runner import Agent
from tests.support.agentfixture import AgentNode, kubeconfig, lines, running, sample, wait_until
from tests.support.apiserver_emulator import ApiServerEmulator
from tests.support.podfactory import container, make_pod

STATIC_HASH = "0123456789abcdef0123456789abcdef"
NODE_OWNER = {"apiVersion": "v1", "kind": "Node", "name": "node-1", "uid": "5e0b4c8e-0000-4000-8000-000000000001"}


def agent_for(node: AgentNode, api: ApiServerEmulator) -> Agent:
    return node.agent(pods_dir=None, kubeconfig=str(kubeconfig(node.base / "kubeconfig", api.url)))


def victim() -> dict[str, Any]:
    """A Guaranteed pod with one running 2-CPU container."""
    return make_pod(
        "victim",
        containers=[container("app", cpu="2", memory="1Gi")],
        states={"app": "running"},
        creation_timestamp="2026-01-01T00:00:01Z",
    )


def attacker(target_uid: str) -> dict[str, Any]:
    """A Guaranteed 2-CPU pod whose annotation names ``target_uid``; no Node owns it."""
    raw = make_pod(
        "attacker",
        namespace="tenant",
        containers=[container("app", cpu="2", memory="512Mi")],
        states={"app": "running"},
        creation_timestamp="2026-01-01T00:00:02Z",
    )
    raw["metadata"]["annotations"] = {"kubernetes.io/config.mirror": target_uid}
    return raw


def node_mirror_pod(name: str, *, cpu: str, second: int) -> dict[str, Any]:
    """A node-owned mirror pod of the static pod ``STATIC_HASH`` (created at ``second``), container ``etcd``."""
    raw = make_pod(
        name,
        namespace="kube-system",
        containers=[container("etcd", cpu=cpu, memory="1Gi")],
        states={"etcd": "running"},
        creation_timestamp=f"2026-01-01T00:00:{second:02d}Z",
    )
    raw["metadata"]["annotations"] = {"kubernetes.io/config.mirror": STATIC_HASH}
    raw["metadata"]["ownerReferences"] = [NODE_OWNER]
    return raw


def kubelet_cgroups(node: AgentNode, raw: dict[str, Any]) -> Path:
    """The cgroups the kubelet makes for an API pod: named by its own uid (it knows no mirror for it)."""
    plain = copy.deepcopy(raw)
    plain["metadata"].pop("annotations", None)
    return node.add_pod(plain, manifest=False)


def events(api: ApiServerEmulator) -> list[tuple[str, str]]:
    return [(e["involvedObject"]["name"], e["reason"]) for e in api.events if e["type"] == "Warning"]


def test_spoofed_mirror_annotation_is_ignored_and_reported(node: AgentNode, api: ApiServerEmulator) -> None:
    """The victim keeps its CPUs and its cpu.max, while the attacker runs and after it goes; the attacker is pinned
    on its own cgroup (its own exclusive CPUs, its pod cpu.max ``max`` as for any exclusive pod, no longer the
    kubelet's quota); the ignored annotation is one log line, one metric count and one Warning Event."""
    good = victim()
    api.add_pod(good)
    node.add_pod(good, manifest=False)
    bad = attacker(good["metadata"]["uid"])
    api.add_pod(bad)
    bad_path = kubelet_cgroups(node, bad)
    victim_path = node.pod_cgroup(good)
    with capture_logs() as logs, running(agent_for(node, api)) as agent:
        wait_until(lambda: node.read(bad_path, "cpu.max") == "max 100000", what="the attacker's own cpu.max")
        wait_until(lambda: events(api), what="the Event")
        attacker_cpus = next(node.read(child) for child in bad_path.iterdir() if child.is_dir())
        during = (node.cpus(good, "app"), node.read(victim_path, "cpu.max"), attacker_cpus)
        api.delete_pod("tenant", "attacker")
        wait_until(lambda: lines(logs, "pod.released"), what="the attacker released")
        passes = agent.reconciler.passes
        wait_until(lambda: agent.reconciler.passes >= passes + 2, what="two more passes")
        refused = sample(agent, "podpin_cgroup_claims_refused_total", reason="mirror_not_node_owned")
    assert (
        ("1,17", "max 100000", "2,18"),
        ("1,17", "max 100000"),
        [("attacker", "PodpinMirrorAnnotationIgnored")],
        [good["metadata"]["uid"]],
        1.0,
    ) == (
        during,
        (node.cpus(good, "app"), node.read(victim_path, "cpu.max")),
        events(api),
        [e["annotation"] for e in lines(logs, "pod.mirror_annotation_ignored")],
        refused,
    )


def test_second_pod_on_a_taken_cgroup_is_reported_and_the_first_left_alone(
    node: AgentNode, api: ApiServerEmulator
) -> None:
    """Two node-owned mirror pods naming one static pod: the first is pinned; the second is reported once (log,
    metric, Warning Event) and never admitted, and the first keeps its CPUs after the second goes."""
    first, second = node_mirror_pod("etcd-node-1", cpu="2", second=1), node_mirror_pod("etcd-copy", cpu="4", second=2)
    api.add_pod(first)
    node.add_pod(first, manifest=False)
    api.add_pod(second)
    with capture_logs() as logs, running(agent_for(node, api)) as agent:
        wait_until(lambda: node.cpus(first, "etcd") == "1,17", what="the static pod pinned")
        wait_until(lambda: events(api), what="the Event")
        passes = agent.reconciler.passes
        wait_until(lambda: agent.reconciler.passes >= passes + 3, what="three more passes")
        admitted = (
            agent.reconciler.planner.is_admitted(first["metadata"]["uid"]),
            agent.reconciler.planner.is_admitted(second["metadata"]["uid"]),
        )
        api.delete_pod("kube-system", "etcd-copy")
        passes = agent.reconciler.passes
        wait_until(lambda: agent.reconciler.passes >= passes + 2, what="two more passes")
        taken = sample(agent, "podpin_cgroup_claims_refused_total", reason="cgroup_taken")
    assert (
        (True, False),
        "1,17",
        [("etcd-copy", "PodpinCgroupTaken")],
        [("etcd-copy", "etcd-node-1")],
        1.0,
    ) == (
        admitted,
        node.cpus(first, "etcd"),
        events(api),
        [(e["pod"], e["holder"].split("/")[1]) for e in lines(logs, "pod.cgroup_taken")],
        taken,
    )


def _forged_mirror_pod(api: ApiServerEmulator) -> dict[str, Any]:
    """A tenant pod forging every field it can write to pass for the static pod's mirror (finding 1 of issue 22):
    the mirror annotation, a controller ownerReference to this Node by kind, name and a made-up uid, and
    ``spec.nodeName``; the Node itself has another uid."""
    api.objects.add_node("node-1", uid=NODE_OWNER["uid"])
    forged = make_pod(
        "etcd-node-1-copy",
        namespace="tenant",
        containers=[container("etcd", cpu="2", memory="1Gi")],
        states={"etcd": "running"},
        creation_timestamp="2026-01-01T00:00:01Z",
    )
    forged["metadata"]["annotations"] = {"kubernetes.io/config.mirror": STATIC_HASH}
    forged["metadata"]["ownerReferences"] = [
        {**NODE_OWNER, "uid": "5e0b4c8e-0000-4000-8000-00000000dead", "controller": True, "blockOwnerDeletion": True}
    ]
    forged["spec"]["nodeName"] = "node-1"
    return forged


def test_a_forged_node_owner_never_takes_a_static_pods_cgroup(node: AgentNode, api: ApiServerEmulator) -> None:
    """Issue 22, finding 1: a tenant pod created before the (recreated) mirror pod, forging every field it can
    write (the mirror annotation, a controller ownerReference to this Node by kind, name and a made-up uid,
    ``spec.nodeName``), is no mirror pod: the Node's uid differs. The real mirror pod holds the static pod's
    cgroup with CPUs of its own; the tenant (admitted first) is pinned on its own cgroup and reported once (log,
    metric, Warning Event)."""
    forged = _forged_mirror_pod(api)
    real = node_mirror_pod("etcd-node-1", cpu="2", second=2)
    api.add_pod(forged)
    forged_path = kubelet_cgroups(node, forged)
    api.add_pod(real)
    node.add_pod(real, manifest=False)
    with capture_logs() as logs, running(agent_for(node, api)) as agent:
        wait_until(lambda: node.cpus(real, "etcd") == "2,18", what="the static pod pinned")
        wait_until(lambda: node.read(forged_path, "cpu.max") == "max 100000", what="the tenant on its own cgroup")
        wait_until(lambda: events(api), what="the Event")
        passes = agent.reconciler.passes
        wait_until(lambda: agent.reconciler.passes >= passes + 2, what="two more passes")
        refused = sample(agent, "podpin_cgroup_claims_refused_total", reason="mirror_owner_uid_mismatch")
        taken = sample(agent, "podpin_cgroup_claims_refused_total", reason="cgroup_taken")
    ignored = lines(logs, "pod.mirror_annotation_ignored")
    assert (
        "2,18",
        "1,17",
        [("etcd-node-1-copy", "PodpinMirrorAnnotationIgnored")],
        [("5e0b4c8e-0000-4000-8000-00000000dead", NODE_OWNER["uid"])],
        (1.0, 0.0),
    ) == (
        node.cpus(real, "etcd"),
        next(node.read(child) for child in forged_path.iterdir() if child.is_dir()),
        events(api),
        [(e["owner_uid"], e["node_uid"]) for e in ignored],
        (refused, taken),
    )


def test_the_nri_lookup_by_a_static_pods_cgroup_never_finds_a_forged_mirror_pod(
    node: AgentNode, api: ApiServerEmulator
) -> None:
    """The NRI path asks for a container's pod by its cgroup's uid (a static pod's config hash): a forged mirror
    pod does not answer for it, though it is found by its own uid."""
    forged = _forged_mirror_pod(api)
    api.add_pod(forged)
    with running(agent_for(node, api)) as agent:
        wait_until(lambda: agent.reconciler.passes >= 1, what="a pass")
        by_cgroup = agent.reconciler.find_view(STATIC_HASH)
        by_uid = agent.reconciler.find_view(forged["metadata"]["uid"])
    assert (None, "etcd-node-1-copy") == (by_cgroup, by_uid.name if by_uid is not None else None)
