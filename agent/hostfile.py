"""Opening a file under a host directory podpin does not own: never through a symlink, never a FIFO or device.

The node lock and the checkpoint live in a host directory (``stateDir``) that other root processes on the node
can write; the kubelet's state and configuration files and the runtime's bundles are written by others. A
planted symlink there made ``podpin run`` and ``podpin reset`` truncate the file it pointed to (the lock), and
a FIFO in place of the checkpoint blocked the agent in ``open(2)`` before its first log line (issue 22,
findings 3 and 4). Every such file is therefore opened here, one way:

* ``O_NOFOLLOW``: a symlink as the last component fails with ``ELOOP`` (with ``O_CREAT`` too, even dangling);
* ``O_NONBLOCK``: opening a FIFO or a device does not wait for a peer;
* ``fstat`` on the descriptor: anything but a regular file is refused (``EINVAL``, "not a regular file") before
  a byte is read or written;
* reads are bounded: at most ``max_bytes`` (``EFBIG`` beyond), checked against ``st_size`` first and again
  while reading (a file that grows meanwhile).

``O_NONBLOCK`` has no effect on a regular file's reads and writes, so the descriptor is used as usual after the
check. Errors are ``OSError`` with the errno that says why; callers name the file in their own messages.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

__all__ = ["HOST_OPEN_FLAGS", "open_regular", "read_regular", "read_regular_fd"]

HOST_OPEN_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
"""Added to every open of a host file."""

_CHUNK = 1 << 20


def open_regular(path: str | Path, flags: int = os.O_RDONLY, mode: int = 0o644, *, dir_fd: int | None = None) -> int:
    """Open ``path`` (relative to ``dir_fd`` when given) with :data:`HOST_OPEN_FLAGS`; only a regular file.

    Raises:
        OSError: ``ELOOP`` for a symlink, ``EINVAL`` for anything but a regular file, or the open's own error.
    """
    fd = os.open(path, flags | HOST_OPEN_FLAGS, mode, dir_fd=dir_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular_fd(fd: int, max_bytes: int) -> bytes:
    """At most ``max_bytes`` from an open regular file's current offset.

    Raises:
        OSError: ``EFBIG`` when the file holds more.
    """
    too_big = OSError(errno.EFBIG, f"larger than {max_bytes} bytes")
    if os.fstat(fd).st_size > max_bytes:
        raise too_big
    chunks: list[bytes] = []
    size = 0
    while size <= max_bytes:
        chunk = os.read(fd, min(_CHUNK, max_bytes + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > max_bytes:
        raise too_big
    return b"".join(chunks)


def read_regular(path: str | Path, max_bytes: int, *, dir_fd: int | None = None) -> bytes:
    """The whole content of a regular file of at most ``max_bytes`` (:func:`open_regular`, then a bounded read).

    Raises:
        OSError: as :func:`open_regular` and :func:`read_regular_fd`.
    """
    fd = open_regular(path, dir_fd=dir_fd)
    try:
        return read_regular_fd(fd, max_bytes)
    finally:
        os.close(fd)
