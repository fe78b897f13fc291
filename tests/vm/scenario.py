"""Guest side: run a VM scenario's steps and record what each one observed, for the host tests to assert.

A scenario is a plain Python script (pytest inside the guest costs ~12 s of start-up under TCG) that the
host harness runs once per test module as ``<venv python> scenario_x.py --results <VM_RW dir>/results.json``.
Each step records the values it measured; an exception ends only that step and is recorded with its
traceback, so one broken kernel fact never hides the others. The results file is rewritten (atomically)
after every step, so a scenario that hangs or crashes still leaves what it had measured for the host to
show. The host side is ``harness.py``.

While the scenario runs, a daemon thread rewrites ``heartbeat`` in the results file's directory every
:data:`HEARTBEAT_SECONDS`: a guest frozen whole (a TCG livelock that prints nothing) stops it, and the host
stops waiting long before the run's hang guard (``harness.HEARTBEAT_STALL_SECONDS``).

Results file::

    {"scenario": NAME, "complete": bool, "meta": {...},
     "steps": {STEP: {"ok": bool, "seconds": float, "values": {...}, "error": str | null}}}
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["HEARTBEAT_FILE", "HEARTBEAT_SECONDS", "Heartbeat", "Scenario", "WaitTimeoutError", "wait_until"]

T = TypeVar("T")


class WaitTimeoutError(TimeoutError):
    """A condition polled by :func:`wait_until` did not hold in time; names it and the last value seen."""


def wait_until(what: str, probe: Callable[[], T | None], *, timeout: float, interval: float = 0.01) -> T:
    """Poll ``probe`` until it returns a truthy value, and return that value.

    Raises:
        WaitTimeoutError: ``probe`` stayed falsy for ``timeout`` seconds; the message names ``what`` and the
            last value, so a failing step explains itself.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise WaitTimeoutError(f"{what}: not true after {timeout} s (last value {value!r})")
        time.sleep(interval)


HEARTBEAT_FILE = "heartbeat"
"""The file in the results directory that the guest rewrites while it lives."""

HEARTBEAT_SECONDS = 5.0
"""How often the guest rewrites :data:`HEARTBEAT_FILE`."""


class Heartbeat:
    """Rewrites a file with the guest's uptime every :data:`HEARTBEAT_SECONDS` from a daemon thread, until
    :meth:`stop`: the host reads the file's age to tell a frozen guest from a slow one (a write error is not the
    caller's concern: the host sees a still heartbeat either way)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stop = threading.Event()
        threading.Thread(target=self._beat, name="heartbeat", daemon=True).start()

    def _beat(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                self.path.write_text(f"{_uptime()}\n")
            self._stop.wait(HEARTBEAT_SECONDS)

    def stop(self) -> None:
        """Stop rewriting the file (it stays, with its last write)."""
        self._stop.set()


class Scenario:
    """Records the steps of one guest scenario into its results file."""

    def __init__(self, name: str, results_path: Path, args: list[str] | None = None) -> None:
        self.name = name
        self.results_path = results_path
        self.args = list(args or [])
        """Command-line arguments after ``--results`` (``scenario_fixture(..., args=...)`` on the host)."""
        self._started = time.monotonic()
        self._steps: dict[str, dict[str, Any]] = {}
        self._meta: dict[str, Any] = {
            "kernel": platform.release(),
            "python": sys.executable,
            "cpus_online": os.cpu_count(),
            "uptime_at_start_s": _uptime(),
        }
        self._complete = False
        self._save()
        self._heartbeat = Heartbeat(self.workdir / HEARTBEAT_FILE)

    @classmethod
    def from_argv(cls, name: str, argv: list[str] | None = None) -> Scenario:
        """Build the scenario from ``--results PATH [ARGS...]`` on the command line (what the harness passes)."""
        parser = argparse.ArgumentParser(prog=name)
        parser.add_argument("--results", type=Path, required=True, help="JSON results file (in a VM_RW dir)")
        known, rest = parser.parse_known_args(argv)
        return cls(name, known.results, rest)

    @property
    def workdir(self) -> Path:
        """A host-visible directory for logs the scenario wants the host to see (the results file's)."""
        return self.results_path.parent

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[dict[str, Any]]:
        """Run one step: the body fills the yielded dict with what it observed.

        An exception inside the body is recorded (with its traceback and the values set so far) and does
        not propagate, so later steps still run.
        """
        if name in self._steps:
            raise ValueError(f"scenario {self.name}: step {name!r} recorded twice")
        values: dict[str, Any] = {}
        record: dict[str, Any] = {"ok": False, "seconds": 0.0, "values": values, "error": None}
        self._steps[name] = record
        started = time.monotonic()
        try:
            yield values
            record["ok"] = True
        except Exception:
            record["error"] = traceback.format_exc()
            print(f"scenario {self.name}: step {name} failed:\n{record['error']}", file=sys.stderr, flush=True)
        finally:
            record["seconds"] = round(time.monotonic() - started, 3)
            self._save()

    def finish(self) -> int:
        """Mark the results complete; returns the exit status for ``raise SystemExit``."""
        self._meta["scenario_seconds"] = round(time.monotonic() - self._started, 3)
        self._complete = True
        self._save()
        self._heartbeat.stop()
        return 0

    def _save(self) -> None:
        data = {"scenario": self.name, "complete": self._complete, "meta": self._meta, "steps": self._steps}
        tmp = self.results_path.with_name(self.results_path.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True, default=str))
        os.replace(tmp, self.results_path)


def _uptime() -> float:
    """Seconds since the guest kernel booted (boot + interpreter start-up, when read at scenario start)."""
    try:
        return float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return -1.0
