"""The plugin against the NRI runtime emulator: registration, Synchronize, every event, answers and failures."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from structlog.testing import capture_logs

from agent.cpuset import CPUSet
from agent.nri import (
    CallResult,
    ConnectionKind,
    ContainerAdjustment,
    ContainerUpdate,
    CPUResources,
    CreateResult,
    NRIMethod,
    PluginState,
)
from agent.nri.plugin import NRIPlugin
from agent.nri.proto import nri_pb2 as pb
from tests.support.nri_plugin import RecordingHandler, Reports, running_plugin, short_socket_path, wait_for
from tests.support.nri_runtime import NRIGeneration, NRIRuntime, PluginConn, make_container, make_pod

POD = make_pod("0c9e8a54", name="trading-engine", namespace="trading")


@contextlib.contextmanager
def connected(
    handler: RecordingHandler, *, runtime: dict[str, Any] | None = None, **plugin: Any
) -> Iterator[tuple[NRIRuntime, PluginConn, NRIPlugin, Reports]]:
    """A runtime emulator and a running plugin, connected and synchronized."""
    reports = Reports()
    with short_socket_path() as path, NRIRuntime(path, **(runtime or {})) as emulator:
        nri = NRIPlugin(handler, socket_path=path, on_report=reports, backoff=(0.05, 0.2), **plugin)
        with running_plugin(nri):
            yield emulator, emulator.wait_ready(), nri, reports


def _cpu(message: pb.LinuxResources) -> tuple[str, str, int | None, int | None]:
    cpu = message.cpu
    quota = cpu.quota.value if cpu.HasField("quota") else None
    period = cpu.period.value if cpu.HasField("period") else None
    return cpu.cpus, cpu.mems, quota, period


def test_registers_as_podpin_90_and_subscribes_to_exactly_its_events() -> None:
    """RegisterPlugin names podpin with index 90; Configure subscribes the seven events and nothing else."""
    handler = RecordingHandler()
    with connected(handler) as (_, conn, nri, _reports):
        assert ("podpin", "90") == (conn.registration.plugin_name, conn.registration.plugin_idx)  # type: ignore[union-attr]
        subscribed = [pb.Event.Name(e) for e in range(1, 15) if conn.subscribed(e)]
        assert [
            "RUN_POD_SANDBOX",
            "STOP_POD_SANDBOX",
            "REMOVE_POD_SANDBOX",
            "CREATE_CONTAINER",
            "UPDATE_CONTAINER",
            "STOP_CONTAINER",
            "REMOVE_CONTAINER",
        ] == subscribed
        status = nri.status()
        assert (PluginState.SYNCHRONIZED, True, "emulated-containerd", "1.7.24", 1) == (
            status.state,
            status.connected,
            status.runtime_name,
            status.runtime_version,
            status.sessions,
        )


def test_synchronize_hands_over_the_runtime_state_and_returns_updates() -> None:
    """Synchronize gives the handler every pod and container as values; its updates go back to the runtime."""
    other = make_pod("u2", name="web")
    containers = [make_container("c1", POD, "engine", cpus="0-15"), make_container("c2", other, "nginx")]
    handler = RecordingHandler(
        answers={"synchronize": lambda _pods, _cs: [ContainerUpdate(container_id="c1", cpuset_cpus=CPUSet([2, 3]))]}
    )
    with connected(handler, runtime={"pods": [POD, other], "containers": containers}) as (_, conn, _nri, _reports):
        (name, pods, seen), *_ = handler.calls
        assert ("synchronize", ["0c9e8a54", "u2"], ["c1", "c2"]) == (name, [p.uid for p in pods], [c.id for c in seen])
        assert CPUSet.range(0, 15) == seen[0].resources.cpus
        assert [("c1", ("2-3", "", None, None))] == [
            (u.container_id, _cpu(u.linux.resources)) for u in conn.sync_responses[-1].update
        ]


def test_split_synchronize_is_collected_into_one_handler_call() -> None:
    """A Synchronize split into 'more' chunks reaches the handler once, whole; only the last answer has updates.
    The connection events say the runtime's request timeout, and ``synchronized`` how much came in how many chunks
    (the evidence, on a real containerd 2.x, that a large Synchronize was split)."""
    pods = [make_pod(f"u{i}") for i in range(5)]
    containers = [make_container(f"c{i}", pods[i]) for i in range(5)]
    handler = RecordingHandler(
        answers={"synchronize": lambda _p, _c: [ContainerUpdate(container_id="c4", cpu_quota=-1)]}
    )
    runtime = {"pods": pods, "containers": containers, "sync_chunk": 2, "request_timeout": 1.0}
    with connected(handler, runtime=runtime) as (_, conn, _nri, reports):
        assert [("synchronize", 5, 5)] == [(n, len(p), len(c)) for n, p, c in handler.calls]
        assert [(True, 0), (True, 0), (False, 1)] == [(r.more, len(r.update)) for r in conn.sync_responses]
        wait_for(lambda: reports.connections(ConnectionKind.SYNCHRONIZED), what="the synchronized event")
        connected_event = reports.connections(ConnectionKind.CONNECTED)[0]
        synced = reports.connections(ConnectionKind.SYNCHRONIZED)[0]
    chunks = [
        pb.SynchronizeRequest(pods=pods[at : at + 2], containers=containers[at : at + 2], more=at < 4)
        for at in (0, 2, 4)
    ]
    sent = sum(len(chunk.SerializeToString()) for chunk in chunks)
    assert ((1.0, None), (1.0, 5, 5, 3, sent)) == (
        (connected_event.request_timeout, connected_event.sync_chunks),
        (synced.request_timeout, synced.sync_pods, synced.sync_containers, synced.sync_chunks, synced.sync_bytes),
    )


def test_a_runtime_that_does_not_tell_its_timeout_is_reported_as_unknown_and_its_deadlines_still_bound() -> None:
    """NRI v0.6 (containerd 1.7) has no ``request_timeout`` in Configure: ``connected`` says None rather than a
    default podpin never saw, and an answer is still bounded by 75 % of the request's own 1 s deadline."""
    release = threading.Event()

    def slow(_pod: Any, _container: Any) -> CreateResult:
        release.wait(5)
        return CreateResult(adjustment=ContainerAdjustment(cpuset_cpus=CPUSet([7])))

    handler = RecordingHandler(answers={"create_container": slow})
    runtime = {"request_timeout": 1.0, "tells_timeouts": False}
    with connected(handler, runtime=runtime, handler_timeout=5.0) as (_, conn, _nri, reports):
        wait_for(lambda: reports.connections(ConnectionKind.SYNCHRONIZED), what="the synchronized event")
        started = time.monotonic()
        reply = conn.create_container(POD, make_container("slow", POD))  # raises DeadlineExceededError if late
        took = time.monotonic() - started
        release.set()
        told = [event.request_timeout for event in reports.connections(ConnectionKind.CONNECTED)]
        told += [event.request_timeout for event in reports.connections(ConnectionKind.SYNCHRONIZED)]
    assert ([None, None], pb.CreateContainerResponse(), True) == (told, reply, 0.75 <= took < 1.0)


