"""The PodResources client against the project's gRPC emulator of the kubelet service, over a real unix socket."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.podresources import (
    AllocatableDevices,
    ContainerKey,
    DeviceAssignments,
    DeviceGroup,
    ErrorKind,
    PodResourcesClient,
    PodResourcesError,
)
from tests.support.podresources_emulator import GetMode, PodResourcesEmulator

GPU = "nvidia.com/gpu"
VF = "intel.com/sriov_netdevice"


@pytest.fixture
def kubelet() -> Iterator[PodResourcesEmulator]:
    with PodResourcesEmulator() as emulator:
        emulator.set_allocatable([(GPU, ("gpu-0",), (0,)), (GPU, ("gpu-1",), (1,)), (VF, ("vf-0", "vf-1"), (1,))])
        emulator.set_pod("ml", "trainer", {"train": [(GPU, ("gpu-1",), (1,))], "sidecar": []})
        emulator.set_pod("net", "router", {"dp": [(VF, ("vf-0",), (1,))]})
        yield emulator


def trainer() -> DeviceAssignments:
    return DeviceAssignments.of(
        {
            ContainerKey(namespace="ml", pod="trainer", container="train"): [
                DeviceGroup(resource=GPU, ids=("gpu-1",), numa=(1,))
            ]
        }
    )


def test_allocatable_lists_every_device_with_its_numa_node(kubelet: PodResourcesEmulator) -> None:
    """GetAllocatableResources becomes the node's device groups, NUMA nodes included."""
    client = PodResourcesClient(kubelet.socket)
    expected = AllocatableDevices(
        groups=(
            DeviceGroup(resource=GPU, ids=("gpu-0",), numa=(0,)),
            DeviceGroup(resource=GPU, ids=("gpu-1",), numa=(1,)),
            DeviceGroup(resource=VF, ids=("vf-0", "vf-1"), numa=(1,)),
        )
    )
    assert expected == client.allocatable()
    assert {"gpu-0": (0,), "gpu-1": (1,)} == client.allocatable().devices(GPU)


def test_list_gives_each_container_with_devices(kubelet: PodResourcesEmulator) -> None:
    """List becomes one entry per container that holds devices; a container without devices is absent."""
    client = PodResourcesClient(kubelet.socket)
    expected = DeviceAssignments.of(
        {
            ContainerKey(namespace="ml", pod="trainer", container="train"): [
                DeviceGroup(resource=GPU, ids=("gpu-1",), numa=(1,))
            ],
            ContainerKey(namespace="net", pod="router", container="dp"): [
                DeviceGroup(resource=VF, ids=("vf-0",), numa=(1,))
            ],
        }
    )
    assert expected == client.list()
    assert ["List"] == kubelet.calls


def test_get_asks_for_one_pod(kubelet: PodResourcesEmulator) -> None:
    """Get (the kubelet serves it) answers for one pod, and the client remembers the method works."""
    client = PodResourcesClient(kubelet.socket)
    assert trainer() == client.get("ml", "trainer")
    assert (1,) == client.get("ml", "trainer").pod_numa("ml", "trainer")
    assert ["Get", "Get"] == kubelet.calls
    assert client.get_supported is True


def test_get_of_an_unknown_pod_is_no_devices(kubelet: PodResourcesEmulator) -> None:
    """A pod the kubelet does not know yet holds no devices (the kubelet's "not found" is not an error)."""
    client = PodResourcesClient(kubelet.socket)
    assert DeviceAssignments() == client.get("ml", "not-yet")


@pytest.mark.parametrize(
    ("mode", "calls"), [(GetMode.DISABLED, ["Get", "List", "List"]), (GetMode.UNIMPLEMENTED, ["List", "List"])]
)
def test_get_falls_back_to_list(mode: GetMode, calls: list[str]) -> None:
    """With the Get gate off or an older kubelet, the client filters List and stops trying Get."""
    with PodResourcesEmulator(get_mode=mode) as kubelet:
        kubelet.set_pod("ml", "trainer", {"train": [(GPU, ("gpu-1",), (1,))]})
        kubelet.set_pod("ml", "other", {"c": [(GPU, ("gpu-0",), (0,))]})
        client = PodResourcesClient(kubelet.socket)
        assert trainer() == client.get("ml", "trainer")
        assert trainer() == client.get("ml", "trainer")
        assert calls == kubelet.calls  # an unregistered method never reaches the server's handlers
        assert client.get_supported is False


def test_missing_socket_fails_before_any_grpc(tmp_path: Path) -> None:
    """Without the socket the client says so (kind "missing"): the caller goes on as without devices."""
    client = PodResourcesClient(tmp_path / "kubelet.sock")
    assert not client.present()
    with pytest.raises(PodResourcesError) as caught:
        client.list()
    assert ErrorKind.MISSING == caught.value.kind
    assert f"{tmp_path / 'kubelet.sock'}: no PodResources socket (the kubelet does not serve it)" == str(caught.value)


