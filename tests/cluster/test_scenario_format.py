"""The scenario corpus of the differential harness, without a cluster: it loads, its pods are pods podpin reads,
podpin's planner decides as each ``expect`` says on the scenario's machine, and it covers what issue 17 asks.

The planner runs as ``podpin plan`` does (same manifest reader, same configuration keys, the machine built from the
scenario's shape like ``tests/support/machines.py``); a ``restart`` step rebuilds it from its checkpoint, and every
pod admitted before must keep its CPUs.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import pytest

from agent.alloc import Decision, Planner
from agent.alloc.state import NodeState, state_from_checkpoint, state_to_checkpoint
from agent.config import config_from_mapping
from agent.cpuset import CPUSet
from agent.pods.manifests import parse_manifest
from agent.pods.model import PodView, pod_from_dict
from agent.sim.machines import synthetic_machine
from agent.topology.model import Topology
from tests.cluster.scenario_format import (
    ADMITTED,
    BUSYBOX_IMAGE,
    Apply,
    Delete,
    Machine,
    PodFile,
    Restart,
    Scenario,
    ScenarioError,
    by_machine,
    load_all,
    load_scenario,
)

CORPUS = load_all()
MIB = 2**20


def _topology(machine: Machine) -> Topology:
    """The scenario's machine as a :class:`Topology` (Intel enumeration; QEMU's numbering differs, the shape not)."""
    built = synthetic_machine(
        sockets=machine.sockets,
        numa_per_socket=machine.numa_per_socket,
        cores_per_numa=machine.cores_per_numa,
        threads=machine.threads_per_core,
    )
    nodes = tuple(replace(node, memory_bytes=machine.memory_mib_per_node * MIB) for node in built.numa_nodes)
    return replace(built, numa_nodes=nodes)


def _view(pod: PodFile) -> PodView:
    (raw,) = parse_manifest(pod.file, pod.path.read_bytes())
    return pod_from_dict(raw)


def _planner(scenario: Scenario, state: NodeState | None = None) -> Planner:
    config = config_from_mapping(scenario.kubelet.configuration(), env={}).planner
    return Planner(_topology(scenario.machine), config, state)


def _held(planner: Planner, uid: str) -> tuple[CPUSet | None, dict[str, CPUSet]]:
    cpu = planner.snapshot().cpu
    return cpu.pod_entries.get(uid), dict(cpu.assignments.get(uid, {}))


def _run(scenario: Scenario) -> dict[str, Decision]:
    """The scenario's steps through podpin's planner; a restart must leave every admitted pod's CPUs as they were."""
    planner = _planner(scenario)
    decisions: dict[str, Decision] = {}
    views: dict[str, PodView] = {}
    for step in scenario.steps:
        if isinstance(step, Apply):
            view = _view(step.pod)
            views[step.pod.name] = view
            decisions[step.pod.name] = planner.admit(view)
        elif isinstance(step, Delete):
            planner.release(views[step.pod.name].uid)
        else:
            before = {name: _held(planner, view.uid) for name, view in views.items()}
            restored = state_from_checkpoint(state_to_checkpoint(planner.snapshot()))
            planner = _planner(scenario, restored)
            for view in views.values():
                if planner.is_admitted(view.uid):
                    assert planner.admit(view).already_admitted
            assert before == {name: _held(planner, view.uid) for name, view in views.items()}
    return decisions


@pytest.mark.parametrize("scenario", CORPUS, ids=[s.name for s in CORPUS])
def test_podpin_decides_as_expected(scenario: Scenario) -> None:
    """Every pod with an ``expect`` is admitted, or rejected with that reason, by podpin on the scenario's machine;
    restarts in the middle move no CPU."""
    decisions = _run(scenario)
    actual = {name: ADMITTED if decisions[name].admitted else str(decisions[name].reason) for name in scenario.expect}
    assert dict(scenario.expect) == actual


