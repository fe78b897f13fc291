"""The static CPU policy's options, parsed once into typed values with the kubelet's error texts.

``cpuManagerPolicyOptions`` is a string map in the kubelet configuration. It is
parsed here exactly once (as ``NewStaticPolicyOptions`` in
``pkg/kubelet/cm/cpumanager/policy_options.go`` does), so every later check is
a field read, and an unknown option, a bad value or an incompatible pair is an
error at start-up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agent.alloc.errors import OptionsError
from agent.alloc.option_values import parse_bool_option

__all__ = ["CPU_POLICY_OPTIONS", "CPUPolicyOptions", "parse_cpu_policy_options"]

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
        values[name] = parse_bool_option(name, value)
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
