"""The memory manager's ``Static`` policy (the kubelet's memorymanager ``policy_static.go``).

Only Guaranteed pods are handled. Memory is partitioned logically: a container
(or a pod bubble) gets memory blocks on a NUMA mask, which becomes its
``cpuset.mems``; runtime isolation is NUMA placement plus the cgroup limits.
Like the CPU policy, this class holds configuration only and takes the
:class:`MemoryState` it works on; ``initContainersReusableMemory`` is kept for
the pod being admitted, as in the kubelet.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import combinations

from agent.alloc.errors import AllocationError, EmptyPodSharedPoolError
from agent.alloc.memorymanager.hints import Reusable, best_listed_hint, lattice_memory_hints
from agent.alloc.memorymanager.state import Block, MemoryState, NUMAMemory
from agent.alloc.pod_budget import validate_pod_budget
from agent.alloc.topologymanager import (
    SMALL_LATTICE_NODES,
    CompactProviderHints,
    HintList,
    NUMAInfo,
    ProviderHints,
    TopologyHint,
    is_narrower_than,
)
from agent.pods import (
    ContainerKind,
    ContainerView,
    PodView,
    QOSClass,
    container_memory_eligible,
    container_memory_requests,
    pod_level_memory,
)

__all__ = ["StaticMemoryPolicy", "pod_requested_memory"]

Requests = Mapping[str, int]


def _bits(mask: int) -> tuple[int, ...]:
    return tuple(n for n in range(mask.bit_length()) if mask >> n & 1)


def _mask(nodes: tuple[int, ...]) -> int:
    mask = 0
    for node in nodes:
        mask |= 1 << node
    return mask


def pod_requested_memory(pod: PodView) -> dict[str, int]:
    """``getPodRequestedResources``: max(app + sidecars, each init + sidecars before it), per resource."""
    by_init: dict[str, int] = {}
    by_sidecars: dict[str, int] = {}
    for container in pod.init_containers:
        for name, size in container_memory_requests(container).items():
            if container.kind == ContainerKind.SIDECAR:
                by_sidecars[name] = by_sidecars.get(name, 0) + size
            else:
                by_init[name] = max(by_init.get(name, 0), by_sidecars.get(name, 0) + size)
    total: dict[str, int] = {}
    for container in pod.containers:
        for name, size in container_memory_requests(container).items():
            total[name] = total.get(name, 0) + size
    for name in set(total) | set(by_sidecars) | set(by_init):
        total[name] = max(total.get(name, 0) + by_sidecars.get(name, 0), by_init.get(name, 0))
    return total


class StaticMemoryPolicy:
    """NUMA-aligned memory for Guaranteed pods, with pod bubbles for pod-level pods.

    With ``numa_info`` and more than 8 NUMA nodes, hints are computed as a
    bitmap (:mod:`agent.alloc.memorymanager.hints`) instead of subset by subset.
    """

    def __init__(self, numa_info: NUMAInfo | None = None) -> None:
        self._numa_info = numa_info
        self._reusable: dict[str, dict[tuple[int, ...], dict[str, int]]] = {}

    def start_pod(self, pod_uid: str) -> None:
        """Forget reusable init-container memory before a (re-)admission of this pod."""
        self._reusable.pop(pod_uid, None)

    # -- requests ------------------------------------------------------------------------
    @staticmethod
    def container_requests(pod: PodView, container: ContainerView) -> dict[str, int]:
        """The memory a container takes exclusively (empty when it shares)."""
        if pod.qos != QOSClass.GUARANTEED or not container_memory_eligible(pod, container):
            return {}
        return dict(container_memory_requests(container))

    def _reusable_for(self, pod_uid: str, numa: tuple[int, ...], resource: str) -> int:
        return self._reusable.get(pod_uid, {}).get(numa, {}).get(resource, 0)

    # -- hints ---------------------------------------------------------------------------
    def calculate_hints(
        self, machine: dict[int, NUMAMemory], requests: Requests, *, reusable: Reusable | None = None
    ) -> dict[str, list[TopologyHint]] | dict[str, HintList]:
        """``calculateHints``: every NUMA subset that can hold every requested resource (empty when none).

        ``reusable`` is the memory the pod's finished init containers left, by the exact NUMA set it sits on.
        """
        reusable = reusable or {}
        nodes = sorted(machine)
        numa_info = self._numa_info
        if numa_info is not None and len(nodes) > SMALL_LATTICE_NODES and numa_info.nodes == tuple(nodes):
            return lattice_memory_hints(machine, requests, reusable, numa_info)
        min_affinity = len(nodes)
        masks: list[tuple[int, ...]] = []
        for size in range(1, len(nodes) + 1):
            for bits in combinations(nodes, size):
                if any(
                    sum(machine[n].tables[r].allocatable if r in machine[n].tables else 0 for n in bits) < requested
                    for r, requested in requests.items()
                ):
                    continue
                min_affinity = min(min_affinity, size)
                if size == 1 and len(machine[bits[0]].cells) > 1:
                    continue
                if size > 1 and any(
                    machine[n].assignments > 0 and (len(machine[n].cells) == 1 or set(machine[n].cells) != set(bits))
                    for n in bits
                ):
                    continue
                if any(
                    sum(machine[n].tables[r].free if r in machine[n].tables else 0 for n in bits)
                    + reusable.get(bits, {}).get(r, 0)
                    < requested
                    for r, requested in requests.items()
                ):
                    continue
                masks.append(bits)
        return (
            {
                resource: [TopologyHint(_mask(bits), len(bits) == min_affinity) for bits in masks]
                for resource in requests
            }
            if masks
            else {}
        )

    def container_hints(self, state: MemoryState, pod: PodView, container: ContainerView) -> CompactProviderHints:
        """``GetTopologyHints`` (container scope)."""
        requests = self.container_requests(pod, container)
        if not requests:
            return None
        blocks = state.get(pod.uid, container.name)
        if blocks is not None:
            return _regenerate(blocks, requests)
        return self.calculate_hints(state.machine, requests, reusable=self._reusable.get(pod.uid))

    def pod_hints(self, state: MemoryState, pod: PodView) -> CompactProviderHints:
        """``GetPodTopologyHints`` (pod scope): pod-level budget, or the aggregate of the containers."""
        if pod.qos != QOSClass.GUARANTEED:
            return None
        if pod.has_pod_level_resources:
            requests = dict(pod_level_memory(pod))
            if not requests:
                return None
            try:
                self._validate_budget(pod, requests)
            except EmptyPodSharedPoolError:
                return {resource: [] for resource in requests}
            if pod.uid in state.pod_blocks:
                return _regenerate(state.pod_blocks[pod.uid], requests)
            return self.calculate_hints(state.machine, requests, reusable=self._reusable.get(pod.uid))
        requests = {k: v for k, v in pod_requested_memory(pod).items() if v > 0}
        if not requests:
            return None
        for container in pod.all_containers:
            blocks = state.get(pod.uid, container.name)
            if blocks is not None:
                return _regenerate(blocks, self.container_requests(pod, container))
        return self.calculate_hints(state.machine, requests, reusable=self._reusable.get(pod.uid))

    def _validate_budget(self, pod: PodView, budget: Requests) -> None:
        """``validatePodScopeResources`` for every memory resource of the pod budget."""
        for resource, total in budget.items():

            def exclusive(container: ContainerView, resource: str = resource) -> int:
                return self.container_requests(pod, container).get(resource, 0)

            validate_pod_budget(pod, resource, total, exclusive)

    # -- choosing the NUMA mask ----------------------------------------------------------
    def _best_mask(
        self, machine: dict[int, NUMAMemory], pod_uid: str, requests: Requests, affinity: int | None, preferred: bool
    ) -> tuple[int, ...]:
        """The hint's mask, defaulted, extended and checked as ``Allocate`` does."""
        best: tuple[tuple[int, ...], bool]
        if affinity is None:
            hints = self.calculate_hints(machine, requests, reusable=self._reusable.get(pod_uid))
            if not hints:
                raise AllocationError(
                    "[memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough memory is "
                    "available"
                )
            default = _find_best(hints.get("memory", []))
            if default is None:
                default = TopologyHint(None, False)
            if not default.preferred and preferred:
                raise AllocationError("[memorymanager] failed to find the default preferred hint")
            best = (_bits(default.affinity or 0), default.preferred)
        else:
            best = (_bits(affinity), preferred)
        if not _satisfies(machine, best[0], requests):
            hints = self.calculate_hints(machine, requests, reusable=self._reusable.get(pod_uid))
            extended = _find_best(hints.get("memory", []), within=_mask(best[0]))
            if extended is None:
                raise AllocationError("[memorymanager] failed to find NUMA nodes to extend the current topology hint")
            if not extended.preferred and best[1]:
                raise AllocationError("[memorymanager] failed to find the extended preferred hint")
            best = (_bits(extended.affinity or 0), extended.preferred)
        if _violates_groups(machine, best[0]):
            raise AllocationError("[memorymanager] preferred hint violates NUMA node allocation")
        return best[0]

    # -- allocation ----------------------------------------------------------------------
    def allocate(
        self, state: MemoryState, pod: PodView, container: ContainerView, affinity: int | None, preferred: bool
    ) -> tuple[Block, ...] | None:
        """``Allocate`` (classic and container scope): blocks for one container.

        Raises:
            AllocationError: with the memory manager's ``[memorymanager] ...`` text.
        """
        requests = self.container_requests(pod, container)
        if not requests:
            return None
        existing = state.get(pod.uid, container.name)
        if existing is not None:
            self._update_reusable(pod, container, existing)
            return existing
        numa = self._best_mask(state.machine, pod.uid, requests, affinity, preferred)
        blocks: list[Block] = []
        for resource, size in requests.items():
            blocks.append(Block(numa, resource, size))
            reusable = self._reusable_for(pod.uid, numa, resource)
            _reserve(state.machine, numa, resource, 0 if reusable >= size else size - reusable)
        self._update_reusable(pod, container, blocks)
        state.set(pod.uid, container.name, blocks)
        self._shrink_init_blocks(state, pod, container, blocks)
        return tuple(blocks)

    def _update_reusable(self, pod: PodView, container: ContainerView, blocks: tuple[Block, ...] | list[Block]) -> None:
        for uid in [uid for uid in self._reusable if uid != pod.uid]:
            del self._reusable[uid]
        if container.kind == ContainerKind.INIT:
            per_mask = self._reusable.setdefault(pod.uid, {})
            for block in blocks:
                sizes = per_mask.setdefault(block.numa, {})
                sizes[block.resource] = max(sizes.get(block.resource, 0), block.size)
            return
        for block in blocks:
            reusable = self._reusable_for(pod.uid, block.numa, block.resource)
            if reusable:
                self._reusable[pod.uid][block.numa][block.resource] = (
                    0 if block.size >= reusable else reusable - block.size
                )

    def _shrink_init_blocks(
        self, state: MemoryState, pod: PodView, container: ContainerView, blocks: list[Block]
    ) -> None:
        """``updateInitContainersMemoryBlocks``: init blocks shrink by what later containers reuse."""
        for block in blocks:
            remaining = block.size
            for init in pod.init_containers:
                if init.name == container.name or remaining == 0:
                    break
                if init.kind == ContainerKind.SIDECAR:
                    continue
                init_blocks = state.get(pod.uid, init.name)
                if not init_blocks:
                    continue
                updated: list[Block] = []
                for old in init_blocks:
                    kept = old
                    if old.size and old.resource == block.resource and set(old.numa) == set(block.numa):
                        used = min(old.size, remaining)
                        remaining -= used
                        kept = Block(old.numa, old.resource, old.size - used)
                    updated.append(kept)
                state.set(pod.uid, init.name, updated)

    def allocate_pod(
        self, state: MemoryState, pod: PodView, affinity: int | None, preferred: bool
    ) -> tuple[int, ...] | None:
        """``AllocatePod`` (KEP-5526): reserve the pod budget once, partition it into container blocks.

        Returns the NUMA nodes of the pod's memory, or None when the pod gets nothing.

        Raises:
            EmptyPodSharedPoolError: exclusive containers consume a whole resource budget with a shared one left.
            AllocationError: with the memory manager's ``[memorymanager] ...`` text.
        """
        if pod.qos != QOSClass.GUARANTEED:
            return None
        total = dict(pod_level_memory(pod))
        if not total:
            return None
        self._validate_budget(pod, total)
        if pod.uid in state.pod_blocks:
            numa = state.pod_blocks[pod.uid][0].numa
        else:
            numa = self._best_mask(state.machine, pod.uid, total, affinity, preferred)
            for resource, size in total.items():
                _reserve(state.machine, numa, resource, size)
            state.pod_blocks[pod.uid] = tuple(Block(numa, r, s) for r, s in total.items())
        sidecars: dict[str, int] = {}
        deferred: list[ContainerView] = []
        for container in pod.init_containers:
            requests = self.container_requests(pod, container)
            if requests:
                sizes = requests
                if container.kind == ContainerKind.SIDECAR:
                    for r, s in requests.items():
                        sidecars[r] = sidecars.get(r, 0) + s
            elif container.kind == ContainerKind.INIT:
                sizes = {r: t - sidecars.get(r, 0) for r, t in total.items()}
            else:
                deferred.append(container)
                continue
            _set_missing(state, pod.uid, container.name, numa, sizes)
        app_exclusive: dict[str, int] = {}
        for container in pod.containers:
            requests = self.container_requests(pod, container)
            if requests:
                for r, s in requests.items():
                    app_exclusive[r] = app_exclusive.get(r, 0) + s
                _set_missing(state, pod.uid, container.name, numa, requests)
            else:
                deferred.append(container)
        remainder = {r: t - sidecars.get(r, 0) - app_exclusive.get(r, 0) for r, t in total.items()}
        for container in deferred:
            _set_missing(state, pod.uid, container.name, numa, remainder)
        return numa

    # -- release -------------------------------------------------------------------------
    def remove_container(self, state: MemoryState, pod_uid: str, container: str) -> None:
        """``RemoveContainer``: give the blocks back (a pod bubble goes back with its last container)."""
        blocks = state.get(pod_uid, container)
        if blocks is None:
            return
        state.delete(pod_uid, container)
        if pod_uid in state.pod_blocks:
            if pod_uid not in state.blocks:
                _release(state.machine, state.pod_blocks.pop(pod_uid))
            return
        _release(state.machine, blocks)

    def remove_pod(self, state: MemoryState, pod_uid: str) -> None:
        """Release everything the pod holds."""
        containers = state.blocks.pop(pod_uid, {})
        if pod_uid in state.pod_blocks:
            _release(state.machine, state.pod_blocks.pop(pod_uid))
        else:
            for blocks in containers.values():
                _release(state.machine, blocks)
        self._reusable.pop(pod_uid, None)


