"""The node's NodeResourceTopology: computed from podpin's own state, published for the NUMA-aware scheduler.

Public API:

* :func:`occupancy_of` -> :class:`Occupancy` of :class:`Amounts` — CPU and
  memory per NUMA node from the planner's snapshot (:mod:`.occupancy`, the one
  module that reads the allocation core's state);
* :func:`node_resource_topology`, :func:`attributes_of`, :class:`Attributes`, :class:`AttributeName`,
  :func:`zone_name`, :func:`zone_numa`, :data:`ZONE_TYPE` — the object, pure
  (:mod:`.compute`);
* :class:`NRTPublisher`, :func:`nrt_publisher_for` — the publishing thread
  (:mod:`.publisher`; :class:`PublishResult` labels its metric), and
  :class:`TopologyCalls` its API calls (:mod:`.calls`).
"""

from agent.nrt.calls import TopologyCalls
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
from agent.nrt.publisher import NRTPublisher, PublishResult, has_extended_resources, nrt_publisher_for

__all__ = [
    "API_VERSION",
    "KIND",
    "ZONE_TYPE",
    "Amounts",
    "AttributeName",
    "Attributes",
    "NRTPublisher",
    "Occupancy",
    "PublishResult",
    "TopologyCalls",
    "attributes_of",
    "has_extended_resources",
    "node_resource_topology",
    "nrt_publisher_for",
    "occupancy_of",
    "zone_name",
    "zone_numa",
]
