"""The NodeResourceTopology publisher against the API server emulator (and the PodResources emulator for devices).

Every request goes through the official client's ``ApiClient`` to the emulator
on 127.0.0.1, which validates each written object against the CRD in
``deploy/crds/`` as a real API server would.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from agent.alloc import Planner
from agent.config import AgentConfig, config_from_mapping
from agent.nrt.calls import TopologyCalls
from agent.nrt.compute import attributes_of, node_resource_topology
from agent.nrt.fingerprint import pod_fingerprint
from agent.nrt.occupancy import occupancy_of
from agent.nrt.publisher import NRTPublisher, PublishResult, has_extended_resources
from agent.podresources import PodResourcesClient
from agent.pods import pod_from_dict
from agent.topology.model import Topology
from tests.support.apiserver_emulator import ApiServerEmulator
from tests.support.machines import machine
from tests.support.paths import REPO
from tests.support.podfactory import container, make_pod
from tests.support.podresources_emulator import PodResourcesEmulator

GROUP, PLURAL = "topology.node.k8s.io", "noderesourcetopologies"
GPU = "nvidia.com/gpu"


def crd() -> dict[str, Any]:
    return dict(yaml.safe_load((REPO / "deploy" / "crds" / "noderesourcetopologies.yaml").read_text()))


@pytest.fixture
def api() -> Iterator[ApiServerEmulator]:
    with ApiServerEmulator() as em:
        em.objects.register_crd(crd())
        em.objects.add_node("node-1", uid="uid-node-1")
        yield em


#: The publishers a test made: the ``stop`` fixture ends their threads, so nothing logs after the test.
_MADE: list[NRTPublisher] = []


@pytest.fixture
def stop() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()
    while _MADE:
        _MADE.pop().join(5.0)


def config(**extra: Any) -> AgentConfig:
    return config_from_mapping(
        {"systemReserved": {"cpu": "1"}, "nodeName": "node-1", "nrt": {"minInterval": "0s"}, **extra}, env={}
    )


def publisher(api: ApiServerEmulator, stop: threading.Event, cfg: AgentConfig, **kwargs: Any) -> NRTPublisher:
    made = NRTPublisher(
        TopologyCalls(api.api().configuration), cfg.planner, cfg.nrt, node_name="node-1", stop=stop, **kwargs
    )
    _MADE.append(made)
    return made


def stored(api: ApiServerEmulator) -> dict[str, Any] | None:
    return api.objects.custom(GROUP, PLURAL, "node-1")


def cpu_available(obj: dict[str, Any] | None) -> list[str]:
    assert obj is not None
    return [next(r["available"] for r in z["resources"] if r["name"] == "cpu") for z in obj["zones"]]


def admit(planner: Planner, name: str, cpus: int) -> None:
    assert planner.admit(
        pod_from_dict(make_pod(name, containers=[container("app", cpu=str(cpus), memory="1Gi")]))
    ).admitted


def wait(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def writes(api: ApiServerEmulator) -> list[str]:
    return [
        f"{r.method} {r.status}"
        for r in api.requests
        if r.path.startswith("/apis/") and r.method in ("POST", "PUT", "PATCH")
    ]


def test_creates_then_updates_owned_by_the_node(api: ApiServerEmulator, stop: threading.Event) -> None:
    """The first state creates the object (owned by the Node); a later admission replaces it with fewer CPUs free."""
    topology, cfg = machine(), config()
    planner = Planner(topology, cfg.planner)
    pub = publisher(api, stop, cfg)
    pub.offer(planner.snapshot(), topology)
    wait(lambda: stored(api) is not None)
    obj = stored(api)
    assert obj is not None
    assert [{"apiVersion": "v1", "kind": "Node", "name": "node-1", "uid": "uid-node-1"}] == obj["metadata"][
        "ownerReferences"
    ]
    assert ["15", "16"] == cpu_available(obj)
    admit(planner, "a", 4)
    pub.offer(planner.snapshot(), topology)
    wait(lambda: cpu_available(stored(api)) == ["11", "16"])
    wait(lambda: len(writes(api)) == 2)  # the request log is written just after the object is stored
    assert ["PATCH 201", "PATCH 200"] == writes(api)
    api.objects.delete_node("node-1")
    assert stored(api) is None


def test_the_same_state_twice_writes_once(api: ApiServerEmulator, stop: threading.Event) -> None:
    """Offering an unchanged snapshot again, or an equal one, does not write again."""
    topology, cfg = machine(), config()
    planner = Planner(topology, cfg.planner)
    pub = publisher(api, stop, cfg)
    pub.offer(planner.snapshot(), topology)
    wait(lambda: pub.published == 1)
    pub.offer(planner.snapshot(), topology)
    pub.offer(dataclasses.replace(planner.snapshot()), topology)  # a new snapshot, equal
    time.sleep(0.3)
    assert ["PATCH 201"] == writes(api)


def test_a_burst_is_coalesced_and_the_latest_state_wins(api: ApiServerEmulator, stop: threading.Event) -> None:
    """With minInterval 1s, ten admissions offered in a burst give at most two writes, the last one the final state."""
    topology, cfg = machine(), config(nrt={"minInterval": "1s"})
    planner = Planner(topology, cfg.planner)
    pub = publisher(api, stop, cfg)
    pub.offer(planner.snapshot(), topology)
    wait(lambda: pub.published == 1)
    for i in range(10):
        admit(planner, f"p{i}", 1)
        pub.offer(planner.snapshot(), topology)
    wait(lambda: cpu_available(stored(api)) == ["5", "16"])
    time.sleep(1.2)  # any further write would come within minInterval
    assert ["PATCH 201", "PATCH 200"] == writes(api)


def test_offer_never_blocks_on_a_hanging_api_server(api: ApiServerEmulator, stop: threading.Event) -> None:
    """While the API server fails every request, offering returns at once; the latest state lands once it recovers."""
    topology, cfg = machine(), config()
    planner = Planner(topology, cfg.planner)
    registry = CollectorRegistry()
    pub = publisher(api, stop, cfg, registry=registry)
    api.fail_next(2, 500)
    start = time.monotonic()
    for i in range(5):
        admit(planner, f"p{i}", 1)
        pub.offer(planner.snapshot(), topology)
    assert time.monotonic() - start < 0.5
    wait(lambda: stored(api) is not None, timeout=15.0)
    assert ["10", "16"] == cpu_available(stored(api))
    assert 1.0 <= (registry.get_sample_value("podpin_nrt_publishes_total", {"result": PublishResult.ERROR}) or 0.0)


def test_missing_crd_is_retried_until_it_exists(stop: threading.Event) -> None:
    """Without the CRD every write is 404; once the CRD is installed the object is created."""
    with ApiServerEmulator() as api:
        api.objects.add_node("node-1", uid="u")
        topology, cfg = machine(), config()
        pub = publisher(api, stop, cfg)
        pub.offer(Planner(topology, cfg.planner).snapshot(), topology)
        wait(lambda: any(r.status == 404 and r.path.startswith("/apis/") for r in api.requests))
        api.objects.register_crd(crd())
        wait(lambda: stored(api) is not None, timeout=15.0)


def _nfd_applies(api: ApiServerEmulator, available: str = "1") -> None:
    """NFD's topology-updater applies its own view with force, as it does."""
    body = stored(api)
    assert body is not None
    nfd = {k: v for k, v in body.items() if k in ("apiVersion", "kind", "zones", "attributes", "topologyPolicies")}
    nfd["metadata"] = {"name": "node-1"}
    nfd["zones"][0]["resources"][0]["available"] = available
    TopologyCalls(api.api().configuration).apply_topology(
        "node-1", nfd, field_manager="nfd-topology-updater", force=True
    )


