"""The topology manager's options, parsed once into typed values with the kubelet's error texts.

``topologyManagerPolicyOptions`` is a string map in the kubelet configuration,
parsed here once as ``NewPolicyOptions`` in
``pkg/kubelet/cm/topologymanager/policy_options.go`` does; an unknown option or
a bad value is an error at start-up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agent.alloc.errors import OptionsError
from agent.alloc.option_values import parse_bool_option, parse_int_option

__all__ = [
    "DEFAULT_MAX_ALLOWABLE_NUMA_NODES",
    "TOPOLOGY_POLICY_OPTIONS",
    "TopologyPolicyOptions",
    "parse_topology_policy_options",
]

PREFER_CLOSEST_NUMA_NODES = "prefer-closest-numa-nodes"
MAX_ALLOWABLE_NUMA_NODES = "max-allowable-numa-nodes"
TOPOLOGY_POLICY_OPTIONS = (PREFER_CLOSEST_NUMA_NODES, MAX_ALLOWABLE_NUMA_NODES)

#: The kubelet refuses a topology policy on machines with more NUMA nodes than this, unless raised.
DEFAULT_MAX_ALLOWABLE_NUMA_NODES = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyPolicyOptions:
    """The topology manager's options (``PolicyOptions``)."""

    prefer_closest_numa: bool = False
    max_allowable_numa_nodes: int = DEFAULT_MAX_ALLOWABLE_NUMA_NODES


def parse_topology_policy_options(raw: Mapping[str, object] | None) -> TopologyPolicyOptions:
    """Parse ``topologyManagerPolicyOptions`` as ``NewPolicyOptions`` does.

    ``max-allowable-numa-nodes`` is an integer (the docs' ``=true`` is wrong) and
    must be at least 8.

    Raises:
        OptionsError: unknown option or bad value.
    """
    prefer_closest = False
    max_nodes = DEFAULT_MAX_ALLOWABLE_NUMA_NODES
    for name, value in (raw or {}).items():
        if name == PREFER_CLOSEST_NUMA_NODES:
            prefer_closest = parse_bool_option(name, value)
        elif name == MAX_ALLOWABLE_NUMA_NODES:
            max_nodes = parse_int_option(name, value)
            if max_nodes < DEFAULT_MAX_ALLOWABLE_NUMA_NODES:
                raise OptionsError(
                    f"the minimum value of {MAX_ALLOWABLE_NUMA_NODES} should not be less than "
                    f"{DEFAULT_MAX_ALLOWABLE_NUMA_NODES}, value: {max_nodes}"
                )
        else:
            raise OptionsError(f'unknown Topology Manager Policy option: "{name}"')
    return TopologyPolicyOptions(prefer_closest_numa=prefer_closest, max_allowable_numa_nodes=max_nodes)
