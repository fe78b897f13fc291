"""Guest side: a long-running process (the agent, ``podpin run``) that a VM scenario starts, kills and restarts.

End-to-end scenarios start the agent in the background, create pods and containers with ``kubetree`` while
it runs, SIGKILL it to simulate a crash, and start it again to check that it adopts what it had pinned.
Output of every run goes to one log file in the scenario's host-visible work dir, each run after a header
line, so a failing step can show the agent's own words (:meth:`Background.log_tail`).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Background", "BackgroundError", "Run", "podpin"]


def podpin(*args: str) -> list[str]:
    """The argv running ``podpin ARGS`` with this interpreter (the host venv's, by absolute path).

    ``python -m agent`` needs no ``bin/podpin`` script on PATH, and the guest's PATH is the host caller's.
    """
    return [sys.executable, "-m", "agent", *args]


class BackgroundError(RuntimeError):
    """The background process could not be started, did not say what was awaited, or is not running."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One finished run of the background process."""

    pid: int
    returncode: int
    """The exit status, or ``-N`` when it was ended by signal ``N`` (``subprocess`` convention)."""
    seconds: float


@dataclass(slots=True)
class Background:
    """Start, signal, wait for and restart one background command whose output goes to ``log_path``."""

    argv: Sequence[str]
    log_path: Path
    env: Mapping[str, str] | None = None
    runs: list[Run] = field(default_factory=list)
    _proc: subprocess.Popen[bytes] | None = None
    _started: float = 0.0
    _offset: int = 0

    @property
    def pid(self) -> int:
        """The pid of the current run.

        Raises:
            BackgroundError: not started.
        """
        if self._proc is None:
            raise BackgroundError(f"{self.argv[0]}: not started")
        return self._proc.pid

    @property
    def running(self) -> bool:
        """Whether the current run is still alive (reaps it if it has exited)."""
        if self._proc is None:
            return False
        if self._proc.poll() is None:
            return True
        self._finish()
        return False

    def start(self) -> int:
        """Start a new run (after a header line in the log); returns its pid.

        Raises:
            BackgroundError: a run is still alive, or the command cannot be executed.
        """
        if self.running:
            raise BackgroundError(f"{self.argv[0]}: already running as pid {self.pid}")
        with self.log_path.open("ab") as log:
            log.write(f"=== run {len(self.runs) + 1}: {' '.join(self.argv)}\n".encode())
            log.flush()
            self._offset = log.tell()
            env = dict(os.environ if self.env is None else self.env)
            try:
                self._proc = subprocess.Popen(
                    list(self.argv), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env
                )
            except OSError as err:
                raise BackgroundError(f"{self.argv[0]}: cannot start: {err}") from err
        self._started = time.monotonic()
        return self._proc.pid

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the current run.

        Raises:
            BackgroundError: it is not running.
        """
        if not self.running or self._proc is None:
            raise BackgroundError(f"{self.argv[0]}: not running, cannot send signal {signum}")
        self._proc.send_signal(signum)

    def kill(self) -> Run:
        """SIGKILL the current run (a crash: no clean-up in the process) and reap it."""
        self.signal(signal.SIGKILL)
        return self.wait(timeout=30.0)

    def stop(self, timeout: float = 10.0) -> Run:
        """SIGTERM the current run, SIGKILL it if still alive after ``timeout`` s, and reap it."""
        self.signal(signal.SIGTERM)
        try:
            return self.wait(timeout=timeout)
        except BackgroundError:
            return self.kill()

    def restart(self) -> int:
        """SIGKILL the current run if alive, then start a new one; returns the new pid."""
        if self.running:
            self.kill()
        return self.start()

    def wait(self, timeout: float) -> Run:
        """Wait for the current run to exit.

        Raises:
            BackgroundError: not started, or still running after ``timeout`` s.
        """
        if self._proc is None:
            raise BackgroundError(f"{self.argv[0]}: not started")
        try:
            self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired as err:
            raise BackgroundError(f"{self.argv[0]}: pid {self._proc.pid} still running after {timeout} s") from err
        return self._finish()

    def output(self) -> str:
        """Everything the current (or last) run has printed so far."""
        with self.log_path.open("rb") as log:
            log.seek(self._offset)
            return log.read().decode(errors="replace")

    def wait_for_output(self, pattern: str, *, timeout: float) -> str:
        """Wait until the current run prints a line matching the regex ``pattern``; returns that line.

        Raises:
            BackgroundError: the run exited or ``timeout`` passed first; the message holds the output tail.
        """
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            for line in self.output().splitlines():
                if regex.search(line):
                    return line
            if not self.running:
                raise BackgroundError(
                    f"{self.argv[0]}: exited ({self.runs[-1].returncode}) before printing /{pattern}/; "
                    f"output tail:\n{self.log_tail()}"
                )
            if time.monotonic() >= deadline:
                raise BackgroundError(
                    f"{self.argv[0]}: no line matching /{pattern}/ after {timeout} s; output tail:\n{self.log_tail()}"
                )
            time.sleep(0.02)

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the log (all runs), for error messages."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def close(self) -> None:
        """SIGKILL the current run if it is alive (end of scenario)."""
        if self.running:
            self.kill()

    def _finish(self) -> Run:
        assert self._proc is not None
        if self.runs and self.runs[-1].pid == self._proc.pid:
            return self.runs[-1]
        run = Run(
            pid=self._proc.pid, returncode=self._proc.returncode, seconds=round(time.monotonic() - self._started, 3)
        )
        self.runs.append(run)
        return run
