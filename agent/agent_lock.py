"""The node's "a podpin agent is working here" lock: an ``flock`` on ``<state dir>/podpin.lock``.

``podpin run`` holds it for as long as it runs; ``podpin reset`` takes it for the
whole reset, so neither can start while the other works on the node's cgroups
(an agent would pin again what the reset just widened, and a reset would undo
a running agent's work). The state directory is the one place both share on a
node: the DaemonSet and the uninstall manifest mount the same host directory,
and ``flock`` is kept by the kernel across containers, mount namespaces and PID
namespaces. The kernel drops the lock when the holder exits, however it exits
(SIGKILL included), so a crashed agent never leaves a stale lock behind; the
file itself stays and only says who held it last (``pid``, as that process saw
itself, and the command).

The state directory is a host directory other root processes can write, so the file is opened through
:mod:`agent.hostfile`: a planted ``podpin.lock`` symlink or FIFO is refused (``ELOOP``, ``EINVAL``) instead of
truncating the file it points to or blocking the caller, and the holder's line is read through the same
descriptor, at most :data:`_HOLDER_BYTES`.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path

from agent.hostfile import open_regular

__all__ = ["LOCK_NAME", "AgentLock", "LockHeldError", "acquire_lock"]

LOCK_NAME = "podpin.lock"


class LockHeldError(RuntimeError):
    """Another podpin process holds the node's lock; the message says who last took it."""


class AgentLock:
    """A held lock; :meth:`release` (or process exit) gives it up."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    def release(self) -> None:
        """Give the lock up (idempotent)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


_HOLDER_BYTES = 512
"""The most read of the file's "who took it" line (``pid N, podpin run``)."""


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, _HOLDER_BYTES, 0).decode(errors="replace").strip()
    except OSError:
        return ""
    return f" (last taken by {text})" if text else ""


def acquire_lock(
    directory: Path,
    command: str,
    *,
    wait: float = 0.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> AgentLock:
    """Take ``<directory>/podpin.lock``, waiting up to ``wait`` seconds for its holder to let go.

    Args:
        directory: the state directory (created if missing).
        command: what takes the lock (``podpin run``, ``podpin reset``), written into the file.
        wait: seconds to keep trying while another process holds it.
        sleep, clock: injectable for tests.

    Raises:
        LockHeldError: another process still holds it after ``wait``.
        OSError: the directory or file cannot be created or opened; ``ELOOP``: the file is a symlink;
            ``EINVAL``: it is not a regular file.
    """
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / LOCK_NAME
    fd = open_regular(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = clock() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError as err:
            if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN) or clock() >= deadline:
                holder = _holder(fd)
                os.close(fd)
                if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise LockHeldError(f"{path} is held by another podpin process{holder}") from None
                raise
            sleep(min(0.2, max(0.0, deadline - clock())))
    os.ftruncate(fd, 0)
    os.write(fd, f"pid {os.getpid()}, {command}\n".encode())
    return AgentLock(path, fd)
