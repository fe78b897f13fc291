"""The checkpoint on disk: atomic replace on save, a clear verdict on load, and what to do when either fails.

``save`` writes the JSON into a new temp file next to the target, fsyncs it,
renames it over the old file and fsyncs the directory, so a crash leaves either
the old or the new checkpoint, never half of one (kubelet #84783). ``load``
returns the parsed :class:`NodeState` or a :class:`CheckpointError` saying
exactly what is wrong; whether the state fits the machine is the planner's
check. The rules (``docs/design.md``, "Restart" and "Parsers and their errors"):

* **No symlinks.** Every operation goes through a descriptor of the state
  directory opened with ``O_NOFOLLOW``: the directory itself must not be a
  symlink (someone pointing podpin's writes elsewhere; :meth:`StateStore.check`
  says so at start, and a save or load fails the same way later), the temp file
  is created with ``O_CREAT|O_EXCL|O_NOFOLLOW`` under a fresh random name, and
  the checkpoint is read through :mod:`agent.hostfile` (``O_NOFOLLOW|O_NONBLOCK``,
  regular files only: a FIFO is refused at once, never waited on, issue 22
  finding 4). Directories above the state
  directory are the host's (the hostPath mount) and are not checked.
* **No debris.** A temp file is removed when its write, fsync or rename fails,
  and :meth:`StateStore.clean` removes the ones a crash left behind.
* **Failures are remembered.** A failed save keeps :attr:`StateStore.failure`
  (errno name, message, attempts) and :attr:`StateStore.stale` until a save
  succeeds: the reconciler retries on every pass and the agent reports itself
  not ready meanwhile.
* **Bounded reads.** A checkpoint larger than :data:`MAX_CHECKPOINT_BYTES`, not
  UTF-8, not JSON, nested deeper than a checkpoint ever is, or not a valid
  checkpoint is a :class:`CheckpointError`; :meth:`StateStore.quarantine` then
  renames it ``podpin_state.json.corrupt-<UTC time>`` and keeps the newest
  :data:`KEEP_CORRUPT` of those.

File operations go through a :class:`DiskOps` (``open``, ``write``, ``fsync``,
``replace``), so tests inject ``ENOSPC``, ``EIO`` or ``EROFS`` where they want.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from agent.alloc import CheckpointError, NodeState, state_from_checkpoint, state_to_checkpoint
from agent.hostfile import HOST_OPEN_FLAGS, read_regular
from agent.safeparse import DocumentError, load_json

__all__ = [
    "CHECKPOINT_NAME",
    "KEEP_CORRUPT",
    "MAX_CHECKPOINT_BYTES",
    "DiskOps",
    "StateStore",
    "WriteFailure",
    "errno_name",
]

CHECKPOINT_NAME = "podpin_state.json"
#: Largest checkpoint read (1 MiB): 127 pods with Static memory on 8 NUMA nodes take 94 KB, so a node at the
#: kubelet's 110-pod default has ten times the room; a larger file costs its parse (a list of a million numbers
#: takes about half a second) and is refused instead.
MAX_CHECKPOINT_BYTES = 1 << 20
#: How many ``podpin_state.json.corrupt-*`` files are kept for inspection (the newest).
KEEP_CORRUPT = 5
#: A checkpoint nests 7 deep; anything much deeper is not one (and would cost recursion to check).
_MAX_DEPTH = 16
_TEMP_PREFIX = f".{CHECKPOINT_NAME}."
_TEMP_SUFFIX = ".tmp"
_CORRUPT_PREFIX = f"{CHECKPOINT_NAME}.corrupt-"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | HOST_OPEN_FLAGS


def errno_name(err: OSError) -> str:
    """``ENOSPC`` for an ``OSError`` with that errno; ``OSError`` when it has none (the metric label)."""
    return errno.errorcode.get(err.errno or 0, type(err).__name__)


class DiskOps:
    """The file operations a save makes, relative to the state directory's descriptor (tests fail them)."""

    def open(self, name: str, flags: int, mode: int, dir_fd: int) -> int:
        """``openat(2)``."""
        return os.open(name, flags, mode, dir_fd=dir_fd)

    def write(self, fd: int, data: bytes) -> int:
        """``write(2)``: how many bytes were written."""
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        """``fsync(2)`` of a file or of the directory."""
        os.fsync(fd)

    def replace(self, source: str, target: str, dir_fd: int) -> None:
        """``renameat(2)`` within the directory."""
        os.replace(source, target, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteFailure:
    """The latest failed save: what the kernel said, and how many saves in a row failed.

    Attributes:
        errno_name: ``ENOSPC``, ``EIO``, ``EROFS``... (``OSError`` without an errno).
        message: the error's text, naming the state directory.
        attempts: failed saves since the last good one.
    """

    errno_name: str
    message: str
    attempts: int


class StateStore:
    """Reads and writes ``<state dir>/podpin_state.json``; see the module docstring."""

    def __init__(self, directory: Path, ops: DiskOps | None = None) -> None:
        self.directory = Path(directory)
        self.path = self.directory / CHECKPOINT_NAME
        self.ops = ops if ops is not None else DiskOps()
        #: The latest failed save, until a save succeeds.
        self.failure: WriteFailure | None = None

    @property
    def stale(self) -> bool:
        """True while the file on disk is behind the state the agent holds (the last save failed)."""
        return self.failure is not None

    # -- the directory ---------------------------------------------------------------------------
    def _open_dir(self) -> int:
        try:
            return os.open(self.directory, _DIR_FLAGS)
        except OSError as err:
            if err.errno in (errno.ELOOP, errno.ENOTDIR) and self.directory.is_symlink():
                raise OSError(
                    errno.ELOOP, f"{self.directory} is a symbolic link; the checkpoint is kept only in a real directory"
                ) from err
            raise

    def check(self) -> None:
        """Refuse a state directory that is a symlink (a missing one is fine: the first save creates it).

        Raises:
            OSError: ``ELOOP`` naming the directory.
        """
        if self.directory.is_symlink():
            raise OSError(
                errno.ELOOP, f"{self.directory} is a symbolic link; the checkpoint is kept only in a real directory"
            )

    def clean(self) -> list[str]:
        """Remove the temp files a crash left behind; returns their names (none when there is no directory)."""
        try:
            dir_fd = self._open_dir()
        except OSError:
            return []
        try:
            names = [n for n in os.listdir(dir_fd) if n.startswith(_TEMP_PREFIX) and n.endswith(_TEMP_SUFFIX)]
            for name in names:
                _unlink(name, dir_fd)
            return sorted(names)
        finally:
            os.close(dir_fd)

    # -- load ------------------------------------------------------------------------------------
    def load(self) -> NodeState | None:
        """The saved state, or None when there is no checkpoint yet.

        Raises:
            CheckpointError: the file is unreadable, a symlink, not a regular file,
                too large, not UTF-8, not JSON, too deep, or not a valid checkpoint.
        """
        try:
            data = self._read()
        except FileNotFoundError:
            return None
        except OSError as err:
            reason = "a symbolic link" if err.errno == errno.ELOOP else f"cannot read: {err.strerror or err}"
            raise CheckpointError(f"{self.path}: {reason}") from err
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as err:  # a torn or overwritten file: bytes that are not even text
            raise CheckpointError(
                f"{self.path}: not valid JSON: not UTF-8 text ({err.reason} at byte {err.start})"
            ) from err
        try:
            document = load_json(text, max_depth=_MAX_DEPTH, max_bytes=MAX_CHECKPOINT_BYTES)
        except DocumentError as err:
            raise CheckpointError(f"{self.path}: not valid JSON: {err}") from err
        try:
            return state_from_checkpoint(document)
        except CheckpointError as err:
            raise CheckpointError(f"{self.path}: {err}") from err

    def _read(self) -> bytes:
        dir_fd = self._open_dir()
        try:
            return read_regular(CHECKPOINT_NAME, MAX_CHECKPOINT_BYTES, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)

    # -- save ------------------------------------------------------------------------------------
    def save(self, state: NodeState) -> None:
        """Write the state atomically (new temp file, fsync, rename, fsync the directory).

        On failure the temp file is gone, :attr:`failure` says why, and the old
        checkpoint (if any) is untouched; on success :attr:`failure` is cleared.

        Raises:
            OSError: the directory cannot be written (the errno says why).
        """
        data = _encode(state)
        try:
            self._write(data)
        except OSError as err:
            attempts = self.failure.attempts + 1 if self.failure is not None else 1
            self.failure = WriteFailure(
                errno_name=errno_name(err), message=f"{self.directory}: {err.strerror or err}", attempts=attempts
            )
            raise
        self.failure = None

    def _write(self, data: bytes) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        dir_fd = self._open_dir()
        try:
            temp = f"{_TEMP_PREFIX}{secrets.token_hex(8)}{_TEMP_SUFFIX}"
            fd = self.ops.open(temp, _TEMP_FLAGS, 0o600, dir_fd)
            try:
                try:
                    view = memoryview(data)
                    while view:
                        view = view[self.ops.write(fd, view.tobytes()) :]
                    self.ops.fsync(fd)
                finally:
                    os.close(fd)
                self.ops.replace(temp, CHECKPOINT_NAME, dir_fd)
            except BaseException:
                _unlink(temp, dir_fd)
                raise
            self.ops.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    # -- setting a bad file aside --------------------------------------------------------------------
    def quarantine(self, now: datetime | None = None) -> Path | None:
        """Rename a bad checkpoint ``podpin_state.json.corrupt-<UTC time>``; keep the newest :data:`KEEP_CORRUPT`.

        Returns:
            the new path, or None when there was nothing to move (or it could not be moved).
        """
        when = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S.%fZ")
        target = f"{_CORRUPT_PREFIX}{when}"
        try:
            dir_fd = self._open_dir()
        except OSError:
            return None
        try:
            try:
                os.replace(CHECKPOINT_NAME, target, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except OSError:
                return None
            kept = sorted(n for n in os.listdir(dir_fd) if n.startswith(_CORRUPT_PREFIX))
            for name in kept[:-KEEP_CORRUPT]:
                _remove(name, dir_fd)
        finally:
            os.close(dir_fd)
        return self.directory / target


def _encode(state: NodeState) -> bytes:
    """The checkpoint file's bytes for a state (indented JSON, keys sorted)."""
    return json.dumps(state_to_checkpoint(state), indent=1, sort_keys=True).encode()


def _unlink(name: str, dir_fd: int) -> None:
    """Remove a temp file; one already gone, or a disk that refuses even that, leaves nothing more to do."""
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=dir_fd)


def _remove(name: str, dir_fd: int) -> None:
    """A set-aside checkpoint, file or (when someone made a directory of it) tree; the next quarantine retries."""
    try:
        os.unlink(name, dir_fd=dir_fd)
    except IsADirectoryError:
        shutil.rmtree(name, dir_fd=dir_fd, ignore_errors=True)
    except OSError:
        return
