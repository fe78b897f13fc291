"""The ``nri`` section of podpin's configuration (pure: parsing only, no file or socket access).

Keys, nested under ``nri:`` in the configuration file:

``nri.enabled`` (default ``true``)
    connect to the runtime's NRI socket whenever it exists; ``false`` keeps
    podpin exactly as without NRI.
``nri.socketPath`` (default ``/var/run/nri/nri.sock``)
    the runtime's NRI socket (containerd/nri ``pkg/api/plugin.go``
    ``DefaultSocketPath``), as mounted into podpin's container.

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

__all__ = ["DEFAULT_SOCKET_PATH", "NRI_CONFIG_KEYS", "NRIConfig", "NRIConfigError", "nri_config_from_mapping"]

DEFAULT_SOCKET_PATH = Path("/var/run/nri/nri.sock")
"""Where containerd and CRI-O listen for external NRI plugins by default."""

NRI_CONFIG_KEYS = ("enabled", "socketPath")
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
    return NRIConfig(**options)


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