def _set_missing(state: MemoryState, pod_uid: str, name: str, numa: tuple[int, ...], sizes: Requests) -> None:
    if state.get(pod_uid, name) is None:
        state.set(pod_uid, name, [Block(numa, r, s) for r, s in sizes.items() if s > 0])


def _regenerate(blocks: tuple[Block, ...], requests: Requests) -> ProviderHints:
    """``regenerateHints``: after a restart, the hint is the mask the blocks already use."""
    if len(blocks) != len(requests) or any(
        b.resource not in requests or b.size != requests[b.resource] for b in blocks
    ):
        return None
    hints: dict[str, list[TopologyHint]] = {r: [] for r in requests}
    for block in blocks:
        hints[block.resource].append(TopologyHint(_mask(block.numa), True))
    return hints


def _find_best(hints: list[TopologyHint] | HintList, within: int = 0) -> TopologyHint | None:
    """``findBestHint`` over the hints whose mask contains ``within``: preferred first, then the narrowest mask.

    None when no hint qualifies.
    """
    if isinstance(hints, HintList):
        return best_listed_hint(hints, within)
    best: TopologyHint | None = None
    for hint in hints:
        if (hint.affinity or 0) & within != within:
            continue
        if (
            best is None
            or best.affinity is None
            or (hint.preferred and not best.preferred)
            or (hint.preferred == best.preferred and is_narrower_than(hint.affinity or 0, best.affinity or 0))
        ):
            best = hint
    return best


