"""The scenarios of the differential harness (issue 17): read one directory into typed values, or say what is wrong.

A scenario is a directory under ``tests/cluster/scenarios/``: ``scenario.yaml`` (the machine, the kubelet's
resource-manager configuration, optional steps) and ``pods/*.yaml`` (one Pod each). The format is documented in
``tests/cluster/scenarios/README.md``; this module is its only reader, for the harness that runs a scenario on the
kubelet and on podpin and for the unit tests that check the corpus. It reads only what is in the directory.

Errors are :class:`ScenarioError` naming the file and the key (``scenarios/x/scenario.yaml: machine.sockets: ...``).
Top-level keys the harness does not use (``source``, ``expect``, ``notes``, anything else) are not refused;
``expect`` is parsed all the same, for the unit tests.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

__all__ = [
    "ADMITTED",
    "BUSYBOX_IMAGE",
    "KUBELET_DEFAULTS",
    "KUBELET_FIELDS",
    "SCENARIOS",
    "Apply",
    "Delete",
    "Kubelet",
    "Machine",
    "PodFile",
    "Restart",
    "Scenario",
    "ScenarioError",
    "Step",
    "by_machine",
    "load_all",
    "load_scenario",
]

SCENARIOS = Path(__file__).parent / "scenarios"
"""The corpus kept in the repository."""

BUSYBOX_IMAGE = "registry.local/busybox:1"
"""The one image every container of a scenario runs (the harness provides it)."""

ADMITTED = "admitted"
"""The ``expect`` value of a pod both sides admit (any other value is the rejection reason)."""

KUBELET_FIELDS = (
    "cpuManagerPolicy",
    "cpuManagerPolicyOptions",
    "topologyManagerPolicy",
    "topologyManagerScope",
    "topologyManagerPolicyOptions",
    "memoryManagerPolicy",
    "reservedSystemCPUs",
    "reservedMemory",
    "systemReserved",
    "kubeReserved",
)
"""The KubeletConfiguration fields a scenario may set (and nothing else)."""

KUBELET_DEFAULTS: Mapping[str, str] = MappingProxyType(
    {
        "cpuManagerPolicy": "none",
        "topologyManagerPolicy": "none",
        "topologyManagerScope": "container",
        "memoryManagerPolicy": "None",
    }
)
"""The kubelet's own defaults of the policy fields; both runs get them where the scenario is silent."""

_MAPS = ("cpuManagerPolicyOptions", "topologyManagerPolicyOptions", "systemReserved", "kubeReserved")
_CHOICES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "cpuManagerPolicy": ("none", "static"),
        "topologyManagerPolicy": ("none", "best-effort", "restricted", "single-numa-node"),
        "topologyManagerScope": ("container", "pod"),
        "memoryManagerPolicy": ("None", "Static"),
    }
)
_MACHINE_KEYS = ("sockets", "cores_per_socket", "threads_per_core", "numa_nodes", "memory_mib_per_node")
_RESTART = "restart"


class ScenarioError(ValueError):
    """A scenario that cannot be read; the message names the file and the key."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Machine:
    """The guest machine: QEMU builds this topology (NUMA nodes split the sockets evenly)."""

    sockets: int
    cores_per_socket: int
    threads_per_core: int
    numa_nodes: int
    memory_mib_per_node: int

    @property
    def cpus(self) -> int:
        """Logical CPUs of the machine."""
        return self.sockets * self.cores_per_socket * self.threads_per_core

    @property
    def numa_per_socket(self) -> int:
        return self.numa_nodes // self.sockets

    @property
    def cores_per_numa(self) -> int:
        return self.cores_per_socket // self.numa_per_socket


@dataclass(frozen=True, slots=True, kw_only=True)
class Kubelet:
    """The resource-manager fields of the KubeletConfiguration, as the scenario gives them."""

    fields: Mapping[str, Any]

    def configuration(self) -> dict[str, Any]:
        """The fields both runs use: the scenario's, with the kubelet's defaults for the policies it leaves out."""
        return {**KUBELET_DEFAULTS, **self.fields}


@dataclass(frozen=True, slots=True, kw_only=True)
class PodFile:
    """One file of ``pods/``: its name and path, the Pod's name and namespace, and the manifest as written."""

    file: str
    path: Path
    name: str
    namespace: str
    manifest: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Apply:
    """Create the pod and wait until it runs (or is rejected)."""

    pod: PodFile


@dataclass(frozen=True, slots=True)
class Delete:
    """Delete the pod and wait until it is gone."""

    pod: PodFile


@dataclass(frozen=True, slots=True)
class Restart:
    """Restart the kubelet (run a) or podpin (run b), keeping their state; running pods keep their CPUs."""


