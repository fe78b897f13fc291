"""Policy options, parsed once into typed values with the kubelet's error texts.

``cpuManagerPolicyOptions`` and ``topologyManagerPolicyOptions`` are string
maps in the kubelet configuration. They are parsed here exactly once (as
``NewStaticPolicyOptions`` and ``NewPolicyOptions`` do), so every later check is
a field read, and an unknown option or a bad value is an error at start-up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "OptionsError",
    "CPUPolicyOptions",
    "TopologyPolicyOptions",
    "parse_cpu_policy_options",
    "parse_topology_policy_options",
    "CPU_POLICY_OPTIONS",
    "TOPOLOGY_POLICY_OPTIONS",
]

FULL_PCPUS_ONLY = "full-pcpus-only"
DISTRIBUTE_CPUS_ACROSS_NUMA = "distribute-cpus-across-numa"
ALIGN_BY_SOCKET = "align-by-socket"
DISTRIBUTE_CPUS_ACROSS_CORES = "distribute-cpus-across-cores"
STRICT_CPU_RESERVATION = "strict-cpu-reservation"
PREFER_ALIGN_BY_UNCORECACHE = "prefer-align-cpus-by-uncorecache"

#: Every static-policy option the kubelet knows (alpha, beta and GA alike: podpin has no feature gates).
CPU_POLICY_OPTIONS = (
    FULL_PCPUS_ONLY,
    DISTRIBUTE_CPUS_ACROSS_NUMA,
    ALIGN_BY_SOCKET,
    DISTRIBUTE_CPUS_ACROSS_CORES,
    STRICT_CPU_RESERVATION,
    PREFER_ALIGN_BY_UNCORECACHE,
)

PREFER_CLOSEST_NUMA_NODES = "prefer-closest-numa-nodes"
MAX_ALLOWABLE_NUMA_NODES = "max-allowable-numa-nodes"
TOPOLOGY_POLICY_OPTIONS = (PREFER_CLOSEST_NUMA_NODES, MAX_ALLOWABLE_NUMA_NODES)

#: The kubelet refuses a topology policy on machines with more NUMA nodes than this, unless raised.
DEFAULT_MAX_ALLOWABLE_NUMA_NODES = 8

_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}


class OptionsError(ValueError):
    """An unknown option, a bad value, or two options that cannot be combined."""


def _parse_bool(name: str, value: object) -> bool:
    """Go's ``strconv.ParseBool`` accepted spellings; YAML booleans are accepted too."""
    if isinstance(value, bool):
        return value
    text = str(value)
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise OptionsError(f'bad value for option "{name}": strconv.ParseBool: parsing "{text}": invalid syntax')


@dataclass(frozen=True, slots=True, kw_only=True)
class CPUPolicyOptions:
    """The static CPU policy's options (``StaticPolicyOptions``)."""

    full_pcpus_only: bool = False
    distribute_cpus_across_numa: bool = False
    align_by_socket: bool = False
    distribute_cpus_across_cores: bool = False
    strict_cpu_reservation: bool = False
    prefer_align_by_uncorecache: bool = False


def parse_cpu_policy_options(raw: Mapping[str, object] | None) -> CPUPolicyOptions:
    """Parse ``cpuManagerPolicyOptions`` as ``NewStaticPolicyOptions`` does.

    Raises:
        OptionsError: unknown option, unparsable value, or an incompatible pair.
    """
    values: dict[str, bool] = {}
    for name, value in (raw or {}).items():
        if name not in CPU_POLICY_OPTIONS:
            raise OptionsError(f'unknown CPU Manager Policy option: "{name}"')
        values[name] = _parse_bool(name, value)
    opts = CPUPolicyOptions(
        full_pcpus_only=values.get(FULL_PCPUS_ONLY, False),
        distribute_cpus_across_numa=values.get(DISTRIBUTE_CPUS_ACROSS_NUMA, False),
        align_by_socket=values.get(ALIGN_BY_SOCKET, False),
        distribute_cpus_across_cores=values.get(DISTRIBUTE_CPUS_ACROSS_CORES, False),
        strict_cpu_reservation=values.get(STRICT_CPU_RESERVATION, False),
        prefer_align_by_uncorecache=values.get(PREFER_ALIGN_BY_UNCORECACHE, False),
    )
    incompatible = [
        (opts.full_pcpus_only and opts.distribute_cpus_across_cores, FULL_PCPUS_ONLY, DISTRIBUTE_CPUS_ACROSS_CORES),
        (
            opts.distribute_cpus_across_numa and opts.distribute_cpus_across_cores,
            DISTRIBUTE_CPUS_ACROSS_NUMA,
            DISTRIBUTE_CPUS_ACROSS_CORES,
        ),
        (
            opts.prefer_align_by_uncorecache and opts.distribute_cpus_across_cores,
            PREFER_ALIGN_BY_UNCORECACHE,
            DISTRIBUTE_CPUS_ACROSS_CORES,
        ),
        (
            opts.prefer_align_by_uncorecache and opts.distribute_cpus_across_numa,
            PREFER_ALIGN_BY_UNCORECACHE,
            DISTRIBUTE_CPUS_ACROSS_NUMA,
        ),
    ]
    for clash, first, second in incompatible:
        if clash:
            raise OptionsError(f"static policy options {first} and {second} can not be used at the same time")
    return opts


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
            prefer_closest = _parse_bool(name, value)
        elif name == MAX_ALLOWABLE_NUMA_NODES:
            text = str(value)
            if isinstance(value, bool) or not text.lstrip("-").isdigit():
                raise OptionsError(f'bad value for option "{name}": strconv.Atoi: parsing "{text}": invalid syntax')
            max_nodes = int(text)
            if max_nodes < DEFAULT_MAX_ALLOWABLE_NUMA_NODES:
                raise OptionsError(
                    f"the minimum value of {MAX_ALLOWABLE_NUMA_NODES} should not be less than "
                    f"{DEFAULT_MAX_ALLOWABLE_NUMA_NODES}, value: {max_nodes}"
                )
        else:
            raise OptionsError(f'unknown Topology Manager Policy option: "{name}"')
    return TopologyPolicyOptions(prefer_closest_numa=prefer_closest, max_allowable_numa_nodes=max_nodes)
