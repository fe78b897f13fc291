"""How a container's devices read in words: the plan text and the ``Pinned`` Event say it the same way.

e.g. ``nvidia.com/gpu gpu-1 (NUMA 1); CPUs aligned``: each group of devices
with its NUMA nodes (``-`` when the device reports none), then whether the
container's CPUs sit on them (:class:`~agent.alloc.DeviceAlignment`).
"""

from __future__ import annotations

from agent.alloc import ContainerPlan, DeviceAlignment

__all__ = ["devices_text"]

_ALIGNMENT = {
    DeviceAlignment.ALIGNED: "CPUs aligned",
    DeviceAlignment.UNALIGNED: "CPUs NOT aligned",
    DeviceAlignment.NO_NUMA: "the devices report no NUMA node",
}


def devices_text(container: ContainerPlan) -> str:
    """The devices ``container`` holds and how its CPUs sit on them ('' when it holds none)."""
    if not container.devices:
        return ""
    held = ", ".join(
        f"{group.resource} {','.join(group.ids)} (NUMA {','.join(map(str, group.numa)) or '-'})"
        for group in container.devices
    )
    alignment = container.device_alignment
    return f"{held}; {_ALIGNMENT[alignment] if alignment is not None else 'runs on no CPU'}"
