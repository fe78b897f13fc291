"""Typed sysfs file reads whose errors start with the file's path, shared by the topology readers.

nri-plugins' ``pkg/sysfs`` keeps the same helpers apart (``utils.go``,
``error.go``): one function per kind of file, each stripping the trailing
newline and raising :class:`SysfsError` with the path in front, so every
message tells the operator which file to look at. Both the CPU and NUMA reader
(:mod:`agent.topology.sysfs`) and the PCI device reader
(:mod:`agent.topology.devices`) use them, which is why they are in a module of
their own: each reader imports this one, and neither imports the other's
internals.
"""

from __future__ import annotations

import os
from pathlib import Path

from agent.cpuset import CPUSet, CPUSetError
from agent.topology.model import TopologyError

__all__ = [
    "SysfsError",
    "exists",
    "list_dir",
    "os_reason",
    "read_cpulist",
    "read_int",
    "read_optional_int",
    "read_str",
]


class SysfsError(TopologyError):
    """A sysfs file that is missing, unreadable or says something impossible.

    The message is ``"<path>: <reason>"`` so that a command can print it as is
    and the operator knows which file to look at.
    """

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def os_reason(err: OSError) -> str:
    """The short reason an operator reads after the path (``no such file``, ``permission denied`` ...)."""
    if isinstance(err, (FileNotFoundError, NotADirectoryError)):
        return "no such file"
    if isinstance(err, PermissionError):
        return "permission denied"
    if isinstance(err, IsADirectoryError):
        return "is a directory"
    return (err.strerror or type(err).__name__).lower()


def read_str(path: Path) -> str:
    """The file's text without its trailing newline."""
    try:
        return path.read_text(encoding="utf-8").rstrip("\n")
    except OSError as err:
        raise SysfsError(path, os_reason(err)) from err
    except UnicodeDecodeError as err:
        raise SysfsError(path, "not UTF-8 text") from err


def read_int(path: Path) -> int:
    """The file's content as one (possibly negative) decimal integer."""
    text = read_str(path).strip()
    try:
        return int(text, 10)
    except ValueError as err:
        raise SysfsError(path, f"not an integer: {text!r}") from err


def read_cpulist(path: Path) -> CPUSet:
    """The file's content as a Linux cpulist (``0-3,8``; empty is the empty set)."""
    text = read_str(path)
    try:
        return CPUSet.parse(text)
    except CPUSetError as err:
        raise SysfsError(path, str(err)) from err


def exists(path: Path) -> bool:
    """Whether ``path`` exists; an unreadable parent is an error naming the path, not False."""
    try:
        return path.exists()
    except OSError as err:
        raise SysfsError(path, os_reason(err)) from err


def read_optional_int(path: Path) -> int | None:
    """Like :func:`read_int`, but None when the file does not exist."""
    return read_int(path) if exists(path) else None


def list_dir(path: Path) -> list[str]:
    """Entry names of a directory (empty when it does not exist)."""
    try:
        return sorted(os.listdir(path))
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as err:
        raise SysfsError(path, os_reason(err)) from err
