"""``PlannerConfig``: exactly the settings the planner reads, as typed values.

The allocation core owns its inputs. The shell (``agent/config.py``) parses the
YAML file into an ``AgentConfig`` that holds one of these next to the agent's
own settings; the planner never sees a YAML document, a default or a setting it
does not use. The kubelet draws the same line: ``pkg/kubelet/cm`` hands each
manager (``cpumanager.NewManager``, ``memorymanager.NewManager``,
``topologymanager.NewManager``) only its slice of the ``KubeletConfiguration``.

The fields have no defaults: the defaults are the configuration file's, stated
once in ``agent/config.py``'s table of keys. ``__post_init__`` turns the
policy and scope names into their enums, so a ``PlannerConfig`` built with a
misspelt name fails at once with a :class:`~agent.alloc.errors.PlannerError`
naming the kubelet key, instead of silently meaning something else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from agent.alloc.cpumanager import CPUManagerPolicy, CPUPolicyOptions
from agent.alloc.errors import PlannerError
from agent.alloc.memorymanager import MemoryManagerPolicy
from agent.alloc.topologymanager import TopologyManagerPolicy, TopologyManagerScope, TopologyPolicyOptions
from agent.cpuset import CPUSet
from agent.vocabulary import CpuMax

__all__ = ["PlannerConfig", "ReservedMemory"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReservedMemory:
    """One ``reservedMemory`` entry: memory held back from pods on one NUMA node (bytes per resource)."""

    numa_node: int
    limits: Mapping[str, int]


#: The enum-valued fields, with the kubelet key each one comes from (for the error message).
_NAMED: tuple[tuple[str, str, type[StrEnum]], ...] = (
    ("cpu_manager_policy", "cpuManagerPolicy", CPUManagerPolicy),
    ("memory_manager_policy", "memoryManagerPolicy", MemoryManagerPolicy),
    ("topology_manager_policy", "topologyManagerPolicy", TopologyManagerPolicy),
    ("topology_manager_scope", "topologyManagerScope", TopologyManagerScope),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannerConfig:
    """The kubelet resource-manager settings the planner works with.

    Attributes:
        cpu_manager_policy: ``cpuManagerPolicy``.
        cpu_policy_options: ``cpuManagerPolicyOptions``, parsed.
        memory_manager_policy: ``memoryManagerPolicy``.
        topology_manager_policy: ``topologyManagerPolicy``.
        topology_manager_scope: ``topologyManagerScope``.
        topology_policy_options: ``topologyManagerPolicyOptions``, parsed.
        reserved_system_cpus: ``reservedSystemCPUs`` (empty: reserve by count, see :meth:`num_reserved_cpus`).
        reserved_cpu_millis: ``kubeReserved`` + ``systemReserved`` cpu, in millicores.
        reserved_memory: ``reservedMemory``, per NUMA node (the ``Static`` memory policy reads it).
        cpu_cfs_quota_period_us: ``cpuCFSQuotaPeriod`` in microseconds (the period written with ``cpu.max``).
    """

    cpu_manager_policy: CPUManagerPolicy
    cpu_policy_options: CPUPolicyOptions
    memory_manager_policy: MemoryManagerPolicy
    topology_manager_policy: TopologyManagerPolicy
    topology_manager_scope: TopologyManagerScope
    topology_policy_options: TopologyPolicyOptions
    reserved_system_cpus: CPUSet
    reserved_cpu_millis: int
    reserved_memory: tuple[ReservedMemory, ...]
    cpu_cfs_quota_period_us: int

    def __post_init__(self) -> None:
        for field_name, key, names in _NAMED:
            value = getattr(self, field_name)
            try:
                object.__setattr__(self, field_name, names(value))
            except ValueError:
                raise PlannerError(f"{key}: {value!r} is not one of {', '.join(names)}") from None

    def num_reserved_cpus(self) -> int:
        """How many CPUs are reserved: |reservedSystemCPUs| if set, else ceil(kube + system reserved cpu)."""
        if self.reserved_system_cpus:
            return len(self.reserved_system_cpus)
        return -(-self.reserved_cpu_millis // 1000)

    def lifted_cpu_max(self) -> CpuMax:
        """The ``cpu.max`` value that lifts the quota: ``max <period>``."""
        return CpuMax(quota=None, period=self.cpu_cfs_quota_period_us)
