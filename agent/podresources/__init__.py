"""Devices per container from the kubelet's PodResources API, as pure values.

The NodeResourceTopology export (:mod:`agent.nrt`) and the device hint provider
of the topology manager merge (:mod:`agent.alloc.devicemanager`, the kubelet's
device manager is its third) read these facts. Public API:

* :class:`DeviceGroup`, :class:`ContainerKey`, :class:`DeviceAssignments`,
  :class:`AllocatableDevices` — the values, defined in the core
  (:mod:`agent.alloc.devices`), which reads them and never imports this package;
* :func:`assignments_from_list`, :func:`assignments_from_pod`,
  :func:`allocatable_from_response` — pure translation of the kubelet's
  answers (:mod:`.translate`);
* :func:`parse_devices`, :func:`load_devices`, :class:`DevicesFileError` — the
  ``podpin plan --devices FILE`` format (:mod:`.devices_file`);
* :class:`PodResourcesClient`, :class:`PodResourcesError` (its :class:`ErrorKind`),
  :data:`DEFAULT_SOCKET` — the gRPC client (:mod:`.client`), which loads gRPC only on its first call.

Importing this package does not import gRPC or protobuf.
"""

from agent.alloc import AllocatableDevices, ContainerKey, DeviceAssignments, DeviceGroup
from agent.podresources.client import (
    DEFAULT_SOCKET,
    MAX_ANSWER_BYTES,
    ErrorKind,
    PodResourcesClient,
    PodResourcesError,
)
from agent.podresources.devices_file import DevicesFileError, load_devices, parse_devices
from agent.podresources.translate import allocatable_from_response, assignments_from_list, assignments_from_pod

__all__ = [
    "DEFAULT_SOCKET",
    "MAX_ANSWER_BYTES",
    "AllocatableDevices",
    "ContainerKey",
    "DeviceAssignments",
    "DeviceGroup",
    "DevicesFileError",
    "ErrorKind",
    "PodResourcesClient",
    "PodResourcesError",
    "allocatable_from_response",
    "assignments_from_list",
    "assignments_from_pod",
    "load_devices",
    "parse_devices",
]
