"""Host processes of the real cluster (kine, the API server, the controller manager, the scheduler): started
with their output in a log file of the test's directory, waited for with a message naming what was awaited and
the log's tail, and stopped (SIGTERM, then SIGKILL) so that nothing outlives the test.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["ClusterError", "Proc", "free_port", "liveness_checks", "wait_for"]


class ClusterError(RuntimeError):
    """A cluster component did not start, or what a test waited for did not happen in time."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def tail(path: Path, lines: int = 25) -> str:
    """The last lines of a log file ('' when it does not exist)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return ""


liveness_checks: list[Callable[[], None]] = []
"""Checks that raise (a ClusterError) once something every wait depends on is gone for good — the guest node
froze and was killed (node.py) — so that each wait of the tests left fails at once, naming it, instead of waiting
out its own timeout. Whoever starts such a thing adds its check and removes it when it stops."""


def wait_for(
    what: str, check: Callable[[], bool], *, timeout: float, logs: Sequence[Path] = (), every: float = 1.0
) -> None:
    """Poll `check` until true; on timeout raise ClusterError naming `what` with the tails of `logs`. A failing
    :data:`liveness_checks` entry ends the wait at once with its own error."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        for alive in tuple(liveness_checks):
            alive()
        try:
            if check():
                return
        except Exception as err:  # a check may fail while what it waits for comes up; the last failure is told
            last_error = err
        if time.monotonic() > deadline:
            tails = "".join(f"\n--- {log} (tail) ---\n{tail(log)}" for log in logs)
            because = f" (the check's last error: {last_error!r})" if last_error is not None else ""
            raise ClusterError(f"timed out after {timeout:.0f} s waiting for {what}{because}{tails}")
        time.sleep(every)


@dataclass(slots=True)
class Proc:
    """One started program and its log."""

    name: str
    argv: Sequence[str]
    log: Path
    cwd: Path
    popen: subprocess.Popen[bytes] | None = None

    def start(self) -> Proc:
        """Start the program in its own process group, its stdout and stderr appended to the log."""
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                list(self.argv), cwd=self.cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        return self

    def running(self) -> bool:
        """Whether the process is alive."""
        return self.popen is not None and self.popen.poll() is None

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM the process group, SIGKILL after `timeout`; reap it."""
        if self.popen is None or self.popen.poll() is not None:
            return
        try:
            os.killpg(self.popen.pid, signal.SIGTERM)
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(10)
        except ProcessLookupError:
            pass


def require_setup(reason: str) -> None:
    """A cluster test whose setup is missing fails naming it, as the VM tests do; ``PODPIN_SKIP_CLUSTER=1`` skips."""
    if os.environ.get("PODPIN_SKIP_CLUSTER") == "1":
        pytest.skip(f"{reason} (skipped: PODPIN_SKIP_CLUSTER=1)")
    pytest.fail(f"real-cluster tests cannot run: {reason}; or set PODPIN_SKIP_CLUSTER=1 to skip them", pytrace=False)