def test_synchronize_beyond_the_bounds_answers_what_it_kept_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 22, finding 5: past ``MAX_SYNC_CONTAINERS`` the rest of a Synchronize is counted, not kept; the last
    chunk is answered for what was kept, and a ``truncated`` outcome names what was left out."""
    from agent.nri import service

    monkeypatch.setattr(service, "MAX_SYNC_CONTAINERS", 3)
    pods = [make_pod(f"u{i}") for i in range(5)]
    containers = [make_container(f"c{i}", pods[i]) for i in range(5)]
    handler = RecordingHandler(
        answers={"synchronize": lambda _p, _c: [ContainerUpdate(container_id="c0", cpu_quota=-1)]}
    )
    runtime = {"pods": pods, "containers": containers, "sync_chunk": 2}
    with connected(handler, runtime=runtime) as (_, conn, _nri, reports):
        kept = [(n, [p.uid for p in ps], [c.id for c in cs]) for n, ps, cs in handler.calls]
        truncated = [o.error for o in reports.calls(CallResult.TRUNCATED)]
        answers = [(r.more, len(r.update)) for r in conn.sync_responses]
    assert [("synchronize", ["u0", "u1", "u2"], ["c0", "c1", "c2"])] == kept
    assert [(True, 0), (True, 0), (False, 1)] == answers
    assert [True] == ["2 pods and 2 containers left out" in str(error) for error in truncated]


def test_synchronize_bytes_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``MAX_SYNC_BYTES`` of chunks nothing more is kept (a runtime that never ends its Synchronize grew the
    agent to 578 MB); the handler gets what came before."""
    from agent.nri import service

    pods = [make_pod(f"u{i}") for i in range(6)]
    containers = [make_container(f"c{i}", pods[i]) for i in range(6)]
    one_chunk = len(pb.SynchronizeRequest(pods=pods[:2], containers=containers[:2], more=True).SerializeToString())
    monkeypatch.setattr(service, "MAX_SYNC_BYTES", one_chunk + 10)
    handler = RecordingHandler()
    runtime = {"pods": pods, "containers": containers, "sync_chunk": 2}
    with connected(handler, runtime=runtime) as (_, _conn, _nri, reports):
        kept = [(len(ps), len(cs)) for _, ps, cs in handler.calls]
        truncated = reports.calls(CallResult.TRUNCATED)
    assert ([(2, 2)], 1) == (kept, len(truncated))


