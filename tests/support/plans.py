"""Small builders of plan values (ContainerPlan, PodPlan) for tests that need a plan but no planner."""

from __future__ import annotations

from collections.abc import Sequence

from agent.alloc import ContainerPlan, PodPlan, Pool, PoolReason, ReasonKind
from agent.cpuset import CPUSet
from agent.pods import ContainerKind, CPUEligibility, QOSClass
from agent.vocabulary import CgroupValues, CpuMax

__all__ = ["container_plan", "pod_plan"]


def container_plan(name: str, pool: Pool, cpus: CPUSet) -> ContainerPlan:
    """An app container of a Guaranteed pod, planned on ``cpus`` in ``pool``."""
    return ContainerPlan(
        name=name,
        kind=ContainerKind.APP,
        pool=pool,
        cpus=cpus,
        numa=(0,),
        container_id=None,
        desired=CgroupValues(cpuset_cpus=cpus, cpu_max=CpuMax(quota=None, period=100_000)),
        reason=PoolReason(
            kind=ReasonKind.EXCLUSIVE if pool == Pool.EXCLUSIVE else ReasonKind.NOT_ELIGIBLE,
            pool=pool,
            eligibility=CPUEligibility.WHOLE_CPUS,
            qos=QOSClass.GUARANTEED,
        ),
    )


def pod_plan(name: str, containers: Sequence[ContainerPlan], *, namespace: str = "default") -> PodPlan:
    """An admitted Guaranteed pod ``name`` holding ``containers`` (no bubble)."""
    return PodPlan(
        uid=f"uid-{name}",
        namespace=namespace,
        name=name,
        qos=QOSClass.GUARANTEED,
        admitted=True,
        reason=None,
        message=None,
        numa_affinity=(0,),
        bubble=None,
        desired=CgroupValues(),
        containers=tuple(containers),
    )
