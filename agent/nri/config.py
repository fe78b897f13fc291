"""The ``nri`` section of podpin's configuration (pure: parsing only, no file or socket access).

Keys (issue 8), nested under ``nri:`` in the configuration file:

``nri.enabled`` (default ``true``)
    connect to the runtime's NRI socket whenever it exists; ``false`` keeps
    podpin exactly as without NRI.
``nri.socketPath`` (default ``/var/run/nri/nri.sock``)
    the runtime's NRI socket (containerd/nri ``pkg/api/plugin.go``
    ``DefaultSocketPath``), as mounted into podpin's container.

The agent's ``config_from_mapping`` owns the file; the integrator adds ``nri``
to its known keys and calls :func:`nri_config_from_mapping` with the value, so
a bad value stops the agent at start naming ``nri.<key>``, like every other key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

__all__ = ["DEFAULT_SOCKET_PATH", "NRIConfig", "NRI_CONFIG_KEYS", "nri_config_from_mapping"]

DEFAULT_SOCKET_PATH = Path("/var/run/nri/nri.sock")
"""Where containerd and CRI-O listen for external NRI plugins by default."""

NRI_CONFIG_KEYS = ("enabled", "socketPath")
"""The keys the ``nri`` section may hold."""

_MAX_UNIX_PATH = 107
"""``sun_path`` holds 108 bytes including the terminating NUL."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NRIConfig:
    """Whether and where podpin connects to the runtime as an NRI plugin."""

    enabled: bool = True
    socket_path: Path = field(default_factory=lambda: DEFAULT_SOCKET_PATH)


def nri_config_from_mapping(value: Mapping[str, Any] | None) -> NRIConfig:
    """Validate the ``nri`` section (``None`` or empty gives the defaults).

    Raises:
        ValueError: naming ``nri`` or the first bad ``nri.<key>``.
    """
    if value is None:
        return NRIConfig()
    if not isinstance(value, Mapping):
        raise ValueError(f"nri: {value!r} is not a map with the keys {', '.join(NRI_CONFIG_KEYS)}")
    unknown = sorted(set(value) - set(NRI_CONFIG_KEYS))
    if unknown:
        raise ValueError(f"nri.{unknown[0]}: unknown key (known keys: {', '.join(NRI_CONFIG_KEYS)})")
    enabled = value.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ValueError(f"nri.enabled: {enabled!r} is not true or false")
    path = value.get("socketPath", str(DEFAULT_SOCKET_PATH))
    if not isinstance(path, str) or not path:
        raise ValueError(f"nri.socketPath: {path!r} is not a path")
    if not PurePosixPath(path).is_absolute():
        raise ValueError(f"nri.socketPath: {path!r} is not an absolute path")
    if "\0" in path or len(path.encode()) > _MAX_UNIX_PATH:
        raise ValueError(
            f"nri.socketPath: {path!r} is not usable as a unix socket path (at most {_MAX_UNIX_PATH} bytes)"
        )
    return NRIConfig(enabled=enabled, socket_path=Path(path))
