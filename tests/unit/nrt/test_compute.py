"""The NodeResourceTopology computed from podpin's state: zones, amounts, attributes, and the CRD's schema."""

from __future__ import annotations

from functools import cache
from typing import Any

import jsonschema
import pytest
import yaml

from agent.alloc import Planner
from agent.config import AgentConfig, config_from_mapping
from agent.nrt import attributes_of, node_resource_topology, occupancy_of
from agent.podresources import AllocatableDevices, ContainerKey, DeviceAssignments, DeviceGroup
from agent.pods import pod_from_dict
from agent.topology.model import Topology
from tests.support.machines import GIB, machine
from tests.support.paths import REPO
from tests.support.podfactory import container, make_pod, resources, sidecar

CRD = REPO / "deploy" / "crds" / "noderesourcetopologies.yaml"
GPU = "nvidia.com/gpu"


@cache
def schema() -> dict[str, Any]:
    """The openAPIV3Schema of the CRD's stored version."""
    crd = yaml.safe_load(CRD.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["storage"]]
    return dict(version["schema"]["openAPIV3Schema"])


def config(**extra: Any) -> AgentConfig:
    return config_from_mapping({"systemReserved": {"cpu": "1"}, **extra}, env={})


def pod_level(name: str, cpus: int, main: int) -> dict[str, Any]:
    """A pod-level pod: a budget of ``cpus`` CPUs, a ``main``-CPU exclusive container and a shared sidecar."""
    return make_pod(
        name,
        containers=[container("main", cpu=str(main), memory="1Gi")],
        init_containers=[
            sidecar("proxy", cpu_request="100m", cpu_limit="500m", memory_request="64Mi", memory_limit="128Mi")
        ],
        pod_resources=resources(cpu=str(cpus), memory="2Gi"),
    )


def classic(name: str, cpus: int, memory: str = "1Gi") -> dict[str, Any]:
    return make_pod(name, containers=[container("app", cpu=str(cpus), memory=memory)])


