"""Machine topology: the pure model (re-exported here), its JSON form, and the sysfs/udev readers.

Only the model is re-exported: the allocation core imports it, and importing a
package runs its ``__init__``, so re-exporting the readers (:mod:`.sysfs`,
:mod:`.devices`, which load pyudev and read files) would pull I/O into the pure
core. Import those from their modules.
"""

from agent.topology.model import CPU, Counters, Device, NUMANode, Topology, TopologyError

__all__ = ["CPU", "Counters", "Device", "NUMANode", "Topology", "TopologyError"]
