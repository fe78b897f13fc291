"""The JSON form of a :class:`Topology` (what ``podpin topology --output json`` prints).

The contract is ``sysfs-fixtures/README.md``: ``cpus`` (every possible CPU,
ascending id), ``numa_nodes`` (ascending id, online CPUs as a cpulist, MemTotal
in bytes, SLIT distances keyed by node id as a string, hugepages keyed
``"<size>kB"``) and ``devices``. ``podpin plan --topology FILE`` reads the same
JSON back, so a topology captured on one machine can be planned against on a
laptop. Devices are listed by NUMA node (unknown node last), then address.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from agent.cpuset import CPUSet, CPUSetError
from agent.topology.model import CPU, Device, NUMANode, Topology, TopologyError

__all__ = ["topology_to_dict", "topology_from_dict", "device_sort_key"]

_HUGEPAGE_KEY = re.compile(r"^([0-9]+)kB$")


def device_sort_key(device: Device) -> tuple[int, int, str]:
    """Order devices by NUMA node (None last), then PCI address."""
    return (device.numa is None, device.numa if device.numa is not None else 0, device.address)


def topology_to_dict(topology: Topology) -> dict[str, Any]:
    """Render the topology as the JSON-ready dict of the fixture contract."""
    return {
        "cpus": [
            {
                "id": cpu.id,
                "core": cpu.core,
                "socket": cpu.socket,
                "die": cpu.die,
                "cluster": cpu.cluster,
                "numa": cpu.numa,
                "l3": cpu.l3,
                "online": cpu.online,
                "isolated": cpu.isolated,
            }
            for cpu in topology.cpus
        ],
        "numa_nodes": [
            {
                "id": node.id,
                "cpus": str(node.cpus),
                "memory_bytes": node.memory_bytes,
                "distances": {str(k): v for k, v in sorted(node.distances.items())},
                "hugepages": {f"{size}kB": count for size, count in sorted(node.hugepages.items())},
            }
            for node in topology.numa_nodes
        ],
        "devices": [
            {"address": d.address, "class": d.pci_class, "numa": d.numa}
            for d in sorted(topology.devices, key=device_sort_key)
        ],
    }


def _field(record: Mapping[str, Any], key: str, where: str, kinds: tuple[type, ...], nullable: bool = False) -> Any:
    if key not in record:
        raise TopologyError(f"topology JSON: {where} has no {key!r}")
    value = record[key]
    if value is None and nullable:
        return None
    if isinstance(value, bool) and bool not in kinds:
        raise TopologyError(f"topology JSON: {where}.{key} = {value!r} is not {kinds[0].__name__}")
    if not isinstance(value, kinds):
        raise TopologyError(f"topology JSON: {where}.{key} = {value!r} is not {kinds[0].__name__}")
    return value


def topology_from_dict(data: Any) -> Topology:
    """Build a :class:`Topology` from the JSON of ``podpin topology``.

    Raises:
        TopologyError: naming the record and field that is missing or wrong.
    """
    if not isinstance(data, Mapping) or "cpus" not in data:
        raise TopologyError("topology JSON: expected an object with 'cpus', 'numa_nodes' and 'devices'")
    cpus: list[CPU] = []
    for index, record in enumerate(data.get("cpus") or []):
        where = f"cpus[{index}]"
        if not isinstance(record, Mapping):
            raise TopologyError(f"topology JSON: {where} is not an object")
        cpus.append(
            CPU(
                id=_field(record, "id", where, (int,)),
                online=_field(record, "online", where, (bool,)),
                isolated=bool(record.get("isolated", False)),
                core=_field(record, "core", where, (int,), nullable=True),
                socket=_field(record, "socket", where, (int,), nullable=True),
                die=record.get("die"),
                cluster=record.get("cluster"),
                numa=_field(record, "numa", where, (int,), nullable=True),
                l3=record.get("l3"),
            )
        )
    nodes: list[NUMANode] = []
    for index, record in enumerate(data.get("numa_nodes") or []):
        where = f"numa_nodes[{index}]"
        if not isinstance(record, Mapping):
            raise TopologyError(f"topology JSON: {where} is not an object")
        try:
            node_cpus = CPUSet.parse(_field(record, "cpus", where, (str,)))
        except CPUSetError as err:
            raise TopologyError(f"topology JSON: {where}.cpus: {err}") from err
        hugepages: dict[int, int] = {}
        for key, count in (record.get("hugepages") or {}).items():
            match = _HUGEPAGE_KEY.match(key)
            if not match or not isinstance(count, int) or isinstance(count, bool) or count < 0:
                raise TopologyError(f"topology JSON: {where}.hugepages[{key!r}] = {count!r} is not a page count")
            hugepages[int(match.group(1))] = count
        distances: dict[int, int] = {}
        for key, dist in (record.get("distances") or {}).items():
            if not str(key).isdigit() or not isinstance(dist, int) or isinstance(dist, bool):
                raise TopologyError(f"topology JSON: {where}.distances[{key!r}] = {dist!r} is not a distance")
            distances[int(key)] = dist
        nodes.append(
            NUMANode(
                id=_field(record, "id", where, (int,)),
                cpus=node_cpus,
                memory_bytes=_field(record, "memory_bytes", where, (int,)),
                hugepages=MappingProxyType(hugepages),
                distances=MappingProxyType(distances),
            )
        )
    devices: list[Device] = []
    for index, record in enumerate(data.get("devices") or []):
        where = f"devices[{index}]"
        if not isinstance(record, Mapping):
            raise TopologyError(f"topology JSON: {where} is not an object")
        devices.append(
            Device(
                address=_field(record, "address", where, (str,)),
                pci_class=_field(record, "class", where, (str,)),
                numa=_field(record, "numa", where, (int,), nullable=True),
            )
        )
    return Topology(cpus=tuple(cpus), numa_nodes=tuple(nodes), devices=tuple(devices))
