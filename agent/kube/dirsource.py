"""The directory source: this node's pods from a directory of manifest files.

For nodes without an API server connection, for ``podpin run --pods-dir`` and
for tests. Parsing is in :mod:`agent.kube.manifests` (pure); this module only
finds the files, notices changes and reports unreadable ones.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from agent.kube.source import Pod, PodEvent
from agent.pods.manifests import MANIFEST_SUFFIXES, MAX_MANIFEST_BYTES, ManifestError, on_node, parse_manifest

try:
    import inotify_simple  # type: ignore[import-untyped]
except ImportError:  # pragma: no cover - the dependency is declared; polling still works without it
    inotify_simple = None

__all__ = ["DirSource"]

_log = structlog.get_logger("podpin.kube.dirsource")


class DirSource:
    """This node's pods from a directory of manifests (``*.yaml``, ``*.yml``, ``*.json``).

    Emits ``SYNC`` at start and whenever the set of pods changes. A file that
    cannot be read or parsed (larger than 1 MiB, YAML anchors or aliases, ...:
    :func:`agent.pods.manifests.parse_manifest`) is reported once per content change — a
    ``source.manifest_error`` log line naming the file and the problem, the
    ``on_error`` callback, and :attr:`source_errors` — and contributes no pods,
    while every other file still counts. Pods whose ``spec.nodeName`` is unset
    or equals ``node_name`` count. Hidden files (``.name``) are ignored, as the
    kubelet's static pod directory does; symlinks (ConfigMap mounts) are
    followed. A pod without ``metadata.uid`` gets a stable uid derived from its
    namespace/name (:func:`agent.kube.manifests.stable_uid`). Two files with the
    same pod: the first in name order counts, the second is reported.

    Changes are noticed through inotify when ``inotify_simple`` is installed
    (within ~50 ms), and by comparing file contents every ``poll_interval``
    seconds in any case, so an event inotify misses is still seen.

    Args:
        directory: the manifest directory (it may appear later; missing is reported).
        node_name: this node.
        poll_interval: seconds between content comparisons.
        on_error: called with each :class:`ManifestError`, from the source's thread.
        use_inotify: False forces polling; None uses inotify when available.
        quiet: report errors only through ``on_error``, without the log line (``podpin reset`` prints its own).
    """

    def __init__(
        self,
        directory: Path | str,
        node_name: str,
        *,
        poll_interval: float = 1.0,
        on_error: Callable[[ManifestError], None] | None = None,
        use_inotify: bool | None = None,
        quiet: bool = False,
    ) -> None:
        if poll_interval <= 0:
            raise ValueError(f"DirSource poll_interval: must be > 0, got {poll_interval!r}")
        if use_inotify and inotify_simple is None:
            raise ValueError("DirSource use_inotify: the inotify_simple package is not installed")
        self._dir = Path(directory)
        self._node = node_name
        self._poll_interval = poll_interval
        self._on_error = on_error
        self._use_inotify = inotify_simple is not None if use_inotify is None else use_inotify
        self._errors = 0
        self._quiet = quiet
        self._files: dict[Path, bytes | None] = {}
        self._parsed: dict[Path, tuple[dict[str, Any], ...]] = {}
        self._missing_reported = False
        self._pods: tuple[Pod, ...] | None = None
        self._listed = False

    @property
    def source_errors(self) -> int:
        """How many manifest errors have been reported so far."""
        return self._errors

    def run(self, emit: Callable[[PodEvent], None], stop: threading.Event) -> None:
        """Emit SYNC now and on every change of the node's pods until ``stop`` is set."""
        waiter = _InotifyWaiter(self._dir) if self._use_inotify else None
        last: tuple[Pod, ...] | None = None
        try:
            while not stop.is_set():
                pods = self.scan()
                # An unlistable directory says nothing about the pods: an empty SYNC
                # would release every pod the agent holds.
                if pods != last and self._listed:
                    emit(PodEvent("SYNC", pods))
                    last = pods
                if waiter is None:
                    stop.wait(self._poll_interval)
                else:
                    waiter.wait(stop, self._poll_interval)
        finally:
            if waiter is not None:
                waiter.close()

    def scan(self) -> tuple[Pod, ...]:
        """Read the directory once; the node's pods in file-name then document order.

        When the directory cannot be listed, the error is reported once and the
        pods of the last successful scan are returned (none before the first).

        Files whose bytes did not change since the last scan are not parsed
        again (nor their errors reported again).
        """
        try:
            paths = sorted(
                p
                for p in self._dir.iterdir()
                if p.suffix in MANIFEST_SUFFIXES and not p.name.startswith(".") and p.is_file()
            )
        except OSError as err:
            if not self._missing_reported:
                self._report(ManifestError(str(self._dir), f"cannot list the directory: {err.strerror or err}"))
                self._missing_reported = True
            self._listed = False
            return self._pods if self._pods is not None else ()
        self._missing_reported = False
        self._listed = True
        changed = self._pods is None
        for gone in set(self._files) - set(paths):
            del self._files[gone]
            self._parsed.pop(gone, None)
            changed = True
        for path in paths:
            problem: ManifestError | None = None
            try:
                data: bytes | None = _read_head(path)
            except OSError as err:
                data, problem = None, ManifestError(str(path), f"cannot read: {err.strerror or err}")
            if path in self._files and self._files[path] == data:
                continue
            self._files[path] = data
            self._parsed.pop(path, None)
            changed = True
            try:
                if problem is not None:
                    raise problem
                self._parsed[path] = parse_manifest(str(path), data or b"")
            except ManifestError as err:
                self._report(err)
        if changed or self._pods is None:
            self._pods = self._collect(paths)
        return self._pods

    def _collect(self, paths: list[Path]) -> tuple[Pod, ...]:
        seen: dict[str, Path] = {}
        pods: list[Pod] = []
        for path in paths:
            for pod in self._parsed.get(path, ()):
                if not on_node(pod, self._node):
                    continue
                metadata = pod.get("metadata")
                uid = str(metadata.get("uid")) if isinstance(metadata, dict) else ""
                if uid and uid in seen:
                    if seen[uid] != path:
                        self._report(
                            ManifestError(str(path), f"pod uid {uid} is already defined in {seen[uid]}; ignored")
                        )
                    continue
                seen[uid] = path
                pods.append(pod)
        return tuple(pods)

    def _report(self, err: ManifestError) -> None:
        self._errors += 1
        if not self._quiet:
            _log.warning("source.manifest_error", node=self._node, file=err.path, error=err.problem)
        if self._on_error is not None:
            self._on_error(err)


