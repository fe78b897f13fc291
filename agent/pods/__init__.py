"""The pod model: raw pod dict -> typed, defaulted, validated :class:`PodView`, QoS and eligibility.

Pure code: nothing here does I/O or reads the clock. Sources hand raw dicts to
:func:`pod_from_dict`; the planner reads :class:`PodView` and asks the
eligibility functions who gets exclusive CPUs and memory. :mod:`.manifests`
turns the text of manifest files (YAML or JSON) into those raw dicts, for
``podpin plan`` and the directory source.
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
from agent.pods.manifests import MANIFEST_SUFFIXES, ManifestError, on_node, parse_manifest, stable_uid
from agent.pods.model import ContainerState, ContainerView, PodView, effective_requests, pod_from_dict
from agent.pods.qos import QOSClass
from agent.pods.resources import ContainerKind, Resources, ResourceSpec

__all__ = [
    "MANIFEST_SUFFIXES",
    "ContainerKind",
    "ContainerState",
    "ContainerView",
    "ManifestError",
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
    "on_node",
    "parse_manifest",
    "pod_from_dict",
    "pod_level_cpus",
    "pod_level_memory",
    "stable_uid",
    "uses_pod_level_path",
]
