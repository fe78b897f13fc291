"""Guest scenario for the pin-latency benchmark (``scripts/bench_pin_latency_vm.py``, ``test_vm_pin_latency.py``).

For each watcher mode (``--modes inotify,off``) a fresh kubepods tree and a fresh unprivileged ``podpin run``
(``reconcilePeriod: --period``, ``cgroupWatch: <mode>``) with pod-level pods whose statuses already name
every container; once the agent is ready, ``--containers`` container cgroups are created at ``--rate`` per
second, round-robin over the pods, as containerd would (``mkdir`` of ``cri-containerd-<id>.scope``). For each
one the latency is the time from just before its ``mkdir`` to the moment its ``cpuset.cpus`` holds the CPUs
the agent's plan (``/state``) gives it: an inotify ``IN_MODIFY`` watch on the new file wakes an observer
thread that reads the value (the file is also read once right after the watch is added, so a write that
came first is not missed). The ``inotify_probe`` step checks that a ``cpuset.cpus`` write raises
``IN_MODIFY``; the ``cpubench`` and ``cpubench_after`` steps time ``cpubench.measure()`` for the slowdown
factor.

Pods: one with 2 CPUs (an exclusive container, the rest in a 1-CPU pod pool) and five with 1 CPU (a pod
pool only), filling the 7 allocatable CPUs of 8; the containers are spread evenly over them.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.cpuset import CPUSet
from tests.vm import cpubench
from tests.vm.agentpods import PodSpec, shared_pool_pod
from tests.vm.agentrun import AgentNode, free_port, http_get, metric_samples, started_line, unprivileged, wait_ready
from tests.vm.background import Background, podpin
from tests.vm.guest_inotify import IN_MODIFY, Inotify
from tests.vm.kubetree import KubeTree, container_scope_name, read, write
from tests.vm.scenario import Scenario, wait_until

BASE = Path("/tmp/podpin-bench")
START_TIMEOUT = 120.0
IDLE_SECONDS = 2.0
"""Let the agent finish the passes still queued (their latency is recorded after read-back) before scraping."""
METRICS = ("podpin_pin_latency_seconds", "podpin_reconcile_duration_seconds", "podpin_cgroup_writes_total")


def bench_pods(containers: int) -> list[PodSpec]:
    """Six pod-level pods over 7 CPUs holding ``containers`` containers in total (see the module docstring)."""
    shapes = [(2, 1)] + [(1, 0)] * 5
    per, extra = divmod(containers, len(shapes))
    pods = []
    for i, (cpu, exclusive) in enumerate(shapes):
        count = per + (1 if i < extra else 0)
        uid = f"b0000000-0000-4000-8000-{i:012x}"
        pods.append(shared_pool_pod(f"bench-{i}", uid, i + 1, containers=count, pod_cpu=cpu, exclusive=exclusive))
    return pods


def percentile(ordered: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass(slots=True)
class _Pending:
    """One created container cgroup whose ``cpuset.cpus`` is awaited."""

    path: Path
    expected: CPUSet
    t0_ns: int


@dataclass(slots=True)
class LatencyObserver:
    """Wakes on ``IN_MODIFY`` of awaited ``cpuset.cpus`` files and stamps when each holds its expected set."""

    inotify: Inotify = field(default_factory=Inotify)
    pending: dict[int, _Pending] = field(default_factory=dict)
    done_ms: dict[str, float] = field(default_factory=dict)
    wakeups: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="latency-observer", daemon=True)
        self._thread.start()

    def created(self, path: Path, expected: CPUSet, t0_ns: int) -> None:
        """Await ``path`` (just made at ``t0_ns``): watch its ``cpuset.cpus``, then check it once."""
        wd = self.inotify.watch(path / "cpuset.cpus", IN_MODIFY)
        with self._lock:
            self.pending[wd] = _Pending(path=path, expected=expected, t0_ns=t0_ns)
            self._check(wd)

    def _check(self, wd: int) -> None:
        entry = self.pending.get(wd)
        if entry is None:
            return
        if CPUSet.parse(read(entry.path, "cpuset.cpus")) == entry.expected:
            self.done_ms[entry.path.name] = (time.monotonic_ns() - entry.t0_ns) / 1e6
            del self.pending[wd]

    def _run(self) -> None:
        while not self._stop.is_set():
            for wd, _mask, _name in self.inotify.read(0.1):
                self.wakeups += 1
                with self._lock:
                    self._check(wd)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        self.inotify.close()


def inotify_probe(out: dict[str, Any]) -> None:
    """Does a ``cpuset.cpus`` write (as the agent does it) raise ``IN_MODIFY`` on the file?"""
    tree = KubeTree()
    try:
        tree.setup()
        ctr = tree.add_container(tree.add_pod())
        notify = Inotify()
        notify.watch(ctr.path / "cpuset.cpus", IN_MODIFY)
        out["before_write"] = notify.read(0.2)
        write(ctr.path, "cpuset.cpus", "1-2")
        events = notify.read(2.0)
        out["events_after_write"] = [bool(mask & IN_MODIFY) for _wd, mask, _name in events]
        notify.close()
    finally:
        tree.close()


def run_mode(sc: Scenario, mode: str, args: argparse.Namespace, out: dict[str, Any]) -> None:
    """One agent, one watcher mode, ``args.containers`` containers; records the latencies and the agent's view."""
    base = BASE / mode
    shutil.rmtree(base, ignore_errors=True)
    tree = KubeTree()
    agent: Background | None = None
    observer = LatencyObserver()
    try:
        tree.setup()
        node = AgentNode(tree, base)
        config = node.write_config("config.yaml", reconcile_period=args.period, cgroup_watch=mode)
        pods = bench_pods(args.containers)
        for spec in pods:
            node.write_manifest(spec)
            node.add_pod_cgroup(spec, pause=False)
        port = free_port()
        argv = podpin("run", "--config", str(config), "--pods-dir", str(node.pods_dir))
        argv += ["--metrics-bind-address", f"127.0.0.1:{port}"]
        agent = Background(unprivileged(argv), log_path=sc.workdir / f"agent-{mode}.log")
        agent.start()
        out["watcher"] = started_line(agent, timeout=START_TIMEOUT).get("watcher")
        out["ready_after_s"] = wait_ready(
            port, timeout=START_TIMEOUT, running=lambda: agent is not None and agent.running
        )
        plan = _plan(port)
        order = [
            (spec, c.name)
            for i in range(max(len(s.containers) for s in pods))
            for spec in pods
            for c in spec.containers[i : i + 1]
        ]
        observer.start()
        started = time.monotonic()
        for n, (spec, name) in enumerate(order):
            delay = started + n / args.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            expected = CPUSet.parse(plan[(spec.uid, name)])
            t0 = time.monotonic_ns()
            container = tree.add_container(node.pods[spec.uid], container_id=spec.container_id(name))
            observer.created(container.path, expected, t0)
        out["create_seconds"] = round(time.monotonic() - started, 3)
        limit = args.settle + _seconds(args.period)
        wait_until("every container pinned", lambda: not observer.pending, timeout=limit, interval=0.1)
        names = [spec.container_id(name) for spec, name in order]
        by_order = [observer.done_ms[container_scope_name(cid)] for cid in names]
        latencies = sorted(by_order)
        out["created"] = len(order)
        out["pinned"] = len(latencies)
        out["latency_ms_by_creation"] = [round(v, 2) for v in by_order]
        out["summary_ms"] = {
            "p50": round(percentile(latencies, 0.50), 2),
            "p90": round(percentile(latencies, 0.90), 2),
            "p99": round(percentile(latencies, 0.99), 2),
            "max": round(latencies[-1], 2),
            "mean": round(sum(latencies) / len(latencies), 2),
        }
        out["observer_wakeups"] = observer.wakeups
        time.sleep(IDLE_SECONDS)
        status, body = http_get(f"http://127.0.0.1:{port}/metrics")
        out["metrics"] = metric_samples(body, METRICS) if status == 200 else {"status": status}
    finally:
        observer.stop()
        out["unpinned"] = sorted(p.path.name for p in observer.pending.values())
        if agent is not None:
            agent.close()
        tree.close()