def _read_head(path: Path) -> bytes:
    """The file's bytes, but never more than one byte beyond the manifest limit (``parse_manifest`` refuses those)."""
    with path.open("rb") as file:
        return file.read(MAX_MANIFEST_BYTES + 1)


class _InotifyWaiter:
    """Waits for a change in a directory through inotify, or until a timeout."""

    def __init__(self, directory: Path) -> None:
        assert inotify_simple is not None
        flags = inotify_simple.flags
        self._mask = (
            flags.CREATE
            | flags.DELETE
            | flags.MODIFY
            | flags.CLOSE_WRITE
            | flags.MOVED_FROM
            | flags.MOVED_TO
            | flags.ATTRIB
            | flags.DELETE_SELF
            | flags.MOVE_SELF
        )
        self._dir = directory
        self._inotify = inotify_simple.INotify()
        self._wd: int | None = None
        self._arm()

    def _arm(self) -> bool:
        """Watch the directory if it exists; True if the watch was just added."""
        try:
            self._wd = self._inotify.add_watch(str(self._dir), self._mask)
        except OSError:
            return False
        return True

    def wait(self, stop: threading.Event, timeout: float) -> None:
        """Return after a change, ``timeout`` seconds, or soon after ``stop``.

        The watch is added before the caller's first scan (in the constructor),
        so no change between a scan and the wait is missed. While the
        directory is missing this polls; once a watch could be added again it
        returns at once, so the caller rescans what appeared meanwhile.
        """
        if self._wd is None:
            if not self._arm():
                stop.wait(timeout)
            return
        deadline = time.monotonic() + timeout
        while not stop.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            events = self._inotify.read(timeout=int(min(remaining, 0.1) * 1000) + 1, read_delay=20)
            if events:
                if any(e.mask & (inotify_simple.flags.IGNORED | inotify_simple.flags.DELETE_SELF) for e in events):
                    self._wd = None
                return

    def close(self) -> None:
        self._inotify.close()