def _managers(obj: dict[str, Any] | None) -> dict[str, list[str]]:
    assert obj is not None
    return {e["manager"]: sorted(e["fieldsV1"]) for e in obj["metadata"]["managedFields"]}


def test_applied_by_podpin_with_the_pod_fingerprint(api: ApiServerEmulator, stop: threading.Event) -> None:
    """The object is applied with the field manager ``podpin`` and carries the fingerprint of the admitted pods in
    the two attributes and the annotation NFD sets."""
    topology, cfg = machine(), config()
    planner = Planner(topology, cfg.planner)
    admit(planner, "a", 2)
    admit(planner, "b", 0)
    pub = publisher(api, stop, cfg)
    pub.offer(planner.snapshot(), topology)
    wait(lambda: stored(api) is not None)
    obj = stored(api)
    assert obj is not None
    signature = pod_fingerprint([("default", "a"), ("default", "b")])
    attributes = {a["name"]: a["value"] for a in obj["attributes"]}
    actual = (
        attributes["nodeTopologyPodsFingerprint"],
        attributes["nodeTopologyPodsFingerprintMethod"],
        obj["metadata"]["annotations"],
        list(_managers(obj)),
    )
    assert (signature, "all", {"topology.node.k8s.io/fingerprint": signature}, ["podpin"]) == actual


