"""Machine topology: the pure model, its JSON form, and the sysfs/udev readers."""

from agent.topology.model import CPU, Counters, Device, NUMANode, Topology, TopologyError

__all__ = ["CPU", "Counters", "Device", "NUMANode", "Topology", "TopologyError"]