@pytest.mark.parametrize("mode", list(NRIGeneration))
def test_create_container_returns_the_handlers_adjustment_and_other_updates(mode: NRIGeneration) -> None:
    """CreateContainer answers with the handler's cpuset, mems, quota and period, plus updates of other containers."""
    result = CreateResult(
        adjustment=ContainerAdjustment(
            cpuset_cpus=CPUSet([1, 2, 17, 18]), cpuset_mems=CPUSet([0]), cpu_quota=-1, cpu_period=100000
        ),
        updates=(ContainerUpdate(container_id="sidecar", cpuset_cpus=CPUSet([3, 19]), ignore_failure=True),),
    )
    handler = RecordingHandler(answers={"create_container": lambda _pod, _c: result})
    with connected(handler, runtime={"mode": mode}) as (_, conn, _nri, reports):
        reply = conn.create_container(POD, make_container("db", POD, "database"))
        assert reply is not None
        assert ("1-2,17-18", "0", -1, 100000) == _cpu(reply.adjust.linux.resources)
        assert [("sidecar", ("3,19", "", None, None), True)] == [
            (u.container_id, _cpu(u.linux.resources), u.ignore_failure) for u in reply.update
        ]
        name, pod, container = handler.calls[-1]
        assert ("create_container", "0c9e8a54", "trading", "db", "database", "/kubepods/pod0c9e8a54/db") == (
            name,
            pod.uid,
            pod.namespace,
            container.id,
            container.name,
            container.cgroups_path,
        )
        outcome = reports.calls()[-1]
        assert (NRIMethod.CREATE_CONTAINER, CallResult.OK, "0c9e8a54", "db") == (
            outcome.event,
            outcome.result,
            outcome.pod_uid,
            outcome.container_id,
        )


@pytest.mark.parametrize("mode", list(NRIGeneration))
def test_pod_and_container_events_reach_the_handler(mode: NRIGeneration) -> None:
    """Run/Stop/RemovePodSandbox and Stop/RemoveContainer reach the handler in order, dedicated calls or StateChange."""
    handler = RecordingHandler()
    container = make_container("c1", POD)
    with connected(handler, runtime={"mode": mode}) as (_, conn, _nri, reports):
        conn.run_pod_sandbox(POD)
        conn.create_container(POD, container)
        conn.stop_container(POD, container)
        conn.remove_container(POD, container)
        conn.stop_pod_sandbox(POD)
        conn.remove_pod_sandbox(POD)
        assert [
            "synchronize",
            "run_pod_sandbox",
            "create_container",
            "stop_container",
            "remove_container",
            "stop_pod_sandbox",
            "remove_pod_sandbox",
        ] == handler.names()
        assert ["0c9e8a54"] * 6 == [call[1].uid for call in handler.calls[1:]]
        assert ["c1", "c1", "c1"] == [call[2].id for call in handler.calls[2:5]]
        assert [
            NRIMethod.SYNCHRONIZE,
            NRIMethod.RUN_POD_SANDBOX,
            NRIMethod.CREATE_CONTAINER,
            NRIMethod.STOP_CONTAINER,
            NRIMethod.REMOVE_CONTAINER,
            NRIMethod.STOP_POD_SANDBOX,
            NRIMethod.REMOVE_POD_SANDBOX,
        ] == [o.event for o in reports.calls(CallResult.OK)]


def test_unsubscribed_events_are_not_sent() -> None:
    """The emulated runtime, like containerd, sends only subscribed events: StartContainer is not one."""
    handler = RecordingHandler()
    with connected(handler) as (_, conn, _nri, _reports):
        assert (False, False) == (conn.subscribed(pb.START_CONTAINER), conn.subscribed(pb.POST_CREATE_CONTAINER))


