"""The pod model: raw pod dict -> typed, defaulted, validated :class:`PodView`, QoS and eligibility.

Pure code: nothing here does I/O or reads the clock. Sources hand raw dicts to
:func:`pod_from_dict`; the planner reads :class:`PodView` and asks the
eligibility functions who gets exclusive CPUs and memory.
"""

from agent.pods.eligibility import (
    container_exclusive_cpus,
    container_memory_eligible,
    container_memory_requests,
    is_equivalent_guaranteed,
    pod_level_cpus,
    pod_level_memory,
    uses_pod_level_path,
)
from agent.pods.errors import PodSpecError
from agent.pods.model import ContainerState, ContainerView, PodView, pod_from_dict
from agent.pods.qos import QOSClass
from agent.pods.resources import ContainerKind, Resources, ResourceSpec, effective_requests

__all__ = [
    "ContainerKind",
    "ContainerState",
    "ContainerView",
    "PodSpecError",
    "PodView",
    "QOSClass",
    "ResourceSpec",
    "Resources",
    "container_exclusive_cpus",
    "container_memory_eligible",
    "container_memory_requests",
    "effective_requests",
    "is_equivalent_guaranteed",
    "pod_from_dict",
    "pod_level_cpus",
    "pod_level_memory",
    "uses_pod_level_path",
]
