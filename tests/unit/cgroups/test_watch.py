"""The kubepods watcher: typed events for new and removed cgroups, by inotify or by polling, and for writes to the
files podpin manages in a container cgroup (inotify only)."""

from __future__ import annotations

import errno
import os
import queue
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent.cgroups.layout import detect_layout
from agent.cgroups.watch import (
    CgroupFileChanged,
    CgroupRemoved,
    CgroupWatcher,
    ContainerCgroupAppeared,
    PodCgroupAppeared,
    WatchEvent,
    WatchMode,
)
from agent.vocabulary import QOSClass, Runtime
from tests.support.cgroupfs_builder import FixtureTree, build_tree, container_hex, pod_uid

_IN_Q_OVERFLOW = 0x4000
_CREATE_DIR = 0x100 | 0x40000000  # IN_CREATE | IN_ISDIR
_DELETE_DIR = 0x200 | 0x40000000  # IN_DELETE | IN_ISDIR
_IN_MODIFY, _IN_IGNORED, _IN_ONLYDIR = 0x2, 0x8000, 0x01000000


class Events:
    """A sink that queues events with their arrival time.

    ``files=False`` (the default) drops :class:`CgroupFileChanged`: a fixture container's files are written
    after its ``mkdir`` (the kernel creates them with it), so the watch on a new container may or may not see
    those writes, and the tests of the directory events would race with them.
    """

    def __init__(self, *, files: bool = False) -> None:
        self.queue: queue.Queue[tuple[float, WatchEvent]] = queue.Queue()
        self.files = files

    def __call__(self, event: WatchEvent) -> None:
        if self.files or not isinstance(event, CgroupFileChanged):
            self.queue.put((time.perf_counter(), event))

    def take(self, count: int, timeout: float = 3.0) -> list[WatchEvent]:
        """The next ``count`` events; raises ``queue.Empty`` if they do not come in time."""
        return [self.queue.get(timeout=timeout)[1] for _ in range(count)]

    def stamped(self, timeout: float = 3.0) -> tuple[float, WatchEvent]:
        return self.queue.get(timeout=timeout)


@pytest.fixture
def events() -> Events:
    return Events()


@contextmanager
def watching(tree: FixtureTree, events: Events, **options: Any) -> Iterator[CgroupWatcher]:
    """A started watcher over ``tree`` that is always stopped afterwards."""
    watcher = CgroupWatcher(detect_layout(tree.root), events, **options)
    watcher.start()
    try:
        yield watcher
    finally:
        assert (True, "stopped") == (watcher.stop(), watcher.mode)


def pod_event(tree: FixtureTree, n: int, qos: str) -> PodCgroupAppeared:
    return PodCgroupAppeared(uid=pod_uid(n), qos=QOSClass(qos), path=tree.qos_dir(qos) / tree.pod_name(pod_uid(n), qos))


def container_event(
    pod: PodCgroupAppeared, tree: FixtureTree, n: int, runtime: str, known: Runtime | None
) -> ContainerCgroupAppeared:
    path = pod.path / tree.container_name(container_hex(n), runtime)
    return ContainerCgroupAppeared(uid=pod.uid, container_id=container_hex(n), runtime=known, path=path)


def _exercise(tree: FixtureTree, events: Events) -> None:
    """Create and remove pods and containers (plus names to ignore) and check the exact event stream."""
    burst = pod_event(tree, 2, "Burstable")
    tree.add_pod(burst.uid, "Burstable")
    assert [burst] == events.take(1)
    crio = container_event(burst, tree, 3, "cri-o", Runtime.CRIO)
    tree.add_conmon(burst.path, container_hex(3))
    (burst.path / "not-a-container").mkdir()
    (burst.path / "cgroup.events").write_text("populated 0\n")
    tree.add_container(burst.path, container_hex(3), "cri-o")
    assert [crio] == events.take(1)
    best = pod_event(tree, 4, "BestEffort")
    tree.add_pod(best.uid, "BestEffort")
    docker = container_event(best, tree, 5, "docker", Runtime.DOCKER if tree.driver == "systemd" else None)
    tree.add_container(best.path, container_hex(5), "docker")
    assert [best, docker] == events.take(2)
    _rmtree(crio.path)
    assert [CgroupRemoved(path=crio.path)] == events.take(1)


