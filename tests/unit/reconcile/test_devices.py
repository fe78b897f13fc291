"""The device gate: a pod requesting devices waits, pass by pass, for PodResources to name them, up to a deadline.

Against the PodResources emulator (real gRPC on a unix socket) and a clock the
test moves.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator, Set
from pathlib import Path
from typing import Any

import pytest

from agent.alloc import Decision, DeviceGroup
from agent.metrics import AgentMetrics
from agent.podresources import PodResourcesClient
from agent.pods.model import pod_from_dict
from agent.reconcile.device_answers import DeviceAnswer, DeviceAsk, DeviceAsks
from agent.reconcile.devices import RETRY_INTERVAL, DeviceGate
from agent.reconcile.reporter import PodRef, Reporter
from tests.support.podfactory import container, make_pod
from tests.support.podresources_emulator import PodResourcesEmulator

GPU = "example.com/gpu"


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def kubelet() -> Iterator[PodResourcesEmulator]:
    with PodResourcesEmulator() as emulator:
        emulator.set_allocatable([(GPU, ("gpu0",), (0,)), (GPU, ("gpu1",), (1,))])
        yield emulator


def gate(kubelet: PodResourcesEmulator, clock: Clock, timeout: float = 5.0) -> DeviceGate:
    """A gate over the emulator's socket."""
    return DeviceGate(PodResourcesClient(kubelet.socket, timeout=1.0), timeout=timeout, clock=clock)


def gpu_pod(name: str = "trainer", resource: str = GPU) -> Any:
    """A pod whose container ``train`` asks for one device of ``resource``."""
    limits = {resource: 1}
    return pod_from_dict(
        make_pod(name, containers=[container("train", cpu="2", memory="1Gi", limits=limits, requests=limits)])
    )


def test_known_devices_admit_at_once(kubelet: PodResourcesEmulator) -> None:
    """Devices PodResources already names: ready now, with the container's groups and the node's devices."""
    kubelet.set_pod("default", "trainer", {"train": [(GPU, ("gpu1",), (1,))]})
    answer = gate(kubelet, Clock()).check(gpu_pod())
    assert answer.devices is not None
    assert (True, (DeviceGroup(resource=GPU, ids=("gpu1",), numa=(1,)),), None) == (
        answer.ready,
        answer.devices.groups_of("train"),
        answer.unknown,
    )


def test_unknown_devices_park_the_pod_until_they_arrive(kubelet: PodResourcesEmulator) -> None:
    """Not named yet: parked with a retry due; the devices named on a later pass admit it with them."""
    clock, the_gate, pod = Clock(), gate(kubelet, Clock()), gpu_pod()
    the_gate.clock = clock
    first = the_gate.check(pod)
    parked = (first.ready, the_gate.waiting, the_gate.next_retry())
    kubelet.set_pod("default", "trainer", {"train": [(GPU, ("gpu1",), (1,))]})
    clock.now += 1.0
    the_gate.begin_pass()
    later = the_gate.check(pod)
    assert ((False, (pod.uid,), 100.0 + RETRY_INTERVAL), True, 1.0) == (parked, later.ready, later.waited)
    assert ((), None) == (the_gate.waiting, the_gate.next_retry())


def test_wait_is_bounded(kubelet: PodResourcesEmulator) -> None:
    """Still unknown at the deadline: admitted without devices, saying what was missing and how long it waited."""
    clock = Clock()
    the_gate, pod = gate(kubelet, clock, timeout=2.0), gpu_pod()
    outcomes = []
    for _ in range(3):
        the_gate.begin_pass()
        answer = the_gate.check(pod)
        outcomes.append(answer.ready)
        clock.now += 1.0
    assert [False, False, True] == outcomes
    assert (None, 2.0) == (answer.devices, answer.waited)
    assert f"PodResources names no device of {GPU} for container train" == answer.unknown


def test_retry_never_goes_past_the_deadline(kubelet: PodResourcesEmulator) -> None:
    """The next ask is due at the retry interval, or at the deadline when that comes first."""
    clock = Clock()
    the_gate = gate(kubelet, clock, timeout=0.2)
    the_gate.check(gpu_pod())
    assert 100.2 == the_gate.next_retry()


