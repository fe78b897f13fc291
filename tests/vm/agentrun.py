"""Guest side: stand in for the API server and the kubelet around a real ``podpin run``, and read what it did.

:class:`AgentNode` owns the agent's inputs in the guest's ``/tmp`` (pods directory, configuration, kubelet
``cpu_manager_state``, state directory) and creates each pod's cgroups where the kubelet (systemd driver)
and containerd would, with the ``cpu.max`` the kubelet writes under ``cpuManagerPolicy: none``. The agent
runs as uid 0 with every capability dropped (:func:`unprivileged`), as the DaemonSet runs it.

The readers report what the kernel and the agent say: a container's ``cpuset.cpus``, its effective set,
``cpu.max`` and its process's ``sched_getaffinity`` (:func:`observe_container`), the agent's capability
sets (:func:`capabilities`), its JSON log lines (:func:`log_events`) and its HTTP endpoints (:func:`http_get`).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.vm.agentpods import SANDBOX, PodSpec, agent_config, kubelet_state_none
from tests.vm.background import Background
from tests.vm.kubetree import Container, KubeTree, Pod, affinity, cpu_max, cpus, cpus_effective

__all__ = [
    "SETPRIV",
    "AgentNode",
    "capabilities",
    "event_summary",
    "free_port",
    "http_get",
    "log_events",
    "metric_samples",
    "metrics_port",
    "observe_container",
    "started_line",
    "unprivileged",
    "wait_ready",
]

SETPRIV = "/usr/bin/setpriv"
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def unprivileged(argv: Sequence[str]) -> list[str]:
    """``argv`` run as uid 0 with an empty bounding set and no inheritable or ambient capabilities.

    After ``execve`` such a process has no capability in any set (permitted is masked by the bounding set).
    """
    return [SETPRIV, "--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all", "--", *argv]


def capabilities(pid: int) -> dict[str, str]:
    """``Uid``, ``Cap*`` and ``NoNewPrivs`` of ``pid`` from ``/proc/<pid>/status`` (first field of each line)."""
    wanted = ("Uid", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs")
    found: dict[str, str] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in wanted:
            found[key] = value.split()[0]
    return found


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def http_get(url: str, timeout: float = 10.0) -> tuple[int, str]:
    """Status and body of a GET (an HTTP error status is an answer; no connection is status 0)."""
    try:
        with _OPENER.open(url, timeout=timeout) as response:
            return int(response.status), response.read().decode(errors="replace")
    except urllib.error.HTTPError as err:
        return int(err.code), err.read().decode(errors="replace")
    except (urllib.error.URLError, OSError) as err:
        return 0, str(err)


def log_events(text: str) -> list[dict[str, Any]]:
    """The JSON log lines in ``text`` (other lines, such as a traceback, are skipped)."""
    events: list[dict[str, Any]] = []
    for line in text.splitlines():
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            events.append(value)
    return events


def observe_container(container: Container, pid: int | None) -> dict[str, str | None]:
    """What the kernel says about one container: its files and its process's affinity (None: no process)."""
    return {
        "cpuset.cpus": str(cpus(container.path)),
        "effective": str(cpus_effective(container.path)),
        "cpu.max": cpu_max(container.path),
        "affinity": None if pid is None else str(affinity(pid)),
    }


