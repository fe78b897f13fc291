"""The memory manager's ``Static`` policy and its state (the kubelet's ``memorymanager``).

The counterpart of ``pkg/kubelet/cm/memorymanager``: :class:`StaticMemoryPolicy`
(``policy_static.go``, classic and KEP-5526 pod-level) holds configuration only
and works on the :class:`MemoryState` it is given (``state/``). Its hints come
from :mod:`.hints` as bitmaps on machines beyond eight NUMA nodes. It shares the
topology manager's hint types with the CPU manager but never imports the CPU
manager. Nothing here does I/O.
"""

from agent.alloc.memorymanager.policy import MemoryManagerPolicy
from agent.alloc.memorymanager.policy_static import StaticMemoryPolicy, pod_requested_memory
from agent.alloc.memorymanager.state import (
    Block,
    MemoryState,
    MemoryStateError,
    MemoryTable,
    NUMAMemory,
    default_machine_state,
    hugepage_resource_name,
    validate_memory_state,
)

__all__ = [
    "Block",
    "MemoryManagerPolicy",
    "MemoryState",
    "MemoryStateError",
    "MemoryTable",
    "NUMAMemory",
    "StaticMemoryPolicy",
    "default_machine_state",
    "hugepage_resource_name",
    "pod_requested_memory",
    "validate_memory_state",
]