def test_zero_timeout_admits_at_once_with_the_warning(kubelet: PodResourcesEmulator) -> None:
    """``deviceWaitTimeout: 0s``: no wait; unknown devices are reported at once."""
    answer = gate(kubelet, Clock(), timeout=0.0).check(gpu_pod())
    assert (True, None) == (answer.ready, answer.devices)
    assert answer.unknown is not None


def test_no_socket_means_no_wait(tmp_path: Path) -> None:
    """Without the PodResources socket the pod is admitted at once, without devices and without a warning."""
    client = PodResourcesClient(tmp_path / "absent.sock", timeout=1.0)
    answer = DeviceGate(client, timeout=5.0, clock=Clock()).check(gpu_pod())
    assert (True, None, None) == (answer.ready, answer.devices, answer.unknown)


def test_pod_without_extended_resources_never_asks(kubelet: PodResourcesEmulator) -> None:
    """A pod without extended resources is ready at once and causes no PodResources call."""
    plain = pod_from_dict(make_pod("web", containers=[container("app", cpu="2", memory="1Gi")]))
    answer = gate(kubelet, Clock()).check(plain)
    assert (True, None, []) == (answer.ready, answer.devices, kubelet.calls)


def test_held_names_a_restored_pods_devices_without_waiting(kubelet: PodResourcesEmulator) -> None:
    """``held`` (pods restored from the checkpoint): the devices when named, None when not, and never a wait."""
    the_gate = gate(kubelet, Clock())
    unknown = the_gate.held(gpu_pod())
    kubelet.set_pod("default", "trainer", {"train": [(GPU, ("gpu1",), (1,))]})
    the_gate.begin_pass()
    known = the_gate.held(gpu_pod())
    assert known is not None
    assert (None, (DeviceGroup(resource=GPU, ids=("gpu1",), numa=(1,)),), ()) == (
        unknown,
        known.groups_of("train"),
        the_gate.waiting,
    )


def test_held_asks_nothing_for_a_pod_without_extended_resources(kubelet: PodResourcesEmulator) -> None:
    """A restored pod without extended resources costs no PodResources call."""
    plain = pod_from_dict(make_pod("web", containers=[container("app", cpu="2", memory="1Gi")]))
    assert (None, []) == (gate(kubelet, Clock()).held(plain), kubelet.calls)


def test_resource_no_device_serves_needs_nothing(kubelet: PodResourcesEmulator) -> None:
    """An extended resource the node has no device of (not a device plugin's) is not waited for."""
    answer = gate(kubelet, Clock()).check(gpu_pod(resource="example.com/licence"))
    assert (True, None) == (answer.ready, answer.unknown)


def test_one_list_per_pass_for_many_pods(kubelet: PodResourcesEmulator) -> None:
    """Several pods waiting in one pass cost one List (and one GetAllocatableResources)."""
    the_gate = gate(kubelet, Clock())
    for name in ("a", "b", "c"):
        the_gate.check(gpu_pod(name))
    assert ["List", "GetAllocatableResources"] == kubelet.calls


def test_a_kubelet_that_stopped_answering_is_waited_for(kubelet: PodResourcesEmulator) -> None:
    """A socket that answers with an error: the pod waits as for unknown devices, then is reported with the error."""
    clock = Clock()
    the_gate = gate(kubelet, clock, timeout=1.0)
    kubelet.stop()
    with socket.socket(socket.AF_UNIX) as bound:  # a socket file nobody listens on: connections are refused
        bound.bind(str(kubelet.socket))
    first = the_gate.check(gpu_pod())
    clock.now += 1.0
    the_gate.begin_pass()
    last = the_gate.check(gpu_pod())
    assert (False, True) == (first.ready, last.ready)
    assert "PodResources List failed" == (last.unknown or "")[: len("PodResources List failed")]