@dataclass(slots=True)
class AgentNode:
    """The agent's inputs in the guest and the kubepods tree it manages; see the module docstring.

    Args:
        tree: the kubepods tree (already ``setup()``).
        base: a fresh directory in the guest's ``/tmp`` for pods, state, configuration.
        node_name: ``nodeName`` of the configuration.
    """

    tree: KubeTree
    base: Path
    node_name: str = "vm-node"
    pods: dict[str, Pod] = field(default_factory=dict)
    containers: dict[tuple[str, str], Container] = field(default_factory=dict)
    processes: dict[tuple[str, str], subprocess.Popen[bytes]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for directory in (self.pods_dir, self.state_dir):
            directory.mkdir(parents=True, exist_ok=True)
        self.kubelet_state.write_text(kubelet_state_none())

    @property
    def pods_dir(self) -> Path:
        """``--pods-dir``: one manifest per pod."""
        return self.base / "pods"

    @property
    def state_dir(self) -> Path:
        """``stateDir``: the agent's checkpoint."""
        return self.base / "state"

    @property
    def kubelet_state(self) -> Path:
        """``kubeletCPUManagerStatePath``: a kubelet with ``cpuManagerPolicy: none``."""
        return self.base / "cpu_manager_state"

    @property
    def checkpoint(self) -> Path:
        """The agent's checkpoint file."""
        return self.state_dir / "podpin_state.json"

    def write_config(self, name: str, *, reconcile_period: str, cgroup_watch: str = "auto") -> Path:
        """Write a configuration file (see :func:`agentpods.agent_config`) and return its path."""
        config = agent_config(
            node_name=self.node_name,
            state_dir=str(self.state_dir),
            kubelet_state=str(self.kubelet_state),
            reconcile_period=reconcile_period,
            cgroup_watch=cgroup_watch,
        )
        self.base.mkdir(parents=True, exist_ok=True)
        path = self.base / name
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    def write_manifest(self, spec: PodSpec, *, started: Sequence[str] | None = None) -> Path:
        """Publish the pod (atomically: temp file + rename, so the agent never reads half a manifest)."""
        path = self.pods_dir / spec.file_name
        tmp = self.pods_dir / f".{spec.file_name}.tmp"
        tmp.write_text(yaml.safe_dump(spec.manifest(started=started), sort_keys=False))
        os.replace(tmp, path)
        return path

    def add_pod_cgroup(self, spec: PodSpec, *, pause: bool = True) -> Pod:
        """The pod slice with the kubelet's pod ``cpu.max``, and its sandbox scope (with a ``pause`` process).

        containerd creates the sandbox (pause container) scope before any container of the pod; no
        container status names it, so podpin must treat it as an unidentified child of the pod.
        """
        pod = self.tree.add_pod(qos=spec.qos, uid=spec.uid, cpu_max=spec.kubelet_cpu_max)
        self.pods[spec.uid] = pod
        sandbox = self.tree.add_container(pod, container_id=spec.sandbox_id)
        self.containers[(spec.uid, SANDBOX)] = sandbox
        if pause:
            self.processes[(spec.uid, SANDBOX)] = self.tree.start_process(sandbox.path)
        return pod

    def add_container_cgroup(self, spec: PodSpec, name: str) -> Container:
        """A container scope in the pod slice, with the kubelet's container ``cpu.max``."""
        pod = self.pods[spec.uid]
        container = self.tree.add_container(
            pod, container_id=spec.container_id(name), cpu_max=spec.container(name).kubelet_cpu_max
        )
        self.containers[(spec.uid, name)] = container
        return container

    def start(self, spec: PodSpec, name: str, *, busy: bool = False) -> subprocess.Popen[bytes]:
        """Start the container's process (sleeping, or ``busy`` spinning) inside its scope."""
        proc = self.tree.start_process(self.containers[(spec.uid, name)].path, busy=busy)
        if not busy:
            self.processes[(spec.uid, name)] = proc
        return proc

    def add_pod(self, spec: PodSpec, *, manifest: bool = True) -> None:
        """Manifest (optional), pod slice, every container scope and a sleeping process in each."""
        if manifest:
            self.write_manifest(spec)
        self.add_pod_cgroup(spec)
        for container in spec.containers:
            self.add_container_cgroup(spec, container.name)
            self.start(spec, container.name)

    def observe(self, specs: Iterable[PodSpec]) -> dict[str, dict[str, dict[str, str | None]]]:
        """Per pod ``namespace/name``, per container: :func:`observe_container`; plus ``(pod)`` for the pod slice
        and ``(sandbox)`` for the sandbox scope."""
        observed: dict[str, dict[str, dict[str, str | None]]] = {}
        for spec in specs:
            pod = self.pods.get(spec.uid)
            if pod is None:
                continue
            per: dict[str, dict[str, str | None]] = {
                "(pod)": {
                    "cpuset.cpus": str(cpus(pod.path)),
                    "effective": str(cpus_effective(pod.path)),
                    "cpu.max": cpu_max(pod.path),
                    "affinity": None,
                }
            }
            for name in (SANDBOX, *(c.name for c in spec.containers)):
                cgroup = self.containers.get((spec.uid, name))
                if cgroup is not None:
                    proc = self.processes.get((spec.uid, name))
                    per[name] = observe_container(cgroup, None if proc is None else proc.pid)
            observed[f"{spec.namespace}/{spec.name}"] = per
        return observed

    def qos_cpus(self) -> dict[str, str]:
        """``cpuset.cpus`` of the burstable and besteffort slices (podpin confines them to the node shared pool)."""
        return {qos: str(cpus(self.tree.qos_slice(qos))) for qos in ("burstable", "besteffort")}


def started_line(agent: Background, *, timeout: float) -> dict[str, Any]:
    """The ``agent.started`` log line of the agent's current run, parsed.

    Raises:
        BackgroundError: the agent exited or did not log it within ``timeout`` s (with its output tail).
    """
    line = agent.wait_for_output(r'"event": "agent.started"', timeout=timeout)
    parsed: dict[str, Any] = json.loads(line)
    return parsed


def metrics_port(started: Mapping[str, Any]) -> int:
    """The bound metrics port the ``agent.started`` line names (``metrics: HOST:PORT``).

    Raises:
        ValueError: the line has no ``metrics`` field or it is not ``HOST:PORT`` (quoting the line).
    """
    address = started.get("metrics")
    _host, sep, port = str(address).rpartition(":")
    if address is None or not sep or not port.isdigit() or int(port) == 0:
        raise ValueError(f"agent.started names no bound metrics port (metrics={address!r}): {dict(started)}")
    return int(port)


def wait_ready(port: int, *, timeout: float, running: Callable[[], bool]) -> float:
    """Poll ``/readyz`` until it answers 200; returns the seconds waited.

    Args:
        port: the agent's metrics port on 127.0.0.1.
        timeout: seconds before giving up.
        running: a callable returning whether the agent still runs (a dead agent fails at once).

    Raises:
        TimeoutError: not ready in time, or the agent exited; the message has the last answer.
    """
    started = time.monotonic()
    last: tuple[int, str] = (0, "no answer yet")
    while time.monotonic() - started < timeout:
        last = http_get(f"http://127.0.0.1:{port}/readyz", timeout=5.0)
        if last[0] == 200:
            return round(time.monotonic() - started, 3)
        if not running():
            raise TimeoutError(f"the agent exited before /readyz answered 200 (last answer {last})")
        time.sleep(0.1)
    raise TimeoutError(f"/readyz on port {port} not 200 after {timeout} s (last answer {last})")


def metric_samples(text: str, names: Iterable[str]) -> dict[str, float]:
    """Samples of the named metrics from Prometheus text (``name{labels}`` as key), others dropped."""
    wanted = tuple(names)
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(wanted):
            continue
        key, _, value = line.rpartition(" ")
        try:
            samples[key] = float(value)
        except ValueError:
            continue
    return samples


def event_summary(events: Iterable[Mapping[str, Any]], names: Iterable[str]) -> list[dict[str, Any]]:
    """The log lines whose ``event`` is in ``names``, reduced to the fields that identify them."""
    keep = set(names)
    fields = ("event", "namespace", "pod", "container", "cgroup_level", "cpus", "files", "reason", "path")
    return [{k: e[k] for k in fields if k in e} for e in events if e.get("event") in keep]