def test_slow_kubelet_is_cut_at_the_timeout(kubelet: PodResourcesEmulator) -> None:
    """A kubelet slower than the timeout gives a "timeout" error after about the timeout, never a hang."""
    kubelet.delay = 5.0
    client = PodResourcesClient(kubelet.socket, timeout=0.3)
    start = time.monotonic()
    with pytest.raises(PodResourcesError) as caught:
        client.allocatable()
    elapsed = time.monotonic() - start
    assert ErrorKind.TIMEOUT == caught.value.kind
    assert f"{kubelet.socket}: GetAllocatableResources: no answer within 0.3s" == str(caught.value)
    assert elapsed < 2.0, f"the call took {elapsed:.2f}s"


def test_kubelet_restart_is_survived(kubelet: PodResourcesEmulator) -> None:
    """While the kubelet is down calls fail ("missing", then "unavailable"); once it is back they answer again."""
    client = PodResourcesClient(kubelet.socket, timeout=1.0)
    assert trainer().containers.keys() <= client.list().containers.keys()
    kubelet.stop()
    with pytest.raises(PodResourcesError) as caught:
        client.list()
    assert ErrorKind.MISSING == caught.value.kind
    kubelet.set_pod("ml", "new", {"c": [(GPU, ("gpu-0",), (0,))]})
    kubelet.start()
    deadline = time.monotonic() + 10.0
    failures: list[ErrorKind] = []
    answer: DeviceAssignments | None = None
    while answer is None and time.monotonic() < deadline:
        try:
            answer = client.list()
        except PodResourcesError as err:
            failures.append(err.kind)
            time.sleep(0.1)
    assert answer is not None, f"the client never reconnected: {failures}"
    assert (0,) == answer.pod_numa("ml", "new")
    assert set() == set(failures) - {ErrorKind.UNAVAILABLE, ErrorKind.TIMEOUT}


def test_a_dead_socket_file_is_unavailable(tmp_path: Path) -> None:
    """A socket file nobody listens on (a crashed kubelet) gives "unavailable" quickly."""
    path = tmp_path / "kubelet.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
        dead.bind(str(path))  # bound, never listening: connecting is refused
        client = PodResourcesClient(path, timeout=1.0)
        start = time.monotonic()
        with pytest.raises(PodResourcesError) as caught:
            client.list()
        assert ErrorKind.UNAVAILABLE == caught.value.kind
        assert time.monotonic() - start < 1.5


def test_an_answer_that_is_not_protobuf_is_unavailable(kubelet: PodResourcesEmulator) -> None:
    """Issue 22, finding 2: bytes that do not decode are "unavailable", never a DecodeError out of the client."""
    kubelet.raw_list = b"\xff" * 64
    with pytest.raises(PodResourcesError) as caught:
        PodResourcesClient(kubelet.socket, timeout=2.0).list()
    assert ErrorKind.UNAVAILABLE == caught.value.kind
    assert "the answer is not a valid ListPodResourcesResponse" in str(caught.value)


def test_a_socket_with_a_full_backlog_is_unavailable(tmp_path: Path) -> None:
    """Issue 22, finding 2: a socket that never accepts gives timeouts, then "unavailable" (grpclib's
    ``AttributeError: ... '_transport'`` is a transport failure), on every later call."""
    path = tmp_path / "kubelet.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as full:
        full.bind(str(path))
        full.listen(0)
        client = PodResourcesClient(path, timeout=0.3)
        kinds = []
        for _ in range(4):
            with pytest.raises(PodResourcesError) as caught:
                client.list()
            kinds.append(caught.value.kind)
    assert set() == set(kinds) - {ErrorKind.TIMEOUT, ErrorKind.UNAVAILABLE}


def test_an_answer_over_the_cap_is_refused_before_it_is_read(kubelet: PodResourcesEmulator) -> None:
    """Issue 22, finding 6: an answer longer than ``max_answer_bytes`` is "unavailable", named with its size."""
    from agent.podresources.v1 import api_pb2

    big = api_pb2.ListPodResourcesResponse(pod_resources=[api_pb2.PodResources(name="x" * (2 << 20))])
    kubelet.raw_list = big.SerializeToString()
    with pytest.raises(PodResourcesError) as caught:
        PodResourcesClient(kubelet.socket, timeout=5.0, max_answer_bytes=1 << 20).list()
    assert ErrorKind.UNAVAILABLE == caught.value.kind
    assert f"an answer of {len(kubelet.raw_list)} bytes, more than the {1 << 20} podpin reads" in str(caught.value)


def test_the_default_cap_is_below_the_charts_memory_limit() -> None:
    """The cap is 16 MiB, a twelfth of the chart's memory limit (a 62 MiB answer peaked at 258 MB, over it)."""
    import yaml

    from agent.podresources import MAX_ANSWER_BYTES
    from tests.support.paths import REPO

    values = yaml.safe_load((REPO / "deploy/helm/podpin/values.yaml").read_text())
    assert ("192Mi", 16 << 20) == (values["resources"]["limits"]["memory"], MAX_ANSWER_BYTES)
