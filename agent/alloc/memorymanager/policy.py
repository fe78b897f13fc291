"""The memory manager's policy names (``memoryManagerPolicy``).

The kubelet spells them with a capital letter (``pkg/kubelet/cm/memorymanager/policy_none.go``,
``policy_static.go``), unlike the CPU and topology managers' policies; podpin
keeps the kubelet's spelling so a ``KubeletConfiguration`` fragment can be copied.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["MemoryManagerPolicy"]


class MemoryManagerPolicy(StrEnum):
    """``memoryManagerPolicy``: ``Static`` adds per-NUMA memory accounting and ``cpuset.mems``."""

    NONE = "None"
    STATIC = "Static"
