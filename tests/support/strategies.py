"""Shared Hypothesis strategies.

Topology-manager hints (``numa_infos``, ``merge_inputs``, ``lattice_sets``) are
shaped to hit the merge's corner cases often: masks come from a small pool so
that lists agree on a mask (preferred permutations) as often as they don't,
distances come from a small alphabet so that ties happen, and node ids are
sometimes not 0..N-1 and hints sometimes name a node the machine lacks.

Pods (``pod_specs``) mix classic and pod-level pods with app, init and sidecar
containers, exclusive and sharing; ``restore_damage`` is what a restart can do
to the CPUs a pod held (a container lost, one container's CPUs on another, CPUs
back in the shared pool).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from hypothesis import strategies as st

from agent.alloc.topologymanager import MAX_NUMA_ID, NUMAInfo, ProviderHints, TopologyHint, mask_of
from agent.quantity import cpu_millis
from tests.support.podfactory import container, make_pod, resources, sidecar

__all__ = [
    "Amounts",
    "Damage",
    "MergeInput",
    "container_specs",
    "lattice_sets",
    "merge_inputs",
    "numa_infos",
    "pod_specs",
    "restore_damage",
]

#: Distances from a few values so equal averages (tie-breaks) are common; the
#: diagonal is usually 10, as SLIT has it, but not always.
_DISTANCES = st.sampled_from([10, 11, 12, 16, 20, 21, 32])


@st.composite
def numa_infos(draw: st.DrawFn, *, min_nodes: int = 1, max_nodes: int = 6) -> NUMAInfo:
    """NUMA nodes (ids 0..N-1, or scattered over 0..63) with a random, possibly asymmetric, distance matrix."""
    count = draw(st.one_of(st.integers(min_nodes, max_nodes), st.integers(max(min_nodes, 3), max_nodes)))
    if draw(st.integers(0, 3)) == 0:
        nodes = tuple(sorted(draw(st.sets(st.integers(0, MAX_NUMA_ID), min_size=count, max_size=count))))
    else:
        nodes = tuple(range(count))
    symmetric = draw(st.booleans())
    matrix = [[0] * count for _ in range(count)]
    for i in range(count):
        for j in range(count):
            if i == j:
                matrix[i][j] = draw(_SELF_DISTANCES)
            elif j < i and symmetric:
                matrix[i][j] = matrix[j][i]
            else:
                matrix[i][j] = draw(_DISTANCES)
    return NUMAInfo(nodes=nodes, distances=tuple(tuple(row) for row in matrix))


_SELF_DISTANCES = st.sampled_from([10, 10, 10, 11])


@dataclass(frozen=True, slots=True)
class MergeInput:
    """A machine and the hints of its providers, as a policy's ``merge`` gets them."""

    numa_info: NUMAInfo
    providers: list[ProviderHints]


# Hypothesis draws the first and last options of sampled_from most often: the
# degenerate shapes (no hints, nil, empty) sit in the middle.
_MASK_KINDS = st.sampled_from(["pool", "pool", "nil", "fresh", "foreign", "pool"])
_PROVIDER_COUNTS = st.sampled_from([2, 3, 1, 2, 0, 3, 1, 2])
_NO_HINTS = st.sampled_from([False, False, True, False, False, False])
_RESOURCE_KINDS = st.sampled_from(["hints", "hints", "nil", "hints", "empty", "hints"])


class _Masks:
    """Draws masks over a machine's nodes from a small pool, fresh, or naming a node it lacks.

    With ``same_size`` every non-foreign mask has one size, so that many results
    tie on size and the distance or value tie-breaks decide.
    """

    def __init__(self, draw: st.DrawFn, info: NUMAInfo, same_size: bool) -> None:
        self._draw = draw
        self._nodes = info.nodes
        self._size = draw(st.integers(1, len(info.nodes))) if same_size else None
        self._pool = [self.fresh() for _ in range(draw(st.integers(1, 4)))]

    def fresh(self) -> int:
        """A mask over the machine's nodes (possibly empty unless sizes are fixed)."""
        count = len(self._nodes)
        if self._size is None:
            positions = self._draw(st.integers(0, (1 << count) - 1))
            return mask_of(node for index, node in enumerate(self._nodes) if positions >> index & 1)
        chosen = self._draw(st.sets(st.integers(0, count - 1), min_size=self._size, max_size=self._size))
        return mask_of(self._nodes[index] for index in chosen)

    def hint_mask(self) -> int | None:
        """The mask of one hint: from the pool, fresh, nil, or with a node the machine lacks."""
        kind = self._draw(_MASK_KINDS)
        if kind == "nil":
            return None
        if kind == "pool":
            return self._pool[self._draw(st.integers(0, len(self._pool) - 1))]
        if kind == "foreign":
            stranger = self._draw(st.integers(0, MAX_NUMA_ID))
            if stranger not in self._nodes:
                return self.fresh() | 1 << stranger
        return self.fresh()


