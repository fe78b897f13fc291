"""Guest scenario for ``test_vm_agent.py``: ``podpin run`` end to end on a real cgroup v2 kernel.

The scenario plays API server (a ``--pods-dir``), kubelet and containerd (``agentrun.AgentNode`` over
``kubetree``) around the real agent, which runs as uid 0 with every capability dropped:

1. ``setup``: the kubepods tree and three pods with a sleeping process per container — the product story
   pod (pod-level budget, exclusive database, two capped sidecars), a classic Guaranteed pod and a Burstable
   pod — with the ``cpu.max`` a kubelet under ``cpuManagerPolicy: none`` writes; the guest's topology JSON
   goes to the work dir for the host's ``podpin plan``;
2. ``once``: ``podpin run --once``;
3. ``start`` / ``adopted``: the long-running agent (``reconcilePeriod: 1s``), ready on ``/readyz``;
4. ``throttle``: busy processes in the database and in a sidecar, ``cpu.stat`` before and after;
5. ``new_pod`` and ``late_status``: pods arriving while it runs (manifest first; cgroups first and the
   container status later), each polled until its process is pinned; ``drift``: the database's cpuset
   rewritten by someone else (as a runtime update could), polled until the agent repairs it;
6. ``metrics``; ``restart``: SIGKILL, start again, compare; ``lost_checkpoint``: SIGKILL, delete the
   checkpoint, start again, compare; ``reset_refused``: ``podpin reset`` while the agent runs;
   ``sigterm``: stop within 5 s; ``final``;
7. ``reset``: ``podpin reset`` (the way out, also without capabilities) and what the kernel shows after it;
   ``reset_again``: a second reset.

Only observations are recorded; ``test_vm_agent.py`` states what they must be.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

from agent.topology.codec import topology_to_dict
from agent.topology.sysfs import read_topology
from tests.vm.agentpods import E2EPods, e2e_pods
from tests.vm.agentrun import (
    AgentNode,
    capabilities,
    event_summary,
    free_port,
    http_get,
    log_events,
    metric_samples,
    metrics_port,
    observe_container,
    started_line,
    unprivileged,
    wait_ready,
)
from tests.vm.background import Background, BackgroundError, podpin
from tests.vm.kubetree import Container, KubeTree, cpu_max, cpu_stat_window, cpus, cpus_effective, write
from tests.vm.scenario import Scenario, wait_until

BASE = Path("/tmp/podpin-e2e")
START_TIMEOUT = 120.0
"""Seconds for an agent start (interpreter, imports and the first full pass take ~10 s under TCG)."""
PIN_TIMEOUT = 30.0
THROTTLE_SECONDS = 1.5
THROTTLE_DEADLINE = 15.0
"""The throttle step measures 1.5 s, longer (up to 15 s) until the sidecar has been throttled: see cpu_stat_window."""
SETTLE_SECONDS = 2.5
"""After a restart, how long to let the agent run (2+ full resyncs of 1 s) before comparing."""
CHANGE_EVENTS = (
    "pod.admitted",
    "pod.released",
    "pod.rejected",
    "cgroup.applied",
    "cgroup.drift_repaired",
    "cgroup.error",
    "cgroup.vanished",
    "state.missing",
    "state.corrupt",
    "state.invalid",
    "state.rebuilt_from_cgroups",
    "topology.changed",
)
"""Log events that mean the agent changed (or found it must rebuild) something."""
METRICS = (
    "podpin_ready",
    "podpin_kubelet_pinning",
    "podpin_pin_latency_seconds_count",
    "podpin_exclusive_cpu_allocation_count",
    "podpin_containers",
    "podpin_cgroup_writes_total",
    "podpin_pinning_errors_total",
)


def pinned_view(container: Container, pid: int) -> dict[str, str | None] | None:
    """The container's observation once it holds an explicit cpuset its process runs on, else None."""
    view = observe_container(container, pid)
    if view["cpuset.cpus"] and view["cpuset.cpus"] == view["effective"] == view["affinity"]:
        return view
    return None


def applied_lines(agent: Background, container: Container) -> int:
    """How many ``cgroup.applied`` lines of the agent's current run name this container's cgroup."""
    path = str(container.path)
    return sum(1 for e in log_events(agent.output()) if e.get("event") == "cgroup.applied" and e.get("path") == path)


