"""Guest side: inotify through libc's three syscalls, so a scenario needs no third-party package.

The agent's watcher (``agent/cgroups/watch.py``) uses a library; this probe exists to measure what the
kernel itself delivers on cgroup2 directories and files (``IN_CREATE``/``IN_DELETE`` for child cgroups,
``IN_MODIFY`` on ``cgroup.events``), independent of that library.
"""

from __future__ import annotations

import ctypes
import os
import select
import struct
from pathlib import Path

__all__ = ["IN_CREATE", "IN_DELETE", "IN_ISDIR", "IN_MODIFY", "Inotify"]

IN_MODIFY = 0x00000002
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_ISDIR = 0x40000000
_EVENT = struct.Struct("iIII")
"""``struct inotify_event`` without its name: wd, mask, cookie, len."""


class Inotify:
    """An inotify instance (non-blocking, close-on-exec) read with ``select`` and a timeout."""

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")

    def watch(self, path: Path, mask: int) -> int:
        """Add a watch for ``mask`` events on ``path``; returns the watch descriptor."""
        wd = self._libc.inotify_add_watch(self.fd, str(path).encode(), mask)
        if wd < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {path}")
        return int(wd)

    def read(self, timeout: float) -> list[tuple[int, int, str]]:
        """Events available within ``timeout`` s: (wd, mask, name)."""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return []
        data = os.read(self.fd, 65536)
        events, offset = [], 0
        while offset < len(data):
            wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
            name = data[offset + _EVENT.size : offset + _EVENT.size + length].rstrip(b"\0").decode()
            events.append((wd, mask, name))
            offset += _EVENT.size + length
        return events

    def close(self) -> None:
        """Close the inotify descriptor (removes every watch)."""
        os.close(self.fd)
