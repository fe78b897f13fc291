"""The allocation core: who gets which CPUs and memory, decided exactly as the kubelet's managers decide.

The counterpart of the kubelet's ``pkg/kubelet/cm`` resource managers, with the
same split: :mod:`.cpumanager`, :mod:`.memorymanager`, :mod:`.devicemanager`
(hints from the devices the kubelet gave a pod; the values in :mod:`.devices`)
and :mod:`.topologymanager`, plus :mod:`.admission` (the topology manager's
container and pod scopes), :mod:`.state` (the node state and its checkpoint
codec) and the :class:`Planner` on top, which is the whole API the shell needs:
build it from a topology and a :class:`PlannerConfig`, ``admit`` and
``release`` pods, ``plan`` the cgroup values, ``snapshot`` the state. The
core owns its inputs: :class:`PlannerConfig` holds exactly what the planner
reads, and the shell's configuration file is parsed into it elsewhere.

Nothing in this package does I/O, reads the clock or the environment: given the
same topology, configuration and pods, the planner returns the same plan.
"""

from agent.alloc.cpumanager import CPU_POLICY_OPTIONS, CPUManagerPolicy, CPUPolicyOptions, parse_cpu_policy_options
from agent.alloc.devices import AllocatableDevices, ContainerKey, DeviceAssignments, DeviceGroup, PodDevices
from agent.alloc.errors import (
    AllocationError,
    CheckpointError,
    EmptyPodSharedPoolError,
    OptionsError,
    PlacementError,
    PlannerError,
    SMTAlignmentError,
    TopologyAffinityError,
    UnexpectedAdmissionError,
)
from agent.alloc.memorymanager import MemoryManagerPolicy
from agent.alloc.plan import (
    AssignmentType,
    ContainerPlan,
    ContainerRequest,
    DeviceAlignment,
    NUMAFree,
    Plan,
    PodPlan,
    Pool,
    PoolReason,
    ReasonKind,
    RequestFacts,
    assignment_type,
)
from agent.alloc.planner import Decision, Planner
from agent.alloc.planner_config import PlannerConfig, ReservedMemory
from agent.alloc.state import (
    CHECKPOINT_VERSION,
    NodeState,
    Observed,
    PodRecord,
    state_from_checkpoint,
    state_to_checkpoint,
)
from agent.alloc.topologymanager import (
    TOPOLOGY_POLICY_OPTIONS,
    TopologyManagerPolicy,
    TopologyManagerScope,
    TopologyPolicyOptions,
    parse_topology_policy_options,
)
from agent.alloc.trace import AdmissionTrace, MergeStep, ResourceHints

__all__ = [
    "AdmissionTrace",
    "AllocatableDevices",
    "CHECKPOINT_VERSION",
    "CPU_POLICY_OPTIONS",
    "TOPOLOGY_POLICY_OPTIONS",
    "AllocationError",
    "AssignmentType",
    "CPUManagerPolicy",
    "CPUPolicyOptions",
    "CheckpointError",
    "ContainerKey",
    "ContainerPlan",
    "ContainerRequest",
    "Decision",
    "DeviceAssignments",
    "DeviceGroup",
    "DeviceAlignment",
    "EmptyPodSharedPoolError",
    "MemoryManagerPolicy",
    "MergeStep",
    "NUMAFree",
    "NodeState",
    "Observed",
    "OptionsError",
    "PlacementError",
    "Plan",
    "Planner",
    "PlannerConfig",
    "PlannerError",
    "PodDevices",
    "PodPlan",
    "PodRecord",
    "Pool",
    "PoolReason",
    "ReasonKind",
    "RequestFacts",
    "ResourceHints",
    "ReservedMemory",
    "SMTAlignmentError",
    "TopologyAffinityError",
    "TopologyManagerPolicy",
    "TopologyManagerScope",
    "TopologyPolicyOptions",
    "UnexpectedAdmissionError",
    "assignment_type",
    "parse_cpu_policy_options",
    "parse_topology_policy_options",
    "state_from_checkpoint",
    "state_to_checkpoint",
]
