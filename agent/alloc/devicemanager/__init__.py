"""The device manager as the topology manager's third hint provider (the kubelet's ``devicemanager``).

The counterpart of ``pkg/kubelet/cm/devicemanager`` — its hint half only: the
kubelet allocates devices before podpin sees a pod, so podpin reads which
devices each container holds (the PodResources API, or ``podpin plan
--devices``) as a :class:`~agent.alloc.devices.PodDevices` value
(``agent/alloc/devices.py``, with the node-wide values the shell fills), and
:class:`DeviceManager` turns them into hints the way the kubelet regenerates
hints for devices already allocated (:mod:`.hints`), so a pod's exclusive CPUs
land on its GPU's NUMA node. It imports neither the CPU nor the memory
manager. Nothing here does I/O.
"""

from agent.alloc.devicemanager.hints import held_device_hints
from agent.alloc.devicemanager.manager import (
    DeviceHints,
    DeviceManager,
    container_device_requests,
    pod_device_requests,
)

__all__ = [
    "DeviceHints",
    "DeviceManager",
    "container_device_requests",
    "held_device_hints",
    "pod_device_requests",
]
