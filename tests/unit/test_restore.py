"""What a reset writes (``agent/restore.py``): widen what podpin narrowed, give back the quotas it lifted, no more.

Pure decisions over cgroups described as found; the end-to-end reset over
fixture trees is in ``tests/agent/test_reset.py``, and on a real kernel in
``tests/vm/scenario_agent.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent.cpuset import CPUSet
from agent.pods import pod_from_dict
from agent.restore import CgroupFacts, Restore, RestorePlan, UnknownPod, plan_restore
from agent.vocabulary import CgroupLevel, CgroupValues, CpuMax
from tests.support.podfactory import container, container_id, make_pod

ONLINE = CPUSet.parse("0-15")
MEMS = CPUSet.parse("0-1")
DB = make_pod("db", containers=[container("db", cpu="4", memory="1Gi")], states={"db": "running"})
DB_ID = container_id(DB["metadata"]["uid"], "db").split("://")[1]
UID = DB["metadata"]["uid"]


def _plan(*cgroups: CgroupFacts, pods: tuple[dict[str, Any], ...] = (DB,), period: int = 100_000) -> RestorePlan:
    return plan_restore(cgroups, [pod_from_dict(p) for p in pods], online=ONLINE, mems=MEMS, period_us=period)


def _pod(**values: Any) -> CgroupFacts:
    return CgroupFacts(path="kubepods/pod", level=CgroupLevel.POD, pod_uid=UID, **values)


def _container(ident: str = DB_ID, **values: Any) -> CgroupFacts:
    return CgroupFacts(path="kubepods/pod/c", level=CgroupLevel.CONTAINER, pod_uid=UID, container_id=ident, **values)


@pytest.mark.parametrize(
    ("cpus", "mems", "expected"),
    [
        (CPUSet.parse("0,7-15"), CPUSet.parse("0"), (ONLINE, MEMS)),
        (CPUSet(), CPUSet(), None),
        (ONLINE, MEMS, None),
        (None, None, None),
        (CPUSet.parse("0-17"), MEMS, (ONLINE, None)),
    ],
    ids=["narrowed", "unset", "already-everything", "no-cpuset-files", "more-than-online"],
)
def test_cpusets_are_widened_only_where_narrowed(
    cpus: CPUSet | None, mems: CPUSet | None, expected: tuple[CPUSet, CPUSet | None] | None
) -> None:
    """A set cpuset that is not every online CPU (memory node) becomes that; unset or complete ones are left alone."""
    level = CgroupFacts(path="kubepods/burstable", level=CgroupLevel.QOS, cpus=cpus, mems=mems)
    restores = _plan(level).restores
    assert expected == ((restores[0].values.cpuset_cpus, restores[0].values.cpuset_mems) if restores else None)


@pytest.mark.parametrize(
    ("found", "period", "expected"),
    [
        (CpuMax(quota=None, period=100_000), 100_000, CpuMax(quota=400_000, period=100_000)),
        (CpuMax(quota=None, period=100_000), 50_000, CpuMax(quota=200_000, period=50_000)),
        (CpuMax(quota=400_000, period=100_000), 100_000, None),
        (CpuMax(quota=123_000, period=100_000), 100_000, None),
        (None, 100_000, None),
    ],
    ids=["lifted", "configured-period", "kubelet-quota", "someone-elses-quota", "no-cpu-max"],
)
def test_only_a_lifted_quota_is_given_back(found: CpuMax | None, period: int, expected: CpuMax | None) -> None:
    """A container's ``max`` becomes its limit's quota with the configured period; a quota that is there stays."""
    restores = _plan(_container(cpus=CPUSet.parse("1-4"), cpu_max=found), period=period).restores
    assert (expected, ONLINE) == (restores[0].values.cpu_max, restores[0].values.cpuset_cpus)


def test_pod_and_container_quota_with_their_names() -> None:
    """The pod cgroup gets the pod's quota and the container its own; both carry whose they are."""
    lifted = CpuMax(quota=None, period=100_000)
    plan = _plan(_pod(cpus=CPUSet(), cpu_max=lifted), _container(cpus=CPUSet(), cpu_max=lifted))
    quota = CpuMax(quota=400_000, period=100_000)
    assert (
        Restore(path="kubepods/pod", level=CgroupLevel.POD, values=CgroupValues(cpu_max=quota), pod="default/db"),
        Restore(
            path="kubepods/pod/c",
            level=CgroupLevel.CONTAINER,
            values=CgroupValues(cpu_max=quota),
            pod="default/db",
            container="db",
        ),
    ) == plan.restores


def test_unknown_pods_are_widened_and_named_but_keep_their_quotas() -> None:
    """A pod cgroup no pod in the list owns: cpusets widened, quotas left as found, reported with its containers."""
    lifted = CpuMax(quota=None, period=100_000)
    plan = _plan(
        _pod(cpus=CPUSet.parse("1-4"), cpu_max=lifted), _container(cpus=CPUSet.parse("1-4"), cpu_max=lifted), pods=()
    )
    assert ((ONLINE, None), (ONLINE, None), (UnknownPod(path="kubepods/pod", uid=UID, containers=1),)) == (
        (plan.restores[0].values.cpuset_cpus, plan.restores[0].values.cpu_max),
        (plan.restores[1].values.cpuset_cpus, plan.restores[1].values.cpu_max),
        plan.unknown,
    )


def test_a_container_no_status_names_keeps_its_quota() -> None:
    """A sandbox (or a container that is gone): widened, but its cpu.max is not podpin's to give back."""
    restores = _plan(_container("f" * 64, cpus=CPUSet.parse("5"), cpu_max=CpuMax(quota=None, period=100_000))).restores
    assert [(ONLINE, None, "default/db", None)] == [
        (r.values.cpuset_cpus, r.values.cpu_max, r.pod, r.container) for r in restores
    ]


def test_nothing_to_restore_is_an_empty_plan() -> None:
    """A tree as the kubelet left it: no restore, no unknown pod (a second reset writes nothing)."""
    kubelet = CpuMax(quota=400_000, period=100_000)
    assert RestorePlan(restores=(), unknown=()) == _plan(
        _pod(cpus=CPUSet(), mems=CPUSet(), cpu_max=kubelet), _container(cpus=ONLINE, mems=MEMS, cpu_max=kubelet)
    )
