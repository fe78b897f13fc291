"""The node's allocation state: the snapshot, its checkpoint codec, adoption and hotplug rebasing.

:class:`NodeState` (:mod:`.node`) is the frozen snapshot the planner publishes
after every change, with the checks a restored state must pass
(:func:`validate_node_state`, the kubelet's ``validateState`` and more);
:mod:`.checkpoint` is its versioned, checksummed JSON form; :mod:`.adopt` offers
cpusets found on live cgroups to the planner when the checkpoint is lost;
:mod:`.readopt` moves a state onto a machine whose online CPUs or reserved set changed (a hotplug, a restart
after one or after a configuration change), keeping every CPU it can. The
kubelet keeps the same split per manager (``cpumanager/state``,
``memorymanager/state``). Nothing here does I/O: the file is the shell's
(``agent/state_store.py``).
"""

from agent.alloc.state.adopt import Observed, contradicted_claims, running_exclusive, seed_observed
from agent.alloc.state.checkpoint import CHECKPOINT_VERSION, state_from_checkpoint, state_to_checkpoint
from agent.alloc.state.node import NodeState, PodRecord, validate_node_state
from agent.alloc.state.readopt import Move, Readoption, readopt

__all__ = [
    "CHECKPOINT_VERSION",
    "NodeState",
    "Observed",
    "contradicted_claims",
    "running_exclusive",
    "PodRecord",
    "Move",
    "Readoption",
    "readopt",
    "seed_observed",
    "state_from_checkpoint",
    "state_to_checkpoint",
    "validate_node_state",
]
