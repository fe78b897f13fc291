"""PCI devices and their NUMA nodes (udev or sysfs), and CPU online/offline events (udev).

A NIC or GPU is attached to one NUMA node; podpin reports it so that an
operator can see which node a device-heavy pod should land on. Two sources
give the same facts:

* udev (``pyudev``), used only when reading the real ``/sys`` and a udev
  database exists (``/run/udev/data``): udev is the machine's own device
  registry, and ``pyudev.Context`` always enumerates the real ``/sys``, so it
  cannot serve any other root.
* the files ``<root>/bus/pci/devices/<address>/{class,numa_node}`` for any
  other root (fixture trees, ``--sysfs-root``, containers without udev).

Per device, ``class`` is required and ``numa_node`` optional (kernels built
without NUMA have none); ``-1`` (the firmware did not say) and a missing file
both give ``numa=None``. No ``bus/pci/devices`` directory means no devices.
Devices are returned by NUMA node (unknown last), then address, the order of
the JSON contract.

``watch_cpu_hotplug`` is for the agent: it calls back on CPU online/offline
uevents so the topology can be re-read. Only the event translation
(:func:`cpu_hotplug_event`, :func:`cpu_hotplug_handler`) is pure and tested;
the netlink monitor itself needs a live kernel.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pyudev  # type: ignore[import-untyped]

from agent.topology.codec import device_sort_key
from agent.topology.model import Device
from agent.topology.sysfs_files import SysfsError, list_dir, read_optional_int, read_str

__all__ = [
    "CPUHotplugEvent",
    "UdevEvent",
    "UdevPCIDevice",
    "cpu_hotplug_event",
    "cpu_hotplug_handler",
    "devices_from_udev",
    "read_devices",
    "watch_cpu_hotplug",
]

#: Where udevd keeps its database; its presence means udev runs on this machine.
UDEV_DATABASE = Path("/run/udev/data")
#: The real sysfs mount point, the only root pyudev can enumerate.
REAL_SYSFS = Path("/sys")

_CPU_NAME = re.compile(r"^cpu([0-9]+)$")


def _device(address: str, pci_class: str, numa_node: int | None) -> Device:
    return Device(address=address, pci_class=pci_class, numa=None if numa_node is None or numa_node < 0 else numa_node)


def _read_devices_sysfs(root: Path) -> tuple[Device, ...]:
    """PCI devices from ``<root>/bus/pci/devices`` (entries are symlinks on a real machine)."""
    base = root / "bus" / "pci" / "devices"
    devices = [
        _device(name, read_str(base / name / "class").strip(), read_optional_int(base / name / "numa_node"))
        for name in list_dir(base)
    ]
    return tuple(sorted(devices, key=device_sort_key))


class _UdevAttributes(Protocol):
    def get(self, key: str, default: object = None) -> bytes | None: ...


class UdevPCIDevice(Protocol):
    """The part of a ``pyudev.Device`` of subsystem ``pci`` that :func:`devices_from_udev` reads."""

    @property
    def sys_name(self) -> str: ...

    @property
    def sys_path(self) -> str: ...

    @property
    def attributes(self) -> _UdevAttributes: ...


def devices_from_udev(found: Iterable[UdevPCIDevice]) -> tuple[Device, ...]:
    """Translate udev PCI devices (``pyudev.Device`` or alike) into :class:`Device` values.

    Raises:
        SysfsError: a device without a ``class`` attribute, or a ``numa_node``
            that is not an integer (named by its sysfs path).
    """
    devices = []
    for dev in found:
        pci_class = dev.attributes.get("class")
        if pci_class is None:
            raise SysfsError(Path(dev.sys_path) / "class", "no such attribute")
        numa_text = dev.attributes.get("numa_node")
        numa: int | None = None
        if numa_text is not None:
            try:
                numa = int(numa_text.decode().strip(), 10)
            except ValueError as err:
                raise SysfsError(Path(dev.sys_path) / "numa_node", f"not an integer: {numa_text.decode()!r}") from err
        devices.append(_device(dev.sys_name, pci_class.decode().strip(), numa))
    return tuple(sorted(devices, key=device_sort_key))


def _use_udev(root: Path, udev_database: Path) -> bool:
    """True when ``root`` is the real ``/sys`` and udev keeps a database on this machine."""
    return root.resolve() == REAL_SYSFS and udev_database.is_dir()


def read_devices(root: Path) -> tuple[Device, ...]:
    """PCI devices of the sysfs tree at ``root``, with their NUMA nodes.

    Uses udev for the real ``/sys`` when udev runs, else the files under
    ``<root>/bus/pci/devices`` (see the module docstring).

    Raises:
        SysfsError: a device file is missing, unreadable or malformed.
    """
    if _use_udev(root, UDEV_DATABASE):
        return devices_from_udev(pyudev.Context().list_devices(subsystem="pci"))
    return _read_devices_sysfs(root)


# -- CPU hotplug -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class CPUHotplugEvent:
    """A CPU went online or offline; the agent re-reads the topology on it."""

    cpu: int
    online: bool


class UdevEvent(Protocol):
    """The part of a ``pyudev.Device`` from a monitor that the translation reads."""

    @property
    def action(self) -> str | None: ...

    @property
    def sys_name(self) -> str: ...


def cpu_hotplug_event(action: str | None, sys_name: str) -> CPUHotplugEvent | None:
    """The hotplug event for a uevent of subsystem ``cpu``, or None for other events.

    The kernel sends ``online``/``offline`` for ``cpuN`` devices when a CPU is
    brought up or down; ``add``/``remove``/``change`` and non-CPU devices of
    the subsystem (``cpufreq`` policies ...) are not online changes.
    """
    match = _CPU_NAME.match(sys_name)
    if match is None or action not in ("online", "offline"):
        return None
    return CPUHotplugEvent(cpu=int(match.group(1)), online=action == "online")


def cpu_hotplug_handler(callback: Callable[[CPUHotplugEvent], None]) -> Callable[[UdevEvent], None]:
    """A udev monitor callback that passes CPU online/offline events on to ``callback``."""

    def handle(device: UdevEvent) -> None:
        event = cpu_hotplug_event(device.action, device.sys_name)
        if event is not None:
            callback(event)

    return handle


def watch_cpu_hotplug(
    callback: Callable[[CPUHotplugEvent], None], *, context: pyudev.Context | None = None
) -> pyudev.MonitorObserver:
    """Start a background thread calling ``callback`` on every CPU online/offline uevent.

    Listens to the kernel's own uevents (netlink, subsystem ``cpu``) rather
    than udev's re-broadcast: a CPU going on- or offline needs no udev rule
    processing, and the agent's container often has no udevd beside it. It
    needs a real machine (and the host network namespace, where uevents are
    sent); the caller stops it with ``observer.stop()``.

    Args:
        callback: called from the observer thread with each event.
        context: the udev context to use (a new one by default).

    Returns:
        The started ``pyudev.MonitorObserver``.
    """
    monitor = pyudev.Monitor.from_netlink(context if context is not None else pyudev.Context(), source="kernel")
    monitor.filter_by(subsystem="cpu")
    observer = pyudev.MonitorObserver(monitor, callback=cpu_hotplug_handler(callback), name="podpin-cpu-hotplug")
    observer.daemon = True
    observer.start()
    return observer
