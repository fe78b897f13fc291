"""Guest side: watch container cgroups appear and record every ``cpuset.cpus`` value they hold, with times.

The pin window of a container is the time from its cgroup appearing (runc creates it) to its ``cpuset.cpus``
holding its final set. The observer watches each pod cgroup for new child directories (inotify ``IN_CREATE``,
stamped when the event is read), then watches the child's ``cpuset.cpus`` for writes (``IN_MODIFY``; the file
is also read right after the watch is added, so a write that came first is not missed) and keeps every
value with its time. Whether the container's bundle existed when its cgroup appeared is recorded too (the
order the bundle naming relies on).
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from agent.cpuset import CPUSet, CPUSetError
from tests.vm.guest_inotify import IN_CREATE, IN_ISDIR, IN_MODIFY, Inotify

__all__ = ["Child", "WindowObserver"]


@dataclass(slots=True)
class Child:
    """One child cgroup of a watched pod cgroup."""

    path: Path
    appeared: float
    """``time.monotonic()`` when its ``IN_CREATE`` was read."""
    bundle_at_appearance: bool | None
    values: list[tuple[float, str]] = field(default_factory=list)
    """``(time.monotonic(), cpuset.cpus)``, in order; the first is the value right after the cgroup appeared."""

    def first_time(self, expected: CPUSet) -> float | None:
        """When ``cpuset.cpus`` first held ``expected``, or None."""
        for at, text in self.values:
            with contextlib.suppress(CPUSetError):
                if CPUSet.parse(text) == expected:
                    return at
        return None

    def window_ms(self, expected: CPUSet) -> float | None:
        """Milliseconds from appearing to holding ``expected`` (None: it never did)."""
        at = self.first_time(expected)
        return None if at is None else round((at - self.appeared) * 1000, 2)


@dataclass(slots=True)
class WindowObserver:
    """Watches pod cgroups (:meth:`watch_pod`) from a thread; children by directory name in :attr:`children`.

    Args:
        bundles: containerd's bundle directory, to record whether ``<id>/config.json`` existed at appearance.
    """

    bundles: Path | None = None
    children: dict[str, Child] = field(default_factory=dict)
    _inotify: Inotify = field(default_factory=Inotify)
    _pods: dict[int, Path] = field(default_factory=dict)
    _files: dict[int, Child] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="pin-window-observer", daemon=True)
        self._thread.start()

    def watch_pod(self, cgroup: Path) -> None:
        """Watch ``cgroup`` (a pod cgroup that exists, with no container yet) for new children."""
        with self._lock:
            self._pods[self._inotify.watch(cgroup, IN_CREATE)] = cgroup

    def child(self, name: str) -> Child | None:
        """The child cgroup named ``name`` (a runtime id), if it appeared."""
        with self._lock:
            return self.children.get(name)

    def _run(self) -> None:
        while not self._stop.is_set():
            for wd, mask, name in self._inotify.read(0.1):
                now = time.monotonic()
                with self._lock:
                    if wd in self._pods and mask & IN_CREATE and mask & IN_ISDIR:
                        self._appeared(self._pods[wd] / name, now)
                    elif wd in self._files and mask & IN_MODIFY:
                        self._record(self._files[wd], now)

    def _appeared(self, path: Path, now: float) -> None:
        bundle = None if self.bundles is None else (self.bundles / path.name / "config.json").exists()
        child = Child(path=path, appeared=now, bundle_at_appearance=bundle)
        self.children[path.name] = child
        try:
            self._files[self._inotify.watch(path / "cpuset.cpus", IN_MODIFY)] = child
        except OSError:
            return  # removed again already
        self._record(child, time.monotonic())

    @staticmethod
    def _record(child: Child, now: float) -> None:
        try:
            text = (child.path / "cpuset.cpus").read_text().strip()
        except OSError:
            return
        if not child.values or child.values[-1][1] != text:
            child.values.append((now, text))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        self._inotify.close()