def test_update_container_passes_the_requested_resources() -> None:
    """UpdateContainer gives the handler the resources the kubelet asked for; its updates are the answer."""
    requested = pb.LinuxResources()
    requested.cpu.cpus = "0-3"
    requested.cpu.quota.value = 200000
    requested.cpu.period.value = 100000
    handler = RecordingHandler(
        answers={"update_container": lambda _pod, c, _r: [ContainerUpdate(container_id=c.id, cpuset_cpus=CPUSet([5]))]}
    )
    with connected(handler) as (_, conn, _nri, _reports):
        reply = conn.update_container(POD, make_container("c1", POD), requested)
        assert reply is not None
        assert CPUResources(quota=200000, period=100000, cpus=CPUSet.range(0, 3)) == handler.calls[-1][3]
        assert [("c1", ("5", "", None, None))] == [(u.container_id, _cpu(u.linux.resources)) for u in reply.update]


def test_stop_container_returns_updates_of_other_containers() -> None:
    """StopContainer answers with the handler's updates (a pool growing back)."""
    handler = RecordingHandler(
        answers={
            "stop_container": lambda _pod, _c: [ContainerUpdate(container_id="other", cpuset_cpus=CPUSet.range(1, 7))]
        }
    )
    with connected(handler) as (_, conn, _nri, _reports):
        reply = conn.stop_container(POD, make_container("c1", POD))
        assert reply is not None
        assert [("other", "1-7")] == [(u.container_id, u.linux.resources.cpu.cpus) for u in reply.update]


def test_unsolicited_updates_go_to_the_runtime_and_failures_come_back() -> None:
    """update_containers sends UpdateContainers; the updates the runtime could not apply come back as values."""
    handler = RecordingHandler()
    update = ContainerUpdate(container_id="c1", cpuset_cpus=CPUSet([4, 5]), cpu_quota=-1, cpu_period=100000)
    with connected(handler) as (_, conn, nri, _reports):
        assert () == nri.update_containers([update])
        conn.fail_updates = True
        assert (update,) == nri.update_containers([update])
        assert [["c1"], ["c1"]] == [[u.container_id for u in r.update] for r in conn.unsolicited]


def test_handler_exception_gives_an_empty_answer_and_is_reported() -> None:
    """A raising handler: the runtime gets no adjustment, the outcome names the error, the connection lives on."""
    answers: list[Exception | CreateResult] = [
        RuntimeError("planner bug"),
        CreateResult(adjustment=ContainerAdjustment(cpuset_cpus=CPUSet([1]))),
    ]
    calls = iter(answers)

    def create(_pod: Any, _container: Any) -> CreateResult:
        answer = next(calls)
        if isinstance(answer, Exception):
            raise answer
        return answer

    handler = RecordingHandler(answers={"create_container": create})
    with connected(handler) as (_, conn, nri, reports):
        reply = conn.create_container(POD, make_container("c1", POD))
        assert pb.CreateContainerResponse() == reply
        error = reports.calls(CallResult.ERROR)[-1]
        assert (NRIMethod.CREATE_CONTAINER, "RuntimeError: planner bug", "0c9e8a54", "c1") == (
            error.event,
            error.error,
            error.pod_uid,
            error.container_id,
        )
        again = conn.create_container(POD, make_container("c2", POD))
        assert again is not None
        assert "1" == again.adjust.linux.resources.cpu.cpus
        assert 1 == nri.status().calls[(NRIMethod.CREATE_CONTAINER, CallResult.ERROR)]


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ({"cpus": "1"}, "invalid answer: create_container returned dict, not CreateResult"),
        (
            CreateResult(updates=("c9",)),  # type: ignore[arg-type]
            "invalid answer: expected ContainerUpdate items, got str",
        ),
    ],
)
def test_handler_answer_of_the_wrong_type_is_an_error(answer: object, error: str) -> None:
    """An answer that is not the declared type gives the runtime an empty answer and an error outcome."""
    handler = RecordingHandler(answers={"create_container": lambda _pod, _c: answer})
    with connected(handler) as (_, conn, _nri, reports):
        assert pb.CreateContainerResponse() == conn.create_container(POD, make_container("c1", POD))
        assert error == reports.calls(CallResult.ERROR)[-1].error