class TestInotify:
    @pytest.mark.parametrize("driver", ["systemd", "cgroupfs"])
    def test_event_stream(self, tmp_path: Path, events: Events, driver: str) -> None:
        """Existing cgroups are reported at start, then new pods, containers and removals, nothing else."""
        tree = build_tree(tmp_path, driver=driver)
        first = pod_event(tree, 1, "Guaranteed")
        tree.add_container(tree.add_pod(first.uid), container_hex(1), "containerd")
        known = Runtime.CONTAINERD if driver == "systemd" else None
        with watching(tree, events) as watcher:
            assert ("inotify", None) == (watcher.mode, watcher.fallback_reason)
            assert [first, container_event(first, tree, 1, "containerd", known)] == events.take(2)
            _exercise(tree, events)
            assert 0 == events.queue.qsize()

    def test_pod_removed_after_its_containers(self, tmp_path: Path, events: Events) -> None:
        """Removing a pod reports its containers first, then the pod (as rmdir order forces)."""
        tree = build_tree(tmp_path)
        pod = tree.add_pod(pod_uid(1))
        container = tree.add_container(pod, container_hex(1))
        with watching(tree, events):
            events.take(2)
            _rmtree(container)
            _rmtree(pod)
            assert [CgroupRemoved(path=container), CgroupRemoved(path=pod)] == events.take(2)

    def test_stop_is_prompt(self, tmp_path: Path, events: Events) -> None:
        """stop() wakes the thread at once even with a long timeout."""
        tree = build_tree(tmp_path)
        watcher = CgroupWatcher(detect_layout(tree.root), events, timeout=30.0)
        watcher.start()
        began = time.perf_counter()
        stopped = watcher.stop()
        assert (True, "stopped", True) == (stopped, watcher.mode, time.perf_counter() - began < 1.0)

    def test_latency(self, tmp_path: Path, events: Events) -> None:
        """A new container cgroup is reported within milliseconds (median and p99 over 200 mkdirs)."""
        tree = build_tree(tmp_path)
        pod = tree.add_pod(pod_uid(1))
        delays: list[float] = []
        with watching(tree, events):
            events.take(1)
            for n in range(200):
                path = pod / tree.container_name(container_hex(n + 10))
                began = time.perf_counter()
                path.mkdir()
                arrived, event = events.stamped()
                assert (
                    ContainerCgroupAppeared(
                        uid=pod_uid(1), container_id=container_hex(n + 10), runtime=Runtime.CONTAINERD, path=path
                    )
                    == event
                )
                delays.append(arrived - began)
        p99 = sorted(delays)[int(len(delays) * 0.99) - 1]
        assert (True, True) == (statistics.median(delays) < 0.05, p99 < 0.5), (statistics.median(delays), p99)


@dataclass
class FakeEvent:
    wd: int
    mask: int
    cookie: int
    name: str


