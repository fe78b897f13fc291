"""The agent configuration: a YAML file with the kubelet's field names (DESIGN §5).

Where the concept is the kubelet's, the key is the kubelet's
(``cpuManagerPolicyOptions``, ``topologyManagerScope``, ``reservedMemory`` ...),
so a platform team can copy its ``KubeletConfiguration`` fragment. Unknown keys
and bad values are errors at start, naming the key.

Defaults that differ from the kubelet's, on purpose: ``topologyManagerPolicy``
is ``best-effort`` and ``topologyManagerScope`` is ``pod``, because the pod-level
hybrid allocation (KEP-5526) that podpin exists for needs a policy other than
``none`` and, for pod shared pools, the pod scope. Every other default is the
kubelet's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any

import durationpy
import yaml

from agent.alloc.options import (
    CPUPolicyOptions,
    OptionsError,
    TopologyPolicyOptions,
    parse_cpu_policy_options,
    parse_topology_policy_options,
)
from agent.cpuset import CPUSet, CPUSetError
from agent.quantity import QuantityError, cpu_millis, memory_bytes

__all__ = ["AgentConfig", "ConfigError", "ReservedMemory", "load_config", "config_from_mapping", "CONFIG_KEYS"]


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names the key."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReservedMemory:
    """One ``reservedMemory`` entry: memory held back from pods on one NUMA node (bytes per resource)."""

    numa_node: int
    limits: Mapping[str, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentConfig:
    """Everything the agent and the planner are configured with."""

    cpu_manager_policy: str = "static"
    cpu_policy_options: CPUPolicyOptions = field(default_factory=CPUPolicyOptions)
    cpu_policy_options_raw: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    memory_manager_policy: str = "None"
    topology_manager_policy: str = "best-effort"
    topology_manager_scope: str = "pod"
    topology_policy_options: TopologyPolicyOptions = field(default_factory=TopologyPolicyOptions)
    reserved_system_cpus: CPUSet = field(default_factory=CPUSet)
    kube_reserved: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    system_reserved: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    eviction_hard_memory: int = 100 * 2**20
    reserved_memory: tuple[ReservedMemory, ...] = ()
    cpu_cfs_quota_period_us: int = 100_000
    node_name: str | None = None
    cgroup_root: Path = Path("/sys/fs/cgroup")
    cgroup_driver: str = "auto"
    reconcile_period: float = 10.0
    pod_resync_period: float = 300.0
    state_dir: Path = Path("/var/lib/podpin")
    kubelet_cpu_manager_state_path: Path = Path("/var/lib/kubelet/cpu_manager_state")
    dry_run: bool = False
    metrics_bind_address: str = "0.0.0.0:9363"  # port 0: any free port (logged in agent.started)
    log_level: str = "info"
    log_format: str = "auto"
    cgroup_watch: str = "auto"
    runtime_root: Path = Path("/")  # where the runtimes' state is (run/containerd, run/containers): --runtime-root

    def num_reserved_cpus(self) -> int:
        """How many CPUs are reserved: |reservedSystemCPUs| if set, else ceil(kube + system reserved cpu)."""
        if self.reserved_system_cpus:
            return len(self.reserved_system_cpus)
        millis = self.kube_reserved.get("cpu", 0) + self.system_reserved.get("cpu", 0)
        return -(-millis // 1000)

    def cfs_period_text(self) -> str:
        """The ``cpu.max`` value that lifts the quota: ``max <period>``."""
        return f"max {self.cpu_cfs_quota_period_us}"


_CHOICES = {
    "cpuManagerPolicy": ("static", "none"),
    "memoryManagerPolicy": ("None", "Static"),
    "topologyManagerPolicy": ("none", "best-effort", "restricted", "single-numa-node"),
    "topologyManagerScope": ("container", "pod"),
    "cgroupDriver": ("auto", "systemd", "cgroupfs"),
    "logLevel": ("debug", "info", "warning", "error"),
    "logFormat": ("auto", "json", "console"),
    "cgroupWatch": ("auto", "inotify", "poll", "off"),
}
_MAPS = ("cpuManagerPolicyOptions", "topologyManagerPolicyOptions", "kubeReserved", "systemReserved", "evictionHard")
_DURATIONS = ("cpuCFSQuotaPeriod", "reconcilePeriod", "podResyncPeriod")
_STRINGS = (
    "reservedSystemCPUs",
    "nodeName",
    "cgroupRoot",
    "stateDir",
    "kubeletCPUManagerStatePath",
    "metricsBindAddress",
    "runtimeRoot",
)

#: Every key the configuration file may hold.
CONFIG_KEYS = tuple(sorted({*_CHOICES, *_MAPS, *_DURATIONS, *_STRINGS, "reservedMemory", "dryRun"}))


def _duration(key: str, value: object) -> timedelta:
    if not isinstance(value, str):
        raise ConfigError(f'{key}: {value!r} is not a duration such as "10s"')
    try:
        result: timedelta = durationpy.from_str(value)
    except Exception as err:  # durationpy raises its own exception types
        raise ConfigError(f'{key}: {value!r} is not a duration such as "10s" ({err})') from err
    return result


def _resource_map(key: str, value: Mapping[str, Any]) -> dict[str, int]:
    result: dict[str, int] = {}
    for name, quantity in value.items():
        try:
            result[name] = cpu_millis(quantity) if name == "cpu" else memory_bytes(quantity)
        except QuantityError as err:
            raise ConfigError(f"{key}.{name}: {err}") from err
    return result


def _reserved_memory(value: object) -> tuple[ReservedMemory, ...]:
    if not isinstance(value, list):
        raise ConfigError(f"reservedMemory: {value!r} is not a list of {{numaNode, limits}}")
    entries: list[ReservedMemory] = []
    seen: set[int] = set()
    for index, item in enumerate(value):
        where = f"reservedMemory[{index}]"
        if not isinstance(item, Mapping) or set(item) - {"numaNode", "limits"}:
            raise ConfigError(f"{where}: {item!r} must have exactly the keys numaNode and limits")
        node = item.get("numaNode")
        if not isinstance(node, int) or isinstance(node, bool) or node < 0:
            raise ConfigError(f"{where}.numaNode: {node!r} is not a NUMA node id")
        if node in seen:
            raise ConfigError(f"{where}.numaNode: duplicate entry for NUMA node {node}")
        seen.add(node)
        limits = item.get("limits")
        if not isinstance(limits, Mapping) or not limits:
            raise ConfigError(f"{where}.limits: {limits!r} is not a non-empty map of memory resources")
        parsed: dict[str, int] = {}
        for name, quantity in limits.items():
            if name != "memory" and not str(name).startswith("hugepages-"):
                raise ConfigError(f"{where}.limits.{name}: only memory and hugepages-<size> can be reserved")
            try:
                parsed[name] = memory_bytes(quantity)
            except QuantityError as err:
                raise ConfigError(f"{where}.limits.{name}: {err}") from err
            if parsed[name] == 0:
                raise ConfigError(f"{where}.limits.{name}: the reserved amount must be greater than zero")
        entries.append(ReservedMemory(numa_node=node, limits=MappingProxyType(parsed)))
    return tuple(entries)


def _check_reserved_memory_sums(config: AgentConfig, eviction_memory: int) -> None:
    """``reservedMemory`` must add up to kube + system reserved (+ eviction-hard for memory), per resource."""
    totals: dict[str, int] = {}
    for entry in config.reserved_memory:
        for name, size in entry.limits.items():
            totals[name] = totals.get(name, 0) + size
    names = set(totals) | {n for n in (*config.kube_reserved, *config.system_reserved) if n != "cpu"}
    names = {n for n in names if n == "memory" or n.startswith("hugepages-")}
    for name in sorted(names):
        expected = config.kube_reserved.get(name, 0) + config.system_reserved.get(name, 0)
        if name == "memory":
            expected += eviction_memory
        if totals.get(name, 0) != expected:
            raise ConfigError(
                f'reservedMemory: the total amount {totals.get(name, 0)} of type "{name}" is not equal to the '
                f"value {expected} determined by Node Allocatable (kubeReserved + systemReserved"
                f"{' + evictionHard memory.available' if name == 'memory' else ''})"
            )


def config_from_mapping(data: Mapping[str, Any] | None, *, env: Mapping[str, str] | None = None) -> AgentConfig:
    """Validate a parsed configuration mapping and build an :class:`AgentConfig`.

    Args:
        data: the parsed YAML (None or empty gives the defaults).
        env: environment for ``NODE_NAME`` (defaults to ``os.environ``).

    Raises:
        ConfigError: naming the first key that is unknown or wrong.
    """
    data = dict(data or {})
    env = os.environ if env is None else env
    unknown = sorted(set(data) - set(CONFIG_KEYS))
    if unknown:
        raise ConfigError(f"unknown configuration key {unknown[0]!r} (known keys: {', '.join(CONFIG_KEYS)})")
    for key, choices in _CHOICES.items():
        if key in data and data[key] not in choices:
            raise ConfigError(f"{key}: {data[key]!r} is not one of {', '.join(choices)}")
    for key in _MAPS:
        if key in data and not isinstance(data[key], Mapping):
            raise ConfigError(f"{key}: {data[key]!r} is not a map")
    for key in _STRINGS:
        if key in data and not isinstance(data[key], str):
            raise ConfigError(f"{key}: {data[key]!r} is not a string")
    if "dryRun" in data and not isinstance(data["dryRun"], bool):
        raise ConfigError(f"dryRun: {data['dryRun']!r} is not true or false")

    try:
        cpu_options = parse_cpu_policy_options(data.get("cpuManagerPolicyOptions"))
    except OptionsError as err:
        raise ConfigError(f"cpuManagerPolicyOptions: {err}") from err
    try:
        topology_options = parse_topology_policy_options(data.get("topologyManagerPolicyOptions"))
    except OptionsError as err:
        raise ConfigError(f"topologyManagerPolicyOptions: {err}") from err
    try:
        reserved_cpus = CPUSet.parse(data.get("reservedSystemCPUs", ""))
    except CPUSetError as err:
        raise ConfigError(f"reservedSystemCPUs: {err}") from err

    eviction = dict(data.get("evictionHard") or {"memory.available": "100Mi"})
    unknown_signals = sorted(
        set(eviction)
        - {
            "memory.available",
            "nodefs.available",
            "nodefs.inodesFree",
            "imagefs.available",
            "imagefs.inodesFree",
            "pid.available",
        }
    )
    if unknown_signals:
        raise ConfigError(f"evictionHard.{unknown_signals[0]}: unknown eviction signal")
    eviction_memory = 0
    if "memory.available" in eviction:
        try:
            eviction_memory = memory_bytes(eviction["memory.available"])
        except QuantityError as err:
            raise ConfigError(f"evictionHard.memory.available: {err}") from err

    period = _duration("cpuCFSQuotaPeriod", data.get("cpuCFSQuotaPeriod", "100ms"))
    if not timedelta(milliseconds=1) <= period <= timedelta(seconds=1):
        raise ConfigError(f"cpuCFSQuotaPeriod: {data.get('cpuCFSQuotaPeriod')!r} must be between 1ms and 1s")
    reconcile = _duration("reconcilePeriod", data.get("reconcilePeriod", "10s"))
    resync = _duration("podResyncPeriod", data.get("podResyncPeriod", "5m"))
    for key, value in (("reconcilePeriod", reconcile), ("podResyncPeriod", resync)):
        if value <= timedelta(0):
            raise ConfigError(f"{key}: {data.get(key)!r} must be positive")

    config = AgentConfig(
        cpu_manager_policy=data.get("cpuManagerPolicy", "static"),
        cpu_policy_options=cpu_options,
        cpu_policy_options_raw=MappingProxyType(
            {k: str(v) for k, v in (data.get("cpuManagerPolicyOptions") or {}).items()}
        ),
        memory_manager_policy=data.get("memoryManagerPolicy", "None"),
        topology_manager_policy=data.get("topologyManagerPolicy", "best-effort"),
        topology_manager_scope=data.get("topologyManagerScope", "pod"),
        topology_policy_options=topology_options,
        reserved_system_cpus=reserved_cpus,
        kube_reserved=MappingProxyType(_resource_map("kubeReserved", data.get("kubeReserved") or {})),
        system_reserved=MappingProxyType(_resource_map("systemReserved", data.get("systemReserved") or {})),
        eviction_hard_memory=eviction_memory,
        reserved_memory=_reserved_memory(data.get("reservedMemory", [])),
        cpu_cfs_quota_period_us=period // timedelta(microseconds=1),
        node_name=data.get("nodeName") or env.get("NODE_NAME") or None,
        cgroup_root=Path(data.get("cgroupRoot", "/sys/fs/cgroup")),
        cgroup_driver=data.get("cgroupDriver", "auto"),
        reconcile_period=reconcile.total_seconds(),
        pod_resync_period=resync.total_seconds(),
        state_dir=Path(data.get("stateDir", "/var/lib/podpin")),
        kubelet_cpu_manager_state_path=Path(
            data.get("kubeletCPUManagerStatePath", "/var/lib/kubelet/cpu_manager_state")
        ),
        dry_run=bool(data.get("dryRun", False)),
        metrics_bind_address=data.get("metricsBindAddress", "0.0.0.0:9363"),
        log_level=data.get("logLevel", "info"),
        log_format=data.get("logFormat", "auto"),
        cgroup_watch=data.get("cgroupWatch", "auto"),
        runtime_root=Path(data.get("runtimeRoot", "/")),
    )
    _check_bind_address(config.metrics_bind_address)
    if config.cpu_manager_policy == "static" and config.num_reserved_cpus() == 0:
        raise ConfigError(
            "kubeReserved/systemReserved/reservedSystemCPUs: the static policy requires systemreserved.cpu + "
            "kubereserved.cpu to be greater than zero"
        )
    if config.memory_manager_policy == "Static":
        if sum(e.limits.get("memory", 0) for e in config.reserved_memory) == 0:
            raise ConfigError("reservedMemory: [memorymanager] you should specify the system reserved memory")
        _check_reserved_memory_sums(config, eviction_memory)
    if cpu_options.align_by_socket and config.topology_manager_policy == "single-numa-node":
        raise ConfigError(
            "cpuManagerPolicyOptions: Topology manager single-numa-node policy is incompatible with CPUManager "
            "align-by-socket policy option"
        )
    return config


def _check_bind_address(address: str) -> None:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ConfigError(f"metricsBindAddress: {address!r} is not HOST:PORT")


def load_config(path: Path | None, *, env: Mapping[str, str] | None = None) -> AgentConfig:
    """Read and validate a configuration file (None gives the defaults).

    Raises:
        ConfigError: the file cannot be read, is not YAML, or holds a bad key.
    """
    if path is None:
        return config_from_mapping({}, env=env)
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the configuration file: {err.strerror or err}") from err
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from err
    if data is not None and not isinstance(data, Mapping):
        raise ConfigError(f"{path}: the configuration must be a YAML mapping, got {type(data).__name__}")
    try:
        return config_from_mapping(data, env=env)
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from err
