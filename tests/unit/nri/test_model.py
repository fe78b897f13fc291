"""podpin's NRI values and their translation to and from NRI's protobuf messages."""

from __future__ import annotations

import pytest

from agent.cpuset import CPUSet
from agent.nri import (
    Container,
    ContainerAdjustment,
    ContainerState,
    ContainerUpdate,
    CPUResources,
    PodSandbox,
)
from agent.nri.convert import (
    ConvertError,
    adjustment_to_pb,
    container_from_pb,
    pod_from_pb,
    resources_from_pb,
    update_from_pb,
    updates_to_pb,
)
from agent.nri.proto import nri_pb2 as pb
from agent.vocabulary import CgroupValues, CpuMax
from tests.support.nri_runtime import make_container, make_pod


def test_empty_cpuset_is_refused_in_an_adjustment() -> None:
    """An empty cpuset would un-pin the container: the value names the field instead."""
    with pytest.raises(ValueError) as raised:
        ContainerAdjustment(cpuset_cpus=CPUSet())
    expected = "ContainerAdjustment.cpuset_cpus: an empty set would un-pin the container; use None to leave it alone"
    assert expected == str(raised.value)


@pytest.mark.parametrize("quota", [0, -2, True, 1.5])
def test_bad_quota_is_refused(quota: object) -> None:
    """A quota must be positive microseconds or -1; anything else is named."""
    with pytest.raises(ValueError, match="cpu_quota"):
        ContainerUpdate(container_id="c1", cpu_quota=quota)  # type: ignore[arg-type]


def test_bad_period_and_container_id_are_refused() -> None:
    """A period must be positive and an update must name its container."""
    with pytest.raises(ValueError, match="cpu_period"):
        ContainerAdjustment(cpu_period=0)
    with pytest.raises(ValueError, match="container_id"):
        ContainerUpdate(container_id="")


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (
            CgroupValues(cpuset_cpus=CPUSet.parse("2-3"), cpu_max=CpuMax(quota=None, period=100000)),
            ContainerAdjustment(cpuset_cpus=CPUSet.parse("2-3"), cpu_quota=-1, cpu_period=100000),
        ),
        (
            CgroupValues(cpuset_mems=CPUSet.parse("1"), cpu_max=CpuMax(quota=150000, period=100000)),
            ContainerAdjustment(cpuset_mems=CPUSet.parse("1"), cpu_quota=150000, cpu_period=100000),
        ),
        (CgroupValues(cpu_max=CpuMax(quota=None)), ContainerAdjustment(cpu_quota=-1)),
        (CgroupValues(cpuset_cpus=CPUSet(), cpuset_mems=CPUSet()), ContainerAdjustment()),
    ],
    ids=["lifted", "quota", "no-period", "empty-sets"],
)
def test_adjustment_of_planned_values(values: CgroupValues, expected: ContainerAdjustment) -> None:
    """Planned cgroup values become the adjustment: "max" is quota -1, an empty cpuset is left to the runtime."""
    assert expected == ContainerAdjustment.of(values)


def test_labels_and_annotations_are_read_only() -> None:
    """Values are frozen all the way down: their maps cannot be changed."""
    pod = PodSandbox(id="s", uid="u", namespace="n", name="p", labels={"a": "b"})
    with pytest.raises(TypeError):
        pod.labels["a"] = "c"  # type: ignore[index]


def test_pod_from_protobuf() -> None:
    """A PodSandbox message becomes a PodSandbox with identity, maps and cgroup paths."""
    message = make_pod("0c9e8a54", name="db", namespace="trading")
    message.linux.cgroups_path = "/kubepods/pod0c9e8a54/sb"
    expected = PodSandbox(
        id="sb-0c9e8a54",
        uid="0c9e8a54",
        namespace="trading",
        name="db",
        labels={"io.kubernetes.pod.uid": "0c9e8a54"},
        annotations={"io.kubernetes.cri.sandbox-name": "db"},
        cgroup_parent="/kubepods/pod0c9e8a54",
        cgroups_path="/kubepods/pod0c9e8a54/sb",
    )
    assert expected == pod_from_pb(message)


def test_container_from_protobuf() -> None:
    """A Container message becomes a Container with its cgroups path and CPU resources."""
    message = make_container("c1", make_pod("u1"), name="envoy", cpus="0-3", quota=50000)
    expected = Container(
        id="c1",
        pod_sandbox_id="sb-u1",
        name="envoy",
        state=ContainerState.CREATED,
        annotations={"io.kubernetes.cri.container-name": "envoy"},
        cgroups_path="/kubepods/podu1/c1",
        resources=CPUResources(shares=1024, quota=50000, period=100000, cpus=CPUSet.range(0, 3)),
    )
    assert expected == container_from_pb(message)


def test_container_without_linux_has_no_resources() -> None:
    """A container message without Linux resources gives resources None, not zeros."""
    assert None is container_from_pb(pb.Container(id="c", name="n")).resources


def test_malformed_cpuset_from_the_runtime_names_container_and_field() -> None:
    """A cpuset that is not a cpulist is a ConvertError naming the container and field."""
    message = make_container("c9", make_pod("u1"), cpus="0-x")
    with pytest.raises(ConvertError, match=r"Container c9 linux.resources.cpu.cpus"):
        container_from_pb(message)


def test_unset_optional_values_stay_unset() -> None:
    """NRI's optional wrappers keep presence: unset quota/period/shares read as None."""
    assert CPUResources() == resources_from_pb("r", pb.LinuxResources())


def test_adjustment_to_protobuf_sets_only_what_is_given() -> None:
    """An adjustment carries cpus, mems, quota -1 and period; an empty one is no message at all."""
    adjustment = ContainerAdjustment(
        cpuset_cpus=CPUSet([1, 2, 17, 18]), cpuset_mems=CPUSet([0]), cpu_quota=-1, cpu_period=100000
    )
    expected = pb.ContainerAdjustment()
    cpu = expected.linux.resources.cpu
    cpu.cpus, cpu.mems = "1-2,17-18", "0"
    cpu.quota.value, cpu.period.value = -1, 100000
    assert expected == adjustment_to_pb(adjustment)
    assert None is adjustment_to_pb(ContainerAdjustment())
    only_cpus = adjustment_to_pb(ContainerAdjustment(cpuset_cpus=CPUSet([3])))
    assert only_cpus is not None
    assert (False, False, "") == (
        only_cpus.linux.resources.cpu.HasField("quota"),
        only_cpus.linux.resources.cpu.HasField("period"),
        only_cpus.linux.resources.cpu.mems,
    )


def test_updates_round_trip_through_protobuf() -> None:
    """Updates keep their container, values and ignore_failure through the wire form."""
    updates = [
        ContainerUpdate(container_id="a", cpuset_cpus=CPUSet([4, 5])),
        ContainerUpdate(container_id="b", cpu_quota=200000, cpu_period=100000, ignore_failure=True),
    ]
    assert updates == [
        update_from_pb(pb.ContainerUpdate.FromString(m.SerializeToString())) for m in updates_to_pb(updates)
    ]


def test_update_list_with_a_foreign_item_is_a_type_error() -> None:
    """Anything but ContainerUpdate items is refused by type, naming what was given."""
    with pytest.raises(TypeError, match="got dict"):
        updates_to_pb([{"container_id": "a"}])  # type: ignore[list-item]
