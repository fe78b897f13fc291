"""A two-NUMA test machine with a GPU on each node, and GPU pods: the planner's device cases share these.

Two NUMA nodes of 8 single-thread cores (CPUs 0-7 and 8-15, CPU 0 reserved);
``example.com/gpu`` ``gpu0`` on NUMA 0 and ``gpu1`` on NUMA 1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from agent.alloc import AllocatableDevices, DeviceGroup, Planner, PodDevices
from agent.config import config_from_mapping
from agent.pods.model import pod_from_dict
from tests.support.machines import machine
from tests.support.podfactory import container, make_pod

__all__ = ["GPU", "NODE_GPUS", "gpu_pod", "holding", "planner"]

GPU = "example.com/gpu"
NODE_GPUS = (
    DeviceGroup(resource=GPU, ids=("gpu0",), numa=(0,)),
    DeviceGroup(resource=GPU, ids=("gpu1",), numa=(1,)),
)


def planner(policy: str, scope: str = "container") -> Planner:
    """A planner on the two-node machine with this topology policy and scope."""
    raw = {"reservedSystemCPUs": "0", "topologyManagerPolicy": policy, "topologyManagerScope": scope}
    return Planner(machine(threads=1), config_from_mapping(raw, env={}).planner)


def gpu_pod(name: str = "gpu", cpus: Mapping[str, int] | None = None, gpus: Mapping[str, int] | None = None) -> Any:
    """A Guaranteed pod: each container its exclusive CPUs and, where given, GPUs."""
    cpus = cpus or {"main": 2}
    gpus = gpus if gpus is not None else {"main": 1}
    containers = []
    for cname, count in cpus.items():
        limits = {GPU: gpus[cname]} if gpus.get(cname) else {}
        containers.append(container(cname, cpu=str(count), memory="1Gi", limits=limits, requests=limits))
    return pod_from_dict(make_pod(name, containers=containers))


def holding(held: Mapping[str, Sequence[DeviceGroup]], node: Sequence[DeviceGroup] = NODE_GPUS) -> PodDevices:
    """Device facts: each container's groups, and the node's."""
    return PodDevices(
        containers=MappingProxyType({name: tuple(groups) for name, groups in held.items()}),
        node=AllocatableDevices(groups=tuple(node)),
    )
