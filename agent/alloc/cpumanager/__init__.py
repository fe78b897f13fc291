"""The CPU manager: the static policy, its state and its options (the kubelet's ``cpumanager``).

The counterpart of ``pkg/kubelet/cm/cpumanager``: :class:`StaticCPUPolicy`
(``policy_static.go``, classic and KEP-5526 pod-level) holds configuration
only and works on the :class:`CPUState` it is given (``state/``), the way the
kubelet's policies take ``state.State``; :func:`parse_cpu_policy_options` reads
``cpuManagerPolicyOptions`` once into :class:`CPUPolicyOptions`. Which CPUs a
request gets is decided by :mod:`.assignment` (``cpu_assignment.go``); the CPU
topology hints by :mod:`.hints`. Nothing here does I/O.
"""

from agent.alloc.cpumanager.options import CPU_POLICY_OPTIONS, CPUPolicyOptions, parse_cpu_policy_options
from agent.alloc.cpumanager.policy import CPUManagerPolicy
from agent.alloc.cpumanager.policy_static import PodCPUAllocation, StaticCPUPolicy, reserved_cpus_for
from agent.alloc.cpumanager.state import CPUState, CPUStateError, validate_cpu_state

__all__ = [
    "CPU_POLICY_OPTIONS",
    "CPUManagerPolicy",
    "CPUPolicyOptions",
    "CPUState",
    "CPUStateError",
    "PodCPUAllocation",
    "StaticCPUPolicy",
    "parse_cpu_policy_options",
    "reserved_cpus_for",
    "validate_cpu_state",
]