def test_another_writer_is_left_alone_and_said_once(api: ApiServerEmulator, stop: threading.Event) -> None:
    """NFD applies its own view: podpin's later states leave it alone; one warning, one Warning Event on the Node,
    the gauge at 1, the publishes counted ``other_writer``."""
    topology, cfg = machine(), config()
    planner = Planner(topology, cfg.planner)
    registry = CollectorRegistry()
    pub = publisher(api, stop, cfg, registry=registry)
    with capture_logs() as logs:
        pub.offer(planner.snapshot(), topology)
        wait(lambda: stored(api) is not None)
        _nfd_applies(api)
        for name in ("a", "b"):
            admit(planner, name, 2)
            pub.offer(planner.snapshot(), topology)
            wait(lambda: (registry.get_sample_value("podpin_nrt_publishes_total", {"result": "other_writer"}) or 0) > 0)
        wait(lambda: len(api.events) == 1)
        time.sleep(0.2)
    [event] = api.events
    warned = [e["managers"] for e in logs if e["event"] == "nrt.other_writer"]
    actual = (
        cpu_available(stored(api)),
        warned,
        (event["involvedObject"]["kind"], event["involvedObject"]["name"], event["reason"], event["type"]),
        registry.get_sample_value("podpin_nrt_other_writer"),
    )
    assert (["1", "16"], [["nfd-topology-updater"]], ("Node", "node-1", "NRTManagedByOther", "Warning"), 1.0) == actual


def test_take_over_applies_over_the_other_writer(api: ApiServerEmulator, stop: threading.Event) -> None:
    """With ``nrt.takeOver``, podpin's next state is applied with force: its values, and the fields that differed
    are podpin's alone (an equal value stays shared, as the API server keeps it)."""
    topology, cfg = machine(), config(nrt={"minInterval": "0s", "takeOver": True})
    planner = Planner(topology, cfg.planner)
    pub = publisher(api, stop, cfg)
    pub.offer(planner.snapshot(), topology)
    wait(lambda: stored(api) is not None)
    _nfd_applies(api)
    admit(planner, "a", 2)
    pub.offer(planner.snapshot(), topology)
    wait(lambda: cpu_available(stored(api)) == ["13", "16"])
    managers = _managers(stored(api))
    taken = [f for f in managers.get("nfd-topology-updater", []) if f in ("f:zones", "f:attributes")]
    assert (["f:attributes", "f:metadata", "f:topologyPolicies", "f:zones"], []) == (managers["podpin"], taken)


def test_an_object_older_podpin_wrote_is_podpins(api: ApiServerEmulator, stop: threading.Event) -> None:
    """An object podpin wrote with POST before server-side apply (under the client's User-Agent, labelled
    ``managed-by: podpin``) is no other writer's: it is applied over, and nothing is said."""
    topology, cfg = machine(), config()
    planner = Planner(topology, cfg.planner)
    old = Planner(topology, cfg.planner)
    admit(old, "gone", 4)
    body = node_resource_topology(
        node_name="node-1",
        topology=topology,
        occupancy=occupancy_of(topology, cfg.planner, old.snapshot()),
        attributes=attributes_of(cfg.planner),
    )
    TopologyCalls(api.api().configuration).create_topology(body)
    pub = publisher(api, stop, cfg)
    with capture_logs() as logs:
        pub.offer(planner.snapshot(), topology)
        wait(lambda: cpu_available(stored(api)) == ["15", "16"])
    assert [] == [e for e in logs if e["event"] == "nrt.other_writer"]


def test_devices_come_from_pod_resources_on_a_node_with_devices(stop: threading.Event) -> None:
    """A Node advertising nvidia.com/gpu makes the publisher ask the kubelet; held GPUs are not available."""
    with ApiServerEmulator() as api, PodResourcesEmulator() as kubelet:
        api.objects.register_crd(crd())
        api.objects.add_node("node-1", uid="u", capacity={"cpu": "32", GPU: "2"})
        kubelet.set_allocatable([(GPU, ("gpu-0",), (0,)), (GPU, ("gpu-1",), (1,))])
        kubelet.set_pod("ml", "t", {"train": [(GPU, ("gpu-1",), (1,))]})
        topology, cfg = machine(), config()
        pub = publisher(api, stop, cfg, devices=PodResourcesClient(kubelet.socket))
        pub.offer(Planner(topology, cfg.planner).snapshot(), topology)
        wait(lambda: stored(api) is not None)
        obj = stored(api)
        assert obj is not None
        gpus = [[r for r in z["resources"] if r["name"] == GPU] for z in obj["zones"]]
        assert [
            [{"name": GPU, "capacity": "1", "allocatable": "1", "available": "1"}],
            [{"name": GPU, "capacity": "1", "allocatable": "1", "available": "0"}],
        ] == gpus
        assert ["GetAllocatableResources", "List"] == kubelet.calls


