"""Guest side: a node with a real containerd, a kubelet stand-in, a simulated API server and ``podpin run``.

:class:`RuntimeNode` puts together what the real-runtime scenarios need:

- containerd 1.7 + runc (``containerd.py``), the test images imported;
- the kubelet's part over CRI (``crikubelet.py``): pod cgroups (cgroupfs driver), sandboxes, containers;
- the API server's part: pod manifests in ``--pods-dir``, published without a status when the pod is bound
  (before the kubelet starts it), and with ``status.containerStatuses`` naming the runtime's container ids
  only ``status_delay`` seconds after each container started (the API lag), or never (``None``);
- ``podpin run`` as the DaemonSet runs it (uid 0, every capability dropped), in one of the :data:`MODES`;
- a :class:`~pinwindow.WindowObserver` on every pod cgroup started, for the pin window of each container.

Modes say how podpin may learn who a new container is. ``bundle``: ``--runtime-root /``, so podpin reads
containerd's bundles. ``api``: ``--runtime-root`` an empty directory, so only the pod status names containers
(the baseline). ``nri``: containerd's NRI section on (``containerd_nri=True``), podpin's ``nri`` settings in
``agent_config`` and no runtime state visible, so podpin learns each container from NRI's CreateContainer
before it exists; :meth:`RuntimeNode.use_mode` restarts containerd when the NRI switch changes.
"""

from __future__ import annotations

import heapq
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from agent.cpuset import CPUSet
from tests.vm import ociimage
from tests.vm.agentpods import PodSpec, agent_config, kubelet_state_none
from tests.vm.agentrun import free_port, http_get, log_events, metric_samples, started_line, unprivileged, wait_ready
from tests.vm.background import Background, podpin
from tests.vm.containerd import Containerd, ContainerdConfig
from tests.vm.crikubelet import CRIKubelet, PodRun, first_view, probe_uptime
from tests.vm.kubetree import hold_cfs_bandwidth
from tests.vm.matrix import MATRIX, RuntimeChoice
from tests.vm.pinwindow import WindowObserver
from tests.vm.runtimepods import manifest
from tests.vm.scenario import wait_until

__all__ = ["MODES", "NRI_SOCKET", "Mode", "RuntimeNode", "StatusWriter", "container_records"]

