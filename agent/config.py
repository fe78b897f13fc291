"""The agent configuration: a YAML file with the kubelet's field names (``docs/design.md``, "Configuration").

Where the concept is the kubelet's, the key is the kubelet's
(``cpuManagerPolicyOptions``, ``topologyManagerScope``, ``reservedMemory`` ...),
so a platform team can copy its ``KubeletConfiguration`` fragment. Unknown keys
and bad values are errors at start, naming the key.

One table, :data:`CONFIG_KEYS`, drives the parsing: each key's name, the field
it fills, its parser and its default (written as it would be in the file, and
parsed like a value from the file), and what it means. The settings the planner
reads land in a :class:`~agent.alloc.PlannerConfig` (``AgentConfig.planner``);
the rest are the agent's own. The checks that need several keys at once run
after the table, in :func:`config_from_mapping`.

Defaults that differ from the kubelet's, on purpose: ``topologyManagerPolicy``
is ``best-effort`` and ``topologyManagerScope`` is ``pod``, because the pod-level
hybrid allocation (KEP-5526) that podpin exists for needs a policy other than
``none`` and, for pod shared pools, the pod scope. And when nothing reserves a
CPU (no ``kubeReserved`` or ``systemReserved`` cpu, no ``reservedSystemCPUs``),
the static policy reserves one (:data:`ASSUMED_RESERVATION`), said in
``AgentConfig.assumed``: the kubelet refuses the static policy without a
reservation, and podpin's own defaults (``podpin run`` without ``--config``)
must be a configuration it accepts. An explicit zero is still refused, as the
kubelet refuses it. Every other default is the kubelet's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Any

import durationpy

from agent.alloc import (
    CPUManagerPolicy,
    MemoryManagerPolicy,
    OptionsError,
    PlannerConfig,
    PlannerError,
    ReservedMemory,
    TopologyManagerPolicy,
    TopologyManagerScope,
    parse_cpu_policy_options,
    parse_topology_policy_options,
)
from agent.cgroups import WatchMode
from agent.config_layers import LAYER_KEYS, LayerError, flatten_layers
from agent.cpuset import CPUSet, CPUSetError
from agent.nri import NRIConfig, NRIConfigError, nri_config_from_mapping
from agent.podresources import DEFAULT_SOCKET
from agent.quantity import QuantityError, cpu_millis, memory_bytes
from agent.runtime.paths import DEFAULT_RUNTIME_PATHS, PRESETS, RuntimePathPreset, RuntimePaths, RuntimePathsError
from agent.safeparse import MAX_DOCUMENT_BYTES, DocumentError, load_yaml
from agent.shortrepr import short_repr

__all__ = [
    "ASSUMED_RESERVATION",
    "CONFIG_KEYS",
    "AgentConfig",
    "ConfigError",
    "ConfigKey",
    "LIVE_KEYS",
    "MAX_CONFIG_BYTES",
    "NRTSettings",
    "NodeAllocatable",
    "config_from_mapping",
    "load_config",
    "node_name_of",
    "read_config_file",
]

#: What the static policy reserves when the configuration reserves no CPU at all, and why (``AgentConfig.assumed``).
ASSUMED_RESERVATION = (
    "systemReserved cpu=1: the static policy needs a reserved CPU and none is configured "
    "(no kubeReserved or systemReserved cpu, no reservedSystemCPUs)"
)


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names the key."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NRTSettings:
    """``nrt``: whether the node's NodeResourceTopology is published, at most how often (seconds), and whether
    podpin takes the object over from another writer (``takeOver``; otherwise it leaves such an object alone)."""

    enabled: bool
    min_interval: float
    take_over: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeAllocatable:
    """What the kubelet keeps of a node's memory from its pods besides the planner's CPUs (Node Allocatable).

    The slice of the configuration ``podpin simulate``'s scheduler reads (``agent/sim/scheduler.py``), with the
    planner's settings; it never sees the rest of :class:`AgentConfig`.

    Attributes:
        reserved_memory: ``kubeReserved`` + ``systemReserved`` memory, in bytes.
        eviction_hard_memory: the ``evictionHard`` ``memory.available`` threshold, in bytes.
    """

    reserved_memory: int
    eviction_hard_memory: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentConfig:
    """Everything the agent is configured with: the planner's settings and the agent's own.

    Built only by :func:`config_from_mapping` (or :func:`load_config`), which
    fills every field from :data:`CONFIG_KEYS`; the defaults live there.
    ``group`` is the node's group section (``agent/config_layers.py``) and
    ``inherited`` the keys taken from the kubelet's own configuration
    (``agent/kubelet_config.py``), both set by :func:`agent.node_config.node_config`.
    """

    planner: PlannerConfig
    kube_reserved: Mapping[str, int]
    system_reserved: Mapping[str, int]
    eviction_hard_memory: int
    node_name: str | None
    cgroup_root: Path
    cgroup_driver: str
    reconcile_period: float
    pod_resync_period: float
    state_dir: Path
    kubelet_cpu_manager_state_path: Path
    dry_run: bool
    metrics_bind_address: str
    state_bind_address: str | None
    log_level: str
    log_format: str
    cgroup_watch: WatchMode
    runtime_root: Path
    pod_resources_socket: Path
    runtime_paths: RuntimePaths = DEFAULT_RUNTIME_PATHS
    nrt: NRTSettings
    nri: NRIConfig
    assumed: tuple[str, ...] = ()
    device_wait_timeout: float = 5.0
    kubelet_config_path: Path | None = None
    group: str | None = None
    inherited: tuple[str, ...] = ()

    @property
    def node_allocatable(self) -> NodeAllocatable:
        """The memory reservations of Node Allocatable, as the simulator's scheduler reads them."""
        return NodeAllocatable(
            reserved_memory=self.kube_reserved.get("memory", 0) + self.system_reserved.get("memory", 0),
            eviction_hard_memory=self.eviction_hard_memory,
        )