class FakeINotify:
    """An inotify stand-in: no kernel events, the test injects them; a pipe makes the fd readable.

    ``on_add`` runs for each watched path before the watch is "added" and may raise.
    """

    def __init__(self, on_add: Callable[[Path], None] = lambda _path: None) -> None:
        self.read_fd, self.write_fd = os.pipe()
        self.on_add = on_add
        self.watches: dict[int, Path] = {}
        self.masks: dict[Path, int] = {}
        self.added = 0
        self.pending: list[FakeEvent] = []
        self.lock = threading.Lock()

    def fileno(self) -> int:
        return self.read_fd

    def add_watch(self, path: Path, mask: int, /) -> int:
        self.on_add(Path(path))
        self.added += 1  # like the kernel, never hand out a removed watch's number again
        self.watches[self.added] = Path(path)
        self.masks[Path(path)] = mask
        return self.added

    def wd_of(self, path: Path) -> int:
        return next(wd for wd, watched in self.watches.items() if watched == path)

    def rm_watch(self, wd: int, /) -> None:
        self.watches.pop(wd)

    def read(self, _timeout: int | None = None, /) -> list[FakeEvent]:
        os.read(self.read_fd, 4096)
        with self.lock:
            found, self.pending = self.pending, []
        return found

    def inject(self, event: FakeEvent) -> None:
        with self.lock:
            self.pending.append(event)
        os.write(self.write_fd, b"x")

    def close(self) -> None:
        os.close(self.read_fd)
        os.close(self.write_fd)


class TestRecovery:
    def test_overflow_rescans(self, tmp_path: Path, events: Events) -> None:
        """After an inotify queue overflow the tree is re-scanned: missed removals and arrivals are reported."""
        tree = build_tree(tmp_path)
        old = tree.add_pod(pod_uid(1))
        fake = FakeINotify()
        with watching(tree, events, inotify_factory=lambda: fake):
            assert [pod_event(tree, 1, "Guaranteed")] == events.take(1)
            _rmtree(old)
            new = pod_event(tree, 2, "Burstable")
            tree.add_container(tree.add_pod(new.uid, "Burstable"), container_hex(2))
            fake.inject(FakeEvent(wd=-1, mask=_IN_Q_OVERFLOW, cookie=0, name=""))
            expected = [CgroupRemoved(path=old), new, container_event(new, tree, 2, "containerd", Runtime.CONTAINERD)]
            assert expected == events.take(3)
            container = container_event(new, tree, 2, "containerd", Runtime.CONTAINERD).path
            expected_watches = {
                tree.kubepods(),
                tree.qos_dir("Burstable"),
                tree.qos_dir("BestEffort"),
                new.path,
                container,
            }
            assert expected_watches == set(fake.watches.values())

    def test_container_created_before_pod_watch(self, tmp_path: Path, events: Events) -> None:
        """A container that appears between the pod's mkdir and its watch is still reported, once."""
        tree = build_tree(tmp_path)
        pod = pod_event(tree, 1, "Guaranteed")

        def race(path: Path) -> None:
            if path == pod.path:
                tree.add_container(path, container_hex(1))

        fake = FakeINotify(on_add=race)
        with watching(tree, events, inotify_factory=lambda: fake):
            tree.add_pod(pod.uid)
            kubepods_wd = next(wd for wd, path in fake.watches.items() if path == tree.kubepods())
            fake.inject(FakeEvent(wd=kubepods_wd, mask=_CREATE_DIR, cookie=0, name=pod.path.name))
            assert [pod, container_event(pod, tree, 1, "containerd", Runtime.CONTAINERD)] == events.take(2)
            pod_wd = next(wd for wd, path in fake.watches.items() if path == pod.path)
            fake.inject(FakeEvent(wd=pod_wd, mask=_CREATE_DIR, cookie=0, name=tree.container_name(container_hex(1))))
            fake.inject(FakeEvent(wd=-1, mask=_IN_Q_OVERFLOW, cookie=0, name=""))
            tree.add_container(pod.path, container_hex(2))
            fake.inject(FakeEvent(wd=pod_wd, mask=_CREATE_DIR, cookie=0, name=tree.container_name(container_hex(2))))
            assert [container_event(pod, tree, 2, "containerd", Runtime.CONTAINERD)] == events.take(1)

    def test_watch_limit_falls_back_to_polling(self, tmp_path: Path, events: Events) -> None:
        """When a new pod cannot be watched (ENOSPC, watch limit) the watcher switches to polling and goes on."""
        tree = build_tree(tmp_path)
        pod = pod_event(tree, 1, "Guaranteed")

        def limit(path: Path) -> None:
            if path == pod.path:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        fake = FakeINotify(on_add=limit)
        with watching(tree, events, inotify_factory=lambda: fake, poll_interval=0.02) as watcher:
            tree.add_pod(pod.uid)
            fake.inject(FakeEvent(wd=1, mask=_CREATE_DIR, cookie=0, name=pod.path.name))
            assert [pod] == events.take(1)
            tree.add_container(pod.path, container_hex(1))
            assert [container_event(pod, tree, 1, "containerd", Runtime.CONTAINERD)] == events.take(1)
            assert ("poll", "inotify unavailable: No space left on device") == (watcher.mode, watcher.fallback_reason)

    def test_sink_error_kept(self, tmp_path: Path) -> None:
        """An exception from the sink ends the thread and is kept for health checks."""
        tree = build_tree(tmp_path)

        def sink(event: WatchEvent) -> None:
            raise RuntimeError(f"sink broke on {type(event).__name__}")

        watcher = CgroupWatcher(detect_layout(tree.root), sink)
        watcher.start()
        tree.add_pod(pod_uid(1))
        deadline = time.monotonic() + 3
        while watcher.error is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert (True, "stopped") == (watcher.stop(), watcher.mode)
        assert "sink broke on PodCgroupAppeared" == str(watcher.error)


