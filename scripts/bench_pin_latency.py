#!/usr/bin/env python3
"""Benchmark: how fast a new container is pinned, from its cgroup appearing to its ``cpuset.cpus`` written.

The agent runs in this process (``agent.runner.Agent``, the inotify cgroup
watcher on, logging JSON at info to /dev/null so rendering is paid for as in a
cluster) over a fixture node: a sysfs tree of ``--machine``, a cgroup v2 tree of
``--driver`` with the kernel emulation (``cpuset.cpus.effective`` follows
writes), both on tmpfs when /dev/shm is usable, and a pods directory holding
``--pods`` Guaranteed pods (one container, one exclusive CPU each). With
``--naming status`` (default) their status already lists the containerID; with
``--naming bundle`` it does not, and each container's containerd bundle
(``config.json`` with the CRI annotations, under ``--runtime-root``) is written
just before its cgroup appears, as containerd does: the agent must name the
container from it. Pod cgroups exist from the start, as the kubelet creates
them with the sandbox.

Then, one at a time, each pod's container cgroup appears. A real cgroup appears
with its files in one step, so the fixture builds it under a name no runtime
uses and renames it into place (inotify ``IN_MOVED_TO``, handled like
``IN_CREATE``). Latency is measured two ways:

* **observed**: from just before the rename to the moment ``cpuset.cpus``
  holds the planned value, polling the file every 50 µs from this process;
* **agent**: the agent's own ``podpin_pin_latency_seconds`` histogram (from
  the watcher event to the write verified), its quantiles interpolated within
  buckets as Prometheus' ``histogram_quantile`` does.

Both report the median and p99 over all containers.

Where the time goes, per container (``stage_<name>_p50_ms`` / ``_p99_ms``): the
bench wraps the in-process agent's reconciler methods with timers (a few
microseconds each) and splits each container's window into ``watch`` (the
rename to the watcher thread's queued event: inotify wake-up and parse),
``queue`` (that event waiting for the loop), ``bundle`` (reading the bundle and
naming the container, ``BundleNamer.identify``), ``to_pass`` (from the event
handled to the pass that pins it: other queued work, a full pass's step in
progress), and inside that pass ``decide`` (admissions and releases over every
pod), ``plan`` (the plan, reused when nothing changed) and ``write`` (scanning
the pod's cgroup, writing and reading back, settling: the pin latency metric,
the ``Pinned`` Event); ``pass`` is the whole pass.

Usage::

    .venv/bin/python scripts/bench_pin_latency.py               # table
    .venv/bin/python scripts/bench_pin_latency.py --json        # one JSON object
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
# The test helpers (tests/support) are not part of the installed package: read them from the checkout.
sys.path.insert(0, str(REPO))

from agent.log import configure_logging
from agent.runner import Agent
from scripts.benchkit import add_options, emit
from tests.support.agentfixture import AgentNode, make_node, wait_until
from tests.support.bundles import containerd_annotations, write_bundle
from tests.support.podfactory import container, container_id, make_pod
from tests.support.sysfs_builder import scratch_dir

_POLL = 0.00005


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` percentile (0 < q <= 100): p99 of 100 samples is the 99th smallest."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float:
    """Prometheus' ``histogram_quantile``: linear interpolation inside the bucket holding rank ``q * count``.

    Args:
        q: the quantile, 0..1.
        buckets: ``(upper bound, cumulative count)`` in ascending order, ending with ``+Inf``.
    """
    total = buckets[-1][1]
    rank = q * total
    lower, below = 0.0, 0.0
    for bound, cumulative in buckets:
        if cumulative >= rank:
            if math.isinf(bound):
                return lower
            inside = cumulative - below
            return lower + (bound - lower) * ((rank - below) / inside if inside else 0.0)
        lower, below = bound, cumulative
    return lower


def _agent_buckets(agent: Agent) -> list[tuple[float, float]]:
    buckets = [
        (float(sample.labels["le"]), sample.value)
        for metric in agent.metrics.registry.collect()
        if metric.name == "podpin_pin_latency_seconds"
        for sample in metric.samples
        if sample.name.endswith("_bucket")
    ]
    return sorted(buckets)


class StageTimer:
    """Timestamps of the agent's steps for one container at a time (the bench creates them one by one).

    ``wrap`` replaces a bound method of an object by a timed one; every call appends ``(name, start, end, arg)``
    (``arg``: the watcher's timestamp for ``on_cgroup``). ``split`` turns the calls since a container's rename into
    its stages, in milliseconds.
    """

    STAGES = ("watch", "queue", "bundle", "to_pass", "decide", "plan", "write", "pass")

    def __init__(self) -> None:
        self.calls: list[tuple[str, float, float, float | None]] = []
        self.rows: list[dict[str, float]] = []

    def wrap(self, owner: object, name: str) -> None:
        original: Callable[..., Any] = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                seen_at = args[1] if name == "on_cgroup" and len(args) > 1 else None
                self.calls.append((name, start, time.perf_counter(), seen_at))

        setattr(owner, name, timed)

    def pass_done(self, since: int) -> bool:
        """Whether the pass that handles the container renamed at call index ``since`` has ended."""
        calls = self.calls[since:]
        handled = next((c for c in calls if c[0] == "on_cgroup"), None)
        return handled is not None and any(c[0] == "run_pass" and c[1] >= handled[2] for c in calls)

    def split(self, since: int, renamed: float) -> None:
        """Record the stages of the container renamed at ``renamed`` (calls from index ``since`` on)."""
        calls = self.calls[since:]
        handled = next((c for c in calls if c[0] == "on_cgroup"), None)
        pinning = next((c for c in calls if c[0] == "run_pass" and handled is not None and c[1] >= handled[2]), None)
        if handled is None or pinning is None:
            return
        inside = {c[0]: c for c in calls if pinning[1] <= c[1] and c[2] <= pinning[2]}
        named = next((c for c in calls if c[0] == "identify"), None)
        row = {
            "watch": (handled[3] or handled[1]) - renamed,
            "queue": handled[1] - (handled[3] or handled[1]),
            "to_pass": pinning[1] - handled[2],
            "pass": pinning[2] - pinning[1],
        }
        if named is not None:
            row["bundle"] = named[2] - named[1]
        for stage, method in (("decide", "decide"), ("plan", "plan_for"), ("write", "apply_targeted")):
            if method in inside:
                row[stage] = inside[method][2] - inside[method][1]
        self.rows.append({k: v * 1000 for k, v in row.items()})

    def figures(self) -> dict[str, float]:
        """``stage_<name>_p50_ms`` and ``_p99_ms`` over the containers recorded."""
        found: dict[str, float] = {}
        for stage in self.STAGES:
            values = [row[stage] for row in self.rows if stage in row]
            if values:
                found[f"stage_{stage}_p50_ms"] = round(statistics.median(values), 3)
                found[f"stage_{stage}_p99_ms"] = round(percentile(values, 99), 3)
        return found


def _pods(n: int, naming: str) -> list[dict[str, Any]]:
    return [
        make_pod(
            f"svc-{i:03d}",
            containers=[container("app", cpu="1", memory="256Mi")],
            states={"app": "running" if naming == "status" else "waiting"},
            creation_timestamp=f"2026-01-01T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z",
        )
        for i in range(n)
    ]


def measure(base: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Build the node, run the agent, create the containers one by one; the result row."""
    node: AgentNode = make_node(base, driver=args.driver, machine=args.machine)
    node.write_config(reconcilePeriod="10s", logLevel="info")
    pods = _pods(args.pods, args.naming)
    for raw in pods:
        node.add_pod(raw, cgroups=False)
        node.tree.add_pod(raw["metadata"]["uid"], "Guaranteed")
    agent = node.agent()
    timer = StageTimer()
    for owner, name in (
        (agent.reconciler, "on_cgroup"),
        (agent.reconciler, "run_pass"),
        (agent.reconciler.decider, "decide"),
        (agent.reconciler.decider, "plan_for"),
        (agent.reconciler.applier, "apply_targeted"),
        (agent.reconciler.namer, "identify"),
    ):
        if owner is not None:
            timer.wrap(owner, name)
    thread = threading.Thread(target=agent.run, name="agent", daemon=True)
    thread.start()
    try:
        wait_until(
            lambda: (
                agent.reconciler.passes > 0
                and all(agent.reconciler.planner.is_admitted(raw["metadata"]["uid"]) for raw in pods)
            ),
            30.0,
            "every pod admitted",
        )
        snapshot = agent.reconciler.snapshot
        assert snapshot is not None
        planned = {pod.uid: str(pod.container("app").cpus) for pod in snapshot.plan.pods}
        observed: list[float] = []
        for raw in pods:
            uid = raw["metadata"]["uid"]
            runtime_id = container_id(uid, "app").split("://")[1]
            target = node.pod_cgroup(raw) / node.tree.container_name(runtime_id)
            want = planned[uid]
            if args.naming == "bundle":
                write_bundle(
                    node.runtime_root, runtime_id, containerd_annotations(uid, "app", pod=raw["metadata"]["name"])
                )
            staging = node.tree.mkcgroup(target.parent / "staging-app", procs="4242\n")
            since = len(timer.calls)
            start = time.perf_counter()
            os.rename(staging, target)
            deadline = start + args.timeout
            while (target / "cpuset.cpus").read_text().strip() != want:
                if time.perf_counter() > deadline:
                    raise SystemExit(f"{target} did not get {want} within {args.timeout}s")
                time.sleep(_POLL)
            observed.append(time.perf_counter() - start)
            wait_until(functools.partial(timer.pass_done, since), args.timeout, "the pinning pass to end")
            timer.split(since, start)
        wait_until(
            lambda: (agent.metrics.registry.get_sample_value("podpin_pin_latency_seconds_count") or 0) >= len(pods),
            5.0,
            "the agent's histogram",
        )
        buckets = _agent_buckets(agent)
        mode = agent.watcher.mode
    finally:
        agent.stop()
        thread.join(10.0)
    count = buckets[-1][1]
    total = agent.metrics.registry.get_sample_value("podpin_pin_latency_seconds_sum") or 0.0
    return {
        "containers": len(observed),
        "machine": args.machine,
        "cpus": len(agent.topology.online_cpus),
        "driver": args.driver,
        "naming": args.naming,
        "watcher": mode,
        "tmpfs": str(base).startswith("/dev/shm"),
        "observed_median_ms": round(statistics.median(observed) * 1000, 3),
        "observed_p99_ms": round(percentile(observed, 99) * 1000, 3),
        "observed_max_ms": round(max(observed) * 1000, 3),
        "agent_count": int(count),
        "agent_median_ms": round(histogram_quantile(0.5, buckets) * 1000, 3),
        "agent_p99_ms": round(histogram_quantile(0.99, buckets) * 1000, 3),
        "agent_mean_ms": round(total / count * 1000, 3) if count else None,
        **timer.figures(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pods", type=int, default=100, help="new containers to pin, one pod each (default: 100)")
    parser.add_argument(
        "--machine",
        default="intel-spr-2s-snc2",
        help="sysfs_builder machine, with more CPUs than --pods (default: %(default)s, 112 CPUs)",
    )
    parser.add_argument("--driver", choices=("systemd", "cgroupfs"), default="systemd", help="kubelet cgroup driver")
    parser.add_argument(
        "--naming",
        choices=("status", "bundle"),
        default="status",
        help="who names the new container: its pod status (default) or its containerd bundle",
    )
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds one container may take (default: 5)")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    add_options(parser)
    args = parser.parse_args(argv)
    if args.smoke:
        args.pods = 5
    with open(os.devnull, "w") as sink:
        configure_logging(json=True, level="info", stream=sink)
        with tempfile.TemporaryDirectory(prefix="podpin-bench-") as fallback, scratch_dir(Path(fallback)) as base:
            row = measure(base, args)
    emit(args, "pin_latency", row, variant=f"{args.naming}-{args.driver}")
    if args.json:
        print(json.dumps(row, sort_keys=True))
        return 0
    print(
        f"pin latency over {row['containers']} new containers: {row['machine']} ({row['cpus']} CPUs), "
        f"{row['driver']} driver, {row['watcher']} watcher, named by {row['naming']}, "
        f"fixture tree {'on tmpfs' if row['tmpfs'] else 'on disk'}"
    )
    print(f"{'':34}{'median':>10}{'p99':>10}")
    print(
        f"{'mkdir -> cpuset.cpus (polled)':34}{row['observed_median_ms']:>8.3f}ms{row['observed_p99_ms']:>8.3f}ms"
        f"   (max {row['observed_max_ms']:.3f} ms)"
    )
    print(
        f"{'podpin_pin_latency_seconds':34}{row['agent_median_ms']:>8.3f}ms{row['agent_p99_ms']:>8.3f}ms"
        f"   (mean {row['agent_mean_ms']} ms over {row['agent_count']})"
    )
    for stage in StageTimer.STAGES:
        if f"stage_{stage}_p50_ms" in row:
            print(
                f"{'  stage ' + stage:34}{row[f'stage_{stage}_p50_ms']:>8.3f}ms{row[f'stage_{stage}_p99_ms']:>8.3f}ms"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
