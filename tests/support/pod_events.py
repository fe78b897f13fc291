"""Running a pod source in a thread and collecting what it emits (KubeSource and DirSource tests)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from agent.kube import PodEvent


def names(pods: tuple[Any, ...] | list[Any]) -> list[str]:
    """The pods' names, in order."""
    return [p["metadata"]["name"] for p in pods]


class Collector:
    """The ``emit`` callback: records every PodEvent and lets a test wait for one."""

    def __init__(self) -> None:
        self.events: list[PodEvent] = []
        self._cond = threading.Condition()

    def __call__(self, event: PodEvent) -> None:
        with self._cond:
            self.events.append(event)
            self._cond.notify_all()

    def wait(self, predicate: Callable[[list[PodEvent]], bool], timeout: float = 5.0) -> None:
        """Wait until the events so far satisfy ``predicate``; fail with what arrived."""
        with self._cond:
            if not self._cond.wait_for(lambda: predicate(self.events), timeout):
                raise AssertionError(f"timed out; got {self.summary()}")

    def wait_count(self, n: int, timeout: float = 5.0) -> None:
        self.wait(lambda events: len(events) >= n, timeout)

    def wait_for_names(self, predicate: Callable[[list[str]], bool], timeout: float = 3.0) -> None:
        """Wait until the newest event's pod names satisfy ``predicate``."""
        self.wait(lambda events: bool(events) and predicate(names(events[-1].pods)), timeout)

    def summary(self) -> list[tuple[str, list[str]]]:
        with self._cond:
            return [(e.kind, names(e.pods)) for e in self.events]


class PodSource(Protocol):
    def run(self, emit: Callable[[PodEvent], None], stop: threading.Event) -> None: ...


@contextlib.contextmanager
def running(source: PodSource) -> Iterator[Collector]:
    """Run ``source`` in a thread; on exit stop it and require it to return within a second."""
    collector = Collector()
    stop = threading.Event()
    thread = threading.Thread(target=source.run, args=(collector, stop), daemon=True)
    thread.start()
    try:
        yield collector
    finally:
        stop.set()
        thread.join(1.0)
        assert not thread.is_alive(), f"{type(source).__name__}.run did not return within 1 s of stop"
