"""``podpin run``: wiring the agent together and running its loop (the imperative shell).

Building an :class:`Agent` reads nothing; :meth:`Agent.prepare` does the start-up, in order, each failure being
one line and a non-zero exit:
configuration (with flag overrides), node name, topology from sysfs, the cgroup
v2 layout (cgroup v1 is refused), the state directory (a symlink is refused;
temp files a crash left are removed), the checkpoint (missing, corrupt or not
fitting: set aside and rebuilt from the live cgroups with a warning and a
metric), the planner (a configuration that does not fit the machine is
refused), the pod source (API server or directory), the HTTP servers (the
metrics and probes; ``/state`` only when ``stateBindAddress`` is set).

The loop is single-threaded: sources, the cgroup watcher and the signal handler
only put items on a queue; the loop drains it, runs a reconcile pass, and every
``reconcilePeriod`` forces a full pass (drift repair, usage sampling, CPU
hotplug check). With ``nri.enabled`` (the default) a thread waits for the
runtime's NRI socket and serves it as an NRI plugin (``agent/nri/plugin.py``);
it registers once the first pod list is planned, and its requests reach the
loop through the same queue and are answered there
(``agent/reconcile/nri_handler.py``, ``nri_desk.py``). No socket, ``--once`` or
a dry run: no plugin, and protobuf is never loaded. A full pass yields to queued work between its steps
(:meth:`Agent.work_waiting`); the loop then handles the queue, runs a pass
for it, and continues the full pass where it stopped. ``--once`` runs one full
pass after the first pod list and exits (status 2 when no pod list arrives
within three reconcile periods, an API server that cannot be reached). SIGTERM
and SIGINT stop everything within a few seconds. While it runs (dry runs aside)
the agent holds the node's lock in its state directory
(``agent/agent_lock.py``): a second agent, or a ``podpin reset``, is refused
until it stops.
"""

from __future__ import annotations

import queue
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import structlog

from agent.agent_lock import AgentLock, LockHeldError, acquire_lock
from agent.alloc import CheckpointError, Planner, PlannerError, state_to_checkpoint
from agent.audit import AffinityAudit, InterferenceCollector, PsutilProbe
from agent.cgroups import (
    CgroupError,
    CgroupFS,
    CgroupLayout,
    CgroupWatcher,
    FileOps,
    WatchEvent,
    WatchMode,
    detect_layout,
)
from agent.config import AgentConfig, ConfigError
from agent.config_flags import with_flags
from agent.config_follow import ConfigFollower
from agent.cpuset import CPUSet, CPUSetError
from agent.fault_boundary import Stage
from agent.footprint import trim_heap
from agent.kube import DirSource, EventRecorder, KubeConfigError, KubeSource, PodEvent, PodSource, load_api
from agent.kube.conditions import ConditionWriter
from agent.kube.node_identity import NodeIdentity
from agent.kubelet_state import KubeletPolicyReader
from agent.metrics import AgentMetrics
from agent.node_config import KubeletRefusalError, LabelReader, NodeConfig, node_config
from agent.nri import CallOutcome, ConnectionEvent, ConnectionKind, Job, Report
from agent.nrt.publisher import NRTPublisher, nrt_publisher_for
from agent.reconcile import Reconciler, Reporter
from agent.reconcile.devices import device_gate_for
from agent.reconcile.loop_events import CgroupChanged, LoopEvent, NRICall, PodsChanged, StopLoop
from agent.reconcile.nri_desk import NRIDesk
from agent.reconcile.nri_handler import LoopCalls
from agent.reconcile.schedule import LoopSchedule, LoopStep
from agent.render import plan_to_dict
from agent.runtime import BundleReader
from agent.server import AgentServer, BindError, StateServer
from agent.state_store import DiskOps, StateStore
from agent.topology import Topology, TopologyError
from agent.topology.load import load_topology

__all__ = ["RunOptions", "AgentError", "Agent", "Configured", "configure"]

