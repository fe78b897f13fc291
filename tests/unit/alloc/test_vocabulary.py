"""The allocation core's vocabulary: one spelling per word, shared by plans, logs and metric labels."""

from __future__ import annotations

import pytest

from agent.alloc import (
    AssignmentType,
    ContainerPlan,
    PodPlan,
    Pool,
    PoolReason,
    ReasonKind,
    assignment_type,
)
from agent.cpuset import CPUSet
from agent.pods import ContainerKind, CPUEligibility, QOSClass
from agent.vocabulary import CgroupValues


def _pod(*, bubble: CPUSet | None, pool: Pool) -> tuple[PodPlan, ContainerPlan]:
    container = ContainerPlan(
        name="c",
        kind=ContainerKind.APP,
        pool=pool,
        cpus=CPUSet.parse("1"),
        numa=(0,),
        container_id=None,
        desired=CgroupValues(),
        reason=PoolReason(
            kind=ReasonKind.EXCLUSIVE, pool=pool, eligibility=CPUEligibility.WHOLE_CPUS, qos=QOSClass.GUARANTEED
        ),
    )
    pod = PodPlan(
        uid="u",
        namespace="default",
        name="p",
        qos=QOSClass.GUARANTEED,
        admitted=True,
        reason=None,
        message=None,
        numa_affinity=(0,),
        bubble=bubble,
        desired=CgroupValues(),
        containers=(container,),
    )
    return pod, container


def test_pools_are_spelled_with_underscores() -> None:
    """The pools read exclusive, pod_shared and node_shared: the kubelet-style spelling, nothing hyphenated."""
    assert ["exclusive", "pod_shared", "node_shared"] == [str(pool) for pool in Pool]


def test_shared_pools_and_assignment_types_share_one_spelling() -> None:
    """A shared pool and its assignment type are the same word, so logs and metric labels never disagree."""
    assert {"pod_shared", "node_shared"} == {str(p) for p in Pool if p != Pool.EXCLUSIVE} & set(AssignmentType)


@pytest.mark.parametrize(
    ("bubble", "pool", "expected"),
    [
        (None, Pool.EXCLUSIVE, AssignmentType.NODE_EXCLUSIVE),
        (CPUSet.parse("1-2"), Pool.EXCLUSIVE, AssignmentType.POD_EXCLUSIVE),
        (CPUSet.parse("1-2"), Pool.POD_SHARED, AssignmentType.POD_SHARED),
        (None, Pool.NODE_SHARED, AssignmentType.NODE_SHARED),
        (CPUSet.parse("1-2"), Pool.NODE_SHARED, AssignmentType.NODE_SHARED),
    ],
)
def test_assignment_type_of_a_container(bubble: CPUSet | None, pool: Pool, expected: AssignmentType) -> None:
    """An exclusive slice is pod_exclusive inside a bubble and node_exclusive without one; shared pools map 1:1."""
    pod, container = _pod(bubble=bubble, pool=pool)
    assert expected == assignment_type(pod, container)


def test_container_kinds_and_qos_classes_are_the_api_spellings() -> None:
    """Kinds are init, sidecar, app; QoS classes are spelled as in status.qosClass."""
    assert (["init", "sidecar", "app"], ["Guaranteed", "Burstable", "BestEffort"]) == (
        [str(kind) for kind in ContainerKind],
        [str(qos) for qos in QOSClass],
    )


def test_reason_kinds_and_eligibility_verdicts_are_snake_case() -> None:
    """Reason kinds and eligibility verdicts (the JSON's reason_kind) are lower snake_case words."""
    words = [str(kind) for kind in ReasonKind] + [str(verdict) for verdict in CPUEligibility]
    assert [word for word in words if word.replace("_", "").isalpha() and word.islower()] == words
