"""A CPU-bound micro-benchmark, run inside and outside the VM to estimate how much slower the guest is.

Pin latency measured in the TCG guest must be scaled to say anything about native hardware. The factor is
estimated with the same interpreter doing the same pure-Python work on both sides: the kind of work the
agent's reconcile pass does (cpuset parsing and formatting, dict building, JSON encoding) and a plain
integer loop. Each workload runs ``repeats`` times; the minimum counts (the least disturbed run).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from agent.cpuset import CPUSet

__all__ = ["WORKLOADS", "measure"]


def _integer_loop() -> int:
    total = 0
    for i in range(300_000):
        total += i * i % 7
    return total


def _agent_like() -> int:
    size = 0
    for i in range(1_500):
        cpus = CPUSet.parse(f"0-{i % 60 + 3},{i % 7 + 70}-{i % 5 + 80}")
        doc = {"cpus": str(cpus), "count": len(cpus), "numa": [c // 16 for c in cpus][:4], "id": f"{i:064x}"}
        size += len(json.dumps(doc, sort_keys=True))
    return size


WORKLOADS: dict[str, Callable[[], int]] = {"integer_loop": _integer_loop, "agent_like": _agent_like}
"""Name -> workload; each returns a value so the work cannot be skipped."""


def measure(repeats: int = 5) -> dict[str, float]:
    """Seconds per workload: the fastest of ``repeats`` runs (``time.perf_counter``)."""
    result: dict[str, float] = {}
    for name, workload in WORKLOADS.items():
        best = float("inf")
        for _ in range(repeats):
            started = time.perf_counter()
            workload()
            best = min(best, time.perf_counter() - started)
        result[name] = round(best, 5)
    return result
