"""The agent as an NRI plugin: the runtime asks podpin for a container's CPUs before the container exists.

Each test runs the real agent (in-process, over a fixture cgroup tree, pods from a pods directory) with
``nri.socketPath`` pointing at the project's NRI runtime emulator (``tests/support/nri_runtime.py``, Go's
framing, containerd's order of calls). The pods' statuses carry no containerID and the runtime root holds no
bundle, so only NRI can name the containers.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from agent.nri.proto import nri_pb2 as pb
from agent.runtime import IdentitySource
from tests.support.agentfixture import AgentNode, lines, make_node, running, sample, wait_until
from tests.support.nri_runtime import NRIRuntime, make_container
from tests.support.nri_runtime import make_pod as nri_pod
from tests.support.podfactory import container, make_pod, runtime_id, waiting_pod


def _sandbox(raw: Mapping[str, Any]) -> pb.PodSandbox:
    """The pod's sandbox as containerd describes it to NRI."""
    return nri_pod(
        raw["metadata"]["uid"],
        raw["metadata"]["name"],
        raw["metadata"]["namespace"],
        sandbox_id=runtime_id(raw, "sandbox"),
    )


def _cpu(answer: pb.CreateContainerResponse | None) -> tuple[str, str, int | None, int | None]:
    """The CPU values of a CreateContainer answer: (cpus, mems, quota, period)."""
    assert answer is not None
    cpu = answer.adjust.linux.resources.cpu
    quota = cpu.quota.value if cpu.HasField("quota") else None
    period = cpu.period.value if cpu.HasField("period") else None
    return cpu.cpus, cpu.mems, quota, period


@pytest.fixture
def socket_path() -> Iterator[Path]:
    """A short socket path (unix socket paths hold at most 107 bytes)."""
    directory = Path(tempfile.mkdtemp(prefix="podpin-nri-"))
    yield directory / "nri.sock"
    shutil.rmtree(directory, ignore_errors=True)


def nri_node(tmp_path: Path, socket_path: Path, wait: str = "300ms") -> AgentNode:
    """A node whose agent serves NRI on ``socket_path``."""
    node = make_node(tmp_path, driver="cgroupfs")
    node.write_config(nri={"socketPath": str(socket_path), "podWaitTimeout": wait})
    return node


def test_create_after_the_pod_is_known_answers_the_planned_values(tmp_path: Path, socket_path: Path) -> None:
    """A pod the watch delivered: the answer holds the container's exclusive CPUs and no CPU limit, the pod cgroup
    already holds them (all CPUs: the container narrows), and the cgroup that appears counts as pinned through NRI
    (connected, and the runtime's socket there: ``podpin_nri_available``)."""
    node = nri_node(tmp_path, socket_path)
    web = waiting_pod("web")
    node.add_pod(web)
    with NRIRuntime(socket_path) as runtime, running(node.agent()) as agent:
        wait_until(lambda: agent.reconciler.planner.is_admitted(web["metadata"]["uid"]), what="web admitted")
        conn = runtime.wait_ready()
        sandbox = _sandbox(web)
        answer = conn.create_container(sandbox, make_container(runtime_id(web, "app"), sandbox, "app"))
        pod_cpus = node.read(node.pod_cgroup(web))
        path = node.start_container(web, "app")
        wait_until(lambda: sample(agent, "podpin_container_pins_total", source=IdentitySource.NRI), what="NRI pin")
        outcome = (
            sample(agent, "podpin_nri_requests_total", method="CreateContainer", result="ok"),
            sample(agent, "podpin_nri_connected"),
            sample(agent, "podpin_nri_available"),
        )
        final = node.read(path)
    assert (("1,17", "", -1, 100000), "0-31", "1,17", (1.0, 1.0, 1.0)) == (_cpu(answer), pod_cpus, final, outcome)


def test_create_before_the_pod_is_known_gets_the_interim_set_then_the_plan(tmp_path: Path, socket_path: Path) -> None:
    """The watch has not delivered the pod: after ``podWaitTimeout`` the container gets the shared pool, a warning
    says so, and once the pod arrives its cgroup (named by NRI alone) is corrected to the planned set."""
    node = nri_node(tmp_path, socket_path)
    web = waiting_pod("web")
    with NRIRuntime(socket_path) as runtime, capture_logs() as logs, running(node.agent()) as agent:
        conn = runtime.wait_ready()
        shared = str(agent.reconciler.plan.shared_pool) if agent.reconciler.plan is not None else ""
        sandbox = _sandbox(web)
        answer = conn.create_container(sandbox, make_container(runtime_id(web, "app"), sandbox, "app"))
        node.add_pod(web)
        path = node.start_container(web, "app")
        wait_until(lambda: node.read(path) == "1,17", what="the planned set after the pod arrived")
    warned = [(e["pod"], e["container"], e["interim"]) for e in lines(logs, "nri.pod_not_known")]
    assert (("0-31", "", None, None), [("default/web", "app", "0-31")], "0-31") == (_cpu(answer), warned, shared)


