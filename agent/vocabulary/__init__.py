"""The words every layer shares, at the bottom of the package graph (imports nothing of podpin but ``cpuset``).

``qos`` the pod's QoS class, ``runtime`` the container runtime and the pod uid,
``levels`` the cgroup levels of the kubepods tree, ``values`` what one cgroup
should hold (:class:`CgroupValues`, ``cpu.max`` as :class:`CpuMax`). The
planner's plan, the cgroup layout and writer, ``podpin reset``, the runtime
readers and NRI all import them from here, so none of those imports another
for a word (``docs/design.md``, "Vocabulary").
"""

from agent.vocabulary.levels import CgroupLevel
from agent.vocabulary.qos import QOSClass
from agent.vocabulary.runtime import POD_UID_FORMS, PodUID, Runtime, is_pod_uid
from agent.vocabulary.values import DEFAULT_CFS_PERIOD_US, CgroupValues, CpuMax, CpuMaxError

__all__ = [
    "DEFAULT_CFS_PERIOD_US",
    "POD_UID_FORMS",
    "CgroupLevel",
    "CgroupValues",
    "CpuMax",
    "CpuMaxError",
    "PodUID",
    "QOSClass",
    "Runtime",
    "is_pod_uid",
]