_NRI_SOCKET_POLL = 1.0
"""Seconds between looks for a missing NRI socket (a stat; quiet)."""


class AgentError(RuntimeError):
    """An agent-level failure: the message is the one line ``podpin run`` prints before exiting non-zero."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    """The ``podpin run`` flags (None = take the configuration's value)."""

    config: Path | None = None
    kubeconfig: str | None = None
    pods_dir: Path | None = None
    sysfs_root: Path = Path("/sys")
    proc_root: Path = Path("/proc")
    cgroup_root: Path | None = None
    state_dir: Path | None = None
    metrics_bind_address: str | None = None
    state_bind_address: str | None = None
    runtime_root: Path | None = None
    dry_run: bool = False
    once: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Configured:
    """What start-up reads first, once: the API client and the node's configuration with the flags applied.

    ``podpin run`` configures its logging from it before the agent is built, and the agent is built from it: the
    configuration file is read once.

    Attributes:
        api: the API server's calls; None with ``--pods-dir``.
        labels_of: reads a node's labels from the API server (group sections); None without one.
        made: the node's configuration (``agent/node_config.py``), the flags' overrides applied.
    """

    api: Any
    labels_of: LabelReader | None
    made: NodeConfig

    @property
    def config(self) -> AgentConfig:
        """The configuration the agent runs with."""
        return self.made.config


def configure(options: RunOptions) -> Configured:
    """Load the API client (unless ``--pods-dir``) and the node's configuration with the flags' overrides.

    Raises:
        AgentError: no API configuration, a bad configuration, a kubelet podpin must not run beside, no node name.
    """
    api = None
    if options.pods_dir is None:
        try:
            api = load_api(options.kubeconfig)
        except KubeConfigError as err:
            raise AgentError(f"API server: {err}") from err
    labels_of = _node_labels(api) if api is not None else None
    try:
        made = node_config(options.config, labels_of=labels_of)
    except KubeletRefusalError as err:
        raise AgentError(f"kubelet: {err}") from err
    except ConfigError as err:
        raise AgentError(f"configuration: {err}") from err
    config = with_flags(made.config, options)
    if not config.node_name:
        raise AgentError("no node name: set nodeName in the configuration or the NODE_NAME environment variable")
    return Configured(api=api, labels_of=labels_of, made=replace(made, config=config))


def _node_labels(api: Any) -> LabelReader:
    """Reads a node's labels from the API server (to choose its group section)."""

    def labels(node: str) -> Mapping[str, str]:
        found = (api.read_node(node, _request_timeout=10).get("metadata") or {}).get("labels") or {}
        return {str(key): str(value) for key, value in found.items()}

    return labels


def _node_identity(api: Any, node: str | None) -> NodeIdentity | None:
    """The Node's uid from the API server (mirror pods' owners are checked against it); None without one."""
    if api is None or not node:
        return None

    def read() -> str | None:
        uid = (api.read_node(node, _request_timeout=5).get("metadata") or {}).get("uid")
        return uid if isinstance(uid, str) else None

    return NodeIdentity(read)


class Agent:
    """The running agent: owns every thread and the single reconcile loop.

    Built in three steps, so that building one is free of effects: the constructor only keeps its inputs and
    makes the queue and events; :meth:`prepare` reads what the agent starts from (the configuration unless given,
    the topology, the cgroup layout, the checkpoint, the pod source) and builds every part, raising
    :class:`AgentError` for what ``podpin run`` reports as one line; :meth:`run` starts the threads and the loop.
    """

    # Built by :meth:`prepare` (each needs what it reads).
    config: AgentConfig
    config_follower: ConfigFollower
    topology: Topology
    layout: CgroupLayout
    store: StateStore
    metrics: AgentMetrics
    recorder: EventRecorder | None
    conditions: ConditionWriter | None
    reconciler: Reconciler
    source: PodSource
    nri_desk: NRIDesk
    nrt: NRTPublisher | None
    watcher: CgroupWatcher
    server: AgentServer
    state_server: StateServer | None

    def __init__(
        self,
        options: RunOptions,
        *,
        configured: Configured | None = None,
        file_ops: FileOps | None = None,
        disk_ops: DiskOps | None = None,
    ) -> None:
        """Keep the inputs; read nothing, start nothing (:meth:`prepare` reads, :meth:`run` starts).

        Args:
            options: the ``podpin run`` flags.
            configured: the API client and configuration :func:`configure` loaded (None: loaded by :meth:`prepare`).
            file_ops: how cgroup files are read and written (tests pass a kernel emulation).
            disk_ops: how the checkpoint is written (tests pass one that fails).
        """
        self.options = options
        self._configured = configured
        self._file_ops = file_ops
        self._disk_ops = disk_ops
        self._prepared = False
        self.log = structlog.get_logger("podpin")
        self.stop_event = threading.Event()
        #: Set by the loop after its first pass (the first pod list): the NRI plugin registers only then.
        self.planned = threading.Event()
        self._queue: queue.Queue[LoopEvent] = queue.Queue()
        self._heartbeat = time.monotonic()
        self._trimmed_sweeps = 0
        """The full passes completed when the heap was last trimmed (``agent/footprint.py``)."""
        self._ready_reason = "starting: no pod list yet"
        self._threads: list[threading.Thread] = []
        self._set_aside: list[str] = []
        self.nri_plugin: Any = None
        self._nri_synchronized = False
        self.metrics_address: str | None = None
        self.state_address: str | None = None
        self.failure: str | None = None
        self._lock: AgentLock | None = None

    def prepare(self) -> None:
        """Read what the agent starts from and build every part; nothing runs until :meth:`run`.

        In the order of the module docstring: the configuration (unless given), the topology, the cgroup layout,
        the state directory and checkpoint, the planner, the pod source, the HTTP servers' addresses. Called once
        (:meth:`run` calls it when nobody did).

        Raises:
            AgentError: an agent-level failure, as one line.
        """
        if self._prepared:
            return
        options = self.options
        configured = self._configured if self._configured is not None else configure(options)
        api, made = configured.api, configured.made
        self.config = made.config
        self.config_follower = ConfigFollower(
            options.config,
            made,
            labels_of=configured.labels_of,
            adjust=lambda config: with_flags(config, options),
            clock=time.monotonic,
        )
        self.log = self.log.bind(node=self.config.node_name)
        for event, fields in made.events:
            self._log_config_event(event, fields)
        self.topology = self._topology()
        self.layout = self._layout()
        fs = CgroupFS(self.config.cgroup_root, self._file_ops)
        self.store = StateStore(self.config.state_dir, self._disk_ops)
        planner, rebuild = self._planner()
        self.metrics = AgentMetrics(lambda: self.reconciler.snapshot)
        probe = PsutilProbe(self.options.proc_root)
        self.metrics.registry.register(InterferenceCollector(lambda: self.reconciler.snapshot, probe))
        for reason in self._set_aside:
            self.metrics.checkpoints_set_aside.labels(reason=reason).inc()
        self.recorder = (
            EventRecorder(api, self.config.node_name or "", on_outcome=self._count_event) if api is not None else None
        )
        self.conditions = (
            ConditionWriter(api, on_outcome=self._count_condition)
            if api is not None and not self.config.dry_run
            else None
        )
        reporter = Reporter(self.config.node_name or "", self.metrics, self.recorder, self.conditions)
        kubelet_policy = KubeletPolicyReader()
        self.reconciler = Reconciler(
            planner,
            layout=self.layout,
            fs=fs,
            reporter=reporter,
            store=self.store,
            kubelet=lambda: kubelet_policy(self.config.kubelet_cpu_manager_state_path),
            dry_run=self.config.dry_run,
            rebuild=rebuild,
            bundles=BundleReader(self.config.runtime_root, paths=self.config.runtime_paths),
            devices=device_gate_for(
                self.config.pod_resources_socket, self.config.device_wait_timeout, self.config.node_name
            ),
            audit=AffinityAudit(probe, period=self.config.reconcile_period),
            node_identity=_node_identity(api, self.config.node_name),
        )
        self.source = self._source(api)
        self.nri_desk = NRIDesk(
            self.reconciler,
            node=self.config.node_name or "",
            pod_wait=self.config.nri.pod_wait,
            pending=self.work_waiting,
        )
        self.nrt = nrt_publisher_for(
            self.config.planner,
            self.config.nrt,
            node_name=self.config.node_name,
            pod_resources_socket=self.config.pod_resources_socket,
            api=api,
            stop=self.stop_event,
            registry=self.metrics.registry,
        )
        watch_mode = WatchMode.AUTO if self.config.cgroup_watch == WatchMode.OFF else self.config.cgroup_watch
        self.watcher = CgroupWatcher(self.layout, self._on_cgroup, mode=watch_mode)
        self._said_unwatched = False
        self.metrics.cgroup_unwatched_containers.set_function(lambda: float(self.watcher.unwatched_containers))
        self.watcher.boundary = self.reconciler.boundary
        try:
            self.server = AgentServer(
                self.config.metrics_bind_address,
                self.metrics.registry,
                health=self.health,
                ready=self.ready,
                on_drop=self._count_drop,
            )
            self.state_server = (
                StateServer(self.config.state_bind_address, self.state, on_drop=self._count_drop)
                if self.config.state_bind_address
                else None
            )
        except ValueError as err:  # a --metrics/state-bind-address the configuration file never validated
            raise AgentError(str(err)) from err
        self._prepared = True

    # -- start-up pieces -----------------------------------------------------------------------
    def _topology(self) -> Topology:
        try:
            return load_topology(None, self.options.sysfs_root)
        except TopologyError as err:
            raise AgentError(f"topology: {err}") from err

    def _layout(self) -> CgroupLayout:
        try:
            layout = detect_layout(self.config.cgroup_root, self.config.cgroup_driver)
            layout.qos_dirs()  # a kubepods or QoS directory that leads outside the root is refused here, not in a pass
            return layout
        except CgroupError as err:
            raise AgentError(f"cgroups: {err}") from err

    def _planner(self) -> tuple[Planner, bool]:
        """The planner over the checkpoint, or over an empty state to be rebuilt from the live cgroups."""
        try:
            self.store.check()
        except OSError as err:
            raise AgentError(f"stateDir: {err.strerror}") from err
        stale = self.store.clean()
        if stale:
            self.log.warning("state.temp_removed", path=str(self.store.directory), files=stale)
        try:
            state = self.store.load()
        except CheckpointError as err:
            moved = self.store.quarantine()
            self._set_aside.append("corrupt")
            self.log.warning("state.corrupt", error=str(err), moved_to=str(moved) if moved else None)
            state = None
        try:
            if state is not None:
                try:
                    return Planner(self.topology, self.config.planner, state), False
                except CheckpointError as err:
                    moved = self.store.quarantine()
                    self._set_aside.append("invalid")
                    self.log.warning("state.invalid", error=str(err), moved_to=str(moved) if moved else None)
            else:
                self.log.warning("state.missing", path=str(self.store.path))
            return Planner(self.topology, self.config.planner), True
        except PlannerError as err:
            raise AgentError(f"configuration does not fit this machine: {err}") from err

    def _source(self, api: Any) -> PodSource:
        node = self.config.node_name or ""
        if self.options.pods_dir is not None:
            if not self.options.pods_dir.is_dir():
                raise AgentError(f"--pods-dir {self.options.pods_dir}: not a directory")
            return DirSource(self.options.pods_dir, node, on_error=lambda _: self.metrics.source_errors.inc())
        return KubeSource(node, api, resync_period=self.config.pod_resync_period, sleep=self._source_backoff)

    # -- callbacks from other threads ------------------------------------------------------------
    def _on_pods(self, event: PodEvent) -> None:
        self._queue.put(PodsChanged(event, time.monotonic()))

    def _on_cgroup(self, event: WatchEvent) -> None:
        self._queue.put(CgroupChanged(event, time.monotonic()))

    def _source_backoff(self, stop: threading.Event, delay: float) -> None:
        """The API source waits only after a failed list or watch: count the failure, then wait (or stop)."""
        self.metrics.source_errors.inc()
        stop.wait(delay)

    def _count_event(self, event_type: str, outcome: str) -> None:
        self.metrics.events.labels(type=event_type, result=outcome).inc()

    def _count_condition(self, outcome: str) -> None:
        self.metrics.condition_patches.labels(result=outcome).inc()

    def _count_drop(self, reason: str) -> None:
        self.metrics.http_dropped.labels(reason=reason).inc()

    # -- endpoints -------------------------------------------------------------------------------
    def health(self) -> tuple[bool, str]:
        """Alive: the loop turned recently and no worker thread died."""
        age = time.monotonic() - self._heartbeat
        limit = max(30.0, 3 * self.config.reconcile_period)
        if age > limit:
            return False, f"the reconcile loop has not turned for {age:.0f}s"
        if self.watcher.error is not None:
            return False, f"the cgroup watcher stopped: {self.watcher.error}"
        if self.reconciler.kubelet_replaced and self.reconciler.blocked is not None:
            return False, self.reconciler.blocked  # a restart mounts the kubelet's new checkpoint file
        dead = [t.name for t in self._threads if not t.is_alive()]
        if dead and not self.stop_event.is_set():
            return False, f"threads stopped: {', '.join(dead)}"
        return True, "ok"

    def ready(self) -> tuple[bool, str]:
        """Ready: state loaded, first full pass done, the kubelet not pinning CPUs, and the checkpoint saved.

        A checkpoint that cannot be saved does not stop the pinning, but a restart
        now would start from an older state: not ready, with the errno, until a
        save succeeds (``docs/design.md``, "Restart").
        """
        if self.reconciler.blocked is not None:
            return False, self.reconciler.blocked
        if self.reconciler.passes == 0:
            return False, self._ready_reason
        if self.reconciler.sweeps == 0:
            return False, "starting: the first full pass is not finished"
        failure = self.store.failure
        if failure is not None and not self.config.dry_run:
            return False, (
                f"the checkpoint cannot be saved ({failure.errno_name}: {failure.message}; {failure.attempts} "
                "attempts); pinning goes on, but a restart now would start from an older state"
            )
        return True, "ok"

    def state(self) -> dict[str, Any]:
        """The ``/state`` document: the checkpoint's data and the current plan."""
        snapshot = self.reconciler.snapshot
        if snapshot is None:
            return {"ready": False, "reason": self._ready_reason}
        return {
            "node": self.config.node_name,
            "ready": self.ready()[0],
            "blocked": self.reconciler.blocked,
            "state": state_to_checkpoint(snapshot.state)["data"],
            "plan": plan_to_dict(snapshot.plan),
        }

    # -- the loop --------------------------------------------------------------------------------
    def _spawn(self, name: str, target: Any) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _take(self, item: LoopEvent) -> bool:
        """Handle one queued item inside the pass's fault boundary; True when it asks for a targeted pass (one
        that failed still does: the pass finds out what is left)."""
        with self.reconciler.boundary.guard(Stage.PASS, "event"):
            return self._handle(item)
        return not isinstance(item, StopLoop)  # it failed (reported at the boundary)

    def _handle(self, item: LoopEvent) -> bool:
        if isinstance(item, PodsChanged):
            self.reconciler.on_pods(item.event)
        elif isinstance(item, CgroupChanged):
            self._say_unwatched()
            # False for a container's file change the reconciler defers (a write fight): no pass for it now
            return self.reconciler.on_cgroup(item.event, item.at)
        elif isinstance(item, NRICall):
            item.calls.run(item.job)  # the desk's answer, on the loop (agent/reconcile/nri_handler.py)
        return not isinstance(item, StopLoop)

    def _say_unwatched(self) -> None:
        """Say once that a container cgroup's files could not be watched (the gauge counts them all)."""
        reason = self.watcher.unwatched_reason
        if reason is not None and not self._said_unwatched:
            self._said_unwatched = True
            self.log.warning(
                "cgroup.file_watch_failed",
                error=reason,
                effect="a rewrite of that container's cpu.max or cpusets is repaired at the next full pass",
                hint="raise fs.inotify.max_user_watches",
            )

    # -- NRI ------------------------------------------------------------------------------------
    def _nri_wanted(self) -> bool:
        return self.config.nri.enabled and not self.options.once and not self.config.dry_run

    def _loop_calls(self, on_late: Callable[[Job], None]) -> LoopCalls:
        """The plugin's handler calls run on this loop: one hop from the connection's thread."""
        calls: LoopCalls

        def submit(job: Job) -> None:
            self._queue.put(NRICall(calls, job, time.monotonic()))

        calls = LoopCalls(submit, on_late)
        return calls

    def _run_nri(self) -> None:
        """Wait for the NRI socket (quietly), then serve it until stopped (the plugin reconnects by itself).

        ``agent.nri.plugin`` loads protobuf: it is imported only once the socket exists.
        """
        path = self.config.nri.socket_path
        if not path.exists():
            self.log.info(
                "nri.socket_absent",
                socket=str(path),
                mode="bundle" if self.config.runtime_root else "api",
                action=f"pinning from the runtime's bundles and the pod status; looking again every "
                f"{_NRI_SOCKET_POLL:g}s",
            )
            while not path.exists():
                if self.stop_event.wait(_NRI_SOCKET_POLL):
                    return
        # Register only once there is a plan: Synchronize compares the running containers with it and
        # CreateContainer answers from it; before the first pod list every answer would be the pod-wait fallback.
        while not self.planned.wait(_NRI_SOCKET_POLL):
            if self.stop_event.is_set():
                return
        from agent.nri.plugin import NRIPlugin  # protobuf only once a socket exists

        self.nri_plugin = NRIPlugin.from_config(
            self.config.nri, self.nri_desk, on_report=self._nri_report, calls=self._loop_calls
        )
        self.nri_plugin.run(self.stop_event)

    def _nri_report(self, report: Report) -> None:
        """Count the plugin's outcomes (on the plugin's threads; prometheus_client is thread-safe)."""
        if isinstance(report, CallOutcome):
            self.metrics.nri_requests.labels(method=report.event, result=report.result).inc()
        elif isinstance(report, ConnectionEvent):
            if report.kind is ConnectionKind.SYNCHRONIZED:
                self._nri_synchronized = True
                self.metrics.nri_connected.set(1)
            elif report.kind is not ConnectionKind.CONNECTED:
                if self._nri_synchronized:
                    self.log.warning(
                        "nri.fallback",
                        socket=report.socket_path,
                        reason=report.error or str(report.kind),
                        action="pinning goes on from the runtime's bundles and the pod status; reconnecting",
                    )
                self._nri_synchronized = False
                self.metrics.nri_connected.set(0)

    def _check_cpus(self) -> None:
        """CPU hotplug: when the online set changed, re-read the topology and re-plan the pods that lost a CPU."""
        try:
            online = CPUSet.parse((self.options.sysfs_root / "devices/system/cpu/online").read_text())
        except (OSError, CPUSetError):
            return
        if online == self.reconciler.topology.online_cpus:
            return
        try:
            topology = load_topology(None, self.options.sysfs_root)
        except TopologyError as err:
            self.log.error("topology.read_failed", error=str(err))
            return
        self.reconciler.rebase(topology)

    def _take_lock(self) -> None:
        """Hold the node's lock while writing cgroups; a state directory that cannot hold it only costs a warning."""
        if self.config.dry_run:
            return
        try:
            self._lock = acquire_lock(self.config.state_dir, "podpin run")
        except LockHeldError as err:
            raise AgentError(f"another podpin process works on this node (an agent or a reset): {err}") from err
        except OSError as err:
            self.log.warning("agent.lock_failed", state_dir=str(self.config.state_dir), error=str(err))

    def run(self) -> int:
        """Run until stopped (or one pass with ``--once``); returns the exit status.

        Raises:
            AgentError: :meth:`prepare`'s failures (when it was not called before), the lock held by another
                process, an address that cannot be bound.
        """
        self.prepare()
        self._take_lock()
        try:
            if not self.options.once:
                self.metrics_address = _joined(*self.server.start())
                if self.state_server is not None:
                    self.state_address = _joined(*self.state_server.start())
        except BindError as err:
            if self._lock is not None:
                self._lock.release()
            raise AgentError(str(err)) from err
        self._spawn("podpin-source", lambda: self.source.run(self._on_pods, self.stop_event))
        if self._nri_wanted():
            socket = self.config.nri.socket_path
            self.metrics.nri_available.set_function(lambda: 1.0 if socket.exists() else 0.0)
            self._spawn("podpin-nri", self._run_nri)
        if not self.options.once and self.config.cgroup_watch != WatchMode.OFF:
            self.watcher.start()
        self.log.info(
            "agent.started",
            dry_run=self.config.dry_run,
            cgroup_root=str(self.config.cgroup_root),
            runtime_root=str(self.config.runtime_root),
            driver=str(self.layout.driver),
            watcher=self.watcher.mode if self.config.cgroup_watch != WatchMode.OFF else WatchMode.OFF,
            online=str(self.topology.online_cpus),
            metrics=self.metrics_address,
            state=self.state_address,
            once=self.options.once,
            nri=str(self.config.nri.socket_path) if self._nri_wanted() else "off",
        )
        for assumption in self.config.assumed:
            self.log.warning("config.assumed", assumption=assumption)
        try:
            return self._loop()
        finally:
            self.shutdown()

    def _log_config_event(self, event: str, fields: Mapping[str, Any]) -> None:
        """A line about how the configuration was made (``agent/node_config.py``)."""
        warn = event in ("config.group_unknown", "kubelet.config_unreadable")
        (self.log.warning if warn else self.log.info)(event, **fields)

    def _follow_config(self) -> None:
        """Take what changed in the configuration: live keys at once, the others reported (``config_follow.py``)."""
        change = self.config_follower.look()
        if change is None:
            return
        if change.error is not None:
            self.log.warning("config.invalid", error=change.error, keeps="the configuration the agent runs with")
            return
        self.config = self.config_follower.current.config
        self.reconciler.retune(audit_period=self.config.reconcile_period, device_wait=self.config.device_wait_timeout)
        if change.live:
            self.log.info("config.reloaded", keys=list(change.live))
        if change.restart:
            self.log.warning("config.restart_needed", keys=list(change.restart))
        self.metrics.config_restart_needed.set(1 if self.config_follower.pending_restart else 0)

    def _loop(self) -> int:
        started = time.monotonic()
        schedule = LoopSchedule.starting(started, self.config.reconcile_period)  # agent/reconcile/schedule.py
        while not self.stop_event.is_set():
            period = schedule.period
            if self.options.once and self.reconciler.passes == 0 and time.monotonic() - started > 3 * period:
                self.failure = f"no pod list from the pod source within {3 * period:g}s (3 x reconcilePeriod)"
                return 2
            recheck_at = self.reconciler.next_recheck()  # a container bundle to read again soon
            nri_due = self.nri_desk.next_deadline()  # an NRI request waiting for its pod
            timeout = schedule.wait(
                time.monotonic(), recheck_at=recheck_at, nri_due=nri_due, sweeping=self.reconciler.sweeping
            )
            try:
                item = self._queue.get(timeout=timeout)
            except queue.Empty:
                item = None
            self._heartbeat = time.monotonic()
            guard = self.reconciler.boundary.guard
            targeted = False
            if item is not None:
                targeted = self._take(item)
                while True:
                    try:
                        queued = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    targeted = self._take(queued) or targeted
            now = time.monotonic()
            rechecked = False
            with guard(Stage.PASS, "recheck"):
                self.nri_desk.revisit(now)
                rechecked = self.reconciler.recheck(now)
            step = schedule.step(now, targeted=targeted or rechecked)
            if step is LoopStep.RESYNC:
                if not self.options.once:
                    self._follow_config()
                    schedule.resynced(now, self.config.reconcile_period)
                self._check_cpus()
                self.reconciler.request_full()
            elif step is LoopStep.SWEEP:
                swept = False
                with guard(Stage.PASS, "sweep"):
                    swept = not self.stop_event.is_set() and self.reconciler.sweep(self.work_waiting)
                if swept:
                    self.metrics.ready.set(1 if self.ready()[0] else 0)
                    self._trim_after_sweep()
                continue
            if not self._pass():
                if self.options.once and self.failure is not None:
                    return 1  # --once: one pass, and it failed
            else:
                self.planned.set()
                self.metrics.ready.set(1 if self.ready()[0] else 0)
                self._trim_after_sweep()
                if self.nrt is not None and self.reconciler.snapshot is not None:  # NodeResourceTopology export
                    self.nrt.offer(self.reconciler.snapshot.state, self.reconciler.snapshot.topology)
                if self.options.once:
                    if self.reconciler.blocked is not None:
                        self.failure = self.reconciler.blocked
                        return 3
                    return 0
        return 0

    def _trim_after_sweep(self) -> None:
        """Give the heap's free pages back once per completed full pass: what a pass read and planned is freed by
        then, and glibc would keep it resident (``agent/footprint.py``)."""
        if self.reconciler.sweeps != self._trimmed_sweeps:
            self._trimmed_sweeps = self.reconciler.sweeps
            trim_heap()

    def _pass(self) -> bool:
        """One reconcile pass inside the pass's fault boundary; False when none ran (or it failed).

        A failed pass leaves a full pass due, so the next one starts from the pod list and the cgroups again.
        """
        ran, failed = False, True
        with self.reconciler.boundary.guard(Stage.PASS, "pass"):
            ran = self.reconciler.run_pass(None if self.options.once else self.work_waiting)
            failed = False
        if failed:
            self.reconciler.request_full()
            if self.options.once:
                self.failure = "the pass failed: an unexpected error (agent.internal_error in the log)"
        return ran

    def work_waiting(self) -> bool:
        """Whether targeted work waits for the loop: a queued event, a bundle re-read due, or a stop.

        The reconciler asks this between the steps of a full pass and leaves the rest of the pass for later
        when it says True (``agent/reconcile/reconciler.py``).
        """
        if self.stop_event.is_set() or not self._queue.empty():
            return True
        due = self.reconciler.next_recheck()
        return due is not None and due <= time.monotonic()

    def shutdown(self) -> None:
        """Stop every thread; bounded so SIGTERM finishes within a few seconds."""
        self.stop_event.set()
        self.watcher.stop()
        self.server.stop()
        if self.state_server is not None:
            self.state_server.stop()
        for thread in self._threads:
            thread.join(timeout=2.0)
        if self.recorder is not None:
            self.recorder.close(timeout=1.5)
        if self.conditions is not None:
            self.conditions.close(timeout=1.0)
        if self._lock is not None:
            self._lock.release()
        if self.failure is None:
            self.log.info("agent.stopped")
        else:
            self.log.error("agent.stopped", reason=self.failure)

    def stop(self) -> None:
        """Ask the loop to end: set the stop event and wake the loop (it may be waiting up to a second)."""
        self.stop_event.set()
        self._queue.put(StopLoop(time.monotonic()))

    def install_signal_handlers(self) -> None:
        """SIGTERM and SIGINT stop the loop (main thread only)."""

        def _stop(signum: int, _frame: object) -> None:
            self.log.info("agent.stopping", signal=signal.Signals(signum).name)
            self.stop()

        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)


def _joined(host: str, port: int) -> str:
    """``host:port``, with an IPv6 host in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
