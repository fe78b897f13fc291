"""The node's own kubelet configuration file: podpin takes its reservations and refuses to start next to a kubelet
that pins CPUs or reserves other CPUs than podpin.

The kubelet reads a ``KubeletConfiguration`` file (``kubelet.config.k8s.io/v1beta1``; kubeadm writes
``/var/lib/kubelet/config.yaml``). podpin reads the same file, read-only (``kubeletConfigPath``; the chart mounts
the kubelet's directory read-only), for two things (``docs/design.md``, "Configuration"):

* **Reservations without copying them by hand.** When podpin's own configuration reserves no CPU at all (no
  ``reservedSystemCPUs``, no ``cpu`` in ``kubeReserved`` or ``systemReserved``), the kubelet's
  ``reservedSystemCPUs``, ``kubeReserved`` and ``systemReserved`` are taken as they are, with its
  ``reservedMemory`` and ``evictionHard`` where podpin's configuration has none: the scheduler counts the node's
  allocatable CPUs from the kubelet's reservation, and the CPUs podpin hands out exclusively must be those.
* **Refusals, with the reason.** ``cpuManagerPolicy: static`` in the file: the kubelet pins CPUs itself and two
  writers would fight over the cpusets. A reservation podpin's configuration states that differs from the
  kubelet's (another set of ``reservedSystemCPUs``, another number of reserved CPUs): pods the scheduler placed
  by the kubelet's allocatable would be refused by podpin, or CPUs the kubelet reserves handed out.

A missing file is no refusal (a kubelet configured by flags; another path): podpin says so and goes on, and the
``cpu_manager_state`` check (``agent/kubelet_state.py``) still stands back from a pinning kubelet. The parsing
and the comparison are pure; :func:`read_kubelet_config` only reads the bounded file.
"""

from __future__ import annotations

import errno
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from agent.cpuset import CPUSet, CPUSetError
from agent.hostfile import read_regular
from agent.quantity import QuantityError, cpu_millis
from agent.safeparse import MAX_DOCUMENT_BYTES, DocumentError, load_yaml
from agent.shortrepr import short_repr

__all__ = [
    "DEFAULT_KUBELET_CONFIG",
    "KubeletConfig",
    "KubeletConfigError",
    "inherit_reservations",
    "kubelet_disagreement",
    "parse_kubelet_config",
    "read_kubelet_config",
]

#: Where kubeadm (and most installers) put the kubelet's configuration file.
DEFAULT_KUBELET_CONFIG = Path("/var/lib/kubelet/config.yaml")

#: The keys podpin takes from the kubelet when its own configuration reserves no CPU.
_RESERVATION_KEYS = ("reservedSystemCPUs", "kubeReserved", "systemReserved")
#: Memory reservations taken along with them, where podpin's configuration has none.
_MEMORY_KEYS = ("reservedMemory", "evictionHard")


class KubeletConfigError(ValueError):
    """The kubelet's configuration file cannot be read as one; the message names the file."""