def _modify(fake: FakeINotify, path: Path, name: str) -> None:
    fake.inject(FakeEvent(wd=fake.wd_of(path), mask=_IN_MODIFY, cookie=0, name=name))


class TestFileChanges:
    """A write to a file podpin manages in a known container cgroup is reported; nothing else is."""

    def test_managed_files_reported_others_not(self, tmp_path: Path) -> None:
        """IN_MODIFY of ``cpu.max``, ``cpuset.cpus``, ``cpuset.mems`` gives one event each; ``memory.max``,
        ``cpu.weight`` and ``cgroup.events`` give none; the container's watch asks for IN_MODIFY only."""
        events = Events(files=True)
        tree = build_tree(tmp_path)
        pod = pod_event(tree, 1, "Guaranteed")
        ctr = container_event(pod, tree, 1, "containerd", Runtime.CONTAINERD)
        tree.add_container(tree.add_pod(pod.uid), container_hex(1))
        fake = FakeINotify()
        with watching(tree, events, inotify_factory=lambda: fake) as watcher:
            assert [pod, ctr] == events.take(2)
            for name in ("memory.max", "cpu.max", "cpu.weight", "cpuset.cpus", "cgroup.events", "cpuset.mems"):
                _modify(fake, ctr.path, name)
            changed = [
                CgroupFileChanged(uid=pod.uid, container_id=ctr.container_id, path=ctr.path, file=name)
                for name in ("cpu.max", "cpuset.cpus", "cpuset.mems")
            ]
            assert changed == events.take(3)
            _modify(fake, ctr.path, "memory.max")
            _modify(fake, pod.path, "cpu.max")  # a pod directory's watch never asks for IN_MODIFY: ignored
            time.sleep(0.1)
            actual = (events.queue.qsize(), fake.masks[ctr.path], watcher.unwatched_containers, watcher.mode)
            assert (0, _IN_MODIFY | _IN_ONLYDIR, 0, "inotify") == actual

    def test_removed_containers_watch_is_dropped(self, tmp_path: Path) -> None:
        """A container removed (its pod's IN_DELETE) loses its watch and is reported once; a late IN_MODIFY or
        the kernel's IN_IGNORED for the old watch reports nothing."""
        events = Events(files=True)
        tree = build_tree(tmp_path)
        pod = pod_event(tree, 1, "Guaranteed")
        ctr = container_event(pod, tree, 1, "containerd", Runtime.CONTAINERD)
        tree.add_container(tree.add_pod(pod.uid), container_hex(1))
        fake = FakeINotify()
        with watching(tree, events, inotify_factory=lambda: fake):
            events.take(2)
            old_wd = fake.wd_of(ctr.path)
            _rmtree(ctr.path)
            fake.inject(FakeEvent(wd=fake.wd_of(pod.path), mask=_DELETE_DIR, cookie=0, name=ctr.path.name))
            assert [CgroupRemoved(path=ctr.path)] == events.take(1)
            fake.inject(FakeEvent(wd=old_wd, mask=_IN_MODIFY, cookie=0, name="cpu.max"))
            fake.inject(FakeEvent(wd=old_wd, mask=_IN_IGNORED, cookie=0, name=""))
            time.sleep(0.1)
            assert (0, [pod.path]) == (
                events.queue.qsize(),
                [p for p in fake.watches.values() if p.is_relative_to(pod.path)],
            )

    def test_ignored_ends_a_containers_file_events(self, tmp_path: Path) -> None:
        """IN_IGNORED (the kernel dropped the watch: the directory went) forgets the watch: an IN_MODIFY that
        reuses its number reports nothing; the container stays known until its pod's watch reports it gone."""
        events = Events(files=True)
        tree = build_tree(tmp_path)
        pod = pod_event(tree, 1, "Guaranteed")
        ctr = container_event(pod, tree, 1, "containerd", Runtime.CONTAINERD)
        tree.add_container(tree.add_pod(pod.uid), container_hex(1))
        fake = FakeINotify()
        with watching(tree, events, inotify_factory=lambda: fake):
            events.take(2)
            wd = fake.wd_of(ctr.path)
            fake.inject(FakeEvent(wd=wd, mask=_IN_IGNORED, cookie=0, name=""))
            fake.inject(FakeEvent(wd=wd, mask=_IN_MODIFY, cookie=0, name="cpu.max"))
            time.sleep(0.1)
            assert 0 == events.queue.qsize()
            _rmtree(ctr.path)
            fake.inject(FakeEvent(wd=fake.wd_of(pod.path), mask=_DELETE_DIR, cookie=0, name=ctr.path.name))
            assert [CgroupRemoved(path=ctr.path)] == events.take(1)

    @pytest.mark.parametrize(
        ("error", "counted"),
        [(errno.ENOSPC, 1), (errno.EACCES, 1), (errno.ENOENT, 0)],
        ids=["ENOSPC", "EACCES", "ENOENT"],
    )
    def test_container_that_cannot_be_watched_is_skipped(
        self, tmp_path: Path, events: Events, error: int, counted: int
    ) -> None:
        """A container directory whose watch fails is still reported, the watcher stays in inotify mode (the pods'
        watches still report new containers), and the failure is counted (not ENOENT: the directory went)."""
        tree = build_tree(tmp_path)
        pod = pod_event(tree, 1, "Guaranteed")
        first = container_event(pod, tree, 1, "containerd", Runtime.CONTAINERD)

        def refuse(path: Path) -> None:
            if path == first.path:
                raise OSError(error, os.strerror(error))

        fake = FakeINotify(on_add=refuse)
        with watching(tree, events, inotify_factory=lambda: fake, poll_interval=0.02) as watcher:
            tree.add_pod(pod.uid)
            fake.inject(FakeEvent(wd=fake.wd_of(tree.kubepods()), mask=_CREATE_DIR, cookie=0, name=pod.path.name))
            assert [pod] == events.take(1)
            tree.add_container(pod.path, container_hex(1))
            fake.inject(FakeEvent(wd=fake.wd_of(pod.path), mask=_CREATE_DIR, cookie=0, name=first.path.name))
            assert [first] == events.take(1)
            second = container_event(pod, tree, 2, "containerd", Runtime.CONTAINERD)
            tree.add_container(pod.path, container_hex(2))
            fake.inject(FakeEvent(wd=fake.wd_of(pod.path), mask=_CREATE_DIR, cookie=0, name=second.path.name))
            assert [second] == events.take(1)
            reason = f"{first.path}: {os.strerror(error)}" if counted else None
            actual = (watcher.mode, watcher.fallback_reason, watcher.unwatched_containers, watcher.unwatched_reason)
            assert ("inotify", None, counted, reason) == actual
            assert (False, True) == (first.path in fake.watches.values(), second.path in fake.watches.values())

    def test_real_inotify_reports_a_write_to_cpu_max(self, tmp_path: Path) -> None:
        """With the kernel's inotify (plain files also raise IN_MODIFY), another writer's ``cpu.max`` is reported
        within milliseconds; a ``memory.max`` write is not."""
        events = Events(files=True)
        tree = build_tree(tmp_path)
        pod = pod_event(tree, 1, "Guaranteed")
        ctr = container_event(pod, tree, 1, "containerd", Runtime.CONTAINERD)
        tree.add_container(tree.add_pod(pod.uid), container_hex(1))
        with watching(tree, events):
            assert [pod, ctr] == events.take(2)
            (ctr.path / "memory.max").write_text("max\n")
            (ctr.path / "cpu.max").write_text("100000 100000\n")
            expected = CgroupFileChanged(uid=pod.uid, container_id=ctr.container_id, path=ctr.path, file="cpu.max")
            assert [expected] == events.take(1, timeout=1.0)

    def test_polling_reports_no_file_changes(self, tmp_path: Path) -> None:
        """In polling mode a write to ``cpu.max`` is not reported (the periodic full pass repairs it)."""
        events = Events(files=True)
        tree = build_tree(tmp_path)
        pod = pod_event(tree, 1, "Guaranteed")
        ctr = container_event(pod, tree, 1, "containerd", Runtime.CONTAINERD)
        tree.add_container(tree.add_pod(pod.uid), container_hex(1))
        with watching(tree, events, mode=WatchMode.POLL, poll_interval=0.02):
            assert [pod, ctr] == events.take(2)
            (ctr.path / "cpu.max").write_text("100000 100000\n")
            time.sleep(0.2)
            assert 0 == events.queue.qsize()


