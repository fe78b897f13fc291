"""Targets of one pod: the identity book decides which child cgroup is which container, the sandbox, or unknown."""

from __future__ import annotations

from pathlib import Path

from agent.alloc import ContainerPlan, PodPlan, Pool, PoolReason, ReasonKind
from agent.cgroups import ScannedContainer, ScannedPod
from agent.cpuset import CPUSet
from agent.pods import ContainerKind, CPUEligibility, QOSClass
from agent.reconcile.identity import Identity, IdentityBook
from agent.reconcile.targets import Target, pod_targets
from agent.runtime import ContainerType, IdentitySource
from agent.vocabulary import CgroupLevel, CgroupValues, CpuMax, Runtime

POD = "0c9e8a54-52d4-4c1e-8f61-3b7a9e2d4c11"
OTHER_POD = "5b0c1d2e-3f40-4a51-8b62-7c83d94ea5f6"
ROOT = Path("/sys/fs/cgroup")
POD_PATH = ROOT / "kubepods" / f"pod{POD}"
DB, SANDBOX, UNKNOWN, FOREIGN = "d" * 64, "5" * 64, "0" * 64, "f" * 64
INTERIM = CPUSet.parse("3")
LIFTED = CpuMax(quota=None, period=100_000)


def _plan() -> PodPlan:
    db = ContainerPlan(
        name="db",
        kind=ContainerKind.APP,
        pool=Pool.EXCLUSIVE,
        cpus=CPUSet.parse("1-2"),
        numa=(0,),
        container_id=None,
        desired=CgroupValues(cpuset_cpus=CPUSet.parse("1-2"), cpu_max=LIFTED),
        reason=PoolReason(
            kind=ReasonKind.EXCLUSIVE,
            pool=Pool.EXCLUSIVE,
            eligibility=CPUEligibility.WHOLE_CPUS,
            qos=QOSClass.GUARANTEED,
        ),
    )
    return PodPlan(
        uid=POD,
        namespace="default",
        name="web",
        qos=QOSClass.GUARANTEED,
        admitted=True,
        reason=None,
        message=None,
        numa_affinity=(0,),
        bubble=CPUSet.parse("1-3"),
        desired=CgroupValues(cpuset_cpus=CPUSet.parse("1-3"), cpu_max=LIFTED),
        containers=(db,),
        interim=INTERIM,
    )


def _book() -> IdentityBook:
    book = IdentityBook()
    for rid, pod, kind, name, source in (
        (DB, POD, ContainerType.CONTAINER, "db", IdentitySource.BUNDLE),
        (SANDBOX, POD, ContainerType.SANDBOX, None, IdentitySource.BUNDLE),
        (FOREIGN, OTHER_POD, ContainerType.CONTAINER, "db", IdentitySource.BUNDLE),
    ):
        book.learn(
            Identity(runtime_id=rid, pod_uid=pod, kind=kind, name=name, source=source, runtime=Runtime.CONTAINERD)
        )
    return book


def test_children_named_by_the_book() -> None:
    """db (named by its bundle, no status yet) gets its slice; the sandbox, an unknown child and a child whose
    bundle names another pod get the interim set."""
    plan = _plan()
    children = tuple(
        ScannedContainer(id=rid, runtime=None, path=POD_PATH / rid) for rid in (DB, SANDBOX, UNKNOWN, FOREIGN)
    )
    live = ScannedPod(qos=QOSClass.GUARANTEED, uid=POD, path=POD_PATH, containers=children)
    targets = pod_targets(plan, live, _book())
    interim = CgroupValues(cpuset_cpus=INTERIM)
    expected = [
        Target(
            path=POD_PATH,
            values=CgroupValues(cpuset_cpus=CPUSet.parse("1-3"), cpu_max=LIFTED),
            level=CgroupLevel.POD,
            pod=plan,
        ),
        Target(
            path=POD_PATH / DB,
            values=CgroupValues(cpuset_cpus=CPUSet.parse("1-2"), cpu_max=LIFTED),
            level=CgroupLevel.CONTAINER,
            pod=plan,
            container="db",
            container_id=f"containerd://{DB}",
            source=IdentitySource.BUNDLE,
        ),
        Target(
            path=POD_PATH / SANDBOX,
            values=interim,
            level=CgroupLevel.SANDBOX,
            pod=plan,
            container_id=f"containerd://{SANDBOX}",
            source=IdentitySource.BUNDLE,
        ),
        Target(path=POD_PATH / UNKNOWN, values=interim, level=CgroupLevel.UNIDENTIFIED, pod=plan, container_id=UNKNOWN),
        Target(path=POD_PATH / FOREIGN, values=interim, level=CgroupLevel.UNIDENTIFIED, pod=plan, container_id=FOREIGN),
    ]
    assert expected == targets