Step = Apply | Delete | Restart
"""One step of a scenario, run in order."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """One scenario directory, read and checked."""

    name: str
    directory: Path
    machine: Machine
    kubelet: Kubelet
    pods: tuple[PodFile, ...]
    steps: tuple[Step, ...]
    expect: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    source: str | None = None

    def pod(self, name: str) -> PodFile:
        """The pod named ``name`` (metadata.name)."""
        for pod in self.pods:
            if pod.name == name:
                return pod
        raise KeyError(name)


def _where(path: Path) -> str:
    parts = path.parts
    return "/".join(parts[parts.index("scenarios") :]) if "scenarios" in parts else str(path)


def _read_yaml(path: Path) -> Any:
    try:
        text = path.read_text()
    except OSError as err:
        raise ScenarioError(f"{_where(path)}: cannot read: {err.strerror or err}") from err
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ScenarioError(f"{_where(path)}: not YAML: {err}") from err


def _machine(where: str, raw: Any) -> Machine:
    if not isinstance(raw, Mapping):
        raise ScenarioError(f"{where}: machine: must be a map with the keys {', '.join(_MACHINE_KEYS)}")
    unknown = sorted(set(raw) - set(_MACHINE_KEYS), key=str)
    if unknown:
        raise ScenarioError(f"{where}: machine.{unknown[0]}: unknown key (known: {', '.join(_MACHINE_KEYS)})")
    values: dict[str, int] = {}
    for key in _MACHINE_KEYS:
        value = raw.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ScenarioError(f"{where}: machine.{key}: {value!r} is not a whole number of at least 1")
        values[key] = value
    machine = Machine(**values)
    if machine.numa_nodes % machine.sockets or machine.cores_per_socket % machine.numa_per_socket:
        raise ScenarioError(
            f"{where}: machine.numa_nodes: {machine.numa_nodes} NUMA nodes do not split {machine.sockets} sockets of "
            f"{machine.cores_per_socket} cores evenly"
        )
    return machine


def _string_map(where: str, key: str, value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ScenarioError(f"{where}: kubelet.{key}: {value!r} is not a map of names to strings")
    for name, item in value.items():
        if not isinstance(item, str):
            raise ScenarioError(f"{where}: kubelet.{key}.{name}: {item!r} must be a string (quote it, as YAML needs)")
    return dict(value)


def _reserved_memory(where: str, value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise ScenarioError(f"{where}: kubelet.reservedMemory: {value!r} is not a list of {{numaNode, limits}}")
    for index, item in enumerate(value):
        if not isinstance(item, Mapping) or set(item) != {"numaNode", "limits"}:
            raise ScenarioError(f"{where}: kubelet.reservedMemory[{index}]: must have exactly numaNode and limits")
        _string_map(where, f"reservedMemory[{index}].limits", item["limits"])
    return [dict(item) for item in value]


def _kubelet(where: str, raw: Any) -> Kubelet:
    if not isinstance(raw, Mapping):
        raise ScenarioError(f"{where}: kubelet: must be a map of KubeletConfiguration fields")
    fields: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in KUBELET_FIELDS:
            raise ScenarioError(
                f"{where}: kubelet.{key}: not a field the harness sets (known: {', '.join(KUBELET_FIELDS)})"
            )
        if key in _CHOICES:
            if value not in _CHOICES[key]:
                raise ScenarioError(f"{where}: kubelet.{key}: {value!r} is not one of {', '.join(_CHOICES[key])}")
            fields[key] = value
        elif key in _MAPS:
            fields[key] = _string_map(where, key, value)
        elif key == "reservedMemory":
            fields[key] = _reserved_memory(where, value)
        elif not isinstance(value, str):
            raise ScenarioError(f'{where}: kubelet.{key}: {value!r} must be a string (a cpuset such as "0" or "0,4")')
        else:
            fields[key] = value
    return Kubelet(fields=MappingProxyType(fields))


def _containers(where: str, spec: Mapping[str, Any]) -> Iterable[tuple[str, Any]]:
    for key in ("initContainers", "containers"):
        items = spec.get(key) or []
        if not isinstance(items, list):
            raise ScenarioError(f"{where}: spec.{key}: must be a list")
        for index, item in enumerate(items):
            yield f"spec.{key}[{index}]", item


def _pod_file(path: Path) -> PodFile:
    where = _where(path)
    raw = _read_yaml(path)
    if not isinstance(raw, Mapping) or raw.get("kind") != "Pod" or raw.get("apiVersion") != "v1":
        raise ScenarioError(f"{where}: must hold one Pod (apiVersion: v1, kind: Pod)")
    metadata = raw.get("metadata")
    if not isinstance(metadata, Mapping) or not isinstance(metadata.get("name"), str):
        raise ScenarioError(f"{where}: metadata.name: every pod needs a name")
    namespace = metadata.get("namespace", "default")
    if not isinstance(namespace, str):
        raise ScenarioError(f"{where}: metadata.namespace: {namespace!r} is not a name")
    spec = raw.get("spec")
    if not isinstance(spec, Mapping) or not spec.get("containers"):
        raise ScenarioError(f"{where}: spec.containers: a pod needs at least one container")
    if "nodeName" in spec:
        raise ScenarioError(f"{where}: spec.nodeName: left to the harness (it binds every pod to its node)")
    for key, item in _containers(where, spec):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise ScenarioError(f"{where}: {key}.name: every container needs a name")
        if item.get("image") != BUSYBOX_IMAGE:
            raise ScenarioError(f"{where}: {key}.image: {item.get('image')!r}; every container runs {BUSYBOX_IMAGE}")
    return PodFile(file=path.name, path=path, name=metadata["name"], namespace=namespace, manifest=raw)


def _pods(directory: Path) -> tuple[PodFile, ...]:
    where = _where(directory / "pods")
    files = sorted((directory / "pods").glob("*.yaml")) if (directory / "pods").is_dir() else []
    if not files:
        raise ScenarioError(f"{where}: no pod files (*.yaml)")
    pods = tuple(_pod_file(path) for path in files)
    seen: dict[tuple[str, str], str] = {}
    for pod in pods:
        other = seen.setdefault((pod.namespace, pod.name), pod.file)
        if other != pod.file:
            raise ScenarioError(f"{where}/{pod.file}: metadata.name: {pod.name} is also the pod of {other}")
    return pods


def _steps(where: str, raw: Any, pods: tuple[PodFile, ...]) -> tuple[Step, ...]:
    by_file = {pod.file: pod for pod in pods}
    if raw is None:
        return tuple(Apply(pod) for pod in pods)
    if not isinstance(raw, list) or not raw:
        raise ScenarioError(f"{where}: steps: must be a non-empty list (pod files, restart, {{delete: file}})")
    steps: list[Step] = []
    applied: set[str] = set()
    for index, item in enumerate(raw):
        key = f"steps[{index}]"
        if item == _RESTART:
            steps.append(Restart())
            continue
        deleting = isinstance(item, Mapping) and set(item) == {"delete"}
        name = item["delete"] if deleting else item
        if not isinstance(name, str) or name not in by_file:
            raise ScenarioError(f"{where}: {key}: {item!r} is not restart, a file of pods/ or {{delete: <file>}}")
        if deleting:
            if name not in applied:
                raise ScenarioError(f"{where}: {key}: deletes {name} before it is applied")
            steps.append(Delete(by_file[name]))
        else:
            if name in applied:
                raise ScenarioError(f"{where}: {key}: applies {name} a second time")
            applied.add(name)
            steps.append(Apply(by_file[name]))
    missing = sorted(set(by_file) - applied)
    if missing:
        raise ScenarioError(f"{where}: steps: {missing[0]} is in pods/ but no step applies it")
    return tuple(steps)


def _expect(where: str, raw: Any, pods: tuple[PodFile, ...]) -> Mapping[str, str]:
    if raw is None:
        return MappingProxyType({})
    if not isinstance(raw, Mapping):
        raise ScenarioError(f"{where}: expect: must map pod names to {ADMITTED} or a rejection reason")
    names = {pod.name for pod in pods}
    for name, outcome in raw.items():
        if name not in names:
            raise ScenarioError(f"{where}: expect.{name}: no pod of the scenario has that name")
        if not isinstance(outcome, str) or not outcome:
            raise ScenarioError(f"{where}: expect.{name}: {outcome!r} is not {ADMITTED} or a reason")
    return MappingProxyType(dict(raw))


def load_scenario(directory: Path) -> Scenario:
    """Read and check one scenario directory.

    Raises:
        ScenarioError: naming the file and the key that is wrong.
    """
    path = directory / "scenario.yaml"
    where = _where(path)
    raw = _read_yaml(path)
    if not isinstance(raw, Mapping):
        raise ScenarioError(f"{where}: must be a map with machine and kubelet")
    for key in ("machine", "kubelet"):
        if key not in raw:
            raise ScenarioError(f"{where}: {key}: missing")
    pods = _pods(directory)
    source = raw.get("source")
    return Scenario(
        name=directory.name,
        directory=directory,
        machine=_machine(where, raw["machine"]),
        kubelet=_kubelet(where, raw["kubelet"]),
        pods=pods,
        steps=_steps(where, raw.get("steps"), pods),
        expect=_expect(where, raw.get("expect"), pods),
        source=source if isinstance(source, str) else None,
    )


def load_all(root: Path = SCENARIOS) -> list[Scenario]:
    """Every scenario under ``root`` (directories with a ``scenario.yaml``), by name."""
    return [load_scenario(path.parent) for path in sorted(root.glob("*/scenario.yaml"))]


def by_machine(scenarios: Iterable[Scenario]) -> dict[Machine, list[Scenario]]:
    """Scenarios grouped by machine shape: each group runs in one boot."""
    groups: dict[Machine, list[Scenario]] = {}
    for scenario in scenarios:
        groups.setdefault(scenario.machine, []).append(scenario)
    return groups
