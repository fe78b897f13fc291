"""Guest side: the node's lifecycle operations that the host asks for through the command channel (guest_node.py).

An argv run in the guest cannot restart the kubelet or containerd: guest_node.py holds them. So a channel request
may name an operation instead (``{"op": ..., "args": {...}}``), and :class:`NodeControls` does it over the objects
guest_node.py owns: restart the kubelet (its configuration file is rewritten by the host in the shared directory
first; with ``clear_state`` the resource managers' and pod allocation checkpoints are deleted, which a changed CPU
or memory policy needs: the kubelet refuses to start over a checkpoint of another policy), restart containerd (a
crash: SIGKILL and start over the same state), and start, stop or look at named background processes (the harness's
podpin agent, a test's helper), each logging to ``<shared>/<name>.log``. Harnesses build node lifecycles from these:
issue 17's differential runs (a fresh kubelet per scenario, a kubelet or podpin restart in the middle) and the
DaemonSet's lifecycle tests.

Every answer is the channel's ``{"rc", "stdout", "stderr"}``, with a JSON ``stdout`` on success and the error in
``stderr`` on failure (rc 1), so the host reports a failed operation the way it reports a failed command.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tests.vm.background import Background, BackgroundError

__all__ = ["KUBELET_ROOT", "KUBELET_STATE_FILES", "NodeControls", "OpError", "clear_kubelet_state", "kubelet_healthy"]

KUBELET_ROOT = Path("/var/lib/kubelet")
KUBELET_STATE_FILES = (
    "cpu_manager_state",
    "memory_manager_state",
    "dra_manager_state",
    "allocated_pods_state",
    "actuated_pods_state",
    "device-plugins/kubelet_internal_checkpoint",
)
"""The kubelet's checkpoints of resource decisions (relative to its root): the CPU, memory and DRA managers', the
pod allocation (in-place resize) checkpoints, the device manager's. A node started "fresh" starts without them."""

_NAME = re.compile(r"[a-z][a-z0-9-]{0,31}")


class OpError(RuntimeError):
    """An operation that cannot be done (unknown name, bad arguments, a process not running); the message says which."""


class Restartable(Protocol):
    """What the controls need of containerd (tests/vm/containerd.py's ``Containerd``)."""

    @property
    def pid(self) -> int: ...

    def restart(self) -> object: ...


def clear_kubelet_state(root: Path) -> list[str]:
    """Delete the kubelet's decision checkpoints under ``root``; returns the ones that existed (relative paths)."""
    removed = []
    for name in KUBELET_STATE_FILES:
        path = root / name
        if path.exists():
            path.unlink()
            removed.append(name)
    return removed


def kubelet_healthy(url: str = "http://127.0.0.1:10248/healthz") -> bool:
    """Whether the kubelet's healthz endpoint answers ``ok`` (its default port, on the guest's loopback)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return bool(answer.read() == b"ok")
    except (OSError, urllib.error.URLError):
        return False


@dataclass(slots=True)
class NodeControls:
    """The kubelet, containerd and named background processes of the guest node, operated by name."""

    kubelet: Background
    containerd: Restartable
    logs: Path
    """Where each named process logs (``<logs>/<name>.log``): the shared directory, readable by the host."""
    kubelet_root: Path = KUBELET_ROOT
    healthy: Callable[[], bool] = kubelet_healthy
    processes: dict[str, Background] = field(default_factory=dict)

    def handle(self, op: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """Do operation ``op``; returns the channel's answer (rc 0 and JSON stdout, or rc 1 and the error)."""
        operations: dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]] = {
            "restart_kubelet": self.restart_kubelet,
            "restart_containerd": self.restart_containerd,
            "start_process": self.start_process,
            "stop_process": self.stop_process,
            "process_status": self.process_status,
        }
        try:
            if op not in operations:
                raise OpError(f"unknown operation {op!r} (known: {', '.join(sorted(operations))})")
            result = operations[op](args)
        except (OpError, BackgroundError, OSError, KeyError, TypeError, ValueError) as err:
            return {"rc": 1, "stdout": "", "stderr": f"{op}: {type(err).__name__}: {err}"}
        return {"rc": 0, "stdout": json.dumps(result), "stderr": ""}

    def restart_kubelet(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Stop the kubelet (SIGTERM; its pods keep running), clear its checkpoints if asked, start it, wait healthy.

        Args: ``clear_state`` (bool), ``timeout_s`` (s until healthz answers ``ok``).
        """
        timeout = float(args.get("timeout_s", 300))
        if self.kubelet.running:
            self.kubelet.stop(timeout=60)
        cleared = clear_kubelet_state(self.kubelet_root) if args.get("clear_state") else []
        pid = self.kubelet.start()
        deadline = time.monotonic() + timeout
        while not self.healthy():
            if not self.kubelet.running:
                raise OpError(f"the kubelet exited after its restart; log tail:\n{self.kubelet.log_tail()}")
            if time.monotonic() > deadline:
                raise OpError(f"the kubelet's healthz not ok {timeout:.0f} s after its restart")
            time.sleep(0.5)
        return {"pid": pid, "cleared": cleared}

    def restart_containerd(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """SIGKILL containerd and start it over the same state (its shims and containers keep running)."""
        del args
        self.containerd.restart()
        return {"pid": self.containerd.pid}

    def start_process(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Start ``argv`` as the named process (``name``, ``argv``, optional ``env``); a running namesake: error."""
        name = _name(args)
        argv = args["argv"]
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise OpError(f"start_process {name}: argv must be a non-empty list of strings, not {argv!r}")
        env = args.get("env")
        if env is not None and not (isinstance(env, dict) and all(isinstance(v, str) for v in env.values())):
            raise OpError(f"start_process {name}: env must map names to strings, not {env!r}")
        known = self.processes.get(name)
        if known is not None and known.running:
            raise OpError(f"process {name} is already running as pid {known.pid}")
        process = Background(argv, log_path=self.logs / f"{name}.log", env=env)
        self.processes[name] = process
        return {"pid": process.start()}

    def stop_process(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """SIGTERM the named process (SIGKILL after ``timeout_s`` s), or SIGKILL it at once with ``kill``."""
        process = self._process(args)
        if not process.running:
            raise OpError(f"process {_name(args)} is not running")
        run = process.kill() if args.get("kill") else process.stop(timeout=float(args.get("timeout_s", 30)))
        return {"pid": run.pid, "returncode": run.returncode}

    def process_status(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Whether the named process runs, and how its earlier runs ended."""
        process = self._process(args)
        running = process.running
        return {
            "running": running,
            "pid": process.pid if running else None,
            "runs": [{"pid": r.pid, "returncode": r.returncode, "seconds": r.seconds} for r in process.runs],
        }

    def close(self) -> None:
        """SIGTERM every named process still running (the node is stopping)."""
        for process in self.processes.values():
            if process.running:
                process.stop(timeout=20)

    def _process(self, args: Mapping[str, Any]) -> Background:
        name = _name(args)
        if name not in self.processes:
            raise OpError(f"no process named {name} was started")
        return self.processes[name]


def _name(args: Mapping[str, Any]) -> str:
    name = args.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise OpError(f"a process name is lowercase letters, digits and '-', up to 32, not {name!r}")
    return name
