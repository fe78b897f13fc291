"""Typed failures of the cgroup layer; every message names the path, file and value involved.

They live in their own module so ``layout``, ``fs`` and ``watch`` can share them
without importing each other. Each class also subclasses the builtin a caller
would naturally catch (``ValueError`` for bad input, ``RuntimeError`` for an
unsupported host), the way attrs' exceptions do.

The writer (:func:`agent.cgroups.fs.CgroupFS.apply`) does not raise per-cgroup
failures: it collects :class:`CgroupFileError`, :class:`EmptyCpusetError`,
:class:`CgroupValueError` and :class:`MismatchError` instances in its report, so
one failing cgroup never stops the others and the caller decides what to log.
"""

from __future__ import annotations

import errno as _errno
import os
from pathlib import Path

__all__ = [
    "CgroupError",
    "CgroupPathError",
    "CgroupV1Error",
    "CgroupDriverError",
    "CgroupValueError",
    "CgroupFileError",
    "CgroupReadError",
    "CgroupWriteError",
    "EmptyCpusetError",
    "MismatchError",
    "errno_name",
    "os_error",
]


class CgroupError(Exception):
    """Base of every failure raised or reported by ``agent.cgroups``."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class CgroupPathError(CgroupError, ValueError):
    """A pod uid, container ID or path that is malformed or would leave the cgroup root."""


class CgroupV1Error(CgroupError, RuntimeError):
    """The cgroup root is not a cgroup v2 (unified) hierarchy."""


class CgroupDriverError(CgroupError, RuntimeError):
    """The kubelet's cgroup driver cannot be determined, or its kubepods cgroup is missing."""


class CgroupValueError(CgroupError, ValueError):
    """A file's content or a desired value that cannot be parsed; names both."""

    def __init__(self, message: str, *, path: Path | None = None, file: str = "", text: str = "") -> None:
        super().__init__(message)
        self.path = path
        self.file = file
        self.text = text


def errno_name(code: int | None) -> str:
    """``"EBUSY"`` for ``errno.EBUSY``; ``"error"`` when there is no errno (a short write...)."""
    if code is None:
        return "error"
    return _errno.errorcode.get(code, f"errno{code}")


class CgroupFileError(CgroupError):
    """Reading or writing one cgroup file failed with an OS error.

    ``errno`` is the OS error number (``None`` when the failure had none),
    ``value`` the text that was being written (``None`` for a read).
    """

    op = "access"

    def __init__(self, *, path: Path, file: str, errno: int | None, detail: str, value: str | None = None) -> None:
        target = f"{path}/{file}"
        shown = f" value {value!r}" if value is not None else ""
        super().__init__(f"{self.op} {target}{shown}: {detail} ({errno_name(errno)})")
        self.path = path
        self.file = file
        self.errno = errno
        self.value = value
        self.detail = detail

    @classmethod
    def from_os_error(cls, error: OSError, *, path: Path, file: str, value: str | None = None) -> CgroupFileError:
        """Wrap an ``OSError``; the detail is its strerror (or its text when it has none)."""
        detail = error.strerror or str(error) or type(error).__name__
        return cls(path=path, file=file, errno=error.errno, detail=detail, value=value)

    @property
    def errno_name(self) -> str:
        """The symbolic errno (``"ENOENT"``), the ``result`` label of the writes metric."""
        return errno_name(self.errno)

    @property
    def vanished(self) -> bool:
        """True when the cgroup (or the file) no longer exists: the container has exited."""
        return self.errno == _errno.ENOENT


class CgroupReadError(CgroupFileError):
    """A cgroup file could not be read."""

    op = "read"


class CgroupWriteError(CgroupFileError):
    """A cgroup file could not be written; nothing else was written to that cgroup afterwards."""

    op = "write"


class EmptyCpusetError(CgroupError, ValueError):
    """A desired ``cpuset.cpus``/``cpuset.mems`` that is empty: writing it would un-pin the cgroup.

    An empty write means "inherit the parent's whole set" on cgroup v2, so it is
    refused and nothing is written to that cgroup.
    """

    def __init__(self, *, path: Path, file: str) -> None:
        super().__init__(f"refused to write an empty {file} to {path}: an empty cpuset un-pins the cgroup")
        self.path = path
        self.file = file


class MismatchError(CgroupError):
    """After writing, ``<file>`` (an ``.effective`` file) differs from the desired set.

    The kernel accepts a child value its parent lacks and silently ignores it,
    so this is how a parent that does not cover its child is noticed.
    """

    def __init__(self, *, path: Path, file: str, desired: str, actual: str) -> None:
        super().__init__(f"{path}/{file} is {actual!r}, expected {desired!r}")
        self.path = path
        self.file = file
        self.desired = desired
        self.actual = actual


def os_error(code: int, detail: str | None = None) -> OSError:
    """An ``OSError`` carrying ``code`` and its strerror (for fault injection and short writes)."""
    return OSError(code, detail if detail is not None else os.strerror(code))
