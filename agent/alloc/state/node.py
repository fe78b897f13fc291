"""``NodeState``: every allocation on the node, and the checks a state must pass before it is adopted.

A ``NodeState`` is a snapshot. The planner never changes one it has published:
an admission works on copies of the CPU and memory states and publishes a new
``NodeState``; readers (metrics, ``/state``, the checkpoint writer) get the
snapshot itself. Its JSON form is :mod:`agent.alloc.state.checkpoint`.

Adopting a state validates everything the kubelet's ``validateState`` does plus what a
podpin state must hold: no CPU in two pods' sets, container sets of a pod-level
pod inside its bubble, default ∪ every set == the online CPUs, memory tables
that add up; each failure names the pod, container and sets involved.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from agent.alloc.cpumanager import CPUState, CPUStateError, validate_cpu_state
from agent.alloc.errors import CheckpointError
from agent.alloc.memorymanager import MemoryState, MemoryStateError, NUMAMemory, validate_memory_state
from agent.cpuset import CPUSet

__all__ = ["NodeState", "PodRecord", "validate_node_state"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PodRecord:
    """An admitted pod: who it is (for reports after it is gone) and the NUMA affinity it was given."""

    uid: str
    namespace: str
    name: str
    numa_affinity: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeState:
    """The node's allocations: CPU and memory states in the kubelet's shape, and the admitted pods.

    ``cpu`` and ``memory`` are never mutated once inside a published snapshot.
    ``memory`` is None when the memory policy is not ``Static``.
    """

    online: CPUSet
    reserved: CPUSet
    cpu: CPUState
    memory: MemoryState | None = None
    pods: Mapping[str, PodRecord] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def shared_pool(self) -> CPUSet:
        """The node shared pool (the kubelet's default cpuset)."""
        return self.cpu.default


# -- validation ---------------------------------------------------------------------------
def validate_node_state(state: NodeState, *, strict: bool, expected_memory: dict[int, NUMAMemory] | None) -> None:
    """Check a state against the machine and against itself.

    Raises:
        CheckpointError: naming the first violated rule.
    """
    cpu = state.cpu
    try:
        validate_cpu_state(cpu.copy(), state.online, state.reserved, strict=strict)
    except CPUStateError as err:
        raise CheckpointError(str(err)) from err
    owners: dict[int, str] = {}
    for uid in sorted(set(cpu.assignments) | set(cpu.pod_entries)):
        if uid not in state.pods:
            raise CheckpointError(f"pod {uid} holds CPUs but has no pod record")
        bubble = cpu.pod_entries.get(uid)
        held = bubble if bubble is not None else CPUSet()
        for name, cpus in sorted(cpu.assignments.get(uid, {}).items()):
            if bubble is not None and not cpus.is_subset_of(bubble):
                raise CheckpointError(
                    f'pod: {uid}, container: {name} cpuset "{cpus}" is not inside the pod\'s cpuset "{bubble}"'
                )
            held = held | cpus
        for cpu_id in held:
            other = owners.setdefault(cpu_id, uid)
            if other != uid:
                raise CheckpointError(f"CPU {cpu_id} is held by two pods: {other} and {uid}")
    if expected_memory is not None and state.memory is None:
        raise CheckpointError("the memory policy is Static but the checkpoint has no memory state")
    if expected_memory is None and state.memory is not None:
        raise CheckpointError("the checkpoint has a memory state but the memory policy is None")
    if state.memory is not None and expected_memory is not None:
        try:
            validate_memory_state(state.memory, expected_memory)
        except MemoryStateError as err:
            raise CheckpointError(str(err)) from err
        for uid in set(state.memory.blocks) | set(state.memory.pod_blocks):
            if uid not in state.pods:
                raise CheckpointError(f"pod {uid} holds memory but has no pod record")