@pytest.mark.parametrize("scenario", CORPUS, ids=[s.name for s in CORPUS])
def test_every_pod_is_a_pod_podpin_reads(scenario: Scenario) -> None:
    """Each pod file parses as a podpin pod (the API server's rules included) and runs only the harness's image."""
    for pod in scenario.pods:
        view = _view(pod)
        assert (pod.name, {BUSYBOX_IMAGE}) == (
            view.name,
            {c["image"] for key in ("initContainers", "containers") for c in pod.manifest["spec"].get(key) or []},
        )


def test_the_corpus_covers_issue_17() -> None:
    """At least 40 scenarios on few machine shapes of at most 8 vCPUs, covering every cpuManagerPolicyOption, both
    scopes under every aligning policy, SMT on and off, 2 and 4 NUMA nodes, init containers and sidecars, the
    Static memory manager, rejections of each kind and restarts in the middle."""
    options: set[str] = set()
    matrix: set[tuple[str, str]] = set()
    outcomes: set[str] = set()
    kinds: set[str] = set()
    memory = restarts = 0
    for scenario in CORPUS:
        fields = scenario.kubelet.configuration()
        options |= set(fields.get("cpuManagerPolicyOptions", {}))
        matrix.add((fields["topologyManagerPolicy"], fields["topologyManagerScope"]))
        outcomes |= set(scenario.expect.values())
        memory += fields["memoryManagerPolicy"] == "Static"
        restarts += any(isinstance(step, Restart) for step in scenario.steps)
        for pod in scenario.pods:
            spec = pod.manifest["spec"]
            kinds |= {
                "sidecar" if c.get("restartPolicy") == "Always" else "init" for c in spec.get("initContainers") or []
            }
            kinds |= {"pod-level"} if "resources" in spec else set()
    shapes = by_machine(CORPUS)
    assert (
        True,
        True,
        {
            "full-pcpus-only",
            "distribute-cpus-across-numa",
            "align-by-socket",
            "distribute-cpus-across-cores",
            "strict-cpu-reservation",
            "prefer-align-cpus-by-uncorecache",
        },
        {(p, s) for p in ("best-effort", "restricted", "single-numa-node") for s in ("pod", "container")},
        {1, 2},
        {1, 2, 4},
        {"init", "sidecar", "pod-level"},
        True,
        {ADMITTED, "TopologyAffinityError", "SMTAlignmentError", "EmptyPodSharedPoolError"},
        True,
    ) == (
        len(CORPUS) >= 40,
        len(shapes) <= 6 and all(machine.cpus <= 8 for machine in shapes),
        options,
        matrix - {("none", "container"), ("none", "pod")},
        {m.threads_per_core for m in shapes},
        {m.numa_nodes for m in shapes},
        kinds,
        memory >= 3,
        outcomes,
        restarts >= 3,
    )


def _write(root: Path, scenario: str, pods: dict[str, str] | None = None) -> Path:
    directory = root / "scenarios" / "broken"
    (directory / "pods").mkdir(parents=True, exist_ok=True)
    (directory / "scenario.yaml").write_text(scenario)
    for name, text in (pods or {"01-a.yaml": _POD}).items():
        (directory / "pods" / name).write_text(text)
    return directory


_MACHINE = "machine: {sockets: 2, cores_per_socket: 2, threads_per_core: 2, numa_nodes: 2, memory_mib_per_node: 2048}\n"
_KUBELET = 'kubelet: {cpuManagerPolicy: static, reservedSystemCPUs: "0"}\n'
_POD = f"apiVersion: v1\nkind: Pod\nmetadata: {{name: a}}\nspec:\n  containers: [{{name: c, image: {BUSYBOX_IMAGE}}}]\n"