def test_forget_drops_gone_pods(kubelet: PodResourcesEmulator) -> None:
    """A parked pod that left the node is no longer waited for."""
    the_gate = gate(kubelet, Clock())
    the_gate.check(gpu_pod())
    the_gate.forget(set())
    assert ((), None) == (the_gate.waiting, the_gate.next_retry())


class Recorded:
    """An Event sink that keeps what it is given."""

    def __init__(self) -> None:
        self.warnings: list[tuple[PodRef, str, str]] = []

    def warning(self, pod: PodRef, reason: str, message: str) -> None:
        self.warnings.append((pod, reason, message))

    def normal(self, pod: PodRef, reason: str, message: str) -> None:
        """Normal Events are not what these tests look at."""

    def forget_gone(self, alive: Set[str]) -> None:
        """Nothing is kept per pod here."""


def test_reporter_posts_devices_unknown_once_and_counts() -> None:
    """The give-up is a Warning ``PodpinDevicesUnknown`` on the pod (once), and the metric counts each."""
    events, metrics = Recorded(), AgentMetrics(lambda: None)
    reporter = Reporter("node-1", metrics, events)
    decision = Decision(uid="u1", namespace="ml", name="trainer", admitted=True)
    for _ in range(2):
        reporter.devices_unknown(decision, "PodResources names no device of example.com/gpu for container train", 5.0)
    assert [("ml", "trainer", "u1")] == [pod for pod, _, _ in events.warnings]
    assert "PodpinDevicesUnknown" == events.warnings[0][1]
    assert events.warnings[0][2].startswith("podpin placed the pod's CPUs without knowing its devices (")
    assert 2.0 == metrics.registry.get_sample_value("podpin_devices_unknown_total")


def test_answer_asks_each_pod_once_with_one_list_and_keeps_a_failure_to_its_pod(
    kubelet: PodResourcesEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``answer`` (the reconciler's call before deciding): a new pass, the gone forgotten, a new pod checked, a
    restored pod asked what it holds, all from one List; an unexpected exception about one pod is that pod's
    answer and the others are still asked."""
    kubelet.set_pod("default", "held", {"train": [(GPU, ("gpu0",), (0,))]})
    the_gate = gate(kubelet, Clock())
    gone = gpu_pod("gone")
    the_gate.check(gone)  # parked: no devices named for it
    new, restored, broken = gpu_pod("new"), gpu_pod("held"), gpu_pod("broken")
    check = the_gate.check

    def failing(pod: Any) -> DeviceAnswer:
        if pod.name == "broken":
            raise RuntimeError("boom")
        return check(pod)

    monkeypatch.setattr(the_gate, "check", failing)
    kubelet.calls.clear()
    answers = the_gate.answer(
        DeviceAsks(
            live=frozenset({new.uid, restored.uid, broken.uid}),
            pods=(
                DeviceAsk(view=new, restored=False),
                DeviceAsk(view=restored, restored=True),
                DeviceAsk(view=broken, restored=False),
            ),
        )
    )
    held = answers.held[restored.uid]
    assert held is not None
    assert (
        [new.uid],
        False,
        (DeviceGroup(resource=GPU, ids=("gpu0",), numa=(0,)),),
        {broken.uid: "boom"},
        ["List", "GetAllocatableResources"],
        (new.uid,),
    ) == (
        list(answers.new),
        answers.new[new.uid].ready,
        held.groups_of("train"),
        {uid: str(err) for uid, err in answers.failed.items()},
        kubelet.calls,
        the_gate.waiting,
    )


def test_answer_lets_a_memory_error_through(kubelet: PodResourcesEmulator, monkeypatch: pytest.MonkeyPatch) -> None:
    """``MemoryError`` while asking about a pod is not that pod's answer: it leaves ``answer``."""
    the_gate = gate(kubelet, Clock())

    def exhausted(*_: Any) -> DeviceAnswer:
        raise MemoryError

    monkeypatch.setattr(the_gate, "check", exhausted)
    pod = gpu_pod()
    with pytest.raises(MemoryError):
        the_gate.answer(DeviceAsks(live=frozenset({pod.uid}), pods=(DeviceAsk(view=pod, restored=False),)))
