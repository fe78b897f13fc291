"""The NRI hand-off: the plugin thread's calls become requests for the loop, answered through a one-shot reply."""

from __future__ import annotations

import threading

import pytest
from structlog.testing import capture_logs

from agent.cpuset import CPUSet
from agent.nri.model import Container, ContainerAdjustment, CreateResult, PodSandbox
from agent.nri.report import NRIMethod
from agent.reconcile.nri_handler import NRIHandoff, NRIInputError, NRIRequest, Reply

POD = PodSandbox(id="s" * 64, uid="0c9e8a54-52d4-4c1e-8f61-3b7a9e2d4c11", namespace="default", name="web")
APP = Container(id="c" * 64, pod_sandbox_id="s" * 64, name="app")


def test_reply_keeps_the_first_answer() -> None:
    """A reply answered twice keeps the first value; waiting on an answered reply returns it at once."""
    reply = Reply()
    reply.give(None)
    reply.give(CreateResult())
    assert (True, None) == reply.wait(0.0)


def test_create_is_answered_by_the_loop() -> None:
    """CreateContainer becomes one request naming the pod and the container; the loop's answer is returned."""
    seen: list[NRIRequest] = []
    answer = CreateResult(adjustment=ContainerAdjustment(cpuset_cpus=CPUSet.parse("1,17")))

    def loop(request: NRIRequest, reply: Reply) -> None:
        seen.append(request)
        threading.Thread(target=reply.give, args=(answer,)).start()

    result = NRIHandoff(loop, wait=1.0).create_container(POD, APP)
    assert ([NRIRequest(method=NRIMethod.CREATE_CONTAINER, pod=POD, container=APP)], answer) == (seen, result)


def test_busy_loop_gives_no_adjustment_and_says_so() -> None:
    """No answer within the wait: an empty answer (the runtime proceeds) and a warning naming pod and container."""
    with capture_logs() as logs:
        result = NRIHandoff(lambda _request, _reply: None, wait=0.01).create_container(POD, APP)
    busy = [(e["method"], e["pod"], e["container"]) for e in logs if e["event"] == "nri.loop_busy"]
    assert (CreateResult(), [(NRIMethod.CREATE_CONTAINER, "default/web", "app")]) == (result, busy)


def test_input_error_reaches_the_plugin() -> None:
    """An input error from the loop is raised, so the plugin answers empty and reports an error outcome."""

    def loop(_request: NRIRequest, reply: Reply) -> None:
        reply.give(NRIInputError("pod default/web: uid: bad"))

    with pytest.raises(NRIInputError) as raised:
        NRIHandoff(loop, wait=1.0).run_pod_sandbox(POD)
    assert "pod default/web: uid: bad" == str(raised.value)


def test_removals_are_not_waited_for_and_stops_are_not_sent() -> None:
    """RemoveContainer and RemovePodSandbox are queued without waiting; StopContainer and StopPodSandbox change
    nothing (CPUs are released when the pod is gone from the API)."""
    seen: list[NRIMethod] = []
    handoff = NRIHandoff(lambda request, _reply: seen.append(request.method), wait=5.0)
    handoff.stop_pod_sandbox(POD)
    stopped = handoff.stop_container(POD, APP)
    handoff.remove_container(POD, APP)
    handoff.remove_pod_sandbox(POD)
    assert ((), [NRIMethod.REMOVE_CONTAINER, NRIMethod.REMOVE_POD_SANDBOX]) == (stopped, seen)
