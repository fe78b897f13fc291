"""The NodeState checkpoint: versioned JSON with a checksum, atomic on disk, validated on load."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from agent.alloc import CheckpointError, Planner, state_from_checkpoint, state_to_checkpoint
from agent.config import config_from_mapping
from agent.pods.model import pod_from_dict
from agent.state_store import StateStore
from tests.support.machines import machine
from tests.support.podfactory import container, make_pod, resources

CONFIG = {"reservedSystemCPUs": "0"}


def admitted_planner(**extra: Any) -> Planner:
    planner = Planner(machine(threads=1), config_from_mapping({**CONFIG, **extra}, env={}).planner)
    pod = pod_from_dict(
        make_pod(
            "db",
            containers=[container("db", cpu="3", memory="1Gi"), container("log")],
            pod_resources=resources(cpu="4", memory="2Gi"),
        )
    )
    assert planner.admit(pod).admitted
    classic = pod_from_dict(make_pod("classic", containers=[container("c", cpu="2", memory="1Gi")]))
    assert planner.admit(classic).admitted
    return planner


def document(**extra: Any) -> dict[str, Any]:
    return state_to_checkpoint(admitted_planner(**extra).snapshot())


def state_from_checkpoint_unchecked(data: dict[str, Any]) -> Any:
    """Parse edited data with a freshly computed checksum, to reach the validation behind the checksum."""
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return state_from_checkpoint(
        {"version": 1, "checksum": "sha256:" + hashlib.sha256(canonical.encode()).hexdigest(), "data": data}
    )


def test_round_trip() -> None:
    """A state survives JSON and comes back equal."""
    planner = admitted_planner()
    state = planner.snapshot()
    assert state == state_from_checkpoint(json.loads(json.dumps(state_to_checkpoint(state))))


def test_restart_adopts_the_checkpoint() -> None:
    """A planner built on a saved state keeps every allocation (no CPU moves on restart)."""
    planner = admitted_planner()
    restored = Planner(
        machine(threads=1), config_from_mapping(CONFIG, env={}).planner, state_from_checkpoint(document())
    )
    assert planner.snapshot().cpu == restored.snapshot().cpu


def test_store_is_atomic_and_readable(tmp_path: Path) -> None:
    """save() replaces the file atomically (no temp file left) and load() reads it back."""
    store = StateStore(tmp_path / "state")
    assert store.load() is None
    state = admitted_planner().snapshot()
    store.save(state)
    assert ["podpin_state.json"] == sorted(p.name for p in (tmp_path / "state").iterdir())
    assert state == store.load()


def test_quarantine_moves_a_corrupt_file(tmp_path: Path) -> None:
    """A corrupt checkpoint is moved aside so the agent can rebuild and an operator can look."""
    store = StateStore(tmp_path)
    store.path.write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        store.load()
    moved = store.quarantine()
    assert (moved is not None, store.path.exists()) == (True, False)


def _edit(path: list[Any], value: Any) -> dict[str, Any]:
    doc = document()
    target = doc["data"]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return doc


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"version": 2, "data": {}, "checksum": "x"}, "unsupported checkpoint version 2 (this podpin reads version 1)"),
        ({"version": 1, "data": {"cpus": {}}, "checksum": "sha256:0"}, "checksum mismatch"),
        ([], "checkpoint: expected an object"),
    ],
)
def test_envelope_errors(doc: Any, message: str) -> None:
    """Version and checksum are checked before anything else."""
    with pytest.raises(CheckpointError) as err:
        state_from_checkpoint(doc)
    assert str(err.value).startswith(message)


def test_tampered_data_fails_the_checksum() -> None:
    """Any edit to the data without a new checksum is detected."""
    with pytest.raises(CheckpointError, match="checksum mismatch"):
        state_from_checkpoint(_edit(["cpus", "default"], "0-15"))


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (
            ["cpus", "default"],
            "0,8-15",
            'current set of available CPUs "0-15" doesn\'t match with CPUs in state "0-6,8-15"',
        ),
        (["cpus", "default"], "0-15", "overlaps with default cpuset"),
        (["cpus", "default"], "", "default cpuset cannot be empty"),
        (["cpus", "default"], "1-3", 'not all reserved cpus: "0" are present in defaultCpuSet: "1-3"'),
        (["pods"], {}, "holds CPUs but has no pod record"),
        (["cpus", "default"], "0-x", "data.cpus.default: invalid cpulist '0-x'"),
        (["cpus", "entries"], [], "data.cpus.entries: expected an object"),
    ],
)
def test_validation_says_what_is_wrong(path: list[str], value: Any, message: str) -> None:
    """A checkpoint whose sets contradict the machine or each other is refused with the reason."""
    doc = state_from_checkpoint_or_error(_edit(path, value))
    if isinstance(doc, CheckpointError):
        error = doc
    else:
        with pytest.raises(CheckpointError) as raised:
            Planner(machine(threads=1), config_from_mapping(CONFIG, env={}).planner, doc)
        error = raised.value
    assert message in str(error)


def state_from_checkpoint_or_error(doc: dict[str, Any]) -> Any:
    try:
        return state_from_checkpoint_unchecked(doc["data"])
    except CheckpointError as err:
        return err


def test_cpu_in_two_pods_is_refused() -> None:
    """Two pods claiming the same CPU is named with the CPU and both pods."""
    doc = document()
    cpus = doc["data"]["cpus"]
    classic = next(uid for uid, containers in cpus["entries"].items() if "c" in containers)
    other = next(uid for uid in cpus["entries"] if uid != classic)
    cpus["entries"][classic]["c"] = "4-5"
    cpus["default"] = "0,6-15"
    state = state_from_checkpoint_or_error(doc)
    with pytest.raises(CheckpointError) as err:
        Planner(machine(threads=1), config_from_mapping(CONFIG, env={}).planner, state)
    assert f"CPU 4 is held by two pods: {min(classic, other)} and {max(classic, other)}" == str(err.value)


def test_container_outside_its_bubble_is_refused() -> None:
    """A pod-level container cpuset must lie inside its pod's bubble."""
    doc = document()
    cpus = doc["data"]["cpus"]
    bubble_uid = next(iter(cpus["podEntries"]))
    cpus["podEntries"][bubble_uid] = "1-3"
    cpus["entries"][bubble_uid]["log"] = "7"
    cpus["default"] = "0,4,8-15"
    state = state_from_checkpoint_or_error(doc)
    with pytest.raises(CheckpointError) as err:
        Planner(machine(threads=1), config_from_mapping(CONFIG, env={}).planner, state)
    assert f'pod: {bubble_uid}, container: log cpuset "7" is not inside the pod\'s cpuset "1-3"' == str(err.value)


def test_memory_state_round_trip_and_mismatch() -> None:
    """With the Static memory policy the machine state is checkpointed and validated too."""
    extra = {
        "memoryManagerPolicy": "Static",
        "systemReserved": {"memory": "924Mi"},
        "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}],
    }
    doc = document(**extra)
    config = config_from_mapping({**CONFIG, **extra}, env={})
    assert Planner(machine(threads=1), config.planner, state_from_checkpoint(doc)).snapshot().memory is not None
    doc["data"]["memory"]["machineState"]["0"]["memoryMap"]["memory"]["free"] += 1
    with pytest.raises(CheckpointError, match=r"NUMA node 0: memory free .* != allocatable"):
        Planner(machine(threads=1), config.planner, state_from_checkpoint_unchecked(doc["data"]))
