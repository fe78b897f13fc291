#!/usr/bin/env python3
"""Static-memory admission on a 16-NUMA machine: memory hints as a lattice bitmap vs the kubelet's listing.

The node is ``agent.sim.machines.synthetic_machine`` with 16 sockets x 1 NUMA
node x 8 cores x 2 threads (256 CPUs, 64 GiB per node), static CPU policy,
``memoryManagerPolicy: Static`` and ``max-allowable-numa-nodes: 16``. A fresh
planner admits 40 Guaranteed pods of 2 CPUs and 8 GiB one by one; every
``admit`` is timed. "listing" is the same planner with the lattice threshold
raised above 16 nodes, so the memory provider lists the 65,535 NUMA subsets one
by one as the kubelet does; both must place every pod on the same nodes.

Run: ``.venv/bin/python scripts/bench_memory_hints.py [--rounds 3] [--json]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from unittest import mock

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # scripts.benchkit, from the checkout

from agent.alloc import Planner
from agent.config import config_from_mapping
from agent.pods.model import pod_from_dict
from agent.sim.machines import synthetic_machine
from scripts.benchkit import add_options, emit

POLICIES = ("single-numa-node", "restricted", "best-effort")


def pod(index: int) -> dict[str, object]:
    """A Guaranteed pod of 2 CPUs and 8 GiB."""
    resources = {"cpu": "2", "memory": "8Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"p{index}", "namespace": "bench", "uid": f"uid-{index}"},
        "spec": {
            "nodeName": "node",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": resources, "limits": resources}}],
        },
        "status": {"phase": "Pending", "qosClass": "Guaranteed"},
    }


def admit_all(policy: str, count: int = 40) -> tuple[list[float], list[tuple[int, ...] | None]]:
    """Milliseconds per admit and the NUMA affinity of each of the ``count`` pods."""
    topology = synthetic_machine(sockets=16, numa_per_socket=1, cores_per_numa=8, threads=2, memory_gib_per_numa=64)
    config = config_from_mapping(
        {
            "kubeReserved": {"cpu": "1"},
            "memoryManagerPolicy": "Static",
            "systemReserved": {"memory": "924Mi"},
            "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}],
            "topologyManagerPolicy": policy,
            "topologyManagerPolicyOptions": {"max-allowable-numa-nodes": "16"},
        },
        env={},
    )
    planner = Planner(topology, config.planner)
    pods = [pod_from_dict(pod(i)) for i in range(count)]
    times: list[float] = []
    placed: list[tuple[int, ...] | None] = []
    for view in pods:
        started = time.perf_counter_ns()
        decision = planner.admit(view)
        times.append((time.perf_counter_ns() - started) / 1e6)
        if not decision.admitted:
            raise SystemExit(f"{policy}: {view.name} rejected: {decision.reason} {decision.message}")
        placed.append(decision.numa_affinity)
    return times, placed


def run(rounds: int, *, pods: int = 40, policies: tuple[str, ...] = POLICIES) -> list[dict[str, object]]:
    """One row per topology policy: median admit time of both forms and their ratio."""
    rows: list[dict[str, object]] = []
    for policy in policies:
        lattice: list[float] = []
        listing: list[float] = []
        for _ in range(rounds):
            times, placed = admit_all(policy, pods)
            lattice += times
            with mock.patch("agent.alloc.memorymanager.policy_static.SMALL_LATTICE_NODES", 64):
                times, placed_listing = admit_all(policy, pods)
            listing += times
            if placed != placed_listing:
                raise SystemExit(f"{policy}: the lattice and the listing placed pods differently")
        rows.append(
            {
                "policy": policy,
                "lattice_median_ms": round(statistics.median(lattice), 2),
                "listing_median_ms": round(statistics.median(listing), 2),
                "speedup": round(statistics.median(listing) / statistics.median(lattice), 1),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=3, help="planner runs per policy and form (default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    add_options(parser)
    args = parser.parse_args(argv)
    rows = run(1, pods=2, policies=POLICIES[:1]) if args.smoke else run(args.rounds)
    emit(args, "memory_hints", rows)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print("| topology policy | lattice median ms | listing median ms | speedup |")
    print("|---|---|---|---|")
    for row in rows:
        print(f"| {row['policy']} | {row['lattice_median_ms']} | {row['listing_median_ms']} | {row['speedup']}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