def test_synchronize_adopts_running_containers(tmp_path: Path, socket_path: Path) -> None:
    """podpin starting next to running containers: Synchronize names them, the one whose cpuset differs from the
    plan is logged and rewritten directly, and no NRI update is returned."""
    node = nri_node(tmp_path, socket_path)
    web = waiting_pod("web")
    pod_path = node.add_pod(web)
    path = node.tree.add_container(pod_path, runtime_id(web, "app"))
    sandbox = _sandbox(web)
    running_app = make_container(runtime_id(web, "app"), sandbox, "app", cpus="0-31")
    running_app.state = pb.CONTAINER_RUNNING
    with (
        NRIRuntime(socket_path, pods=[sandbox], containers=[running_app]) as runtime,
        capture_logs() as logs,
        running(node.agent()),
    ):
        conn = runtime.wait_ready()
        wait_until(lambda: node.read(path) == "1,17", what="the adopted container's planned set")
        wait_until(lambda: lines(logs, "nri.synchronize_differs"), what="the difference logged")
    adopted = [(e["pods"], e["containers"]) for e in lines(logs, "nri.adopted")]
    differs = lines(logs, "nri.synchronize_differs")[0]["containers"]
    updates = [list(r.update) for r in conn.sync_responses]
    assert ([(1, 1)], {"default/web/app": {"runtime": "0-31", "plan": "1,17"}}, [[]]) == (adopted, differs, updates)


def test_runtime_restart_reconnects(tmp_path: Path, socket_path: Path) -> None:
    """The runtime goes away (podpin says it falls back) and comes back: podpin registers again and answers."""
    node = nri_node(tmp_path, socket_path)
    web = waiting_pod("web")
    node.add_pod(web)
    runtime = NRIRuntime(socket_path)
    runtime.start()
    try:
        with capture_logs() as logs, running(node.agent()) as agent:
            wait_until(lambda: agent.reconciler.planner.is_admitted(web["metadata"]["uid"]), what="web admitted")
            runtime.wait_ready()
            runtime.stop()
            wait_until(lambda: sample(agent, "podpin_nri_connected") == 0.0, what="disconnected")
            runtime.start()
            conn = runtime.wait_ready(count=2)
            wait_until(lambda: sample(agent, "podpin_nri_connected") == 1.0, what="connected again")
            sandbox = _sandbox(web)
            answer = conn.create_container(sandbox, make_container(runtime_id(web, "app"), sandbox, "app"))
    finally:
        runtime.stop()
    fallbacks = len(lines(logs, "nri.fallback"))
    assert ("1,17", 1) == (_cpu(answer)[0], fallbacks)


def test_pool_change_rewrites_other_containers_directly(tmp_path: Path, socket_path: Path) -> None:
    """A new exclusive container admitted through CreateContainer shrinks the shared pool: the cgroup writer (not an
    NRI update) narrows the burstable level, so a running shared container no longer runs on the new CPUs."""
    node = nri_node(tmp_path, socket_path)
    other = make_pod("other", containers=[container("s", cpu="500m")], states={"s": "running"})
    node.add_pod(other)
    other_path = node.container_cgroup(other, "s")
    burstable = node.tree.qos_dir("burstable")
    web = waiting_pod("web", ts=2)
    with NRIRuntime(socket_path) as runtime, running(node.agent()):
        conn = runtime.wait_ready()
        wait_until(lambda: node.read(burstable) == "0-31", what="the whole shared pool first")
        node.add_pod(web)
        sandbox = _sandbox(web)
        answer = conn.create_container(sandbox, make_container(runtime_id(web, "app"), sandbox, "app"))
        wait_until(lambda: node.read(burstable) == "0,2-16,18-31", what="the shared pool narrowed")
        effective = node.read(other_path, "cpuset.cpus.effective")
    assert answer is not None
    assert ("1,17", [], "0,2-16,18-31") == (_cpu(answer)[0], list(answer.update), effective)


def test_update_container_reasserts_the_planned_cpuset(tmp_path: Path, socket_path: Path) -> None:
    """The kubelet's update carries a cpuset of its own: podpin answers with an update back to the planned set."""
    node = nri_node(tmp_path, socket_path)
    web = waiting_pod("web")
    node.add_pod(web)
    with NRIRuntime(socket_path) as runtime, running(node.agent()) as agent:
        wait_until(lambda: agent.reconciler.planner.is_admitted(web["metadata"]["uid"]), what="web admitted")
        conn = runtime.wait_ready()
        sandbox = _sandbox(web)
        app = make_container(runtime_id(web, "app"), sandbox, "app")
        conn.create_container(sandbox, app)
        kubelet = pb.LinuxResources()
        kubelet.cpu.cpus = "0-31"
        answer = conn.update_container(sandbox, app, kubelet)
    assert answer is not None
    assert [(runtime_id(web, "app"), "1,17")] == [(u.container_id, u.linux.resources.cpu.cpus) for u in answer.update]