def _satisfies(machine: dict[int, NUMAMemory], numa: tuple[int, ...], requests: Requests) -> bool:
    return all(
        sum(machine[n].tables[r].free if r in machine[n].tables else 0 for n in numa) >= size
        for r, size in requests.items()
    )


def _violates_groups(machine: dict[int, NUMAMemory], numa: tuple[int, ...]) -> bool:
    if len(numa) == 1:
        return False
    return any(
        machine[n].assignments > 0 and (len(machine[n].cells) == 1 or set(machine[n].cells) != set(numa)) for n in numa
    )


def _reserve(machine: dict[int, NUMAMemory], numa: tuple[int, ...], resource: str, size: int) -> None:
    """``updateMachineState``: count the block on every node, fill node by node in mask order."""
    for node in numa:
        memory = machine[node]
        memory.assignments += 1
        memory.cells = numa
        if size == 0:
            continue
        table = memory.tables.get(resource)
        if table is None or table.free <= 0:
            continue
        taken = min(table.free, size)
        table.reserved += taken
        table.free -= taken
        size -= taken


def _release(machine: dict[int, NUMAMemory], blocks: tuple[Block, ...]) -> None:
    """The release half of ``RemoveContainer``."""
    for block in blocks:
        size = block.size
        for node in block.numa:
            memory = machine[node]
            memory.assignments -= 1
            if memory.assignments == 0:
                memory.cells = (node,)
            if size == 0:
                continue
            table = memory.tables.get(block.resource)
            if table is None or table.reserved == 0:
                continue
            given = min(table.reserved, size)
            table.free += given
            table.reserved -= given
            size -= given
