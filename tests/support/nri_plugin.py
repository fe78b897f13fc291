"""Test helpers for podpin's NRI plugin: a recording handler, a running plugin, a short socket path."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.nri import (
    CallOutcome,
    CallResult,
    ConnectionEvent,
    ConnectionKind,
    Container,
    ContainerUpdate,
    CPUResources,
    CreateResult,
    NRIMethod,
    PodSandbox,
    Report,
)
from agent.nri.plugin import NRIPlugin

__all__ = ["RecordingHandler", "Reports", "running_plugin", "short_socket_path", "wait_for"]


@dataclass
class RecordingHandler:
    """An NRIHandler that records every call and answers from its fields.

    ``answers`` maps a method name to a callable taking the call's arguments and
    returning the answer (or raising); without one the answer is empty.
    """

    answers: dict[str, Callable[..., Any]] = field(default_factory=dict)
    calls: list[tuple[Any, ...]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def _record(self, name: str, *args: Any) -> Any:
        with self.lock:
            self.calls.append((name, *args))
        answer = self.answers.get(name)
        return None if answer is None else answer(*args)

    def names(self) -> list[str]:
        with self.lock:
            return [call[0] for call in self.calls]

    def synchronize(self, pods: Sequence[PodSandbox], containers: Sequence[Container]) -> Sequence[ContainerUpdate]:
        return self._record("synchronize", pods, containers) or ()

    def run_pod_sandbox(self, pod: PodSandbox) -> None:
        self._record("run_pod_sandbox", pod)

    def stop_pod_sandbox(self, pod: PodSandbox) -> None:
        self._record("stop_pod_sandbox", pod)

    def remove_pod_sandbox(self, pod: PodSandbox) -> None:
        self._record("remove_pod_sandbox", pod)

    def create_container(self, pod: PodSandbox, container: Container) -> CreateResult:
        return self._record("create_container", pod, container) or CreateResult()

    def update_container(
        self, pod: PodSandbox, container: Container, requested: CPUResources | None
    ) -> Sequence[ContainerUpdate]:
        return self._record("update_container", pod, container, requested) or ()

    def stop_container(self, pod: PodSandbox, container: Container) -> Sequence[ContainerUpdate]:
        return self._record("stop_container", pod, container) or ()

    def remove_container(self, pod: PodSandbox, container: Container) -> None:
        self._record("remove_container", pod, container)


@dataclass
class Reports:
    """Collects the plugin's reports (thread-safe)."""

    items: list[Report] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, report: Report) -> None:
        with self.lock:
            self.items.append(report)

    def calls(self, result: CallResult | None = None, *, event: NRIMethod | None = None) -> list[CallOutcome]:
        """The request outcomes so far, of one result and one method if given."""
        with self.lock:
            outcomes = [r for r in self.items if isinstance(r, CallOutcome)]
        return [o for o in outcomes if result in (None, o.result) and event in (None, o.event)]

    def connections(self, kind: ConnectionKind | None = None) -> list[ConnectionEvent]:
        """The connection changes so far, of one kind if given."""
        with self.lock:
            return [r for r in self.items if isinstance(r, ConnectionEvent) and kind in (None, r.kind)]


def wait_for(condition: Callable[[], object], timeout: float = 5.0, what: str = "condition") -> None:
    """Poll ``condition`` every 10 ms until it is truthy; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)


@contextlib.contextmanager
def short_socket_path() -> Iterator[Path]:
    """A socket path in a fresh directory under /tmp (unix socket paths are limited to 107 bytes)."""
    directory = tempfile.mkdtemp(prefix="nri-", dir="/tmp")
    try:
        yield Path(directory) / "nri.sock"
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def running_plugin(plugin: NRIPlugin, stop_within: float = 1.0) -> Iterator[NRIPlugin]:
    """Run ``plugin`` on a thread; on exit stop it and fail if it took longer than ``stop_within`` seconds."""
    stop = threading.Event()
    thread = threading.Thread(target=plugin.run, args=(stop,), name="test-nri-plugin", daemon=True)
    thread.start()
    try:
        yield plugin
    finally:
        started = time.monotonic()
        stop.set()
        thread.join(5.0)
        took = time.monotonic() - started
        if thread.is_alive() or took > stop_within:
            raise AssertionError(f"the plugin took {took:.2f}s to stop (limit {stop_within}s)")
