"""The agent names new container cgroups from their runtime's bundles, before the pod status names them.

Each test runs the real agent over a fixture cgroup tree and a fixture runtime root (``--runtime-root``)
holding containerd bundles as containerd 1.7 writes them: ``config.json`` before the cgroup, annotated with
the pod uid, the container name and its kind. The pods' statuses carry no containerID for the containers
concerned, so only the bundle can name them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from agent.runner import Agent
from agent.runtime import IdentityErrorReason, IdentitySource
from tests.support.agentfixture import AgentNode, lines, make_node, running, sample, wait_until
from tests.support.bundles import bundle_path, containerd_annotations, write_bundle
from tests.support.podfactory import container, make_pod, runtime_id, waiting_pod

OTHER_UID = "5b0c1d2e-3f40-4a51-8b62-7c83d94ea5f6"


def _appear(node: AgentNode, raw: Mapping[str, Any], runtime_id: str) -> Path:
    """The container cgroup appears in one step with its files (built aside, renamed into place)."""
    pod = node.pod_cgroup(raw)
    staging = node.tree.mkcgroup(pod / f"staging-{runtime_id[:8]}", procs="4242\n")
    target = pod / node.tree.container_name(runtime_id)
    os.rename(staging, target)
    return target


def _runtime_state(node: AgentNode) -> None:
    """containerd keeps bundles on this node (its k8s.io task directory exists)."""
    bundle_path(node.runtime_root, "0" * 64).parent.parent.mkdir(parents=True, exist_ok=True)


def _applied(logs: Sequence[Mapping[str, Any]], path: Path) -> list[str | None]:
    """The ``cpuset.cpus`` values written to ``path``, in order."""
    return [e["files"].get("cpuset.cpus", {}).get("new") for e in lines(logs, "cgroup.applied", path=str(path))]


def _admitted_then_appears(node: AgentNode, agent: Agent, web: Mapping[str, Any]) -> Path:
    """Once ``web`` is admitted, its container ``app``'s bundle is written and its cgroup appears; the cgroup."""
    wait_until(lambda: agent.reconciler.planner.is_admitted(web["metadata"]["uid"]), what="web admitted")
    write_bundle(node.runtime_root, runtime_id(web, "app"), containerd_annotations(web["metadata"]["uid"], "app"))
    return _appear(node, web, runtime_id(web, "app"))


@pytest.mark.parametrize("driver", ["systemd", "cgroupfs"])
def test_container_is_pinned_from_its_bundle_before_its_status(tmp_path: Path, driver: str) -> None:
    """No containerID in the status: the bundle names the container, whose first cpuset is its own slice."""
    node = make_node(tmp_path, driver=driver)
    web = waiting_pod("web")
    node.add_pod(web)
    _runtime_state(node)
    with capture_logs() as logs, running(node.agent()) as agent:
        path = _admitted_then_appears(node, agent, web)
        wait_until(lambda: node.read(path) == "1,17", what="the container's own slice")
        wait_until(
            lambda: sample(agent, "podpin_container_pins_total", source=IdentitySource.BUNDLE), what="the pin counted"
        )
        pins = [
            sample(agent, "podpin_container_pins_total", source=s)
            for s in (IdentitySource.BUNDLE, IdentitySource.STATUS)
        ]
    applied = lines(logs, "cgroup.applied", path=str(path))
    assert (["1,17"], "container", [1.0, 0.0]) == (_applied(logs, path), applied[0]["cgroup_level"], pins)


def test_the_new_containers_line_says_where_its_pin_latency_went(tmp_path: Path) -> None:
    """Its ``cgroup.applied`` line carries ``pin_ms``: every stage of the bundle path, adding up to the total,
    which is what the pin latency histogram observed; the pod cgroup's line has none."""
    node = make_node(tmp_path)
    web = waiting_pod("web")
    node.add_pod(web)
    _runtime_state(node)
    with capture_logs() as logs, running(node.agent()) as agent:
        path = _admitted_then_appears(node, agent, web)
        wait_until(lambda: sample(agent, "podpin_pin_latency_seconds_count") == 1.0, what="the pin observed")
        observed = sample(agent, "podpin_pin_latency_seconds_sum") or 0.0
    pin = lines(logs, "cgroup.applied", path=str(path))[0]["pin_ms"]
    others = [e for e in lines(logs, "cgroup.applied") if e["path"] != str(path) and "pin_ms" in e]
    stages = ["queue", "name", "wait", "plan", "write"]
    actual = (
        ["total", *stages],
        all(value >= 0 for value in pin.values()),
        abs(sum(pin[s] for s in stages) - pin["total"]) < 0.01,
        abs(pin["total"] - observed * 1000) < 0.01,
        others,
    )
    assert (list(pin), True, True, True, []) == actual, pin


def test_sandbox_is_recognised_and_gets_the_interim_set(tmp_path: Path) -> None:
    """The sandbox's bundle says ``sandbox``: it gets the pod's interim set and is logged as the sandbox."""
    node = make_node(tmp_path)
    web = waiting_pod("web")
    node.add_pod(web)
    _runtime_state(node)
    sandbox = "5" * 64
    write_bundle(node.runtime_root, sandbox, containerd_annotations(web["metadata"]["uid"], None))
    with capture_logs() as logs, running(node.agent()) as agent:
        path = _appear(node, web, sandbox)
        wait_until(lambda: node.read(path) == "0,2-16,18-31", what="the interim set (the node shared pool)")
        del agent
    assert ["sandbox"] == [e["cgroup_level"] for e in lines(logs, "cgroup.applied", path=str(path))]


