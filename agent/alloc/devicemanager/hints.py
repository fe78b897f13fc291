"""Device topology hints from devices a container already holds (the kubelet's ``generateDeviceTopologyHints``).

The counterpart of ``pkg/kubelet/cm/devicemanager/topology_hints.go``. The
kubelet's device manager gives hints two ways: from the free devices when it
is about to allocate, and — "regenerating" them, as after a kubelet restart —
from the devices a container (``GetTopologyHints``) or a pod
(``GetPodTopologyHints``) already holds. podpin never allocates devices: the
kubelet did, before podpin sees the pod. So only the second way exists here:

* only the NUMA nodes that host a device of the resource are looked at
  (``deviceNUMANodes``: the nodes the resource's devices report, those the
  machine does not have dropped; all the machine's nodes when none is left):
  a set that adds a node without such a device adds nothing but width, so a
  GPU on NUMA 1 of a two-node machine gives ``{1}`` alone, not ``{0,1}`` too;
* a set of those nodes is a hint when every held device is attached to at
  least one of its nodes (``mask.AnySet`` of the device's nodes); a device that
  reports no NUMA node is attached to none, so holding one leaves no hint at all;
* a hint is preferred when its size is the narrowest size at which the node's
  devices of that resource — all of them, held or free, ``allDevices`` — could
  hold the request; that size starts at the number of nodes looked at, so the
  set of all of them is preferred when no narrower set could hold it.

A device spanning two nodes therefore fits either node alone. Up to
:data:`~agent.alloc.topologymanager.SMALL_LATTICE_NODES` NUMA nodes the hints
are listed in the kubelet's order (by size, then by node ids); beyond, every
subset is judged at once on NumPy arrays and handed to the merge as a
:class:`~agent.alloc.topologymanager.HintList` bitmap, as the CPU hints are.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import combinations

from agent.alloc.topologymanager import (
    SMALL_LATTICE_NODES,
    HintList,
    NUMAInfo,
    TopologyHint,
    bitmap_from_flags,
    mask_of,
    popcount_table,
    position_of,
)

__all__ = ["held_device_hints"]

Devices = Mapping[str, tuple[int, ...]]
"""Device id -> the NUMA nodes it is attached to (empty: it reports none)."""


def _device_masks(devices: Devices, numa_info: NUMAInfo) -> list[int]:
    """Each device's NUMA nodes as a mask over the machine's nodes (nodes it does not have are dropped)."""
    default = numa_info.default_mask
    return [mask_of(n for n in numa if 0 <= n <= 63) & default for numa in devices.values()]


def _device_nodes(numa_info: NUMAInfo, everything: list[int]) -> tuple[int, ...]:
    """``deviceNUMANodes``: the machine's nodes some device of the resource reports; all of them when none does."""
    hosting = 0
    for device in everything:
        hosting |= device
    return tuple(n for n in numa_info.nodes if hosting >> n & 1) or numa_info.nodes


def _listed(nodes: tuple[int, ...], everything: list[int], held: list[int], request: int) -> list[TopologyHint]:
    min_size = len(nodes)
    found: list[int] = []
    for size in range(1, len(nodes) + 1):
        for combo in combinations(nodes, size):
            mask = mask_of(combo)
            if size < min_size and sum(1 for device in everything if device & mask) >= request:
                min_size = size
            if sum(1 for device in held if device & mask) >= request:
                found.append(mask)
    return [TopologyHint(mask, mask.bit_count() == min_size) for mask in found]


def _lattice(
    numa_info: NUMAInfo, looked_at: tuple[int, ...], everything: list[int], held: list[int], request: int
) -> HintList:
    import numpy as np

    nodes = numa_info.nodes
    positions = np.arange(1 << len(nodes), dtype=np.int64)
    counts = popcount_table(len(nodes))
    within = (positions & ~position_of(mask_of(looked_at), nodes)) == 0

    def touching(masks: list[int]) -> np.ndarray:
        total = np.zeros(positions.shape, dtype=np.int64)
        for mask in masks:
            total += (positions & position_of(mask, nodes)) != 0
        return total

    fitting = (touching(everything) >= request) & (positions > 0) & within
    min_size = int(counts[fitting].min()) if fitting.any() else len(looked_at)
    offered = (touching(held) >= request) & (positions > 0) & within
    preferred = offered & (counts == min_size)
    return HintList.from_bitmaps(numa_info, masks=bitmap_from_flags(offered), preferred=bitmap_from_flags(preferred))


def held_device_hints(
    numa_info: NUMAInfo, node_devices: Devices, held: Devices, request: int
) -> list[TopologyHint] | HintList:
    """The hints for ``request`` devices of one resource from the ``held`` ones (the module docstring's rules).

    Args:
        numa_info: the machine's NUMA nodes.
        node_devices: every device of the resource on the node (held ones included).
        held: the devices the container or pod holds (as many as it requests; the caller checks).
        request: how many devices it requests.
    """
    everything = _device_masks(node_devices, numa_info)
    owned = _device_masks(held, numa_info)
    looked_at = _device_nodes(numa_info, everything)
    if len(looked_at) > SMALL_LATTICE_NODES:
        return _lattice(numa_info, looked_at, everything, owned, request)
    return _listed(looked_at, everything, owned, request)