class TestPolling:
    @pytest.mark.parametrize("driver", ["systemd", "cgroupfs"])
    def test_forced_poll(self, tmp_path: Path, events: Events, driver: str) -> None:
        """mode='poll' reports the same events as inotify, from periodic scans."""
        tree = build_tree(tmp_path, driver=driver)
        first = pod_event(tree, 1, "Guaranteed")
        tree.add_pod(first.uid)
        with watching(tree, events, mode=WatchMode.POLL, poll_interval=0.02) as watcher:
            assert ("poll", None, [first]) == (watcher.mode, watcher.fallback_reason, events.take(1))
            _exercise(tree, events)

    def test_fallback_when_inotify_missing(self, tmp_path: Path, events: Events) -> None:
        """auto falls back to polling when inotify cannot be set up, and says why."""
        tree = build_tree(tmp_path)

        def missing() -> FakeINotify:
            raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))

        with watching(tree, events, inotify_factory=missing, poll_interval=0.02) as watcher:
            assert ("poll", "inotify unavailable: Function not implemented") == (watcher.mode, watcher.fallback_reason)
            _exercise(tree, events)

    def test_inotify_required(self, tmp_path: Path, events: Events) -> None:
        """mode='inotify' raises instead of falling back."""
        tree = build_tree(tmp_path)

        def missing() -> FakeINotify:
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))

        watcher = CgroupWatcher(detect_layout(tree.root), events, mode=WatchMode.INOTIFY, inotify_factory=missing)
        with pytest.raises(OSError) as caught:
            watcher.start()
        assert errno.EMFILE == caught.value.errno


def _rmtree(cgroup: Path) -> None:
    """Remove a fixture cgroup the way the kernel does: its files with it, then the directory."""
    for child in sorted(cgroup.iterdir(), reverse=True):
        if child.is_dir():
            _rmtree(child)
        else:
            child.unlink()
    cgroup.rmdir()
