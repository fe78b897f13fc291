"""Pure translation of PodResources answers into device values, and the values' own lookups."""

from __future__ import annotations

from agent.podresources import (
    AllocatableDevices,
    ContainerKey,
    DeviceAssignments,
    DeviceGroup,
    allocatable_from_response,
    assignments_from_list,
    assignments_from_pod,
)
from agent.podresources.v1 import api_pb2

GPU = "nvidia.com/gpu"


def devices(resource: str, ids: list[str], numa: list[int]) -> api_pb2.ContainerDevices:
    return api_pb2.ContainerDevices(
        resource_name=resource,
        device_ids=ids,
        topology=api_pb2.TopologyInfo(nodes=[api_pb2.NUMANode(ID=n) for n in numa]),
    )


def pod(namespace: str, name: str, **containers: list[api_pb2.ContainerDevices]) -> api_pb2.PodResources:
    return api_pb2.PodResources(
        name=name,
        namespace=namespace,
        containers=[api_pb2.ContainerResources(name=c, devices=d) for c, d in containers.items()],
    )


def test_list_keeps_every_group_of_a_container() -> None:
    """A container holding GPUs on two NUMA nodes keeps both groups; the pod's NUMA nodes are their union."""
    response = api_pb2.ListPodResourcesResponse(
        pod_resources=[pod("ml", "big", train=[devices(GPU, ["g0"], [0]), devices(GPU, ["g3"], [3])], logs=[])]
    )
    value, problems = assignments_from_list(response)
    key = ContainerKey(namespace="ml", pod="big", container="train")
    assert [] == problems
    assert [key] == list(value.containers)
    assert (DeviceGroup(resource=GPU, ids=("g0",), numa=(0,)), DeviceGroup(resource=GPU, ids=("g3",), numa=(3,))) == (
        value.for_container("ml", "big", "train")
    )
    assert (0, 3) == value.pod_numa("ml", "big")
    assert () == value.container_numa("ml", "big", "logs")


def test_device_without_topology_has_no_numa_nodes() -> None:
    """A device group the kubelet reports without a TopologyInfo has no NUMA nodes (no hint from it)."""
    response = api_pb2.ListPodResourcesResponse(
        pod_resources=[pod("a", "p", c=[api_pb2.ContainerDevices(resource_name=GPU, device_ids=["g0"])])]
    )
    value, _ = assignments_from_list(response)
    assert (DeviceGroup(resource=GPU, ids=("g0",), numa=()),) == value.for_container("a", "p", "c")


def test_malformed_entries_are_left_out_and_named() -> None:
    """Entries without a resource name, device id or with a negative NUMA id are dropped, each problem named."""
    response = api_pb2.ListPodResourcesResponse(
        pod_resources=[
            pod(
                "a",
                "p",
                c=[
                    devices("", ["x"], [0]),
                    devices(GPU, [], [0]),
                    devices(GPU, ["g1"], [-1]),
                    devices(GPU, ["g2"], [1]),
                ],
            )
        ]
    )
    value, problems = assignments_from_list(response)
    assert [
        "pod a/p container c: a device group without a resource name",
        "pod a/p container c: nvidia.com/gpu group with an empty device id list or an empty id",
        "pod a/p container c: nvidia.com/gpu devices ['g1'] on a negative NUMA node [-1]",
    ] == problems
    assert (DeviceGroup(resource=GPU, ids=("g2",), numa=(1,)),) == value.for_container("a", "p", "c")


def test_get_answer_and_empty_get_answer() -> None:
    """A Get answer gives its pod's containers; an answer without a pod gives nothing."""
    value, _ = assignments_from_pod(
        api_pb2.GetPodResourcesResponse(pod_resources=pod("a", "p", c=[devices(GPU, ["g"], [1])]))
    )
    assert (1,) == value.pod_numa("a", "p")
    assert (DeviceAssignments(), []) == assignments_from_pod(api_pb2.GetPodResourcesResponse())


def test_allocatable_groups_and_held_counts() -> None:
    """Allocatable devices list resources and ids with NUMA nodes; held() counts each held device once."""
    value, problems = allocatable_from_response(
        api_pb2.AllocatableResourcesResponse(devices=[devices(GPU, ["g0", "g1"], [0]), devices("x.io/nic", ["n"], [1])])
    )
    assert [] == problems
    assert (
        AllocatableDevices(
            groups=(
                DeviceGroup(resource=GPU, ids=("g0", "g1"), numa=(0,)),
                DeviceGroup(resource="x.io/nic", ids=("n",), numa=(1,)),
            )
        )
        == value
    )
    assert (GPU, "x.io/nic") == value.resources
    held = DeviceAssignments.of(
        {ContainerKey(namespace="a", pod="p", container="c"): [DeviceGroup(resource=GPU, ids=("g1",))]}
    )
    assert {(GPU, "g1"): 1} == held.held()
    assert 1 == len(held)
