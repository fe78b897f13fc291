"""The checkpoint on disk: atomic replace on save, a clear verdict on load.

``save`` writes the JSON next to the target, fsyncs it, renames it over the
old file and fsyncs the directory, so a crash leaves either the old or the new
checkpoint, never half of one (kubelet #84783). ``load`` returns the parsed
:class:`NodeState` or a :class:`CheckpointError` saying exactly what is wrong;
whether the state fits the machine is the planner's check.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from agent.alloc import CheckpointError, NodeState, state_from_checkpoint, state_to_checkpoint

__all__ = ["StateStore", "CHECKPOINT_NAME"]

CHECKPOINT_NAME = "podpin_state.json"


class StateStore:
    """Reads and writes ``<state dir>/podpin_state.json``."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.path = self.directory / CHECKPOINT_NAME

    def load(self) -> NodeState | None:
        """The saved state, or None when there is no checkpoint yet.

        Raises:
            CheckpointError: the file is unreadable, not JSON, or not a valid checkpoint.
        """
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return None
        except OSError as err:
            raise CheckpointError(f"{self.path}: cannot read: {err.strerror or err}") from err
        except UnicodeDecodeError as err:  # a torn or overwritten file: bytes that are not even text
            raise CheckpointError(
                f"{self.path}: not valid JSON: not UTF-8 text ({err.reason} at byte {err.start})"
            ) from err
        try:
            document = json.loads(text)
        except ValueError as err:
            raise CheckpointError(f"{self.path}: not valid JSON: {err}") from err
        try:
            return state_from_checkpoint(document)
        except CheckpointError as err:
            raise CheckpointError(f"{self.path}: {err}") from err

    def save(self, state: NodeState) -> None:
        """Write the state atomically (temp file, fsync, rename, fsync the directory).

        Raises:
            OSError: the directory cannot be written.
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        temp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        data = json.dumps(state_to_checkpoint(state), indent=1, sort_keys=True).encode()
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, self.path)
        dir_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def quarantine(self) -> Path | None:
        """Move a corrupt checkpoint aside (``.corrupt``) so it can be inspected; returns the new path."""
        if not self.path.exists():
            return None
        target = self.path.with_name(self.path.name + ".corrupt")
        os.replace(self.path, target)
        return target