@st.composite
def merge_inputs(
    draw: st.DrawFn,
    *,
    min_nodes: int = 1,
    max_nodes: int = 6,
    max_lists: int = 4,
    max_hints: int = 5,
    same_size: bool | None = None,
) -> MergeInput:
    """Providers (nil, empty, nil and empty resource lists, nil masks) small enough for the literal product.

    ``same_size``: masks of one size (``None``: half the time).
    """
    info = draw(numa_infos(min_nodes=min_nodes, max_nodes=max_nodes))
    masks = _Masks(draw, info, draw(st.booleans()) if same_size is None else same_size)

    def resource_hints() -> list[TopologyHint] | None:
        kind = draw(_RESOURCE_KINDS)
        if kind == "nil":
            return None
        if kind == "empty":
            return []
        return [TopologyHint(masks.hint_mask(), draw(st.booleans())) for _ in range(draw(st.integers(1, max_hints)))]

    providers: list[ProviderHints] = []
    lists = 0
    for index in range(draw(_PROVIDER_COUNTS)):
        if lists >= max_lists or draw(_NO_HINTS):
            providers.append(draw(st.sampled_from([None, {}])))
            lists += 1
            continue
        resources = draw(st.integers(1, min(3, max_lists - lists)))
        providers.append({f"resource{index}-{n}": resource_hints() for n in range(resources)})
        lists += resources
    return MergeInput(numa_info=info, providers=providers)


@st.composite
def lattice_sets(draw: st.DrawFn, *, max_bits: int = 6, max_sets: int = 12) -> tuple[int, list[int]]:
    """A lattice size and subsets of its positions as bitmaps, often dense (to overflow naive counting)."""
    size_bits = draw(st.integers(0, max_bits))
    size = 1 << size_bits
    dense = draw(st.booleans())
    positions = st.sets(st.integers(0, size - 1), min_size=size // 2 if dense else 0, max_size=size)
    sets = draw(st.lists(positions, max_size=max_sets))
    return size_bits, [sum(1 << position for position in members) for members in sets]


class Amounts(TypedDict, total=False):
    """Container resources as keyword arguments of ``container``/``sidecar``."""

    cpu: str
    memory: str
    cpu_request: str
    cpu_limit: str
    memory_request: str
    memory_limit: str


#: An exclusive candidate, or one of three shared containers.
container_specs = st.one_of(
    st.integers(1, 4).map(lambda n: Amounts(cpu=str(n), memory="256Mi")),
    st.sampled_from(
        [
            Amounts(cpu_request="100m", cpu_limit="500m", memory_request="64Mi", memory_limit="128Mi"),
            Amounts(cpu="250m", memory="64Mi"),
            Amounts(),
        ]
    ),
)


@st.composite
def pod_specs(draw: st.DrawFn, index: int) -> dict[str, Any]:
    """A random raw pod ``pod<index>``: classic or pod-level, with app, init and sidecar containers."""
    apps = draw(st.lists(container_specs, min_size=1, max_size=3))
    inits = draw(st.lists(st.tuples(st.booleans(), container_specs), max_size=2))
    pod_level = draw(st.booleans())
    containers = [container(f"app{i}", **spec) for i, spec in enumerate(apps)]
    init_containers = [
        sidecar(f"side{i}", **spec) if restartable else container(f"init{i}", **spec)
        for i, (restartable, spec) in enumerate(inits)
    ]
    pod_resources = None
    if pod_level:
        # The API server's rules: pod requests >= aggregate container requests, no container limit above the pod's.
        requested = [spec.get("cpu_request") or spec.get("cpu") for spec in apps + [spec for _, spec in inits]]
        whole = [-(-cpu_millis(cpu) // 1000) for cpu in requested if cpu]
        budget = max(sum(whole), 4) + draw(st.integers(0, 3))
        pod_resources = resources(cpu=str(budget), memory="4Gi")
    return make_pod(f"pod{index}", containers=containers, init_containers=init_containers, pod_resources=pod_resources)


@dataclass(frozen=True, slots=True)
class Damage:
    """One thing a restart did to a pod's CPU entries, naming containers by their index in spec order.

    ``drop``: container ``first`` lost its entry (a gap, or a shorter prefix); ``copy``: container ``second``
    holds what ``first`` holds (a state written by a podpin that planned two containers on one CPU); ``leak``:
    ``first``'s CPUs are in the shared pool as well (a state the kubelet's own check would refuse).
    """

    kind: Literal["drop", "copy", "leak"]
    first: int
    second: int


def restore_damage(*, leaks: bool) -> st.SearchStrategy[list[Damage]]:
    """Up to three damages to apply in order (``leaks``: whether CPUs may also sit in the shared pool)."""
    kinds = st.sampled_from(["drop", "copy", "leak"] if leaks else ["drop", "copy"])
    return st.lists(st.builds(Damage, kinds, st.integers(0, 7), st.integers(0, 7)), max_size=3)