AGENT_START_TIMEOUT = 180.0
METRICS = (
    "podpin_container_pins_total",
    "podpin_runtime_identity_errors_total",
    "podpin_pin_latency_seconds_count",
    "podpin_pinning_errors_total",
    "podpin_nri_requests_total",
    "podpin_nri_connected",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Mode:
    """How podpin learns who a new container is (see the module docstring)."""

    name: str
    runtime_root: Path | None
    """``--runtime-root``; None: an empty directory (no runtime state visible to podpin)."""
    containerd_nri: bool = False
    """containerd's ``[plugins."io.containerd.nri.v1.nri"] disable = false``."""
    agent_config: Mapping[str, Any] = field(default_factory=dict)
    """Configuration keys added to the agent's (an NRI mode puts its ``nri`` settings here)."""


NRI_SOCKET = Path("/var/run/nri/nri.sock")
"""Where containerd listens for NRI plugins in the guest (``ContainerdConfig.nri_socket``)."""

MODES: dict[str, Mode] = {
    "nri": Mode(
        name="nri",
        runtime_root=None,
        containerd_nri=True,
        agent_config={"nri": {"enabled": True, "socketPath": str(NRI_SOCKET)}},
    ),
    "bundle": Mode(name="bundle", runtime_root=Path("/")),
    "api": Mode(name="api", runtime_root=None),
}
"""The modes the scenarios run. ``nri``: containerd's NRI on and no runtime state visible, so only NRI (or,
seconds later, the status) names a container. In ``bundle`` and ``api`` podpin keeps its default
``nri.enabled: true`` while containerd's NRI is off: the socket is absent, as on a node without NRI."""


@dataclass(slots=True)
class StatusWriter:
    """The API server's view of pod statuses: publishes each container's id ``delay`` seconds after its start.

    Writes go through a thread, in time order; a pod :meth:`forget`-ed (deleted) is never written again.
    """

    pods_dir: Path
    _queue: list[tuple[float, int, str, str, str]] = field(default_factory=list)
    _reported: dict[str, dict[str, str]] = field(default_factory=dict)
    _specs: dict[str, PodSpec] = field(default_factory=dict)
    _seq: int = 0
    _cv: threading.Condition = field(default_factory=threading.Condition)
    _stop: bool = False
    _thread: threading.Thread | None = None
    written: list[tuple[float, str, str]] = field(default_factory=list)
    """``(time.monotonic() just before the write, pod uid, container)`` of each status published."""

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="status-writer", daemon=True)
        self._thread.start()

    def publish(self, spec: PodSpec) -> None:
        """Write the pod as bound but not started (no status), replacing any earlier manifest."""
        with self._cv:
            self._specs[spec.uid] = spec
            self._reported[spec.uid] = {}
            self._write(spec, {})

    def schedule(self, spec: PodSpec, name: str, container_id: str, at: float) -> None:
        """Publish container ``name``'s id at ``at`` (``time.monotonic()``)."""
        with self._cv:
            self._seq += 1
            heapq.heappush(self._queue, (at, self._seq, spec.uid, name, container_id))
            self._cv.notify()

    def forget(self, spec: PodSpec) -> None:
        """The pod is deleted: remove its manifest and drop its pending statuses."""
        with self._cv:
            self._specs.pop(spec.uid, None)
            self._reported.pop(spec.uid, None)
            self._queue = [entry for entry in self._queue if entry[2] != spec.uid]
            heapq.heapify(self._queue)
            (self.pods_dir / spec.file_name).unlink(missing_ok=True)

    def _write(self, spec: PodSpec, ids: Mapping[str, str]) -> None:
        path = self.pods_dir / spec.file_name
        tmp = self.pods_dir / f".{spec.file_name}.tmp"
        tmp.write_text(yaml.safe_dump(manifest(spec, ids), sort_keys=False))
        os.replace(tmp, path)

    def _run(self) -> None:
        with self._cv:
            while not self._stop:
                now = time.monotonic()
                if self._queue and self._queue[0][0] <= now:
                    _at, _seq, uid, name, container_id = heapq.heappop(self._queue)
                    spec = self._specs.get(uid)
                    if spec is not None:
                        self._reported[uid][name] = container_id
                        stamp = time.monotonic()  # before the write: nobody can react to it earlier
                        self._write(spec, self._reported[uid])
                        self.written.append((stamp, uid, name))
                    continue
                self._cv.wait(timeout=None if not self._queue else max(0.0, self._queue[0][0] - now))

    def stop(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify()
        if self._thread is not None:
            self._thread.join(timeout=5.0)


class RuntimeNode:
    """One guest node; see the module docstring.

    Args:
        workdir: the scenario's host-visible directory (logs, topology, configuration).
        vm_dir: ``$PODPIN_VM_DIR`` as the guest sees it (containerd and busybox are under ``runtime/``).
        base: guest scratch space for the agent's pods, state and configuration.
    """

    def __init__(
        self,
        workdir: Path,
        vm_dir: Path,
        *,
        base: Path = Path("/tmp/podpin-rt"),
        runtime: RuntimeChoice = MATRIX["containerd-1.7"],
        built_root: Path = Path("/tmp/podpin-runtimes"),
    ) -> None:
        self.workdir = workdir
        self.vm_dir = vm_dir
        self.base = base
        self.runtime = runtime
        self.built_root = built_root
        hold_cfs_bandwidth()  # TCG: no kernel text patching per container (kubetree.hold_cfs_bandwidth)
        shutil.rmtree(base, ignore_errors=True)
        self.pods_dir = base / "pods"
        self.state_dir = base / "state"
        self.empty_root = base / "no-runtime-state"
        for directory in (self.pods_dir, self.state_dir, self.empty_root):
            directory.mkdir(parents=True, exist_ok=True)
        self.kubelet_state = base / "cpu_manager_state"
        self.kubelet_state.write_text(kubelet_state_none())
        self.containerd = Containerd(self.containerd_config(nri=False), log_path=workdir / "containerd.log")
        self.kubelet: CRIKubelet | None = None
        self.status = StatusWriter(self.pods_dir)
        self.status.start()
        self.observer = WindowObserver(bundles=self.containerd.config.bundles)
        self.observer.start()
        self.mode: Mode | None = None
        self.agent: Background | None = None
        self.port = 0
        self.state_port = 0
        self.runs: dict[str, PodRun] = {}

    # -- the runtime --------------------------------------------------------------------------
    def containerd_config(self, *, nri: bool, request_timeout: str | None = None) -> ContainerdConfig:
        """The chosen runtime's configuration (its binaries, runc, config version) with NRI on or off."""
        return ContainerdConfig(
            runtime_bin=self.runtime.bin_dir(self.vm_dir, self.built_root),
            runc=self.runtime.runc(self.vm_dir, self.built_root),
            version=self.runtime.config_version,
            nri=nri,
            nri_request_timeout=request_timeout,
        )

    def start_runtime(self, *, nri: bool = False) -> dict[str, Any]:
        """Start containerd (NRI on or off), import the images, make the kubepods tree; returns what it saw."""
        self.containerd = Containerd(self.containerd_config(nri=nri), log_path=self.containerd.log_path)
        client = self.containerd.start()
        version = client.version()
        images = self.containerd.import_images(self.vm_dir / "runtime" / "busybox")
        self.kubelet = CRIKubelet(client)
        self.kubelet.setup()
        return {
            "runtime": f"{version.runtime_name} {version.runtime_version}",
            "runtime_api": version.runtime_api_version,
            "start_seconds": self.containerd.start_seconds[-1],
            "images": [image for image in images if not image.startswith("sha256:")],
            "runc": _runc_version(self.containerd.config.runc_path),
            "matrix": self.runtime.name,
        }

    @property
    def cri(self) -> CRIKubelet:
        if self.kubelet is None:
            raise RuntimeError("start_runtime() first")
        return self.kubelet

    def restart_containerd(self, *, config: ContainerdConfig | None = None) -> float:
        """SIGKILL containerd and start it again over the same state (shims and containers keep running); with
        ``config`` (see :meth:`containerd_config`), the new daemon runs on that, for example with another NRI
        ``plugin_request_timeout``. Returns the seconds the new daemon took to serve CRI."""
        if config is None:
            self.containerd.restart()
            return self.containerd.start_seconds[-1]
        self.containerd.kill()
        self.containerd = Containerd(config, log_path=self.containerd.log_path)
        self.cri.client = self.containerd.start()
        return self.containerd.start_seconds[-1]

    def use_mode(self, mode: Mode) -> None:
        """Make containerd's NRI switch match ``mode`` (restarting containerd if it changes)."""
        if self.containerd.config.nri != mode.containerd_nri:
            self.containerd.stop()
            self.containerd = Containerd(
                self.containerd_config(nri=mode.containerd_nri), log_path=self.containerd.log_path
            )
            self.cri.client = self.containerd.start()
        self.mode = mode

    # -- the agent ----------------------------------------------------------------------------
    def config_path(self, mode: Mode) -> Path:
        return self.base / f"config-{mode.name}.yaml"

    def start_agent(self, mode: Mode, *, fresh_state: bool = True, period: str = "10s") -> dict[str, Any]:
        """Start ``podpin run`` unprivileged in ``mode``; returns its start line fields and readiness time."""
        self.use_mode(mode)
        if fresh_state:
            shutil.rmtree(self.state_dir, ignore_errors=True)
            self.state_dir.mkdir(parents=True)
        config = agent_config(
            node_name="vm-node",
            state_dir=str(self.state_dir),
            kubelet_state=str(self.kubelet_state),
            reconcile_period=period,
            cgroup_watch="inotify",
            extra={"cgroupDriver": "cgroupfs", **mode.agent_config},
        )
        path = self.config_path(mode)
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        shutil.copy(path, self.workdir / "config.yaml")
        self.port, self.state_port = free_port(), free_port()
        root = mode.runtime_root if mode.runtime_root is not None else self.empty_root
        argv = podpin("run", "--config", str(path), "--pods-dir", str(self.pods_dir), "--runtime-root", str(root))
        argv += ["--metrics-bind-address", f"127.0.0.1:{self.port}"]
        argv += ["--state-bind-address", f"127.0.0.1:{self.state_port}"]
        self.kill_agent()
        since = len(self.agent_events())
        agent = Background(unprivileged(argv), log_path=self.workdir / "agent.log")
        self.agent = agent
        agent.start()
        started = started_line(agent, timeout=AGENT_START_TIMEOUT)
        ready = wait_ready(self.port, timeout=AGENT_START_TIMEOUT, running=lambda: agent.running)
        fields = {"runtime_root": started.get("runtime_root"), "ready_after_s": ready, "pid": agent.pid}
        if mode.containerd_nri:
            # The plugin registers after the first planned pass, so after readiness: a pod started before
            # its Synchronize would be created without podpin's NRI answer (a load-dependent race).
            began = time.monotonic()
            self.wait_synchronized(since)
            fields["nri_synchronized_after_s"] = round(ready + time.monotonic() - began, 3)
        return fields

    def wait_synchronized(self, since: int, count: int = 1, timeout: float = 60.0) -> list[dict[str, Any]]:
        """Wait for ``count`` ``nri.synchronized`` lines of the agent after its ``since``-th log line; returns them."""

        def synchronized() -> list[dict[str, Any]] | None:
            found = [e for e in self.agent_events()[since:] if e.get("event") == "nri.synchronized"]
            return found if len(found) >= count else None

        return wait_until("the agent synchronized with containerd's NRI", synchronized, timeout=timeout, interval=0.1)

    def kill_agent(self) -> None:
        """SIGKILL the agent (a crash: nothing cleaned up)."""
        if self.agent is not None and self.agent.running:
            self.agent.kill()

    def agent_events(self) -> list[dict[str, Any]]:
        """Every JSON log line of every agent run so far."""
        path = self.workdir / "agent.log"
        return log_events(path.read_text(errors="replace")) if path.exists() else []

    def metrics(self) -> dict[str, float]:
        status, body = http_get(f"http://127.0.0.1:{self.port}/metrics")
        return metric_samples(body, METRICS) if status == 200 else {"status": float(status)}

    def state(self) -> dict[str, Any]:
        """The agent's ``/state`` document (served on ``--state-bind-address``).

        Raises:
            RuntimeError: it did not answer 200.
        """
        status, body = http_get(f"http://127.0.0.1:{self.state_port}/state")
        if status != 200:
            raise RuntimeError(f"/state answered {status}: {body[:300]}")
        document: dict[str, Any] = json.loads(body)
        return document

    def plan(self) -> dict[tuple[str, str], str]:
        """(pod uid, container) -> CPUs, from the agent's plan."""
        return {(p["uid"], c["name"]): c["cpus"] for p in self.state()["plan"]["pods"] for c in p["containers"]}

    def wait_admitted(self, specs: Sequence[PodSpec], timeout: float = 60.0) -> dict[tuple[str, str], str]:
        """Wait until the agent's plan holds every pod of ``specs``; returns the plan."""
        uids = {spec.uid for spec in specs}

        def admitted() -> dict[tuple[str, str], str] | None:
            plan = self.plan()
            return plan if uids <= {uid for uid, _ in plan} else None

        return wait_until("pods admitted by the agent", admitted, timeout=timeout, interval=0.05)

    # -- pods ---------------------------------------------------------------------------------
    def start_pod(
        self,
        spec: PodSpec,
        image: ociimage.ImageSpec,
        *,
        status_delay: float | None,
        names: Sequence[str] | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> PodRun:
        """What the kubelet does for a bound pod: pod cgroup (watched), sandbox (with the pod's ``annotations``),
        each container of ``names`` (default: all) created and started; each container's status is published
        ``status_delay`` s after it started (None: never)."""
        cgroup = self.cri.create_pod_cgroup(spec)
        self.observer.watch_pod(cgroup)
        run = self.cri.run_sandbox(spec, cgroup, annotations=annotations)
        self.runs[spec.uid] = run
        order = [c.name for c in spec.containers if c.sidecar] + [c.name for c in spec.containers if not c.sidecar]
        for name in order if names is None else names:
            container_id = self.cri.create_container(run, name, image)
            self.cri.start_container(run, name)
            if status_delay is not None:
                self.status.schedule(spec, name, container_id, run.started[name] + status_delay)
        return run

    def start_pods(
        self, specs: Sequence[PodSpec], image: ociimage.ImageSpec, *, status_delay: float | None
    ) -> dict[tuple[str, str], str]:
        """Publish ``specs`` (no status), wait for the agent to admit them, then start them side by side.

        Returns:
            the agent's plan once they were admitted.
        """
        for spec in specs:
            self.status.publish(spec)
        plan = self.wait_admitted(specs)
        with ThreadPoolExecutor(max_workers=max(1, len(specs))) as pool:
            for future in [pool.submit(self.start_pod, spec, image, status_delay=status_delay) for spec in specs]:
                future.result()
        return plan

    def delete_pod(self, spec: PodSpec) -> None:
        """The pod is deleted: its manifest goes, then the kubelet stops and removes it."""
        self.status.forget(spec)
        run = self.runs.pop(spec.uid, None)
        if run is not None:
            self.cri.stop_pod(run)

    def delete_pods(self, specs: Sequence[PodSpec]) -> None:
        """Delete several pods side by side (each as :meth:`delete_pod`)."""
        with ThreadPoolExecutor(max_workers=max(1, len(specs))) as pool:
            for future in [pool.submit(self.delete_pod, spec) for spec in specs]:
                future.result()

    def cpusets(self) -> dict[str, str]:
        """``cpuset.cpus.effective`` of every pod cgroup and child started here (``<pod>/<child id>``)."""
        found = {}
        for run in self.runs.values():
            for path in (run.cgroup, *(p for p in run.cgroup.iterdir() if p.is_dir())):
                key = str(path.relative_to(self.cri.root))
                found[key] = (path / "cpuset.cpus.effective").read_text().strip()
        return found

    def close(self) -> None:
        """Stop the agent, every pod, containerd, and the helper threads."""
        if self.agent is not None:
            self.agent.close()
        for spec_uid in list(self.runs):
            run = self.runs.pop(spec_uid)
            try:
                self.cri.stop_pod(run)
            except Exception as err:  # end of the scenario: say so on stderr, the poweroff takes the rest
                sys.stderr.write(f"runtimenode: cannot stop pod {run.spec.name}: {err}\n")
        self.status.stop()
        self.observer.stop()
        if self.kubelet is not None:
            self.kubelet.close()
        self.containerd.close()


def container_records(
    node: RuntimeNode, runs: Sequence[PodRun], plan: Mapping[tuple[str, str], str], *, timeout: float = 60.0
) -> list[dict[str, Any]]:
    """For each container of ``runs``: its planned CPUs, what it saw first, its final effective set and window.

    Waits (up to ``timeout`` s overall) for every container to print its first view and to reach its planned
    set. ``window_ms`` is from its cgroup appearing to ``cpuset.cpus`` holding the plan's CPUs (None: never);
    ``first_view_final``: the first view already was that set; ``started_after_ms``: from the cgroup appearing
    to the entrypoint reading its affinity (guest ``/proc/uptime``, 10 ms resolution: the race podpin runs);
    ``status_after_ms``: from the cgroup appearing to its status being published (None: not yet, or never);
    ``spec_cpus``: ``linux.resources.cpu.cpus`` of the container's OCI spec as containerd wrote it (runc applies it
    at creation; NRI's adjustment lands there), None when unset or unreadable.
    """
    deadline = time.monotonic() + timeout
    records = []
    for run in runs:
        for name, container_id in run.containers.items():
            expected = CPUSet.parse(plan[(run.spec.uid, name)])
            seen = _wait(partial(first_view, run.log_path(name)), deadline)
            child = _wait(partial(node.observer.child, container_id), deadline)
            if child is not None:
                _wait(partial(child.first_time, expected), deadline)
            effective = (run.container_cgroup(name) / "cpuset.cpus.effective").read_text().strip()
            uptime = probe_uptime(run.log_path(name))
            published = [at for at, uid, written in node.status.written if (uid, written) == (run.spec.uid, name)]
            records.append(
                {
                    "pod": run.spec.name,
                    "uid": run.spec.uid,
                    "container": name,
                    "id": container_id,
                    "planned": str(expected),
                    "first_view": None if seen is None else str(seen),
                    "first_view_final": seen == expected,
                    "effective": effective,
                    "window_ms": None if child is None else child.window_ms(expected),
                    "status_after_ms": None
                    if child is None or not published
                    else round((published[0] - child.appeared) * 1000, 1),
                    "started_after_ms": None
                    if child is None or uptime is None
                    else round((uptime - child.appeared) * 1000, 1),
                    "values": [] if child is None else [v for _, v in child.values],
                    "bundle_at_appearance": None if child is None else child.bundle_at_appearance,
                    "spec_cpus": _spec_cpus(node.containerd.config.bundles / container_id / "config.json"),
                }
            )
    return records


def _spec_cpus(path: Path) -> str | None:
    """``linux.resources.cpu.cpus`` of an OCI ``config.json``, or None.

    A file that cannot be read or parsed is read again for up to a second (the runtime may be rewriting it); a
    complete spec without a cpuset is None at once.
    """
    spec = None
    for _ in range(20):
        try:
            spec = json.loads(path.read_text())
            break
        except (OSError, ValueError):
            time.sleep(0.05)
    if not isinstance(spec, dict):
        return None
    cpus = (((spec.get("linux") or {}).get("resources") or {}).get("cpu") or {}).get("cpus")
    return cpus if isinstance(cpus, str) and cpus else None


def _wait(probe: Callable[[], Any], deadline: float) -> Any:
    """Poll ``probe`` until it returns something other than None or ``deadline`` passes; its last answer."""
    while True:
        value = probe()
        if value is not None or time.monotonic() >= deadline:
            return value
        time.sleep(0.02)


def _runc_version(runc: Path) -> str:
    """The first line of ``runc --version``."""
    proc = subprocess.run([str(runc), "--version"], capture_output=True, text=True, timeout=30, check=False)
    return (proc.stdout or proc.stderr).splitlines()[0] if (proc.stdout or proc.stderr) else f"exit {proc.returncode}"
