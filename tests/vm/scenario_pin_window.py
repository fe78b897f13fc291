"""Guest scenario of ``scripts/bench_pin_window.py``: the pin window of real containers, per identity mode.

containerd 1.7 + runc as in ``scenario_runtime.py``. For each mode (``--modes``, names of
``runtimenode.MODES``) a fresh ``podpin run``; then ``--containers`` containers in pods of ``--per-pod``
containers (``runtimepods.bench_pod``: every container one exclusive CPU, so none may keep the set it
inherits), one pod at a time: published without status, admitted, started over CRI with the probe image
(each container prints the ``Cpus_allowed_list`` it started with), its containers' statuses published
``--status-delay`` s after each started, recorded, deleted. Per container: the window from its cgroup
appearing to ``cpuset.cpus`` holding its planned CPU, whether its first view already was that CPU, and the
agent's own account of where its pin went (``pin_ms`` of its ``cgroup.applied`` line: queue, name, wait, plan,
write), summed up per stage.
``cpubench`` / ``cpubench_after`` time the CPU micro-benchmark for the VM slowdown factor.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from functools import partial
from pathlib import Path
from typing import Any

from tests.vm import cpubench, ociimage
from tests.vm.runtimenode import MODES, RuntimeNode, container_records
from tests.vm.runtimepods import STATUS_DELAY, bench_pod
from tests.vm.scenario import Scenario, wait_until

VM_DIR = Path(os.environ.get("PODPIN_VM_DIR") or "/tmp/podpin-vm")
MODE_OFFSET = 1000
"""Pod indexes of the n-th mode start at n x this, so no uid is reused across modes."""


def percentile(ordered: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending, non-empty list."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


PIN_STAGES = ("total", "queue", "name", "wait", "plan", "write")
"""The agent's own account of a pin (``pin_ms`` of ``cgroup.applied``, ``agent/reconcile/pin_trace.py``)."""


def attach_pin_stages(records: list[dict[str, Any]], events: list[dict[str, Any]]) -> None:
    """Give each record the ``pin_ms`` of the agent's first ``cgroup.applied`` line for its container cgroup (the
    cgroup's directory is the container id here, cgroupfs driver), or None where the agent wrote nothing new (NRI:
    runc created the cgroup with the set already)."""
    by_id: dict[str, dict[str, float]] = {}
    for event in events:
        if event.get("event") == "cgroup.applied" and isinstance(event.get("pin_ms"), dict):
            by_id.setdefault(Path(str(event.get("path", ""))).name, event["pin_ms"])
    for record in records:
        record["pin_ms"] = by_id.get(record["id"])


def stage_summary(records: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """p50 and p99 (guest milliseconds) of each stage over the records that have ``pin_ms``."""
    found: dict[str, dict[str, float]] = {}
    for stage in PIN_STAGES:
        values = sorted(r["pin_ms"][stage] for r in records if r.get("pin_ms") and stage in r["pin_ms"])
        if values:
            found[stage] = {"p50_ms": round(percentile(values, 0.50), 2), "p99_ms": round(percentile(values, 0.99), 2)}
    return found


def summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The benchmark row's numbers from the per-container records."""
    windows = sorted(r["window_ms"] for r in records if r["window_ms"] is not None)
    starts = sorted(r["started_after_ms"] for r in records if r["started_after_ms"] is not None)
    return {
        "stages": stage_summary(records),
        "containers": len(records),
        "first_view_final": sum(1 for r in records if r["first_view_final"]),
        "pinned": len(windows),
        "p50_ms": round(percentile(windows, 0.50), 2) if windows else None,
        "p99_ms": round(percentile(windows, 0.99), 2) if windows else None,
        "max_ms": round(windows[-1], 2) if windows else None,
        "started_after_p50_ms": round(percentile(starts, 0.50), 1) if starts else None,
        "started_after_min_ms": starts[0] if starts else None,
    }


def _released(node: RuntimeNode, uid: str) -> bool:
    """Whether the agent's plan no longer holds pod ``uid``."""
    return uid not in {p["uid"] for p in node.state()["plan"]["pods"]}


def run_mode(node: RuntimeNode, mode: str, order: int, args: argparse.Namespace, out: dict[str, Any]) -> None:
    """One agent in ``mode``; pods of ``args.per_pod`` containers until ``args.containers`` ran."""
    out["agent"] = node.start_agent(MODES[mode])
    records: list[dict[str, Any]] = []
    started = time.monotonic()
    index = 0
    while len(records) < args.containers:
        count = min(args.per_pod, args.containers - len(records))
        spec = bench_pod(order * MODE_OFFSET + index, count)
        index += 1
        plan = node.start_pods([spec], ociimage.PROBE_IMAGE, status_delay=args.status_delay)
        records.extend(container_records(node, [node.runs[spec.uid]], plan, timeout=args.status_delay + 60))
        node.delete_pod(spec)
        wait_until("the pod released", partial(_released, node, spec.uid), timeout=60)
    out["seconds"] = round(time.monotonic() - started, 1)
    attach_pin_stages(records, node.agent_events())
    out["records"] = records
    out["summary"] = summary(records)
    out["metrics"] = node.metrics()
    node.kill_agent()


def main() -> int:
    """Runtime, micro-benchmark, one step per mode, micro-benchmark again."""
    sc = Scenario.from_argv("pin_window")
    parser = argparse.ArgumentParser(prog="scenario_pin_window.py")
    parser.add_argument("--containers", type=int, default=50)
    parser.add_argument("--per-pod", type=int, default=5, help="containers per pod (each one exclusive CPU)")
    parser.add_argument("--modes", default="nri,bundle,api")
    parser.add_argument("--status-delay", type=float, default=STATUS_DELAY, help="the API lag, in seconds")
    parser.add_argument("--cpubench", action="store_true")
    args = parser.parse_args(sc.args)
    node = RuntimeNode(sc.workdir, VM_DIR)
    try:
        with sc.step("runtime") as out:
            out.update(node.start_runtime(nri=False))
        if args.cpubench:
            with sc.step("cpubench") as out:
                out.update(cpubench.measure())
        for order, mode in enumerate(args.modes.split(",")):
            with sc.step(f"mode_{mode}") as out:
                run_mode(node, mode, order, args, out)
        if args.cpubench:
            with sc.step("cpubench_after") as out:
                out.update(cpubench.measure())
    finally:
        node.close()
    status: int = sc.finish()
    return status


if __name__ == "__main__":
    raise SystemExit(main())
