"""The node's NodeResourceTopology: computed from podpin's own state, published for the NUMA-aware scheduler.

Public API:

* :func:`occupancy_of` -> :class:`Occupancy` of :class:`Amounts` — CPU and
  memory per NUMA node from the planner's snapshot (:mod:`.occupancy`, the one
  module that reads the allocation core's state);
* :func:`node_resource_topology`, :func:`attributes_of`, :class:`Attributes`, :class:`AttributeName`,
  :func:`zone_name`, :func:`zone_numa`, :data:`ZONE_TYPE` — the object, pure
  (:mod:`.compute`);

The shell half is imported from its own modules, never from here:
:class:`~agent.nrt.publisher.NRTPublisher` and
:func:`~agent.nrt.publisher.nrt_publisher_for` (the publishing thread;
:class:`~agent.nrt.publisher.PublishResult` labels its metric) and
:class:`~agent.nrt.calls.TopologyCalls` (its API calls). They load the
Kubernetes client, which ``podpin plan`` and ``podpin simulate`` (which compute
the object) must not pay for: every sub-command is registered at start-up.
"""

from agent.nrt.compute import (
    API_VERSION,
    KIND,
    ZONE_TYPE,
    AttributeName,
    Attributes,
    attributes_of,
    node_resource_topology,
    zone_name,
    zone_numa,
)
from agent.nrt.occupancy import Amounts, Occupancy, occupancy_of

__all__ = [
    "API_VERSION",
    "KIND",
    "ZONE_TYPE",
    "Amounts",
    "AttributeName",
    "Attributes",
    "Occupancy",
    "attributes_of",
    "node_resource_topology",
    "occupancy_of",
    "zone_name",
    "zone_numa",
]