def publish(topology: Topology, cfg: AgentConfig, *pods: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Admit the pods in order and compute the object."""
    planner = Planner(topology, cfg.planner)
    for raw in pods:
        assert planner.admit(pod_from_dict(raw)).admitted
    return node_resource_topology(
        node_name="node-1",
        topology=topology,
        occupancy=occupancy_of(topology, cfg.planner, planner.snapshot()),
        attributes=attributes_of(cfg.planner),
        **kwargs,
    )


def amounts(obj: dict[str, Any], zone: str, resource: str) -> tuple[str, str, str]:
    """(capacity, allocatable, available) of one resource in one zone."""
    (found,) = [z for z in obj["zones"] if z["name"] == zone]
    (res,) = [r for r in found["resources"] if r["name"] == resource]
    return res["capacity"], res["allocatable"], res["available"]


def test_empty_node() -> None:
    """Before any pod: a Node zone per NUMA node, cpu less the reserved CPU on node 0, costs from the SLIT."""
    obj = publish(machine(), config())
    assert ["node-0", "node-1"] == [z["name"] for z in obj["zones"]]
    assert {"Node"} == {z["type"] for z in obj["zones"]}
    assert ("16", "15", "15") == amounts(obj, "node-0", "cpu")
    assert ("16", "16", "16") == amounts(obj, "node-1", "cpu")
    assert [{"name": "node-0", "value": 10}, {"name": "node-1", "value": 21}] == obj["zones"][0]["costs"]
    assert str(64 * GIB) == amounts(obj, "node-0", "memory")[2]
    assert [
        {"name": "topologyManagerPolicy", "value": "best-effort"},
        {"name": "topologyManagerScope", "value": "pod"},
        {"name": "topologyManagerMaxNUMANodes", "value": "8"},
    ] == obj["attributes"]
    assert ["BestEffortPodLevel"] == obj["topologyPolicies"]
    assert {"name": "node-1", "labels": {"app.kubernetes.io/managed-by": "podpin"}} == obj["metadata"]


def test_bubbles_and_exclusive_slices_are_not_available() -> None:
    """A pod bubble counts whole (pod shared pool included); a classic exclusive container counts its CPUs."""
    obj = publish(machine(), config(), pod_level("a", 5, 4), classic("b", 6), classic("web", 0))
    used = {z["name"]: int(amounts(obj, z["name"], "cpu")[2]) for z in obj["zones"]}
    assert 31 - 11 == sum(used.values())
    assert ("16", "15", "4") == amounts(obj, "node-0", "cpu")


def test_reserved_system_cpus_are_not_allocatable_where_they_are() -> None:
    """reservedSystemCPUs are taken off the allocatable of the zone each reserved CPU is on."""
    obj = publish(machine(), config(reservedSystemCPUs="0,16", systemReserved={}))
    assert (("16", "14", "14"), ("16", "16", "16")) == (amounts(obj, "node-0", "cpu"), amounts(obj, "node-1", "cpu"))
    obj = publish(machine(), config(reservedSystemCPUs="0,8", systemReserved={}))
    assert (("16", "15", "15"), ("16", "15", "15")) == (amounts(obj, "node-0", "cpu"), amounts(obj, "node-1", "cpu"))


def static_memory() -> dict[str, Any]:
    return {
        "memoryManagerPolicy": "Static",
        "systemReserved": {"cpu": "1", "memory": "1Gi"},
        "evictionHard": {"memory.available": "100Mi"},
        "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1124Mi"}}],
    }


def test_static_memory_reports_the_memory_managers_tables() -> None:
    """With the Static policy, memory and hugepages come from the memory manager: capacity, allocatable, free."""
    topology = machine(hugepages_2m=512)
    hp = make_pod(
        "hp",
        containers=[
            {
                "name": "app",
                "resources": {
                    "requests": {"cpu": "2", "memory": "1Gi", "hugepages-2Mi": "256Mi"},
                    "limits": {"cpu": "2", "memory": "1Gi", "hugepages-2Mi": "256Mi"},
                },
            }
        ],
    )
    obj = publish(topology, config_from_mapping(static_memory(), env={}), hp)
    zone0 = [r["name"] for r in obj["zones"][0]["resources"]]
    assert ["cpu", "memory", "hugepages-2Mi"] == zone0
    total = 64 * GIB
    allocatable = total - 1124 * 2**20 - GIB
    assert (str(total), str(allocatable), str(allocatable - GIB)) == amounts(obj, "node-0", "memory")
    assert (str(GIB), str(GIB), str(GIB - 256 * 2**20)) == amounts(obj, "node-0", "hugepages-2Mi")
    assert (str(total), str(total - GIB), str(total - GIB)) == amounts(obj, "node-1", "memory")


def test_without_static_memory_nothing_is_subtracted() -> None:
    """With memoryManagerPolicy None, available memory equals allocatable: nothing places memory on NUMA nodes."""
    obj = publish(machine(), config(), classic("big", 4, "32Gi"))
    assert (str(64 * GIB), str(64 * GIB), str(64 * GIB)) == amounts(obj, "node-0", "memory")


def devices() -> tuple[AllocatableDevices, DeviceAssignments]:
    allocatable = AllocatableDevices(
        groups=(
            DeviceGroup(resource=GPU, ids=("gpu-0",), numa=(0,)),
            DeviceGroup(resource=GPU, ids=("gpu-1", "gpu-2"), numa=(1,)),
            DeviceGroup(resource=GPU, ids=("gpu-x",), numa=()),
            DeviceGroup(resource="example.com/nic", ids=("vf-0",), numa=(0, 1)),
        )
    )
    held = DeviceAssignments.of(
        {ContainerKey(namespace="ml", pod="t", container="c"): [DeviceGroup(resource=GPU, ids=("gpu-2",), numa=(1,))]}
    )
    return allocatable, held


def test_devices_per_numa_node() -> None:
    """Device resources follow cpu and memory per zone: held devices are not available; no-NUMA devices are left out."""
    allocatable, held = devices()
    obj = publish(machine(), config(), devices=allocatable, assignments=held)
    assert ["cpu", "memory", "example.com/nic", GPU] == [r["name"] for r in obj["zones"][0]["resources"]]
    assert ("1", "1", "1") == amounts(obj, "node-0", GPU)
    assert ("2", "2", "1") == amounts(obj, "node-1", GPU)
    assert ("1", "1", "1") == amounts(obj, "node-1", "example.com/nic")


def test_owner_reference_and_policy_names() -> None:
    """The Node's uid becomes the ownerReference; single-numa-node/container maps to the legacy policy name."""
    obj = publish(
        machine(), config(topologyManagerPolicy="single-numa-node", topologyManagerScope="container"), owner_uid="u-1"
    )
    assert [{"apiVersion": "v1", "kind": "Node", "name": "node-1", "uid": "u-1"}] == obj["metadata"]["ownerReferences"]
    assert ["SingleNUMANodeContainerLevel"] == obj["topologyPolicies"]
    assert {"name": "topologyManagerPolicy", "value": "single-numa-node"} == obj["attributes"][0]


def test_policy_is_none_when_podpin_aligns_nothing() -> None:
    """cpuManagerPolicy none without Static memory never rejects for alignment: the published policy is none."""
    obj = publish(
        machine(),
        config_from_mapping({"cpuManagerPolicy": "none", "topologyManagerPolicy": "single-numa-node"}, env={}),
    )
    assert {"name": "topologyManagerPolicy", "value": "none"} == obj["attributes"][0]
    assert ["None"] == obj["topologyPolicies"]
    assert ("16", "16", "16") == amounts(obj, "node-0", "cpu")


CASES = {
    "empty-2numa": lambda: publish(machine(), config()),
    "busy-4numa": lambda: publish(
        machine(numa_per_socket=2, cores_per_numa=4),
        config(topologyManagerPolicy="single-numa-node"),
        pod_level("a", 3, 2),
        classic("b", 4),
        owner_uid="u",
    ),
    "static-hugepages": lambda: publish(
        machine(hugepages_2m=64, hugepages_1g=2), config_from_mapping(static_memory(), env={}), classic("c", 2)
    ),
    "devices": lambda: publish(machine(), config(), devices=devices()[0], assignments=devices()[1]),
    "no-distances": lambda: publish(
        Topology(
            cpus=machine().cpus,
            numa_nodes=tuple(
                n.__class__(id=n.id, cpus=n.cpus, memory_bytes=n.memory_bytes) for n in machine().numa_nodes
            ),
        ),
        config(),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_object_validates_against_the_crd_schema(case: str) -> None:
    """Every kind of object podpin publishes is valid under the CRD's OpenAPI v3 schema."""
    obj = CASES[case]()
    jsonschema.validate(obj, schema())
    assert "topology.node.k8s.io/v1alpha2" == obj["apiVersion"]


def test_the_schema_rejects_what_the_api_server_would() -> None:
    """The schema check is real: a zone without a type and a quantity that is not one are refused."""
    obj = publish(machine(), config())
    del obj["zones"][0]["type"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(obj, schema())
    obj = publish(machine(), config())
    obj["zones"][0]["resources"][0]["available"] = "lots"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(obj, schema())
