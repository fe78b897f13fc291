"""The topology manager: hints, their merge, and the four policies (the kubelet's ``topologymanager``).

The counterpart of ``pkg/kubelet/cm/topologymanager``. Hint providers (the CPU
and memory managers) describe where a resource could go as
:class:`TopologyHint`\\ s or a compact :class:`HintList`; a
:class:`TopologyPolicy` built by :func:`make_policy` merges every provider's
hints into one NUMA affinity and an admit/reject decision, with the kubelet's
result but without its cartesian product (:mod:`.merge` over :mod:`.lattice`).
:class:`NUMAInfo` holds the machine's node ids and distances the merge ranks
masks with; :class:`TopologyPolicyOptions` the parsed
``topologyManagerPolicyOptions``.

The lattice helpers listed below are public for the hint providers that build
their hints as bitmaps on machines beyond
:data:`SMALL_LATTICE_NODES` NUMA nodes. Nothing here does I/O.
"""

from agent.alloc.topologymanager.hint import (
    MAX_NUMA_ID,
    HintError,
    ProviderHints,
    TopologyHint,
    ids_of,
    is_narrower_than,
    mask_of,
)
from agent.alloc.topologymanager.hint_list import CompactProviderHints, HintList, lists_from_providers
from agent.alloc.topologymanager.lattice import (
    SMALL_LATTICE_NODES,
    bitmap_from_flags,
    flags_from_bitmap,
    mask_at,
    popcount_table,
    position_of,
)
from agent.alloc.topologymanager.merge import LatticeMerger
from agent.alloc.topologymanager.numa_info import NUMAInfo
from agent.alloc.topologymanager.options import (
    DEFAULT_MAX_ALLOWABLE_NUMA_NODES,
    TOPOLOGY_POLICY_OPTIONS,
    TopologyPolicyOptions,
    parse_topology_policy_options,
)
from agent.alloc.topologymanager.policy import (
    BestEffortPolicy,
    NonePolicy,
    RestrictedPolicy,
    SingleNumaNodePolicy,
    TopologyManagerPolicy,
    TopologyPolicy,
    TopologyPolicyError,
    make_policy,
)
from agent.alloc.topologymanager.scope import TopologyManagerScope

__all__ = [
    "DEFAULT_MAX_ALLOWABLE_NUMA_NODES",
    "MAX_NUMA_ID",
    "SMALL_LATTICE_NODES",
    "TOPOLOGY_POLICY_OPTIONS",
    "BestEffortPolicy",
    "CompactProviderHints",
    "HintError",
    "HintList",
    "LatticeMerger",
    "NUMAInfo",
    "NonePolicy",
    "ProviderHints",
    "RestrictedPolicy",
    "SingleNumaNodePolicy",
    "TopologyHint",
    "TopologyManagerPolicy",
    "TopologyManagerScope",
    "TopologyPolicy",
    "TopologyPolicyError",
    "TopologyPolicyOptions",
    "bitmap_from_flags",
    "flags_from_bitmap",
    "ids_of",
    "is_narrower_than",
    "lists_from_providers",
    "make_policy",
    "mask_at",
    "mask_of",
    "parse_topology_policy_options",
    "popcount_table",
    "position_of",
]