def _update_cpu(answer: pb.UpdateContainerResponse | None) -> list[tuple[str, str, str, int | None, int | None]]:
    """The updates of an UpdateContainer answer: (container id, cpus, mems, quota, period) each."""
    assert answer is not None
    return [
        (
            u.container_id,
            u.linux.resources.cpu.cpus,
            u.linux.resources.cpu.mems,
            u.linux.resources.cpu.quota.value if u.linux.resources.cpu.HasField("quota") else None,
            u.linux.resources.cpu.period.value if u.linux.resources.cpu.HasField("period") else None,
        )
        for u in answer.update
    ]


def test_update_without_a_cpuset_is_answered_from_the_plan(tmp_path: Path, socket_path: Path) -> None:
    """An update carrying only a CPU quota (``cpuManagerPolicy: none``, an in-place resize) is still answered with
    the container's planned cpuset and CFS values, so ``runc update`` writes nothing stale."""
    node = nri_node(tmp_path, socket_path)
    web = waiting_pod("web")
    node.add_pod(web)
    with NRIRuntime(socket_path) as runtime, running(node.agent()) as agent:
        wait_until(lambda: agent.reconciler.planner.is_admitted(web["metadata"]["uid"]), what="web admitted")
        conn = runtime.wait_ready()
        sandbox = _sandbox(web)
        app = make_container(runtime_id(web, "app"), sandbox, "app")
        conn.create_container(sandbox, app)
        kubelet = pb.LinuxResources()
        kubelet.cpu.quota.value = 200000
        answer = conn.update_container(sandbox, app, kubelet)
    assert [(runtime_id(web, "app"), "1,17", "", -1, 100000)] == _update_cpu(answer)


def test_update_after_the_pool_changed_carries_the_new_shared_pool(tmp_path: Path, socket_path: Path) -> None:
    """A Guaranteed pod's fractional container created on the whole shared pool, then an exclusive pod admitted:
    containerd's update re-sends the creation-time cpuset, and podpin's answer replaces it with the narrowed pool."""
    node = nri_node(tmp_path, socket_path)
    other = make_pod(
        "other",
        containers=[container("x", cpu="2", memory="1Gi"), container("s", cpu="500m", memory="1Gi")],
        states={"x": "running", "s": "running"},
    )
    node.add_pod(other)
    web = waiting_pod("web", ts=2)
    with NRIRuntime(socket_path) as runtime, running(node.agent()) as agent:
        conn = runtime.wait_ready()
        wait_until(lambda: agent.reconciler.planner.is_admitted(other["metadata"]["uid"]), what="other admitted")
        sandbox = _sandbox(other)
        shared = make_container(runtime_id(other, "s"), sandbox, "s")
        created = conn.create_container(sandbox, shared)
        node.add_pod(web)
        wait_until(lambda: agent.reconciler.planner.is_admitted(web["metadata"]["uid"]), what="web admitted")
        stale = pb.LinuxResources()
        stale.cpu.cpus = _cpu(created)[0]
        answer = conn.update_container(sandbox, shared, stale)
    assert ("0,2-16,18-31", ["0,3-16,19-31"]) == (_cpu(created)[0], [u[1] for u in _update_cpu(answer)])


def test_malformed_request_is_reported_and_answered_empty(tmp_path: Path, socket_path: Path) -> None:
    """A CreateContainer whose pod uid names no cgroup: no adjustment, a warning naming the field, an error count."""
    node = nri_node(tmp_path, socket_path)
    with NRIRuntime(socket_path) as runtime, capture_logs() as logs, running(node.agent()) as agent:
        conn = runtime.wait_ready()
        sandbox = nri_pod("Not-A-UID", "bad", sandbox_id="a" * 64)
        answer = conn.create_container(sandbox, make_container("b" * 64, sandbox, "app"))
        wait_until(
            lambda: sample(agent, "podpin_nri_requests_total", method="CreateContainer", result="error"),
            what="the error counted",
        )
    assert answer is not None
    errors = [e["error"] for e in lines(logs, "nri.invalid_input")]
    expected = (
        f"pod default/bad (sandbox '{'a' * 64}'): uid: invalid pod uid 'Not-A-UID': expected an RFC 4122 UUID in "
        "lower-case hex (8-4-4-4-12) or a static pod's 32-hex config hash"
    )
    assert (False, [expected]) == (answer.HasField("adjust"), errors)


def test_socket_appearing_later_is_found(tmp_path: Path, socket_path: Path) -> None:
    """No socket at start: podpin says so once and pins as without NRI (NRI not available, so no alert); when the
    runtime starts, it connects."""
    node = nri_node(tmp_path, socket_path)
    with capture_logs() as logs, running(node.agent()) as agent:
        wait_until(lambda: lines(logs, "nri.socket_absent"), what="the absent socket said")
        before = sample(agent, "podpin_nri_available")
        with NRIRuntime(socket_path) as runtime:
            runtime.wait_ready(timeout=5.0)
            wait_until(lambda: sample(agent, "podpin_nri_connected") == 1.0, what="connected")
            after = sample(agent, "podpin_nri_available")
    assert (1, 0.0, 1.0) == (len(lines(logs, "nri.socket_absent")), before, after)