Parser = Callable[[str, Any], Any]
"""``(key, value from the file) -> typed value``; raises :class:`ConfigError` naming the key."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigKey:
    """One configuration key: where its value goes, how it is read, its default and its meaning.

    Attributes:
        key: the YAML key.
        field: the :class:`AgentConfig` field it fills, or ``planner.<field>`` for the :class:`PlannerConfig`.
        parse: reads the file's value (or ``default``) into the field's type.
        default: the value when the key is absent, written as in the file.
        doc: one line for people.
    """

    key: str
    field: str
    parse: Parser
    default: Any
    doc: str


# -- parsers ---------------------------------------------------------------------------------
def _choice(names: type[StrEnum] | tuple[str, ...]) -> Parser:
    """A parser accepting exactly the given names (an enum's values, or a tuple of strings)."""
    allowed = tuple(names)

    def parse(key: str, value: Any) -> Any:
        if value not in allowed:
            raise ConfigError(f"{key}: {short_repr(value)} is not one of {', '.join(allowed)}")
        return names(value) if isinstance(names, type) else value

    return parse


def _string(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{key}: {short_repr(value)} is not a string")
    return value


def _path(key: str, value: Any) -> Path:
    return Path(_string(key, value))


def _optional_path(key: str, value: Any) -> Path | None:
    """A path where empty means "none" (``kubeletConfigPath``: then nothing is read)."""
    return Path(_string(key, value)) if _string(key, value) else None


def _optional_string(key: str, value: Any) -> str | None:
    """A string where empty means unset (``nodeName``: then ``$NODE_NAME``)."""
    return _string(key, value) or None


def _bool(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{key}: {short_repr(value)} is not true or false")
    return value


def _map(key: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key}: {short_repr(value)} is not a map")
    return value


def _duration(key: str, value: Any) -> timedelta:
    if not isinstance(value, str):
        raise ConfigError(f'{key}: {short_repr(value)} is not a duration such as "10s"')
    try:
        result: timedelta = durationpy.from_str(value)
    except Exception as err:  # durationpy raises its own exception types
        raise ConfigError(f'{key}: {short_repr(value)} is not a duration such as "10s" ({err})') from err
    return result


def _positive_seconds(key: str, value: Any) -> float:
    period = _duration(key, value)
    if period <= timedelta(0):
        raise ConfigError(f"{key}: {short_repr(value)} must be positive")
    return period.total_seconds()


def _non_negative_seconds(key: str, value: Any) -> float:
    period = _duration(key, value)
    if period < timedelta(0):
        raise ConfigError(f"{key}: {short_repr(value)} must not be negative")
    return period.total_seconds()


def _cfs_period_us(key: str, value: Any) -> int:
    """``cpuCFSQuotaPeriod`` in microseconds; the kernel accepts 1ms to 1s."""
    period = _duration(key, value)
    if not timedelta(milliseconds=1) <= period <= timedelta(seconds=1):
        raise ConfigError(f"{key}: {short_repr(value)} must be between 1ms and 1s")
    return period // timedelta(microseconds=1)


def _options(parse_options: Callable[[Mapping[str, object] | None], Any]) -> Parser:
    """A parser for a kubelet policy option map (the kubelet's own errors, prefixed with the key)."""

    def parse(key: str, value: Any) -> Any:
        try:
            return parse_options(_map(key, value))
        except OptionsError as err:
            raise ConfigError(f"{key}: {err}") from err

    return parse


def _cpuset(key: str, value: Any) -> CPUSet:
    try:
        return CPUSet.parse(_string(key, value))
    except CPUSetError as err:
        raise ConfigError(f"{key}: {err}") from err


def _resource_map(key: str, value: Any) -> Mapping[str, int]:
    """``kubeReserved``/``systemReserved``: cpu in millicores, memory and hugepages in bytes."""
    result: dict[str, int] = {}
    for name, quantity in _map(key, value).items():
        if not isinstance(name, str):
            raise ConfigError(f"{key}: {short_repr(name)} is not a resource name")
        try:
            result[name] = cpu_millis(quantity) if name == "cpu" else memory_bytes(quantity)
        except QuantityError as err:
            raise ConfigError(f"{key}.{name}: {err}") from err
    return MappingProxyType(result)


_EVICTION_SIGNALS = frozenset(
    {
        "memory.available",
        "nodefs.available",
        "nodefs.inodesFree",
        "imagefs.available",
        "imagefs.inodesFree",
        "pid.available",
    }
)

#: The kubelet's hard eviction threshold for memory, also used when ``evictionHard`` is given empty.
_EVICTION_DEFAULT = MappingProxyType({"memory.available": "100Mi"})


def _eviction_memory(key: str, value: Any) -> int:
    """``evictionHard``: the bytes of its ``memory.available`` threshold (0 without one)."""
    signals = dict(_map(key, value)) or dict(_EVICTION_DEFAULT)
    unknown = sorted(set(signals) - _EVICTION_SIGNALS, key=repr)
    if unknown:
        name = unknown[0]
        raise ConfigError(
            f"{key}.{name if isinstance(name, str) and len(name) < 60 else short_repr(name)}: unknown eviction signal"
        )
    if "memory.available" not in signals:
        return 0
    try:
        return memory_bytes(signals["memory.available"])
    except QuantityError as err:
        raise ConfigError(f"{key}.memory.available: {err}") from err


def _reserved_memory(key: str, value: Any) -> tuple[ReservedMemory, ...]:
    if not isinstance(value, list):
        raise ConfigError(f"{key}: {short_repr(value)} is not a list of {{numaNode, limits}}")
    entries: list[ReservedMemory] = []
    seen: set[int] = set()
    for index, item in enumerate(value):
        where = f"{key}[{index}]"
        if not isinstance(item, Mapping) or set(item) - {"numaNode", "limits"}:
            raise ConfigError(f"{where}: {short_repr(item)} must have exactly the keys numaNode and limits")
        node = item.get("numaNode")
        if not isinstance(node, int) or isinstance(node, bool) or node < 0:
            raise ConfigError(f"{where}.numaNode: {short_repr(node)} is not a NUMA node id")
        if node in seen:
            raise ConfigError(f"{where}.numaNode: duplicate entry for NUMA node {node}")
        seen.add(node)
        limits = item.get("limits")
        if not isinstance(limits, Mapping) or not limits:
            raise ConfigError(f"{where}.limits: {short_repr(limits)} is not a non-empty map of memory resources")
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


#: ``runtimePaths``' keys (all optional: a preset's value, else containerd's and CRI-O's defaults).
_RUNTIME_PATH_KEYS = ("preset", "containerdState", "crioRunroot", "crioStorageDriver", "sandboxerDir")


def _runtime_paths(key: str, value: Any) -> RuntimePaths:
    given = _map(key, value)
    unknown = sorted(set(given) - set(_RUNTIME_PATH_KEYS))
    if unknown:
        raise ConfigError(f"{key}.{unknown[0]}: unknown key (known: {', '.join(_RUNTIME_PATH_KEYS)})")
    preset_name = _string(f"{key}.preset", given.get("preset", RuntimePathPreset.DEFAULT))
    try:
        preset = PRESETS[RuntimePathPreset(preset_name)]
    except ValueError:
        raise ConfigError(
            f"{key}.preset: {preset_name!r} is not one of {', '.join(p.value for p in RuntimePathPreset)}"
        ) from None

    def path(name: str, default: PurePosixPath | None) -> PurePosixPath | None:
        return PurePosixPath(_string(f"{key}.{name}", given[name])) if given.get(name) else default

    try:
        return RuntimePaths(
            containerd_state=path("containerdState", preset.containerd_state) or preset.containerd_state,
            crio_runroot=path("crioRunroot", preset.crio_runroot) or preset.crio_runroot,
            crio_storage_driver=_string(f"{key}.crioStorageDriver", given.get("crioStorageDriver"))
            if given.get("crioStorageDriver")
            else preset.crio_storage_driver,
            sandboxer_dir=path("sandboxerDir", preset.sandboxer_dir),
        )
    except RuntimePathsError as err:
        names = {"containerd_state": "containerdState", "crio_runroot": "crioRunroot", "sandboxer_dir": "sandboxerDir"}
        field, _, message = str(err).partition(": ")
        raise ConfigError(f"{key}.{names.get(field, 'crioStorageDriver')}: {message}") from None


#: ``nrt``'s keys and defaults: the table's default for ``nrt``, and what a map that leaves a key out gets.
_NRT_DEFAULT = MappingProxyType({"enabled": False, "minInterval": "5s", "takeOver": False})


def _nrt(key: str, value: Any) -> NRTSettings:
    given = _map(key, value)
    unknown = sorted(set(given) - set(_NRT_DEFAULT))
    if unknown:
        raise ConfigError(f"{key}.{unknown[0]}: unknown key (known: {', '.join(_NRT_DEFAULT)})")
    merged = {**_NRT_DEFAULT, **given}
    interval = _duration(f"{key}.minInterval", merged["minInterval"])
    if interval < timedelta(0):
        raise ConfigError(f"{key}.minInterval: {merged['minInterval']!r} must not be negative")
    return NRTSettings(
        enabled=_bool(f"{key}.enabled", merged["enabled"]),
        min_interval=interval.total_seconds(),
        take_over=_bool(f"{key}.takeOver", merged["takeOver"]),
    )


def _nri(_key: str, value: Any) -> NRIConfig:
    """The ``nri`` section (its own keys and defaults are ``agent.nri.config``'s; errors name ``nri.<key>``)."""
    try:
        return nri_config_from_mapping(value)
    except NRIConfigError as err:
        raise ConfigError(str(err)) from err


def _bind_address(key: str, value: Any) -> str:
    address = _string(key, value)
    _host, sep, port = address.rpartition(":")
    if not sep or not port.isascii() or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ConfigError(f"{key}: {short_repr(address)} is not HOST:PORT")
    return address


def _optional_bind_address(key: str, value: Any) -> str | None:
    """``HOST:PORT``, or empty for "not served"."""
    return _bind_address(key, value) if _string(key, value) else None


# -- the table ---------------------------------------------------------------------------------
def _key(key: str, field: str, parse: Parser, default: Any, doc: str) -> ConfigKey:
    return ConfigKey(key=key, field=field, parse=parse, default=default, doc=doc)


#: Every key the configuration file may hold, in the order they are read.
CONFIG_KEYS: tuple[ConfigKey, ...] = (
    _key(
        "cpuManagerPolicy",
        "planner.cpu_manager_policy",
        _choice(CPUManagerPolicy),
        "static",
        "static pins exclusive CPUs; none only reports",
    ),
    _key(
        "cpuManagerPolicyOptions",
        "planner.cpu_policy_options",
        _options(parse_cpu_policy_options),
        {},
        "the static policy's options, as in the kubelet",
    ),
    _key(
        "memoryManagerPolicy",
        "planner.memory_manager_policy",
        _choice(MemoryManagerPolicy),
        "None",
        "Static adds per-NUMA memory and cpuset.mems",
    ),
    _key(
        "topologyManagerPolicy",
        "planner.topology_manager_policy",
        _choice(TopologyManagerPolicy),
        "best-effort",
        "NUMA alignment: none, best-effort, restricted or single-numa-node (the kubelet's default is none)",
    ),
    _key(
        "topologyManagerScope",
        "planner.topology_manager_scope",
        _choice(TopologyManagerScope),
        "pod",
        "pod (pod bubbles and pod shared pools) or container (the kubelet's default)",
    ),
    _key(
        "topologyManagerPolicyOptions",
        "planner.topology_policy_options",
        _options(parse_topology_policy_options),
        {},
        "prefer-closest-numa-nodes, max-allowable-numa-nodes",
    ),
    _key(
        "reservedSystemCPUs",
        "planner.reserved_system_cpus",
        _cpuset,
        "",
        "CPUs never handed out exclusively (overrides the cpu of kubeReserved and systemReserved)",
    ),
    _key("kubeReserved", "kube_reserved", _resource_map, {}, "ceil(cpu) whole CPUs are reserved; memory for Static"),
    _key("systemReserved", "system_reserved", _resource_map, {}, "as kubeReserved"),
    _key(
        "evictionHard",
        "eviction_hard_memory",
        _eviction_memory,
        dict(_EVICTION_DEFAULT),
        "the memory.available threshold counts into the memory reservation",
    ),
    _key(
        "reservedMemory",
        "planner.reserved_memory",
        _reserved_memory,
        [],
        "per-NUMA memory reservation for Static; must add up as in the kubelet",
    ),
    _key(
        "cpuCFSQuotaPeriod",
        "planner.cpu_cfs_quota_period_us",
        _cfs_period_us,
        "100ms",
        "the period written with cpu.max",
    ),
    _key("nodeName", "node_name", _optional_string, "", "the node this agent serves (empty: $NODE_NAME)"),
    _key("cgroupRoot", "cgroup_root", _path, "/sys/fs/cgroup", "where the cgroup v2 hierarchy is mounted"),
    _key(
        "cgroupDriver",
        "cgroup_driver",
        _choice(("auto", "systemd", "cgroupfs")),
        "auto",
        "how the kubelet names pod cgroups: systemd, cgroupfs, or auto (detected)",
    ),
    _key(
        "reconcilePeriod",
        "reconcile_period",
        _positive_seconds,
        "10s",
        "full resync: drift repair, usage sampling, CPU hotplug check",
    ),
    _key("podResyncPeriod", "pod_resync_period", _positive_seconds, "5m", "full relist of pods from the API server"),
    _key("stateDir", "state_dir", _path, "/var/lib/podpin", "where the checkpoint (podpin_state.json) is kept"),
    _key(
        "kubeletCPUManagerStatePath",
        "kubelet_cpu_manager_state_path",
        _path,
        "/var/lib/kubelet/cpu_manager_state",
        "read to refuse working next to a pinning kubelet",
    ),
    _key(
        "kubeletConfigPath",
        "kubelet_config_path",
        _optional_path,
        "/var/lib/kubelet/config.yaml",
        "the kubelet's own configuration file: its reservations are taken when podpin states none, and podpin "
        "refuses to start next to a kubelet that pins CPUs or reserves others (empty: not read)",
    ),
    _key("dryRun", "dry_run", _bool, False, "decide, log and report; write no cgroup file"),
    _key(
        "metricsBindAddress",
        "metrics_bind_address",
        _bind_address,
        "0.0.0.0:9363",
        "/metrics, /healthz, /readyz (port 0: any free port, logged in agent.started)",
    ),
    _key(
        "stateBindAddress",
        "state_bind_address",
        _optional_bind_address,
        "",
        "/state (the node's pods and their CPUs) on its own address; empty: not served (suggested: 127.0.0.1:9364)",
    ),
    _key("logLevel", "log_level", _choice(("debug", "info", "warning", "error")), "info", "the lowest level logged"),
    _key(
        "logFormat",
        "log_format",
        _choice(("auto", "json", "console")),
        "auto",
        "auto is JSON when not on a terminal",
    ),
    _key(
        "cgroupWatch",
        "cgroup_watch",
        _choice(WatchMode),
        "auto",
        "how new cgroups are noticed: inotify, poll, auto (inotify, else polling) or off (only the resync)",
    ),
    _key(
        "runtimeRoot",
        "runtime_root",
        _path,
        "/",
        "where the runtimes' state is mounted (run/containerd, run/containers): container names from OCI bundles",
    ),
    _key(
        "runtimePaths",
        "runtime_paths",
        _runtime_paths,
        {},
        "{preset: default|k3s|rke2, containerdState, crioRunroot, crioStorageDriver, sandboxerDir}: where the "
        "runtimes keep bundles, as node paths under runtimeRoot (k3s and rke2: containerd state /run/k3s/containerd)",
    ),
    _key(
        "podResourcesSocket",
        "pod_resources_socket",
        _path,
        str(DEFAULT_SOCKET),
        "the kubelet's PodResources API: which devices each container holds (read on nodes with devices)",
    ),
    _key(
        "deviceWaitTimeout",
        "device_wait_timeout",
        _non_negative_seconds,
        "5s",
        "how long a pod requesting devices waits for PodResources to name them before it is admitted without",
    ),
    _key(
        "nrt",
        "nrt",
        _nrt,
        dict(_NRT_DEFAULT),
        "{enabled, minInterval, takeOver}: publish the node's NodeResourceTopology, at most once per minInterval; "
        "takeOver: also when another writer (NFD) manages it",
    ),
    _key("nri", "nri", _nri, {}, "the NRI plugin: enabled, socketPath, podWaitTimeout (agent/nri/config.py)"),
)

_KNOWN = tuple(sorted(k.key for k in CONFIG_KEYS))

#: Keys whose change a running agent follows without a restart: none of them moves a running pod's CPUs. A change
#: of any other key is reported (``config.restart_needed``) and waits for the agent's next start.
LIVE_KEYS = frozenset({"logLevel", "reconcilePeriod", "deviceWaitTimeout"})

#: Largest configuration file read (1 MiB; a real one is a few hundred bytes).
MAX_CONFIG_BYTES = MAX_DOCUMENT_BYTES


# -- checks across keys ------------------------------------------------------------------------
def _check_reserved_memory_sums(config: AgentConfig) -> None:
    """``reservedMemory`` must add up to kube + system reserved (+ eviction-hard for memory), per resource."""
    totals: dict[str, int] = {}
    for entry in config.planner.reserved_memory:
        for name, size in entry.limits.items():
            totals[name] = totals.get(name, 0) + size
    names = set(totals) | {n for n in (*config.kube_reserved, *config.system_reserved) if n != "cpu"}
    names = {n for n in names if n == "memory" or n.startswith("hugepages-")}
    for name in sorted(names):
        expected = config.kube_reserved.get(name, 0) + config.system_reserved.get(name, 0)
        if name == "memory":
            expected += config.eviction_hard_memory
        if totals.get(name, 0) != expected:
            raise ConfigError(
                f'reservedMemory: the total amount {totals.get(name, 0)} of type "{name}" is not equal to the '
                f"value {expected} determined by Node Allocatable (kubeReserved + systemReserved"
                f"{' + evictionHard memory.available' if name == 'memory' else ''})"
            )


def _check(config: AgentConfig) -> None:
    planner = config.planner
    if planner.cpu_manager_policy == CPUManagerPolicy.STATIC and planner.num_reserved_cpus() == 0:
        raise ConfigError(
            "kubeReserved/systemReserved/reservedSystemCPUs: the static policy requires systemreserved.cpu + "
            "kubereserved.cpu to be greater than zero"
        )
    if planner.memory_manager_policy == MemoryManagerPolicy.STATIC:
        if sum(e.limits.get("memory", 0) for e in planner.reserved_memory) == 0:
            raise ConfigError("reservedMemory: [memorymanager] you should specify the system reserved memory")
        _check_reserved_memory_sums(config)
    if (
        planner.cpu_policy_options.align_by_socket
        and planner.topology_manager_policy == TopologyManagerPolicy.SINGLE_NUMA_NODE
    ):
        raise ConfigError(
            "cpuManagerPolicyOptions: Topology manager single-numa-node policy is incompatible with CPUManager "
            "align-by-socket policy option"
        )


def _reserves_no_cpu(data: Mapping[str, Any], policy: CPUManagerPolicy) -> bool:
    """The static policy with no CPU reservation configured at all (an explicit zero counts as configured)."""
    if policy != CPUManagerPolicy.STATIC or data.get("reservedSystemCPUs"):
        return False
    return not any(
        isinstance(data.get(key), Mapping) and "cpu" in data[key] for key in ("kubeReserved", "systemReserved")
    )


# -- entry points ------------------------------------------------------------------------------
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
    unknown = sorted(set(data) - set(_KNOWN), key=repr)  # keys of any YAML type: 1, null, true
    if unknown:
        where = "only in the file, for its sections" if unknown[0] in LAYER_KEYS else f"known keys: {', '.join(_KNOWN)}"
        raise ConfigError(f"unknown configuration key {short_repr(unknown[0])} ({where})")
    planner: dict[str, Any] = {}
    agent: dict[str, Any] = {}
    for entry in CONFIG_KEYS:
        value = entry.parse(entry.key, data.get(entry.key, entry.default))
        section, _, name = entry.field.rpartition(".")
        (planner if section == "planner" else agent)[name] = value
    agent["node_name"] = agent["node_name"] or env.get("NODE_NAME") or None
    if _reserves_no_cpu(data, planner["cpu_manager_policy"]):
        agent["system_reserved"] = MappingProxyType({**agent["system_reserved"], "cpu": 1000})
        agent["assumed"] = (ASSUMED_RESERVATION,)
    planner["reserved_cpu_millis"] = agent["kube_reserved"].get("cpu", 0) + agent["system_reserved"].get("cpu", 0)
    try:
        config = AgentConfig(planner=PlannerConfig(**planner), **agent)
    except PlannerError as err:
        raise ConfigError(str(err)) from err
    _check(config)
    return config


def read_config_file(path: Path) -> dict[str, Any]:
    """The configuration file as a mapping, sections and all (``agent/config_layers.py``), not yet validated.

    The file is read with the bounds of :mod:`agent.safeparse`: at most
    :data:`MAX_CONFIG_BYTES`, aliases expanded within bounds, bounded nesting.

    Raises:
        ConfigError: the file cannot be read, is too large, is not YAML, or not a mapping.
    """
    try:
        with Path(path).open("rb") as file:
            raw = file.read(MAX_CONFIG_BYTES + 1)
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the configuration file: {err.strerror or err}") from err
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES} bytes; not a configuration file")
    try:
        data = load_yaml(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from err
    except DocumentError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from err
    if data is not None and not isinstance(data, Mapping):
        raise ConfigError(f"{path}: the configuration must be a YAML mapping, got {type(data).__name__}")
    return dict(data or {})


def node_name_of(data: Mapping[str, Any], env: Mapping[str, str] | None = None) -> str | None:
    """The node a configuration is for: its ``nodeName``, else ``$NODE_NAME``."""
    env = os.environ if env is None else env
    name = data.get("nodeName")
    return name if isinstance(name, str) and name else env.get("NODE_NAME") or None


def load_config(path: Path | None, *, env: Mapping[str, str] | None = None) -> AgentConfig:
    """Read and validate a configuration file (None gives the defaults) for this node, without its labels.

    The node's section applies (by ``nodeName`` or ``$NODE_NAME``), group sections do not: they need the node's
    labels, which :func:`agent.node_config.node_config` reads for the running agent.

    Raises:
        ConfigError: the file cannot be read, is too large, is not YAML, or holds a bad key.
    """
    if path is None:
        return config_from_mapping({}, env=env)
    data = read_config_file(path)
    try:
        layered = flatten_layers(data, node_name_of(data, env), None)
        return config_from_mapping(layered.mapping, env=env)
    except (ConfigError, LayerError) as err:
        raise ConfigError(f"{path}: {err}") from err
