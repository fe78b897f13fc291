"""The checkpoint codec: a :class:`NodeState` as versioned, checksummed JSON, and back.

Writing the JSON to disk (temp file, fsync, rename) is the imperative shell's
job (``agent/state_store.py``); this module only converts, so a checkpoint can
be checked without touching a file. The kubelet keeps its CPU and memory
manager checkpoints the same way (``state/checkpoint.go``: one struct per
format version, with a checksum).

Checkpoint format, version 1::

    {"version": 1, "checksum": "sha256:<hex of the canonical JSON of data>",
     "data": {"cpus": {"online", "reserved", "default", "entries": {uid: {container: cpulist}},
                       "podEntries": {uid: cpulist}},
              "memory": null | {"machineState": {...}, "entries": {...}, "podEntries": {...}},
              "pods": {uid: {"namespace", "name", "numaAffinity": [ids] | null}}}}

A parsed document still has to be checked against the machine with
:func:`agent.alloc.state.node.validate_node_state` before it is adopted.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from agent.alloc.cpumanager import CPUState
from agent.alloc.errors import CheckpointError
from agent.alloc.memorymanager import Block, MemoryState, MemoryTable, NUMAMemory
from agent.alloc.state.node import NodeState, PodRecord
from agent.cpuset import CPUSet, CPUSetError

__all__ = ["CHECKPOINT_VERSION", "state_from_checkpoint", "state_to_checkpoint"]

CHECKPOINT_VERSION = 1


def _canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def _blocks_to_json(blocks: tuple[Block, ...]) -> list[dict[str, Any]]:
    return [{"numaAffinity": list(b.numa), "type": b.resource, "size": b.size} for b in blocks]


def _memory_to_json(memory: MemoryState) -> dict[str, Any]:
    return {
        "machineState": {
            str(node): {
                "numberOfAssignments": m.assignments,
                "cells": list(m.cells),
                "memoryMap": {
                    name: {
                        "total": t.total,
                        "systemReserved": t.system_reserved,
                        "allocatable": t.allocatable,
                        "reserved": t.reserved,
                        "free": t.free,
                    }
                    for name, t in sorted(m.tables.items())
                },
            }
            for node, m in sorted(memory.machine.items())
        },
        "entries": {
            uid: {name: _blocks_to_json(blocks) for name, blocks in sorted(containers.items())}
            for uid, containers in sorted(memory.blocks.items())
        },
        "podEntries": {uid: _blocks_to_json(blocks) for uid, blocks in sorted(memory.pod_blocks.items())},
    }


def state_to_checkpoint(state: NodeState) -> dict[str, Any]:
    """The checkpoint document for a state (JSON-ready)."""
    data = {
        "cpus": {
            "online": str(state.online),
            "reserved": str(state.reserved),
            "default": str(state.cpu.default),
            "entries": {
                uid: {name: str(cpus) for name, cpus in sorted(containers.items())}
                for uid, containers in sorted(state.cpu.assignments.items())
            },
            "podEntries": {uid: str(cpus) for uid, cpus in sorted(state.cpu.pod_entries.items())},
        },
        "memory": _memory_to_json(state.memory) if state.memory is not None else None,
        "pods": {
            uid: {
                "namespace": record.namespace,
                "name": record.name,
                "numaAffinity": list(record.numa_affinity) if record.numa_affinity is not None else None,
            }
            for uid, record in sorted(state.pods.items())
        },
    }
    return {
        "version": CHECKPOINT_VERSION,
        "checksum": "sha256:" + hashlib.sha256(_canonical(data).encode()).hexdigest(),
        "data": data,
    }


class _Reader:
    """Typed field access that names the JSON path of whatever is wrong."""

    @staticmethod
    def obj(value: Any, path: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise CheckpointError(f"{path}: expected an object, got {json.dumps(value)[:80]}")
        return value

    @staticmethod
    def int_(value: Any, path: str) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise CheckpointError(f"{path}: expected a non-negative integer, got {json.dumps(value)[:80]}")
        return value

    @staticmethod
    def cpus(value: Any, path: str) -> CPUSet:
        if not isinstance(value, str):
            raise CheckpointError(f"{path}: expected a cpulist string, got {json.dumps(value)[:80]}")
        try:
            return CPUSet.parse(value)
        except CPUSetError as err:
            raise CheckpointError(f"{path}: {err}") from err

    @classmethod
    def blocks(cls, value: Any, path: str) -> tuple[Block, ...]:
        if not isinstance(value, list):
            raise CheckpointError(f"{path}: expected a list of memory blocks")
        result = []
        for i, raw in enumerate(value):
            item = cls.obj(raw, f"{path}[{i}]")
            numa = item.get("numaAffinity")
            if not isinstance(numa, list) or not all(isinstance(n, int) and not isinstance(n, bool) for n in numa):
                raise CheckpointError(f"{path}[{i}].numaAffinity: expected a list of NUMA node ids")
            resource = item.get("type")
            if not isinstance(resource, str):
                raise CheckpointError(f"{path}[{i}].type: expected a resource name")
            result.append(Block(tuple(numa), resource, cls.int_(item.get("size"), f"{path}[{i}].size")))
        return tuple(result)


def _memory_from_json(value: Any) -> MemoryState:
    r = _Reader
    data = r.obj(value, "data.memory")
    machine: dict[int, NUMAMemory] = {}
    for key, raw in r.obj(data.get("machineState"), "data.memory.machineState").items():
        path = f"data.memory.machineState.{key}"
        if not str(key).isdigit():
            raise CheckpointError(f"{path}: NUMA node ids must be integers")
        node = r.obj(raw, path)
        cells = node.get("cells")
        if not isinstance(cells, list) or not all(isinstance(c, int) for c in cells):
            raise CheckpointError(f"{path}.cells: expected a list of NUMA node ids")
        tables = {}
        for name, table in r.obj(node.get("memoryMap"), f"{path}.memoryMap").items():
            t = r.obj(table, f"{path}.memoryMap.{name}")
            tables[name] = MemoryTable(
                *(
                    r.int_(t.get(k), f"{path}.memoryMap.{name}.{k}")
                    for k in ("total", "systemReserved", "allocatable", "reserved", "free")
                )
            )
        machine[int(key)] = NUMAMemory(
            r.int_(node.get("numberOfAssignments"), f"{path}.numberOfAssignments"), tuple(cells), tables
        )
    blocks = {
        uid: {
            name: r.blocks(b, f"data.memory.entries.{uid}.{name}")
            for name, b in r.obj(containers, f"data.memory.entries.{uid}").items()
        }
        for uid, containers in r.obj(data.get("entries", {}), "data.memory.entries").items()
    }
    pod_blocks = {
        uid: r.blocks(b, f"data.memory.podEntries.{uid}")
        for uid, b in r.obj(data.get("podEntries", {}), "data.memory.podEntries").items()
    }
    return MemoryState(machine=machine, blocks=blocks, pod_blocks=pod_blocks)


def state_from_checkpoint(document: Any) -> NodeState:
    """Parse a checkpoint document (already JSON-decoded); verifies version and checksum.

    The result still has to be checked against the machine with :func:`validate_node_state`.

    Raises:
        CheckpointError: unknown version, checksum mismatch, or a malformed field (named by its path).
    """
    r = _Reader
    doc = r.obj(document, "checkpoint")
    version = doc.get("version")
    if version != CHECKPOINT_VERSION:
        raise CheckpointError(
            f"unsupported checkpoint version {json.dumps(version)} (this podpin reads version {CHECKPOINT_VERSION})"
        )
    data = r.obj(doc.get("data"), "data")
    checksum = "sha256:" + hashlib.sha256(_canonical(data).encode()).hexdigest()
    if doc.get("checksum") != checksum:
        raise CheckpointError(
            f"checksum mismatch: the file says {doc.get('checksum')!r}, its data hashes to {checksum!r}"
        )
    cpus = r.obj(data.get("cpus"), "data.cpus")
    state_cpu = CPUState(
        default=r.cpus(cpus.get("default"), "data.cpus.default"),
        assignments={
            uid: {
                name: r.cpus(c, f"data.cpus.entries.{uid}.{name}")
                for name, c in r.obj(containers, f"data.cpus.entries.{uid}").items()
            }
            for uid, containers in r.obj(cpus.get("entries", {}), "data.cpus.entries").items()
        },
        pod_entries={
            uid: r.cpus(c, f"data.cpus.podEntries.{uid}")
            for uid, c in r.obj(cpus.get("podEntries", {}), "data.cpus.podEntries").items()
        },
    )
    pods = {}
    for uid, record in r.obj(data.get("pods", {}), "data.pods").items():
        rec = r.obj(record, f"data.pods.{uid}")
        affinity = rec.get("numaAffinity")
        if affinity is not None and (not isinstance(affinity, list) or not all(isinstance(n, int) for n in affinity)):
            raise CheckpointError(f"data.pods.{uid}.numaAffinity: expected a list of NUMA node ids or null")
        for key in ("namespace", "name"):
            if not isinstance(rec.get(key), str):
                raise CheckpointError(f"data.pods.{uid}.{key}: expected a string")
        pods[uid] = PodRecord(
            uid=uid,
            namespace=rec["namespace"],
            name=rec["name"],
            numa_affinity=tuple(affinity) if affinity is not None else None,
        )
    memory = data.get("memory")
    return NodeState(
        online=r.cpus(cpus.get("online"), "data.cpus.online"),
        reserved=r.cpus(cpus.get("reserved"), "data.cpus.reserved"),
        cpu=state_cpu,
        memory=_memory_from_json(memory) if memory is not None else None,
        pods=MappingProxyType(pods),
    )
