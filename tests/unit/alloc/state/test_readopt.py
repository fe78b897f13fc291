"""Re-adopting a checkpoint after a CPU hotplug or a reservation change: keep every CPU that can be kept.

Before ``readopt.py`` the planner refused such a checkpoint (``current set of available CPUs ... doesn't match``,
``the checkpoint reserves CPUs "0" but the configuration reserves "0-1"``); the agent set it aside and re-admitted
the running pods one by one, so a pod the change did not touch could move or be rejected.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from agent.alloc import Planner, state_from_checkpoint, state_to_checkpoint
from agent.alloc.state.readopt import needs_readoption
from agent.config import config_from_mapping
from agent.cpuset import CPUSet
from agent.pods.model import pod_from_dict
from agent.topology.model import Topology
from tests.support.machines import machine
from tests.support.podfactory import container, make_pod, resources

CONFIG: dict[str, Any] = {"reservedSystemCPUs": "0"}


def offline(topology: Topology, *ids: int) -> Topology:
    """The same machine with these CPUs offline (as sysfs shows them: no placement ids)."""
    return replace(
        topology,
        cpus=tuple(
            replace(c, online=False, core=None, socket=None, numa=None) if c.id in ids else c for c in topology.cpus
        ),
    )


def planner_with_pods(topology: Topology, config: dict[str, Any], *pods: dict[str, Any]) -> Planner:
    planner = Planner(topology, config_from_mapping(config, env={}).planner)
    for raw in pods:
        assert planner.admit(pod_from_dict(raw)).admitted
    return planner


def restart(planner: Planner, topology: Topology, config: dict[str, Any]) -> Planner:
    """A new planner over the saved checkpoint (through its JSON), on this machine and configuration."""
    state = state_from_checkpoint(state_to_checkpoint(planner.snapshot()))
    return Planner(topology, config_from_mapping(config, env={}).planner, state)


def db() -> dict[str, Any]:
    return make_pod(
        "db",
        containers=[container("db", cpu="3", memory="1Gi"), container("log")],
        pod_resources=resources(cpu="4", memory="2Gi"),
    )


def classic(name: str = "classic", cpus: str = "2") -> dict[str, Any]:
    return make_pod(name, containers=[container("c", cpu=cpus, memory="1Gi")])


def held(planner: Planner) -> dict[str, dict[str, str]]:
    """Per pod name: each container's set and the bubble (``<pod>``)."""
    state = planner.snapshot()
    found: dict[str, dict[str, str]] = {}
    for uid, record in state.pods.items():
        sets = {name: str(cpus) for name, cpus in state.cpu.assignments.get(uid, {}).items()}
        if uid in state.cpu.pod_entries:
            sets["<pod>"] = str(state.cpu.pod_entries[uid])
        found[record.name] = sets
    return found


def test_hotplug_moves_only_the_lost_cpu() -> None:
    """CPU 6 goes offline: classic keeps 5 and gets 7 (NUMA 0); db is untouched; the move says why."""
    topology = machine(threads=1)
    before = planner_with_pods(topology, CONFIG, db(), classic())
    after = restart(before, offline(topology, 6), CONFIG)
    assert ([("classic", "c", "5-6", "5,7", "6", "")], []) == readoption_summary(after)
    assert {"db": {"db": "1-3", "log": "4", "<pod>": "1-4"}, "classic": {"c": "5,7"}} == held(after)
    assert "0,8-15" == str(after.snapshot().cpu.default)


def readoption_summary(planner: Planner) -> tuple[list[tuple[str, str, str, str, str, str]], list[str]]:
    readoption = planner.readoption
    assert readoption is not None
    return (
        [
            (m.name, m.container or "<pod>", str(m.before), str(m.after), str(m.offline), str(m.reserved))
            for m in readoption.moves
        ],
        list(readoption.dropped),
    )


def test_newly_reserved_cpu_moves_out_of_the_bubble_and_its_container() -> None:
    """reservedSystemCPUs 0 -> 0-1: db's bubble and its db container give up CPU 1 and get 7; classic is untouched."""
    topology = machine(threads=1)
    before = planner_with_pods(topology, CONFIG, db(), classic())
    after = restart(before, topology, {"reservedSystemCPUs": "0-1"})
    assert (
        [("db", "<pod>", "1-4", "2-4,7", "", "1"), ("db", "db", "1-3", "2-3,7", "", "1")],
        [],
    ) == readoption_summary(after)
    assert ({"db": "2-3,7", "log": "4", "<pod>": "2-4,7"}, {"c": "5-6"}, "0-1") == (
        held(after)["db"],
        held(after)["classic"],
        str(after.snapshot().reserved),
    )


def test_more_reserved_cpus_come_from_free_cpus_first() -> None:
    """systemReserved 1 -> 2 CPUs (no explicit list): the old reserved CPU stays and the new one is a free CPU,
    so no pod moves (the kubelet would pick CPUs 0-1 afresh, one of them db's)."""
    topology = machine(threads=1)
    config = {"systemReserved": {"cpu": "1"}}
    before = planner_with_pods(topology, config, db(), classic())
    after = restart(before, topology, {"systemReserved": {"cpu": "2"}})
    assert (([], []), 2, CPUSet(), {"db": {"db": "1-3", "log": "4", "<pod>": "1-4"}, "classic": {"c": "5-6"}}) == (
        readoption_summary(after),
        len(after.snapshot().reserved),
        after.snapshot().reserved & CPUSet.parse("1-6"),
        held(after),
    )


def test_pod_that_cannot_be_made_whole_is_dropped_and_the_others_kept() -> None:
    """Every CPU is held; CPU 15 goes offline: its pod is dropped (to be admitted again), no other pod changes."""
    topology = machine(threads=1)
    pods = [classic("a", "7"), classic("b", "4"), classic("c", "4")]
    before = planner_with_pods(topology, CONFIG, *pods)
    owner = next(name for name, sets in held(before).items() if 15 in CPUSet.parse(sets["c"]))
    after = restart(before, offline(topology, 15), CONFIG)
    kept = {name: sets for name, sets in held(before).items() if name != owner}
    dropped = readoption_summary(after)[1]
    assert ([pod_uid_of(before, owner)], kept) == (dropped, held(after))


def pod_uid_of(planner: Planner, name: str) -> str:
    return next(uid for uid, record in planner.snapshot().pods.items() if record.name == name)


def test_strict_reservation_switched_on_is_readopted() -> None:
    """strict-cpu-reservation switched on: the reserved CPU leaves the shared pool, every pod keeps its CPUs."""
    topology = machine(threads=1)
    before = planner_with_pods(topology, CONFIG, db(), classic())
    strict = {**CONFIG, "cpuManagerPolicyOptions": {"strict-cpu-reservation": "true"}}
    after = restart(before, topology, strict)
    assert (([], []), "7-15", held(before)) == (
        readoption_summary(after),
        str(after.snapshot().cpu.default),
        held(after),
    )


def test_unchanged_checkpoint_needs_no_readoption() -> None:
    """Same CPUs, same reserved set, same strictness: adopted as it is."""
    topology = machine(threads=1)
    state = planner_with_pods(topology, CONFIG, db(), classic()).snapshot()
    assert (False, True, True) == (
        needs_readoption(state, topology.online_cpus, CPUSet.parse("0"), strict=False),
        needs_readoption(state, CPUSet.parse("0-14"), CPUSet.parse("0"), strict=False),
        needs_readoption(state, topology.online_cpus, CPUSet.parse("0"), strict=True),
    )