@pytest.mark.parametrize(
    ("scenario", "pods", "message"),
    [
        (_KUBELET, None, "scenarios/broken/scenario.yaml: machine: missing"),
        (
            _MACHINE.replace("sockets: 2", "sockets: two") + _KUBELET,
            None,
            "scenarios/broken/scenario.yaml: machine.sockets: 'two' is not a whole number of at least 1",
        ),
        (
            _MACHINE.replace("numa_nodes: 2", "numa_nodes: 3") + _KUBELET,
            None,
            "scenarios/broken/scenario.yaml: machine.numa_nodes: 3 NUMA nodes do not split 2 sockets of 2 cores evenly",
        ),
        (
            _MACHINE + "kubelet: {cpuManagerPolicy: static, evictionHard: {}}\n",
            None,
            "scenarios/broken/scenario.yaml: kubelet.evictionHard: not a field the harness sets",
        ),
        (
            _MACHINE + "kubelet: {topologyManagerScope: node}\n",
            None,
            "scenarios/broken/scenario.yaml: kubelet.topologyManagerScope: 'node' is not one of container, pod",
        ),
        (
            _MACHINE + "kubelet: {cpuManagerPolicyOptions: {full-pcpus-only: true}}\n",
            None,
            "scenarios/broken/scenario.yaml: kubelet.cpuManagerPolicyOptions.full-pcpus-only: True must be a string",
        ),
        (
            _MACHINE + _KUBELET + "steps: [01-a.yaml, restart, 02-b.yaml]\n",
            None,
            "scenarios/broken/scenario.yaml: steps[2]: '02-b.yaml' is not restart, a file of pods/ or {delete: <file>}",
        ),
        (
            _MACHINE + _KUBELET + "steps: [{delete: 01-a.yaml}, 01-a.yaml]\n",
            None,
            "scenarios/broken/scenario.yaml: steps[0]: deletes 01-a.yaml before it is applied",
        ),
        (
            _MACHINE + _KUBELET + "steps: [restart]\n",
            None,
            "scenarios/broken/scenario.yaml: steps: 01-a.yaml is in pods/ but no step applies it",
        ),
        (
            _MACHINE + _KUBELET + "expect: {b: admitted}\n",
            None,
            "scenarios/broken/scenario.yaml: expect.b: no pod of the scenario has that name",
        ),
        (
            _MACHINE + _KUBELET,
            {"01-a.yaml": _POD.replace(BUSYBOX_IMAGE, "nginx:1.27")},
            "scenarios/broken/pods/01-a.yaml: spec.containers[0].image: 'nginx:1.27'; every container runs",
        ),
        (
            _MACHINE + _KUBELET,
            {"01-a.yaml": _POD, "02-a.yaml": _POD},
            "scenarios/broken/pods/02-a.yaml: metadata.name: a is also the pod of 01-a.yaml",
        ),
        (_MACHINE + _KUBELET, {"01-a.yaml": "kind: Pod\n"}, "scenarios/broken/pods/01-a.yaml: must hold one Pod"),
    ],
)
def test_a_broken_scenario_is_refused_naming_the_file_and_key(
    tmp_path: Path, scenario: str, pods: dict[str, str] | None, message: str
) -> None:
    """A mistake in a scenario stops the loader with the file and the key that are wrong."""
    with pytest.raises(ScenarioError) as err:
        load_scenario(_write(tmp_path, scenario, pods))
    assert str(err.value).startswith(message)


def test_keys_the_harness_does_not_use_are_ignored_and_policies_default_as_the_kubelets(tmp_path: Path) -> None:
    """``source``, ``notes`` and other top-level keys are read past; policies the scenario leaves out get the
    kubelet's defaults in both runs; without steps every pod file is applied in name order."""
    scenario = load_scenario(
        _write(
            tmp_path,
            "source: somewhere\nnotes: anything\nwhatever: [1, 2]\n" + _MACHINE + _KUBELET,
            {"02-b.yaml": _POD.replace("name: a", "name: b"), "01-a.yaml": _POD},
        )
    )
    assert (
        "somewhere",
        {
            "cpuManagerPolicy": "static",
            "topologyManagerPolicy": "none",
            "topologyManagerScope": "container",
            "memoryManagerPolicy": "None",
            "reservedSystemCPUs": "0",
        },
        ["a", "b"],
        MappingProxyType({}),
    ) == (
        scenario.source,
        scenario.kubelet.configuration(),
        [step.pod.name for step in scenario.steps if isinstance(step, Apply)],
        scenario.expect,
    )
