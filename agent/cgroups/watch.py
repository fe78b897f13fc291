"""Notice new and removed pod and container cgroups, and rewrites of the files podpin manages, within
milliseconds (inotify), or by polling.

The agent must pin a new container before its workload settles on the wrong
CPUs, so it learns about a container cgroup from the kernel (inotify on the
kubepods tree, as koordlet's PLEG does) rather than waiting for the API server.

Watched directories: kubepods, the burstable and besteffort levels, and every
pod cgroup (a new pod directory is watched as soon as it appears; its existing
children are then listed, so a container created in between is not missed).
Every known container cgroup is watched too, for ``IN_MODIFY`` only: a write to
its ``cpuset.cpus``, ``cpuset.mems`` or ``cpu.max`` is reported as
:class:`CgroupFileChanged` (other files are dropped at the name check). runc
applies the OCI spec's resources after podpin pinned a new container (its
``cpu.max`` quota back over podpin's ``max``), ``runc update`` after an in-place
resize; the reconciler re-applies that container at once instead of at the next
full pass. podpin's own writes are reported too (the kernel cannot tell writers
apart); the re-apply they cause reads and writes nothing. A container directory
whose watch cannot be added (the watch limit, ``ENOSPC``) is reported and known
as usual, only without file events: it is counted in
:attr:`CgroupWatcher.unwatched_containers` (the first reason kept in
:attr:`CgroupWatcher.unwatched_reason`) and the watcher stays in inotify mode,
the periodic full pass repairs that container. A removed cgroup2 directory's
own watch hears nothing (no ``IN_DELETE_SELF``/``IN_IGNORED`` on 6.1,
``tests/vm/test_kernel_facts.py``): the watch would stay, holding a slot of the
watch limit, so a container's watch is removed when its pod's watch reports it
gone (as a pod's is); an ``IN_IGNORED`` that does come forgets the watch.
Polling reports no :class:`CgroupFileChanged`: there the periodic full pass is
the only repair.

Directory names are parsed with :class:`~agent.cgroups.layout.CgroupLayout` for
both drivers and the three runtimes; CRI-O's ``crio-conmon-*`` cgroups, other
names and plain files are ignored.

When inotify is unavailable (no inotify_simple, no inotify in the kernel, the
watch limit ``fs.inotify.max_user_watches`` reached) the watcher polls the same
tree every ``poll_interval`` seconds and says so in :attr:`CgroupWatcher.mode`
and :attr:`CgroupWatcher.fallback_reason`. An inotify queue overflow triggers a
full re-scan, so no event is lost for good.

``start()`` registers the watches and reports what already exists (one
"appeared" event per pod and container, parents first) before returning; from
then on events come from the watcher thread. The sink must be quick and must
not raise (an exception ends the thread and is kept in :attr:`CgroupWatcher.error`).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import select
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Literal, Protocol

from agent.cgroups.layout import CgroupLayout, scan
from agent.cgroups.values import CPU_MAX, CPUS, MEMS
from agent.fault_boundary import FaultBoundary, Stage
from agent.vocabulary import PodUID, QOSClass, Runtime

__all__ = [
    "WatchMode",
    "PodCgroupAppeared",
    "ContainerCgroupAppeared",
    "CgroupRemoved",
    "CgroupFileChanged",
    "MANAGED_FILES",
    "WatchEvent",
    "Sink",
    "CgroupWatcher",
    "INotifyLike",
]

# inotify(7) flags (linux/inotify.h); inotify_simple.flags has the same values.
_IN_MODIFY = 0x2
_IN_MOVED_FROM, _IN_MOVED_TO, _IN_CREATE, _IN_DELETE = 0x40, 0x80, 0x100, 0x200
_IN_Q_OVERFLOW, _IN_IGNORED, _IN_ONLYDIR, _IN_ISDIR = 0x4000, 0x8000, 0x01000000, 0x40000000
_MASK = _IN_CREATE | _IN_DELETE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_ONLYDIR
_FILE_MASK = _IN_MODIFY | _IN_ONLYDIR
"""A container directory: writes to its files (its removal is seen by its pod's watch, which removes this one)."""

MANAGED_FILES = frozenset({CPUS, MEMS, CPU_MAX})
"""The files of a container cgroup whose modification is reported (the ones podpin writes)."""


class WatchMode(StrEnum):
    """``cgroupWatch``: how new cgroups are noticed between the periodic resyncs."""

    AUTO = "auto"
    INOTIFY = "inotify"
    POLL = "poll"
    OFF = "off"


@dataclass(frozen=True, slots=True, kw_only=True)
class PodCgroupAppeared:
    """A pod cgroup exists (``qos`` is the level its directory is in)."""

    uid: PodUID
    qos: QOSClass
    path: Path


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerCgroupAppeared:
    """A container (or sandbox) cgroup exists; ``runtime`` is None when the name does not tell."""

    uid: PodUID
    container_id: str
    runtime: Runtime | None
    path: Path


@dataclass(frozen=True, slots=True, kw_only=True)
class CgroupRemoved:
    """A pod or container cgroup is gone (containers are reported before their pod)."""

    path: Path


@dataclass(frozen=True, slots=True, kw_only=True)
class CgroupFileChanged:
    """Something wrote ``file`` (one of :data:`MANAGED_FILES`) of a known container cgroup: runc applying the
    spec's resources after podpin pinned it, ``runc update``, an operator, or podpin itself (inotify only)."""

    uid: PodUID
    container_id: str
    path: Path
    file: str


WatchEvent = PodCgroupAppeared | ContainerCgroupAppeared | CgroupRemoved | CgroupFileChanged
"""What the watcher reports."""

Sink = Callable[[WatchEvent], None]
"""Receives every event, in order, from one thread at a time."""

_Node = QOSClass | PodCgroupAppeared | ContainerCgroupAppeared
"""A known directory: a QoS level (kubepods is the Guaranteed one), a pod or a container."""


class _InotifyError(Exception):
    """inotify stopped working (watch limit, closed descriptor): switch to polling."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


class _RawEvent(Protocol):
    wd: int
    mask: int
    name: str


class INotifyLike(Protocol):
    """The part of ``inotify_simple.INotify`` the watcher uses (tests substitute it)."""

    def fileno(self) -> int: ...
    def add_watch(self, path: Path, mask: int, /) -> int: ...
    def rm_watch(self, wd: int, /) -> None: ...
    def read(self, timeout: int | None = None, /) -> Iterable[_RawEvent]: ...
    def close(self) -> None: ...


def _default_inotify() -> INotifyLike:
    try:
        import inotify_simple  # type: ignore[import-untyped]
    except ImportError as error:
        raise OSError(errno.ENOSYS, f"inotify_simple is not installed ({error})") from error
    ino: INotifyLike = inotify_simple.INotify()
    return ino


def _snapshot(layout: CgroupLayout) -> dict[Path, _Node]:
    """Every QoS level, pod and container cgroup that exists now, parents before children."""
    nodes: dict[Path, _Node] = {}
    for qos in QOSClass:
        if layout.qos_dir(qos).is_dir():
            nodes[layout.qos_dir(qos)] = qos
    for pod in scan(layout):
        nodes[pod.path] = PodCgroupAppeared(uid=pod.uid, qos=pod.qos, path=pod.path)
        for c in pod.containers:
            nodes[c.path] = ContainerCgroupAppeared(uid=pod.uid, container_id=c.id, runtime=c.runtime, path=c.path)
    return nodes


class CgroupWatcher:
    """Reports pod and container cgroups appearing and disappearing under kubepods.

    Args:
        layout: the node's cgroup layout.
        sink: called with each :data:`WatchEvent`.
        mode: ``auto`` (inotify, else polling), ``inotify`` (fail if unavailable) or ``poll``; ``off`` is
            the caller's to honour, by never starting the watcher.
        poll_interval: seconds between scans in polling mode.
        timeout: the longest the thread waits before checking the stop event
            (stop also wakes it at once through a pipe).
        inotify_factory: builds the inotify instance (tests inject failures).
    """

    def __init__(
        self,
        layout: CgroupLayout,
        sink: Sink,
        *,
        mode: WatchMode = WatchMode.AUTO,
        poll_interval: float = 1.0,
        timeout: float = 0.5,
        inotify_factory: Callable[[], INotifyLike] = _default_inotify,
    ) -> None:
        self.layout = layout
        self._sink = sink
        self._requested = mode
        self.poll_interval = poll_interval
        self.timeout = timeout
        self._factory = inotify_factory
        self.mode: WatchMode | Literal["stopped"] = "stopped"
        self.fallback_reason: str | None = None
        self.error: Exception | None = None
        self.unwatched_containers = 0
        """Container cgroups whose file watch could not be added (no :class:`CgroupFileChanged` for them)."""
        self.unwatched_reason: str | None = None
        """Why the first of them could not be watched (e.g. the watch limit); None while every one is."""
        self.boundary: FaultBoundary | None = None
        """Where an unexpected failure with one directory stops (that event only); None: it ends the thread."""
        self._ino: INotifyLike | None = None
        self._known: dict[Path, _Node] = {}
        self._wds: dict[int, Path] = {}
        self._stop = threading.Event()
        self._wake_r, self._wake_w = -1, -1
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        """Set up watches (or the first scan), report existing cgroups, start the thread."""
        if self._requested != WatchMode.POLL:
            try:
                self._ino = self._factory()
                self.mode = WatchMode.INOTIFY
                self._adopt(self.layout.kubepods(), QOSClass.GUARANTEED)
            except (OSError, _InotifyError) as failure:
                error = failure.error if isinstance(failure, _InotifyError) else failure
                self._close_inotify()
                if self._requested == WatchMode.INOTIFY:
                    raise error from None
                self._fall_back(error)
        if self._ino is None:
            self.mode = WatchMode.POLL
            self._resync()
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._run, name="podpin-cgroup-watch", daemon=True)
        self._thread.start()

    def stop(self, join_timeout: float = 2.0) -> bool:
        """Stop the thread; True when it ended within ``join_timeout`` seconds."""
        self._stop.set()
        if self._wake_w >= 0:
            os.write(self._wake_w, b"x")
        if self._thread is not None:
            self._thread.join(join_timeout)
            if self._thread.is_alive():
                return False
        self._close_inotify()
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                os.close(fd)
        self._wake_r = self._wake_w = -1
        self.mode = "stopped"
        return True

    def __enter__(self) -> CgroupWatcher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            if self._ino is not None:
                try:
                    self._inotify_loop()
                except _InotifyError as failure:
                    self._fall_back(failure.error)
                    self._resync()
            while not self._stop.wait(self.poll_interval):
                self._guarded(self._resync, "a rescan of the kubepods tree")
        except Exception as error:  # the sink's or the filesystem's: keep it for health checks
            self.error = error

    def _fall_back(self, error: OSError) -> None:
        self._close_inotify()
        self.mode = WatchMode.POLL
        self.fallback_reason = f"inotify unavailable: {error.strerror or error}"

    def _close_inotify(self) -> None:
        if self._ino is not None:
            self._ino.close()
        self._ino = None
        self._wds.clear()

    # -- inotify -----------------------------------------------------------------------
    def _inotify_loop(self) -> None:
        assert self._ino is not None
        poller = select.poll()
        poller.register(self._ino.fileno(), select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        while not self._stop.is_set():
            if not poller.poll(self.timeout * 1000) or self._stop.is_set():
                continue
            try:
                events = list(self._ino.read(0))
            except OSError as error:
                raise _InotifyError(error) from error
            for event in events:
                self._guarded(functools.partial(self._handle, event), f"the event of {event.name!r}")

    def _guarded(self, work: Callable[[], None], subject: str) -> None:
        """``work`` inside the cgroup-directory fault boundary (``agent/fault_boundary.py``); inotify failures
        still end the inotify loop (the watcher falls back to polling)."""
        try:
            work()
        except _InotifyError:
            raise
        except Exception as err:
            if self.boundary is None:
                raise
            self.boundary.caught(Stage.CGROUP, err, subject)

    def _handle(self, event: _RawEvent) -> None:
        if event.mask & _IN_Q_OVERFLOW:
            self._resync()
            return
        if event.mask & _IN_IGNORED:
            self._wds.pop(event.wd, None)
            return
        if event.mask & _IN_MODIFY:
            if event.name in MANAGED_FILES:  # first: most writes to a container's files are not podpin's files
                self._file_changed(event.wd, event.name)
            return
        parent = self._wds.get(event.wd)
        if parent is None or not event.mask & _IN_ISDIR:
            return
        path = parent / event.name
        if event.mask & (_IN_CREATE | _IN_MOVED_TO):
            node = self._classify(parent, event.name)
            if node is not None and path not in self._known:
                self._adopt(path, node)
        elif event.mask & (_IN_DELETE | _IN_MOVED_FROM):
            self._forget(path)

    def _file_changed(self, wd: int, name: str) -> None:
        path = self._wds.get(wd)
        node = self._known.get(path) if path is not None else None
        if isinstance(node, ContainerCgroupAppeared):
            self._sink(CgroupFileChanged(uid=node.uid, container_id=node.container_id, path=node.path, file=name))

    # -- the known tree ----------------------------------------------------------------
    def _classify(self, parent: Path, name: str) -> _Node | None:
        """What ``parent/name`` is, judged from its parent and its name; None to ignore it."""
        above = self._known.get(parent)
        path = parent / name
        if isinstance(above, QOSClass):
            if above is QOSClass.GUARANTEED:
                for level in (QOSClass.BURSTABLE, QOSClass.BESTEFFORT):
                    if path == self.layout.qos_dir(level):
                        return level
            uid = self.layout.parse_pod_dir(above, name)
            return None if uid is None else PodCgroupAppeared(uid=uid, qos=above, path=path)
        if isinstance(above, PodCgroupAppeared):
            parsed = self.layout.parse_container_dir(name)
            if parsed is not None:
                return ContainerCgroupAppeared(uid=above.uid, container_id=parsed[1], runtime=parsed[0], path=path)
        return None

    def _adopt(self, path: Path, node: _Node) -> None:
        """Record a new directory, watch it (a container: its files), report it, list it if it holds cgroups."""
        container = isinstance(node, ContainerCgroupAppeared)
        watched = self._ino is not None and not container
        if watched:
            assert self._ino is not None
            try:
                self._wds[self._ino.add_watch(path, _MASK)] = path
            except OSError as error:
                if error.errno in (errno.ENOENT, errno.ENOTDIR):
                    return  # removed again before we looked; its DELETE event follows
                raise _InotifyError(error) from error
        elif container and self._ino is not None:
            self._watch_files(path)
        self._known[path] = node
        if not isinstance(node, QOSClass):
            self._sink(node)
        if watched:
            try:
                names = sorted(e.name for e in os.scandir(path) if e.is_dir(follow_symlinks=False))
            except FileNotFoundError:
                names = []
            for name in names:
                child = self._classify(path, name)
                if child is not None and path / name not in self._known:
                    self._adopt(path / name, child)

    def _watch_files(self, path: Path) -> None:
        """Watch a container directory's files; one that cannot be is skipped (module docstring), never a reason
        to poll: the pods' watches, which new containers need, stay as they are."""
        assert self._ino is not None
        try:
            self._wds[self._ino.add_watch(path, _FILE_MASK)] = path
        except OSError as error:
            if error.errno in (errno.ENOENT, errno.ENOTDIR):
                return  # removed again before we looked: nothing to repair; its pod's DELETE event follows
            self.unwatched_containers += 1
            if self.unwatched_reason is None:
                self.unwatched_reason = f"{path}: {error.strerror or error}"

    def _forget(self, path: Path) -> None:
        """Drop ``path`` and everything known below it; report pods and containers, deepest first.

        Only directories below a known one are ever adopted, so an unknown ``path`` has nothing known below it
        (a runtime's scratch directory renamed away costs nothing); below a known one, a prefix test per known
        path instead of building each one's parents (this ran between an event and the pass that pins).
        """
        if path not in self._known:
            return
        below = f"{path}{os.sep}"
        gone = [p for p in self._known if p == path or str(p).startswith(below)]
        for p in sorted(gone, key=lambda p: -len(p.parts)):
            if not isinstance(self._known.pop(p), QOSClass):
                self._sink(CgroupRemoved(path=p))
        for wd in [wd for wd, p in self._wds.items() if p in gone]:
            del self._wds[wd]
            if self._ino is not None:
                with contextlib.suppress(OSError):  # the kernel drops it with the directory
                    self._ino.rm_watch(wd)

    def _resync(self) -> None:
        """Compare the tree with what is known: report what went away, then what appeared."""
        now = _snapshot(self.layout)
        for path in [p for p in self._known if p not in now]:
            if path in self._known:
                self._forget(path)
        for path, node in now.items():
            if path not in self._known:
                self._adopt(path, node)