def test_slow_handler_is_answered_before_the_runtimes_deadline() -> None:
    """A handler slower than the budget: the runtime gets an empty answer in time (no deadline, no disconnect);
    the call is reported as timeout, then as late when it ends, and later events are still served in order."""
    release = threading.Event()

    def slow(_pod: Any, _container: Any) -> CreateResult:
        release.wait(5)
        return CreateResult(adjustment=ContainerAdjustment(cpuset_cpus=CPUSet([7])))

    handler = RecordingHandler(answers={"create_container": slow})
    with connected(handler, runtime={"request_timeout": 1.0}, handler_timeout=5.0) as (_, conn, nri, reports):
        started = time.monotonic()
        reply = conn.create_container(POD, make_container("slow", POD))  # raises DeadlineExceededError if late
        took = time.monotonic() - started
        assert pb.CreateContainerResponse() == reply
        assert 0.75 <= took < 1.0  # the budget is 75 % of the runtime's 1 s
        timeout = reports.calls(CallResult.TIMEOUT)[-1]
        assert (NRIMethod.CREATE_CONTAINER, "slow") == (timeout.event, timeout.container_id)
        release.set()
        wait_for(lambda: reports.calls(CallResult.LATE), what="the late outcome")
        late = reports.calls(CallResult.LATE)[-1]
        assert (NRIMethod.CREATE_CONTAINER, "slow", None) == (late.event, late.container_id, late.error)
        handler.answers.pop("create_container")
        assert pb.CreateContainerResponse() == conn.create_container(POD, make_container("next", POD))
        assert ["synchronize", "create_container", "create_container"] == handler.names()
        assert (False, PluginState.SYNCHRONIZED) == (conn.trunk.closed.is_set(), nri.status().state)


def test_malformed_cpuset_from_the_runtime_is_invalid_and_skips_the_handler() -> None:
    """A container whose cpuset is not a cpulist: empty answer, 'invalid' naming the field, handler not called."""
    handler = RecordingHandler()
    with connected(handler) as (_, conn, _nri, reports):
        assert pb.CreateContainerResponse() == conn.create_container(POD, make_container("bad", POD, cpus="0-x"))
        invalid = reports.calls(CallResult.INVALID)[-1]
        assert NRIMethod.CREATE_CONTAINER == invalid.event
        assert "Container bad linux.resources.cpu.cpus" in (invalid.error or "")
        assert ["synchronize"] == handler.names()


def test_refused_requests_warn_once_per_cause_per_interval() -> None:
    """Issue 22, finding 8: 500 malformed CreateContainer requests are one warning line (the rest debug lines held
    back), while every one is still reported and answered."""
    handler = RecordingHandler()
    with capture_logs() as logs, connected(handler) as (_, conn, _nri, reports):
        for n in range(500):
            conn.create_container(POD, make_container(f"bad{n}", POD, cpus="0-x"))
        wait_for(lambda: len(reports.calls(CallResult.INVALID)) == 500)
    warnings = [line for line in logs if line["event"] == "nri.call" and line["log_level"] == "warning"]
    held = [line for line in logs if line["event"] == "nri.call" and line.get("throttled")]
    assert (1, 499) == (len(warnings), len(held))


def test_state_change_of_an_unsubscribed_event_is_ignored() -> None:
    """A StateChange for an event podpin did not subscribe to is answered empty, reported ignored, never handled."""
    handler = RecordingHandler()
    with connected(handler) as (_, conn, _nri, reports):
        change = pb.StateChangeEvent(event=pb.START_CONTAINER, pod=POD, container=make_container("c1", POD))
        assert pb.Empty() == conn.call("StateChange", change, pb.Empty)
        ignored = [(o.event, o.error) for o in reports.calls(CallResult.IGNORED)]
        assert [(NRIMethod.STATE_CHANGE, "event START_CONTAINER is not subscribed")] == ignored
        assert ["synchronize"] == handler.names()


def test_large_answer_is_framed_so_go_can_read_it() -> None:
    """A Synchronize answer far over 4096 bytes reaches the Go-framed runtime whole (no ENOMEM, no disconnect)."""
    updates = [ContainerUpdate(container_id=f"{i:064x}", cpuset_cpus=CPUSet([i % 64])) for i in range(400)]
    handler = RecordingHandler(answers={"synchronize": lambda _p, _c: updates})
    with connected(handler) as (_, conn, _nri, _reports):
        response = conn.sync_responses[-1]
        assert response.ByteSize() > 4 * 4096
        assert [u.container_id for u in updates] == [u.container_id for u in response.update]
        assert None is conn.trunk.error