def _plan(port: int) -> dict[tuple[str, str], str]:
    """(pod uid, container) -> CPUs, from the agent's ``/state`` plan."""
    status, body = http_get(f"http://127.0.0.1:{port}/state")
    if status != 200:
        raise RuntimeError(f"/state answered {status}: {body[:500]}")
    document = json.loads(body)
    return {(p["uid"], c["name"]): c["cpus"] for p in document["plan"]["pods"] for c in p["containers"]}


def _seconds(duration: str) -> float:
    """``10s``, ``500ms``, ``2m`` -> seconds (the forms the scenario accepts for ``--period``)."""
    for suffix, factor in (("ms", 0.001), ("s", 1.0), ("m", 60.0)):
        if duration.endswith(suffix):
            return float(duration[: -len(suffix)]) * factor
    raise ValueError(f"--period {duration!r}: expected a number with ms, s or m")


def main() -> int:
    """Probe, micro-benchmark, then one step per mode."""
    sc = Scenario.from_argv("pin_latency")
    parser = argparse.ArgumentParser(prog="scenario_pin_latency.py")
    parser.add_argument("--containers", type=int, default=200)
    parser.add_argument("--rate", type=float, default=20.0, help="container cgroups created per second")
    parser.add_argument("--period", default="10s", help="reconcilePeriod of the agent in every mode")
    parser.add_argument("--modes", default="inotify,off", help="cgroupWatch values to run, comma-separated")
    parser.add_argument("--settle", type=float, default=60.0, help="seconds beyond the period to wait for pins")
    parser.add_argument("--cpubench", action="store_true", help="also time cpubench.measure() first and last")
    args = parser.parse_args(sc.args)
    with sc.step("inotify_probe") as out:
        inotify_probe(out)
    if args.cpubench:
        with sc.step("cpubench") as out:
            out.update(cpubench.measure())
    for mode in args.modes.split(","):
        with sc.step(f"mode_{mode}") as out:
            out["mode"], out["period"], out["rate"] = mode, args.period, args.rate
            run_mode(sc, mode, args, out)
    if args.cpubench:
        with sc.step("cpubench_after") as out:
            out.update(cpubench.measure())
    status: int = sc.finish()
    return status


if __name__ == "__main__":
    raise SystemExit(main())