def test_bundle_naming_another_pod_is_refused_and_reported(tmp_path: Path) -> None:
    """A bundle in pod A's cgroup that claims pod B: not believed, reported (log, metric), interim set."""
    node = make_node(tmp_path)
    web = waiting_pod("web")
    node.add_pod(web)
    _runtime_state(node)
    rid = runtime_id(web, "app")
    write_bundle(node.runtime_root, rid, containerd_annotations(OTHER_UID, "app"))
    with capture_logs() as logs, running(node.agent()) as agent:
        wait_until(lambda: agent.reconciler.passes > 0, what="the first pass")
        path = _appear(node, web, rid)
        wait_until(
            lambda: sample(agent, "podpin_runtime_identity_errors_total", reason=IdentityErrorReason.UID_MISMATCH),
            what="the report",
        )
        wait_until(lambda: node.read(path) == "0,2-16,18-31", what="the interim set")
        errors = [(e["reason"], e["pod"], e["container_id"]) for e in lines(logs, "runtime.identity_error")]
    assert [(IdentityErrorReason.UID_MISMATCH, "web", rid)] == errors


def test_bundle_written_after_the_cgroup_is_read_again(tmp_path: Path) -> None:
    """A bundle that is not there yet when the cgroup appears is read again shortly and then names it."""
    node = make_node(tmp_path)
    web = waiting_pod("web")
    node.add_pod(web)
    _runtime_state(node)
    rid = runtime_id(web, "app")
    with running(node.agent()) as agent:
        wait_until(lambda: agent.reconciler.planner.is_admitted(web["metadata"]["uid"]), what="web admitted")
        path = _appear(node, web, rid)
        wait_until(lambda: node.read(path) == "0,2-16,18-31", what="the interim set first")
        write_bundle(node.runtime_root, rid, containerd_annotations(web["metadata"]["uid"], "app"))
        wait_until(lambda: node.read(path) == "1,17", timeout=3.0, what="the slice after a re-read")
        wait_until(
            lambda: sample(agent, "podpin_container_pins_total", source=IdentitySource.BUNDLE), what="the pin counted"
        )
        assert 1.0 == sample(agent, "podpin_container_pins_total", source=IdentitySource.BUNDLE)


def test_without_runtime_state_the_status_names_the_container(tmp_path: Path) -> None:
    """No runtime state under the root: said once; the container waits in the interim set for its status."""
    node = make_node(tmp_path)
    web = waiting_pod("web")
    node.add_pod(web)
    running_web = make_pod(
        "web",
        containers=[container("app", cpu="2", memory="1Gi")],
        states={"app": "running"},
        creation_timestamp="2026-01-01T00:00:01Z",
    )
    with capture_logs() as logs, running(node.agent()) as agent:
        wait_until(lambda: agent.reconciler.planner.is_admitted(web["metadata"]["uid"]), what="web admitted")
        path = _appear(node, web, runtime_id(web, "app"))
        wait_until(lambda: node.read(path) == "0,2-16,18-31", what="the interim set")
        node.write_manifest(running_web)
        wait_until(lambda: node.read(path) == "1,17", what="the slice once the status names it")
        wait_until(
            lambda: sample(agent, "podpin_container_pins_total", source=IdentitySource.STATUS), what="the pin counted"
        )
    unavailable = [e["directory"] for e in lines(logs, "runtime.bundles_unavailable")]
    assert [str(node.runtime_root / "run/containerd/io.containerd.runtime.v2.task/k8s.io")] == unavailable


def test_once_names_running_containers_from_bundles(tmp_path: Path) -> None:
    """``podpin run --once --runtime-root DIR`` (the CLI): containers running without a status are named by scan."""
    node = make_node(tmp_path, driver="cgroupfs")
    pods = [waiting_pod("a", ts=1), waiting_pod("b", "4", ts=2)]
    for raw in pods:
        node.add_pod(raw)
        rid = runtime_id(raw, "app")
        write_bundle(node.runtime_root, rid, containerd_annotations(raw["metadata"]["uid"], "app"))
        _appear(node, raw, rid)
    result = node.cli("--once")
    actual = [node.read(node.pod_cgroup(raw) / runtime_id(raw, "app")) for raw in pods]
    assert (0, ["1,17", "2-3,18-19"]) == (result.returncode, actual), result.stderr


def test_lost_checkpoint_keeps_bundle_named_containers_on_their_cpus(tmp_path: Path) -> None:
    """Rebuilt from the cgroups without any status containerID, each pod keeps the CPUs it runs on."""
    node = make_node(tmp_path)
    first = [waiting_pod("a", ts=5), waiting_pod("b", ts=6)]
    for raw in first:
        node.add_pod(raw)
        rid = runtime_id(raw, "app")
        write_bundle(node.runtime_root, rid, containerd_annotations(raw["metadata"]["uid"], "app"))
        _appear(node, raw, rid)
    node.run_once()
    before = [node.read(node.pod_cgroup(raw) / node.tree.container_name(runtime_id(raw, "app"))) for raw in first]
    (node.state_dir / "podpin_state.json").unlink()
    early = waiting_pod("early", ts=1)
    node.add_pod(early)
    with capture_logs() as logs:
        node.run_once()
    after = [node.read(node.pod_cgroup(raw) / node.tree.container_name(runtime_id(raw, "app"))) for raw in first]
    kept = sorted((e["pod"], e.get("kept_running_cpus")) for e in lines(logs, "pod.admitted"))
    assert (["1,17", "2,18"], before, [("a", ["app"]), ("b", ["app"]), ("early", None)]) == (before, after, kept)