def test_no_devices_means_no_grpc_call(api: ApiServerEmulator, stop: threading.Event) -> None:
    """A Node without extended resources is published without asking the kubelet (gRPC is never needed)."""
    with PodResourcesEmulator() as kubelet:
        topology, cfg = machine(), config()
        pub = publisher(api, stop, cfg, devices=PodResourcesClient(kubelet.socket))
        pub.offer(Planner(topology, cfg.planner).snapshot(), topology)
        wait(lambda: stored(api) is not None)
        assert [] == kubelet.calls


def test_missing_socket_publishes_without_devices(stop: threading.Event, tmp_path: Path) -> None:
    """A Node with devices but no PodResources socket is still published, without device resources."""
    with ApiServerEmulator() as api:
        api.objects.register_crd(crd())
        api.objects.add_node("node-1", uid="u", capacity={GPU: "2"})
        topology, cfg = machine(), config()
        pub = publisher(api, stop, cfg, devices=PodResourcesClient(tmp_path / "kubelet.sock"))
        pub.offer(Planner(topology, cfg.planner).snapshot(), topology)
        wait(lambda: stored(api) is not None)
        obj = stored(api)
        assert obj is not None
        assert ["cpu", "memory"] == [r["name"] for r in obj["zones"][0]["resources"]]


def test_topology_change_is_published(api: ApiServerEmulator, stop: threading.Event) -> None:
    """A new topology (CPU hotplug) with its rebased state replaces the zones."""
    topology, cfg = machine(), config()
    pub = publisher(api, stop, cfg)
    pub.offer(Planner(topology, cfg.planner).snapshot(), topology)
    wait(lambda: stored(api) is not None)
    smaller: Topology = machine(cores_per_numa=4)
    pub.offer(Planner(smaller, cfg.planner).snapshot(), smaller)
    wait(lambda: cpu_available(stored(api)) == ["7", "8"])


def test_devices_are_refreshed_without_a_new_state(stop: threading.Event) -> None:
    """On a node with devices, a GPU taken by a container shows within the refresh period, with no new offer."""
    with ApiServerEmulator() as api, PodResourcesEmulator() as kubelet:
        api.objects.register_crd(crd())
        api.objects.add_node("node-1", uid="u", capacity={GPU: "1"})
        kubelet.set_allocatable([(GPU, ("gpu-0",), (0,))])
        topology, cfg = machine(), config()
        pub = publisher(api, stop, cfg, devices=PodResourcesClient(kubelet.socket), refresh_period=0.3)
        pub.offer(Planner(topology, cfg.planner).snapshot(), topology)

        def gpu_free() -> str | None:
            obj = stored(api)
            return (
                None if obj is None else next(r["available"] for r in obj["zones"][0]["resources"] if r["name"] == GPU)
            )

        wait(lambda: gpu_free() == "1")
        kubelet.set_pod("ml", "t", {"train": [(GPU, ("gpu-0",), (0,))]})
        wait(lambda: gpu_free() == "0", timeout=5.0)


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({"capacity": {"cpu": "8", "memory": "1Gi", "hugepages-2Mi": "0", "pods": "110"}}, False),
        ({"allocatable": {"nvidia.com/gpu": "2"}}, True),
        ({"capacity": {"kubernetes.io/batch-cpu": "1"}}, False),
        ({}, False),
    ],
)
def test_extended_resources_mean_devices(status: dict[str, Any], expected: bool) -> None:
    """Only a vendor-prefixed resource in the Node's capacity or allocatable counts as a device."""
    assert expected == has_extended_resources({"status": status})


def test_a_recreated_node_gets_its_object_back(api: ApiServerEmulator, stop: threading.Event) -> None:
    """The Node is deleted (its object collected) and recreated with a new uid: the refresh publishes again, owned by
    the new Node."""
    topology, cfg = machine(), config()
    pub = publisher(api, stop, cfg, refresh_period=0.3)
    pub.offer(Planner(topology, cfg.planner).snapshot(), topology)
    wait(lambda: stored(api) is not None)
    api.objects.delete_node("node-1")
    assert stored(api) is None
    api.objects.add_node("node-1", uid="uid-new")
    wait(lambda: stored(api) is not None, timeout=5.0)
    obj = stored(api)
    assert obj is not None
    assert "uid-new" == obj["metadata"]["ownerReferences"][0]["uid"]