def settled(agent: Background, container: Container, lines: int) -> None:
    """Wait for the agent's ``lines``-th ``cgroup.applied`` line for the container: it logs after all its writes.

    The cpuset is written before ``cpu.max``, so a pinned cpuset alone does not mean the pass is over.
    """
    wait_until(
        f"{lines} cgroup.applied line(s) for {container.path.name}",
        lambda: applied_lines(agent, container) >= lines,
        timeout=PIN_TIMEOUT,
    )


class AgentScenario:
    """The steps of the module docstring; every step only records what it saw."""

    def __init__(self, sc: Scenario) -> None:
        self.sc = sc
        self.tree = KubeTree()
        self.pods: E2EPods = e2e_pods()
        shutil.rmtree(BASE, ignore_errors=True)
        self.node = AgentNode(self.tree, BASE)
        self.config = BASE / "config.yaml"
        self.port = 0
        self.state_port = 0
        self.agent: Background | None = None

    def argv(self, *extra: str) -> list[str]:
        """``podpin run`` with this node's inputs, without capabilities."""
        return unprivileged(podpin("run", "--config", str(self.config), "--pods-dir", str(self.node.pods_dir), *extra))

    def running_agent(self) -> Background:
        """The long-running agent (a step after ``start`` that finds none fails with that reason)."""
        if self.agent is None:
            raise BackgroundError("the long-running agent was not started")
        return self.agent

    # -- steps -------------------------------------------------------------------------------------
    def setup(self, out: dict[str, Any]) -> None:
        self.tree.setup()
        self.node.write_config("config.yaml", reconcile_period="1s")
        shutil.copy(self.config, self.sc.workdir / "config.yaml")
        topology = topology_to_dict(read_topology(Path("/sys")))
        (self.sc.workdir / "topology.json").write_text(json.dumps(topology, indent=1))
        for spec in self.pods.initial:
            self.node.add_pod(spec)
        out["before_agent"] = self.node.observe(self.pods.initial)
        out["qos_cpus"] = self.node.qos_cpus()

    def once(self, out: dict[str, Any]) -> None:
        started = time.monotonic()
        proc = subprocess.run(self.argv("--once"), capture_output=True, text=True, timeout=START_TIMEOUT, check=False)
        out["seconds"] = round(time.monotonic() - started, 2)
        out["returncode"] = proc.returncode
        (self.sc.workdir / "once.log").write_text(proc.stdout + proc.stderr)
        events = log_events(proc.stdout + proc.stderr)
        out["event_counts"] = dict(Counter(str(e.get("event")) for e in events))
        out["stderr_tail"] = (proc.stdout + proc.stderr)[-1500:]
        out["observed"] = self.node.observe(self.pods.initial)
        out["qos_cpus"] = self.node.qos_cpus()
        out["checkpoint_written"] = self.node.checkpoint.is_file()

    def start(self, out: dict[str, Any]) -> None:
        self.port, self.state_port = free_port(), free_port()
        argv = self.argv(
            "--metrics-bind-address", f"127.0.0.1:{self.port}", "--state-bind-address", f"127.0.0.1:{self.state_port}"
        )
        self.agent = Background(argv, log_path=self.sc.workdir / "agent.log")
        started = time.monotonic()
        pid = self.agent.start()
        out["started_line"] = started_line(self.agent, timeout=START_TIMEOUT)
        out["port"] = self.port
        out["logged_port"] = metrics_port(out["started_line"])
        out["ready_after_s"] = wait_ready(
            self.port, timeout=START_TIMEOUT, running=lambda: self.running_agent().running
        )
        out["seconds"] = round(time.monotonic() - started, 2)
        out["capabilities"] = capabilities(pid)
        out["cmdline"] = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:4]
        out["healthz"] = http_get(f"http://127.0.0.1:{self.port}/healthz")

    def adopted(self, out: dict[str, Any]) -> None:
        agent = self.running_agent()
        out["changes"] = event_summary(log_events(agent.output()), CHANGE_EVENTS)
        out["observed"] = self.node.observe(self.pods.initial)

    def throttle(self, out: dict[str, Any]) -> None:
        story = self.pods.story
        watched = {name: self.node.containers[(story.uid, name)] for name in ("database", "log-collector")}
        busy = [
            self.node.start(story, "database", busy=True),
            self.node.start(story, "database", busy=True),
            self.node.start(story, "log-collector", busy=True),
        ]
        window = cpu_stat_window(
            {name: c.path for name, c in watched.items()},
            seconds=THROTTLE_SECONDS,
            until=lambda deltas: deltas["log-collector"].nr_throttled > 0,
            deadline=THROTTLE_DEADLINE,
        )
        out["busy_affinity"] = [observe_container(watched["database"], busy[0].pid)["affinity"]]
        for proc in busy:
            self.tree.stop_process(proc)
        for name, container in watched.items():
            window[name]["cpu.max"] = cpu_max(container.path)
        out.update(window)
        out["pod_cpu_max"] = cpu_max(self.node.pods[story.uid].path)

    def new_pod(self, out: dict[str, Any]) -> None:
        agent = self.running_agent()
        spec = self.pods.new
        self.node.write_manifest(spec)
        self.node.add_pod_cgroup(spec)
        started = time.monotonic()
        container = self.node.add_container_cgroup(spec, "main")
        proc = self.node.start(spec, "main")
        wait_until(f"{spec.name}/main pinned", lambda: pinned_view(container, proc.pid), timeout=PIN_TIMEOUT)
        out["seconds_to_pinned"] = round(time.monotonic() - started, 3)
        settled(agent, container, 1)
        out["pinned"] = observe_container(container, proc.pid)
        out["observed"] = self.node.observe([spec])

    def late_status(self, out: dict[str, Any]) -> None:
        agent = self.running_agent()
        spec = self.pods.late
        self.node.write_manifest(spec, started=())
        self.node.add_pod_cgroup(spec)
        container = self.node.add_container_cgroup(spec, "main")
        proc = self.node.start(spec, "main")
        wait_until(
            f"{spec.name}/main in the interim set", lambda: pinned_view(container, proc.pid), timeout=PIN_TIMEOUT
        )
        settled(agent, container, 1)
        out["interim"] = observe_container(container, proc.pid)
        interim = out["interim"]["cpuset.cpus"]
        self.node.write_manifest(spec)
        started = time.monotonic()

        def moved() -> dict[str, str | None] | None:
            view = pinned_view(container, proc.pid)
            return view if view is not None and view["cpuset.cpus"] != interim else None

        wait_until(f"{spec.name}/main pinned after its status", moved, timeout=PIN_TIMEOUT)
        out["seconds_to_pinned_after_status"] = round(time.monotonic() - started, 3)
        settled(agent, container, 2)
        out["pinned"] = observe_container(container, proc.pid)

    def drift(self, out: dict[str, Any]) -> None:
        agent = self.running_agent()
        spec = self.pods.story
        container = self.node.containers[(spec.uid, "database")]
        pid = self.node.processes[(spec.uid, "database")].pid
        planned = str(cpus(container.path))
        seen = len(log_events(agent.output()))
        wider = str(cpus_effective(self.node.pods[spec.uid].path))
        write(container.path, "cpuset.cpus", wider)
        out["during"] = observe_container(container, pid)
        started = time.monotonic()

        def repaired() -> dict[str, str | None] | None:
            view = pinned_view(container, pid)
            return view if view is not None and view["cpuset.cpus"] == planned else None

        out["repaired"] = wait_until("database cpuset repaired", repaired, timeout=PIN_TIMEOUT)
        out["seconds_to_repair"] = round(time.monotonic() - started, 3)
        wait_until(
            "cgroup.drift_repaired logged",
            lambda: any(e.get("event") == "cgroup.drift_repaired" for e in log_events(agent.output())[seen:]),
            timeout=PIN_TIMEOUT,
        )
        out["changes"] = event_summary(log_events(agent.output())[seen:], CHANGE_EVENTS)

    def everything(self, out: dict[str, Any]) -> None:
        out["observed"] = self.node.observe(self.pods.every)
        out["qos_cpus"] = self.node.qos_cpus()

    def metrics(self, out: dict[str, Any]) -> None:
        status, body = http_get(f"http://127.0.0.1:{self.port}/metrics")
        out["status"] = status
        out["samples"] = metric_samples(body, METRICS)
        status, body = http_get(f"http://127.0.0.1:{self.state_port}/state")
        out["state_status"] = status
        document = json.loads(body) if status == 200 else {}
        out["state_pods"] = sorted(document.get("state", {}).get("pods", {}))

    def restart(self, out: dict[str, Any]) -> None:
        agent = self.running_agent()
        out["before"] = self.node.observe(self.pods.every)
        killed = agent.kill()
        out["killed_returncode"] = killed.returncode
        out["after_kill"] = self.node.observe(self.pods.every)
        pid = agent.start()
        started_line(agent, timeout=START_TIMEOUT)
        out["ready_after_s"] = wait_ready(self.port, timeout=START_TIMEOUT, running=lambda: agent.running)
        out["capabilities"] = capabilities(pid)
        time.sleep(SETTLE_SECONDS)
        out["after"] = self.node.observe(self.pods.every)
        events = log_events(agent.output())
        out["event_counts"] = dict(Counter(str(e.get("event")) for e in events))
        out["changes"] = event_summary(events, CHANGE_EVENTS)

    def lost_checkpoint(self, out: dict[str, Any]) -> None:
        agent = self.running_agent()
        out["before"] = self.node.observe(self.pods.every)
        agent.kill()
        self.node.checkpoint.unlink()
        agent.start()
        started_line(agent, timeout=START_TIMEOUT)
        out["ready_after_s"] = wait_ready(self.port, timeout=START_TIMEOUT, running=lambda: agent.running)
        time.sleep(SETTLE_SECONDS)
        out["after"] = self.node.observe(self.pods.every)
        events = log_events(agent.output())
        out["changes"] = event_summary(events, CHANGE_EVENTS)
        out["checkpoint_rewritten"] = self.node.checkpoint.is_file()

    def sigterm(self, out: dict[str, Any]) -> None:
        agent = self.running_agent()
        started = time.monotonic()
        agent.signal(signal.SIGTERM)
        try:
            run = agent.wait(timeout=5.0)
            out["returncode"] = run.returncode
        except BackgroundError as err:
            out["returncode"] = f"still running: {err}"
            agent.kill()
        out["seconds"] = round(time.monotonic() - started, 3)
        out["stopped_logged"] = '"event": "agent.stopped"' in agent.output()

    def final(self, out: dict[str, Any]) -> None:
        out["observed"] = self.node.observe(self.pods.every)

    def run_reset(self, out: dict[str, Any], log_name: str) -> None:
        """``podpin reset`` over this node (no capabilities), its status and output."""
        argv = unprivileged(podpin("reset", "--config", str(self.config), "--pods-dir", str(self.node.pods_dir)))
        started = time.monotonic()
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=START_TIMEOUT, check=False)
        out["seconds"] = round(time.monotonic() - started, 2)
        out["returncode"] = proc.returncode
        out["stdout"] = proc.stdout[-3000:]
        out["stderr"] = proc.stderr[-1500:]
        (self.sc.workdir / log_name).write_text(proc.stdout + proc.stderr)

    def reset_refused(self, out: dict[str, Any]) -> None:
        out["before"] = self.node.observe(self.pods.every)
        self.run_reset(out, "reset-refused.log")
        out["after"] = self.node.observe(self.pods.every)

    def reset(self, out: dict[str, Any]) -> None:
        self.run_reset(out, "reset.log")
        out["online"] = Path("/sys/devices/system/cpu/online").read_text().strip()
        out["observed"] = self.node.observe(self.pods.every)
        out["qos_cpus"] = self.node.qos_cpus()
        out["qos_effective"] = {
            qos: str(cpus_effective(self.tree.qos_slice(qos))) for qos in ("burstable", "besteffort")
        }
        out["checkpoint_kept"] = self.node.checkpoint.is_file()

    def reset_again(self, out: dict[str, Any]) -> None:
        self.run_reset(out, "reset-again.log")
        out["observed"] = self.node.observe(self.pods.every)

    def close(self) -> None:
        if self.agent is not None:
            self.agent.close()
        self.tree.close()


def main() -> int:
    """Run every step in order (a failed step is recorded; later steps may still show something)."""
    sc = Scenario.from_argv("agent")
    run = AgentScenario(sc)
    steps = (
        ("setup", run.setup),
        ("once", run.once),
        ("start", run.start),
        ("adopted", run.adopted),
        ("throttle", run.throttle),
        ("new_pod", run.new_pod),
        ("late_status", run.late_status),
        ("drift", run.drift),
        ("everything", run.everything),
        ("metrics", run.metrics),
        ("restart", run.restart),
        ("lost_checkpoint", run.lost_checkpoint),
        ("reset_refused", run.reset_refused),
        ("sigterm", run.sigterm),
        ("final", run.final),
        ("reset", run.reset),
        ("reset_again", run.reset_again),
    )
    try:
        for name, step in steps:
            with sc.step(name) as out:
                step(out)
    finally:
        run.close()
    status: int = sc.finish()
    return status


if __name__ == "__main__":
    raise SystemExit(main())
