"""Where a command gets its topology: a saved ``podpin topology`` JSON file, or a sysfs tree.

Shared by ``podpin plan``, ``run`` and ``simulate`` so they accept the same
``--topology FILE`` / ``--sysfs-root DIR`` pair and fail with the same one-line
errors naming the path.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

from agent.topology.codec import topology_from_dict
from agent.topology.model import Topology, TopologyError
from agent.topology.sysfs import SysfsError, read_topology

__all__ = ["load_topology", "machine_name", "DEFAULT_SYSFS_ROOT"]

#: Where sysfs is mounted on a Linux machine.
DEFAULT_SYSFS_ROOT = Path("/sys")


def _read_json(topology_file: Path) -> object:
    try:
        return json.loads(Path(topology_file).read_text())
    except OSError as err:
        raise TopologyError(f"{topology_file}: cannot read: {err.strerror or err}") from err
    except ValueError as err:
        raise TopologyError(f"{topology_file}: not valid JSON: {err}") from err


def machine_name(topology_file: Path | None, sysfs_root: Path = DEFAULT_SYSFS_ROOT) -> str | None:
    """The name of the machine a topology describes: a saved file's ``hostname``, this host's name for its own
    ``/sys``; None when nothing says (a sysfs copy, a file saved without one).

    Raises:
        TopologyError: the file cannot be read or parsed.
    """
    if topology_file is not None:
        data = _read_json(topology_file)
        name = data.get("hostname") if isinstance(data, dict) else None
        return name if isinstance(name, str) and name else None
    return socket.gethostname() if Path(sysfs_root) == DEFAULT_SYSFS_ROOT else None


def load_topology(topology_file: Path | None, sysfs_root: Path = DEFAULT_SYSFS_ROOT) -> Topology:
    """The topology from ``topology_file`` (JSON of ``podpin topology``) if given, else from ``sysfs_root``.

    Raises:
        TopologyError: the file cannot be read or parsed, or the sysfs tree is unusable;
            the message starts with the path.
    """
    if topology_file is not None:
        data = _read_json(topology_file)
        try:
            return topology_from_dict(data)
        except TopologyError as err:
            raise TopologyError(f"{topology_file}: {err}") from err
    try:
        return read_topology(Path(sysfs_root))
    except SysfsError as err:
        raise TopologyError(str(err)) from err
    except TopologyError as err:
        raise TopologyError(f"{sysfs_root}: {err}") from err