@dataclass(frozen=True, slots=True, kw_only=True)
class KubeletConfig:
    """The parts of a ``KubeletConfiguration`` podpin compares and takes, as the file writes them.

    Attributes:
        path: where it was read (for messages).
        cpu_manager_policy: ``cpuManagerPolicy`` (the kubelet's default is ``none``).
        reservations: ``reservedSystemCPUs``, ``kubeReserved``, ``systemReserved``, ``reservedMemory`` and
            ``evictionHard`` where the file sets them, as written.
    """

    path: str
    cpu_manager_policy: str = "none"
    reservations: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def reserved_cpus(self) -> tuple[CPUSet | None, int]:
        """The kubelet's reserved CPUs: the explicit set (or None) and how many CPUs that is.

        Raises:
            KubeletConfigError: a value the kubelet itself would refuse.
        """
        explicit = self.reservations.get("reservedSystemCPUs")
        if explicit:
            try:
                cpus = CPUSet.parse(str(explicit))
            except CPUSetError as err:
                raise KubeletConfigError(f"{self.path}: reservedSystemCPUs: {err}") from err
            return cpus, len(cpus)
        millis = 0
        for key in ("kubeReserved", "systemReserved"):
            section = self.reservations.get(key) or {}
            if "cpu" in section:
                try:
                    millis += cpu_millis(section["cpu"])
                except QuantityError as err:
                    raise KubeletConfigError(f"{self.path}: {key}.cpu: {err}") from err
        return None, -(-millis // 1000)


def parse_kubelet_config(text: str, path: str) -> KubeletConfig:
    """The comparable parts of a ``KubeletConfiguration`` document.

    Raises:
        KubeletConfigError: not YAML (within the bounds of :mod:`agent.safeparse`), not a mapping, or of
            another kind.
    """
    try:
        data = load_yaml(text)
    except DocumentError as err:
        raise KubeletConfigError(f"{path}: not valid YAML: {err}") from err
    if not isinstance(data, Mapping):
        raise KubeletConfigError(f"{path}: not a KubeletConfiguration (a {type(data).__name__})")
    kind = data.get("kind", "KubeletConfiguration")
    if kind != "KubeletConfiguration":
        raise KubeletConfigError(f"{path}: kind {short_repr(kind)}, not KubeletConfiguration")
    policy = data.get("cpuManagerPolicy") or "none"
    if not isinstance(policy, str):
        raise KubeletConfigError(f"{path}: cpuManagerPolicy: {short_repr(policy)} is not a string")
    found = {key: data[key] for key in (*_RESERVATION_KEYS, *_MEMORY_KEYS) if data.get(key) not in (None, "", {}, [])}
    return KubeletConfig(path=path, cpu_manager_policy=policy, reservations=MappingProxyType(found))


def read_kubelet_config(path: Path) -> KubeletConfig | None:
    """The kubelet's configuration file at ``path``, or None when there is none.

    Raises:
        KubeletConfigError: the file is there but cannot be read or parsed.
    """
    try:
        raw = read_regular(path, MAX_DOCUMENT_BYTES)  # no symlink, FIFO or device (agent/hostfile.py)
    except FileNotFoundError:
        return None
    except OSError as err:
        if err.errno == errno.EFBIG:
            raise KubeletConfigError(
                f"{path}: larger than {MAX_DOCUMENT_BYTES} bytes; not a kubelet configuration"
            ) from err
        raise KubeletConfigError(f"{path}: cannot read the kubelet's configuration: {err.strerror or err}") from err
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise KubeletConfigError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from err
    return parse_kubelet_config(text, str(path))


def _reserves_cpu(mapping: Mapping[str, Any]) -> bool:
    """Whether podpin's configuration states any CPU reservation (an explicit zero counts)."""
    if mapping.get("reservedSystemCPUs"):
        return True
    return any(isinstance(mapping.get(key), Mapping) and "cpu" in mapping[key] for key in _RESERVATION_KEYS[1:])


def inherit_reservations(mapping: Mapping[str, Any], kubelet: KubeletConfig) -> tuple[dict[str, Any], tuple[str, ...]]:
    """podpin's configuration with the kubelet's reservations where it states none; and the keys taken.

    Nothing is taken when podpin's configuration reserves a CPU itself (it is then compared instead, by
    :func:`kubelet_disagreement`), nor when the kubelet reserves no CPU either.
    """
    merged = dict(mapping)
    if _reserves_cpu(mapping) or kubelet.reserved_cpus()[1] == 0:
        return merged, ()
    taken = []
    for key in (*_RESERVATION_KEYS, *_MEMORY_KEYS):
        if key in kubelet.reservations and key not in {k for k, v in mapping.items() if v not in (None, "", {}, [])}:
            merged[key] = kubelet.reservations[key]
            taken.append(key)
    return merged, tuple(taken)


def kubelet_disagreement(
    kubelet: KubeletConfig, reserved_system_cpus: CPUSet, reserved_count: int, *, assumed: bool
) -> str | None:
    """Why podpin must not start next to this kubelet, or None.

    Args:
        kubelet: the kubelet's configuration.
        reserved_system_cpus: podpin's ``reservedSystemCPUs`` (empty when unset).
        reserved_count: how many CPUs podpin reserves.
        assumed: podpin's reservation is the one it assumes when nothing reserves a CPU (never a disagreement:
            the kubelet reserves none, podpin needs one, and says so in ``config.assumed``).
    """
    if kubelet.cpu_manager_policy.lower() == "static":
        return (
            f"the kubelet pins CPUs itself (cpuManagerPolicy: static in {kubelet.path}): two writers would fight "
            "over the cpusets; set cpuManagerPolicy: none on this node (drain, remove cpu_manager_state, restart the "
            "kubelet) or do not run podpin here"
        )
    if assumed:
        return None
    theirs, count = kubelet.reserved_cpus()
    if theirs is not None and reserved_system_cpus and theirs != reserved_system_cpus:
        return (
            f"the kubelet reserves CPUs {theirs} (reservedSystemCPUs in {kubelet.path}) and podpin reserves CPUs "
            f"{reserved_system_cpus}: podpin would hand out CPUs the kubelet keeps for the system; give podpin the "
            "kubelet's value, or leave podpin's reservations unset to take the kubelet's"
        )
    if count != reserved_count:
        return (
            f"the kubelet reserves {count} CPU(s) ({_what(kubelet)} in {kubelet.path}) and podpin reserves "
            f"{reserved_count}: the scheduler counts the node's CPUs from the kubelet's reservation, so podpin would "
            "refuse pods it placed or give away reserved CPUs; give podpin the kubelet's values, or leave podpin's "
            "reservations unset to take the kubelet's"
        )
    return None


def _what(kubelet: KubeletConfig) -> str:
    stated = [key for key in _RESERVATION_KEYS if key in kubelet.reservations]
    return ", ".join(stated) if stated else "no reservation"
