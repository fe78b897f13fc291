"""The ``nri`` section of podpin's configuration (pure: parsing only, no file or socket access).

Keys, nested under ``nri:`` in the configuration file:

``nri.enabled`` (default ``true``)
    connect to the runtime's NRI socket whenever it exists; ``false`` keeps
    podpin exactly as without NRI.
``nri.socketPath`` (default ``/var/run/nri/nri.sock``)
    the runtime's NRI socket (containerd/nri ``pkg/api/plugin.go``
    ``DefaultSocketPath``), as mounted into podpin's container.
``nri.podWaitTimeout`` (default ``500ms``, at most ``800ms``)
    how long a CreateContainer (or RunPodSandbox) for a pod the API watch has
    not delivered yet waits for it before the container is answered with the
    interim set (and corrected later). The plugin answers each request within
    one second at most (75 % of the runtime's 2 s request timeout), and the
    wait must fit in it with room for the planning.

``agent/config.py`` owns the file: its key table has one row for ``nri``
whose parser is :func:`nri_config_from_mapping`, so a bad value stops the
agent at start naming ``nri.<key>``, like every other key. The defaults are
stated once, on :class:`NRIConfig`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import durationpy

__all__ = [
    "DEFAULT_POD_WAIT",
    "DEFAULT_SOCKET_PATH",
    "MAX_POD_WAIT",
    "NRI_CONFIG_KEYS",
    "NRIConfig",
    "NRIConfigError",
    "nri_config_from_mapping",
]

DEFAULT_SOCKET_PATH = Path("/var/run/nri/nri.sock")
"""Where containerd and CRI-O listen for external NRI plugins by default."""

DEFAULT_POD_WAIT = 0.5
"""Seconds a container of a pod not yet delivered by the API watch waits for it (``nri.podWaitTimeout``)."""

MAX_POD_WAIT = 0.8
"""The longest ``nri.podWaitTimeout``: the answer must leave the plugin's 1 s budget with room to plan."""

NRI_CONFIG_KEYS = ("enabled", "socketPath", "podWaitTimeout")
"""The keys the ``nri`` section may hold."""

_MAX_UNIX_PATH = 107
"""``sun_path`` holds 108 bytes including the terminating NUL."""


class NRIConfigError(ValueError):
    """A bad ``nri`` section; the message names ``nri`` or the key (``nri.socketPath``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NRIConfig:
    """Whether and where podpin connects to the runtime as an NRI plugin."""

    enabled: bool = True
    socket_path: Path = field(default_factory=lambda: DEFAULT_SOCKET_PATH)
    pod_wait: float = DEFAULT_POD_WAIT
    """Seconds (``nri.podWaitTimeout``)."""


def nri_config_from_mapping(value: Mapping[str, Any] | None) -> NRIConfig:
    """Validate the ``nri`` section (``None`` or empty gives the defaults).

    Raises:
        NRIConfigError: naming ``nri`` or the first bad ``nri.<key>``.
    """
    if value is None:
        return NRIConfig()
    if not isinstance(value, Mapping):
        raise NRIConfigError(f"nri: {value!r} is not a map with the keys {', '.join(NRI_CONFIG_KEYS)}")
    unknown = sorted(set(value) - set(NRI_CONFIG_KEYS))
    if unknown:
        raise NRIConfigError(f"nri.{unknown[0]}: unknown key (known keys: {', '.join(NRI_CONFIG_KEYS)})")
    options: dict[str, Any] = {}
    if "enabled" in value:
        enabled = value["enabled"]
        if not isinstance(enabled, bool):
            raise NRIConfigError(f"nri.enabled: {enabled!r} is not true or false")
        options["enabled"] = enabled
    if "socketPath" in value:
        options["socket_path"] = _socket_path(value["socketPath"])
    if "podWaitTimeout" in value:
        options["pod_wait"] = _pod_wait(value["podWaitTimeout"])
    return NRIConfig(**options)


def _pod_wait(value: object) -> float:
    bad = f'nri.podWaitTimeout: {value!r} is not a duration between 0s and {MAX_POD_WAIT * 1000:g}ms such as "500ms"'
    if not isinstance(value, str):
        raise NRIConfigError(bad)
    try:
        seconds = float(durationpy.from_str(value).total_seconds())
    except Exception as err:  # durationpy raises its own exception types
        raise NRIConfigError(bad) from err
    if not 0 <= seconds <= MAX_POD_WAIT:
        raise NRIConfigError(bad)
    return seconds


def _socket_path(path: object) -> Path:
    if not isinstance(path, str) or not path:
        raise NRIConfigError(f"nri.socketPath: {path!r} is not a path")
    if not PurePosixPath(path).is_absolute():
        raise NRIConfigError(f"nri.socketPath: {path!r} is not an absolute path")
    if "\0" in path or len(path.encode()) > _MAX_UNIX_PATH:
        raise NRIConfigError(
            f"nri.socketPath: {path!r} is not usable as a unix socket path (at most {_MAX_UNIX_PATH} bytes)"
        )
    return Path(path)
