#!/usr/bin/env python3
"""Benchmark: podpin's lattice hint merge against the kubelet's literal cartesian product.

For 4..16 NUMA nodes, three providers (CPU, memory, one device type) return the
hints the kubelet's providers would: one hint per NUMA subset with enough free
capacity, preferred iff the subset has the fewest nodes that could hold the
request on an empty machine. Two scenarios per size:

* ``fits``  - some single node has room for everything (the preferred path);
* ``tight`` - no single node has room for the CPUs right now, so every CPU hint
  is non-preferred and the merge takes the non-preferred (lattice) path.

Both merges run side by side in this process on the same hints and their
results must be identical. A literal run whose estimated time exceeds
``--max-literal-seconds`` (default 60) is not run to the end: its time is
extrapolated from a timed partial run of the same loop over the first
permutations, and reported as an estimate (``~``, ``literal_estimated``).

Usage::

    .venv/bin/python scripts/bench_merge.py            # table
    .venv/bin/python scripts/bench_merge.py --json     # one JSON row per line
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agent.alloc.topologymanager import (
    CompactProviderHints,
    HintList,
    NUMAInfo,
    ProviderHints,
    TopologyHint,
    ids_of,
    make_policy,
)

# The literal merge is a test oracle (tests/oracles), not part of the installed package: read it from the checkout.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scripts.benchkit import add_options, emit
from tests.oracles.merge_reference import HintMerger, filter_providers_hints, merge_permutation

_POLICY = "best-effort"


@dataclass(frozen=True, slots=True)
class Resource:
    """One resource of one provider: per-node capacity and free amount, and the request."""

    provider: str
    name: str
    capacity: list[int]
    free: list[int]
    request: int


def _subset_sums(values: Sequence[int]) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Sum of ``values`` over every node subset, indexed by the subset's bitmask."""
    sums = np.zeros(1, dtype=np.int64)
    for value in values:
        sums = np.concatenate((sums, sums + value))
    return sums


def _popcounts(nodes: int) -> np.ndarray[Any, np.dtype[np.int64]]:
    counts = np.zeros(1 << nodes, dtype=np.int64)
    for bit in range(nodes):
        counts[1 << bit : 2 << bit] = counts[: 1 << bit] + 1
    return counts


def _bitmap(flags: np.ndarray[Any, np.dtype[np.bool_]]) -> int:
    return int.from_bytes(np.packbits(flags, bitorder="little").tobytes(), "little")


def provider_hints(resource: Resource, info: NUMAInfo) -> tuple[list[TopologyHint], HintList]:
    """The kubelet-style hints of one resource, as plain hints (ascending mask order) and as a HintList."""
    nodes = len(info.nodes)
    counts = _popcounts(nodes)
    total = _subset_sums(resource.capacity)
    free = _subset_sums(resource.free)
    offered = free >= resource.request
    offered[0] = False
    could_fit = (total >= resource.request) & (counts > 0)
    smallest = int(counts[could_fit].min())
    preferred = offered & (counts == smallest)
    plain = [TopologyHint(int(mask), bool(preferred[mask])) for mask in np.flatnonzero(offered)]
    compact = HintList.from_bitmaps(info, masks=_bitmap(offered), preferred=_bitmap(preferred))
    return plain, compact


def machine(nodes: int, scenario: str, rng: random.Random) -> list[Resource]:
    """Per-node capacity and random free amounts for CPU, memory and a device.

    No node has room for the 24 CPUs (at most 23 free) unless the scenario is
    ``fits``, which gives one node room for all three requests.
    """
    cpus, memory_gib, gpus = 32, 128, 2
    cpu_free = [rng.randint(2, 23) for _ in range(nodes)]
    memory_free = [rng.randint(8, 120) for _ in range(nodes)]
    gpu_free = [rng.randint(0, gpus) for _ in range(nodes)]
    if scenario == "fits":
        roomy = rng.randrange(nodes)
        cpu_free[roomy], memory_free[roomy], gpu_free[roomy] = 28, 64, 1
    return [
        Resource("cpu", "cpu", [cpus] * nodes, cpu_free, 24),
        Resource("memory", "memory", [memory_gib] * nodes, memory_free, 32),
        Resource("devices", "example.com/gpu", [gpus] * nodes, gpu_free, 1),
    ]


def _timed(function: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Median milliseconds of ``repeat`` calls, and the last result."""
    samples = []
    result = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e3, result


def _literal(
    providers: list[ProviderHints], info: NUMAInfo, max_seconds: float
) -> tuple[float, bool, tuple[TopologyHint, bool] | None, int]:
    """Literal merge time in ms, whether it is an estimate, its result if it ran, and the product size."""
    lists = filter_providers_hints(providers)
    product = 1
    for hints in lists:
        product *= len(hints)
    merger = HintMerger.new(info, lists, _POLICY)
    default = info.default_mask
    sample = min(product, 200_000)
    start = time.perf_counter()
    best: TopologyHint | None = None
    for permutation in itertools.islice(itertools.product(*lists), sample):
        best = merger.compare(best, merge_permutation(default, permutation))
    per_permutation = (time.perf_counter() - start) / max(sample, 1)
    estimate = per_permutation * product
    if sample == product:
        return estimate * 1e3, False, (best or TopologyHint(default, False), True), product
    if estimate > max_seconds:
        return estimate * 1e3, True, None, product
    start = time.perf_counter()
    result = merger.merge()
    return (time.perf_counter() - start) * 1e3, False, (result, True), product


def run(nodes: int, scenario: str, args: argparse.Namespace) -> dict[str, Any]:
    """One row: both merges on the same hints; raises if their results differ."""
    rng = random.Random(args.seed * 1000 + nodes * 2 + (scenario == "tight"))
    distances = tuple(
        tuple(10 if a == b else 12 if a // 2 == b // 2 else 20 + 2 * abs(a // 4 - b // 4) for b in range(nodes))
        for a in range(nodes)
    )
    info = NUMAInfo(nodes=tuple(range(nodes)), distances=distances)
    plain: list[ProviderHints] = []
    compact: list[CompactProviderHints] = []
    sizes = []
    for resource in machine(nodes, scenario, rng):
        hints, hint_list = provider_hints(resource, info)
        plain.append({resource.name: hints})
        compact.append({resource.name: hint_list})
        sizes.append(len(hints))
    policy = make_policy(_POLICY, info)
    podpin_ms, podpin = _timed(lambda: policy.merge(compact), args.repeat)
    plain_ms, podpin_plain = _timed(lambda: policy.merge(plain), max(1, args.repeat // 5))
    if podpin != podpin_plain:
        raise AssertionError(f"{nodes} nodes, {scenario}: HintList merge {podpin} != plain merge {podpin_plain}")
    literal_ms, estimated, literal, product = _literal(plain, info, args.max_literal_seconds)
    if literal is not None and literal != podpin:
        raise AssertionError(f"{nodes} nodes, {scenario}: literal {literal} != podpin {podpin}")
    best, admit = podpin
    return {
        "numa_nodes": nodes,
        "scenario": scenario,
        "hints_per_resource": sizes,
        "permutations": product,
        "literal_ms": round(literal_ms, 3),
        "literal_estimated": estimated,
        "podpin_ms": round(podpin_ms, 3),
        "podpin_plain_ms": round(plain_ms, 3),
        "speedup": round(literal_ms / podpin_ms, 1),
        "result": {"mask": list(ids_of(best.affinity or 0)), "preferred": best.preferred, "admit": admit},
        "identical": literal is not None,
    }


def _table_line(row: dict[str, Any]) -> str:
    approx = "~" if row["literal_estimated"] else " "
    literal = f"{approx}{row['literal_ms']:.4g}"
    speedup = f"{approx}{row['speedup']:.3g}x"
    return (
        f"{row['numa_nodes']:>5} {row['scenario']:>6} {row['permutations']:>12.3g} {literal:>13} "
        f"{row['podpin_ms']:>10.3f} {row['podpin_plain_ms']:>13.4g} {speedup:>11} "
        f"{'checked' if row['identical'] else 'estimate':>9}  {row['result']['mask']} pref={row['result']['preferred']}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print one JSON object per row")
    parser.add_argument("--min-nodes", type=int, default=4)
    parser.add_argument("--max-nodes", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=20, help="timed runs of the fast merge (median)")
    parser.add_argument("--max-literal-seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=1)
    add_options(parser)
    args = parser.parse_args(argv)
    if args.smoke:
        args.min_nodes, args.max_nodes, args.repeat, args.max_literal_seconds = 4, 5, 2, 2.0
    rows = []
    if not args.json:
        print(
            f"{'nodes':>5} {'case':>6} {'perms':>12} {'literal_ms':>13} {'podpin_ms':>10} "
            f"{'plain_list_ms':>13} {'speedup':>11} {'results':>9}  best hint"
        )
    for nodes in range(args.min_nodes, args.max_nodes + 1):
        for scenario in ("fits", "tight"):
            row = run(nodes, scenario, args)
            rows.append(row)
            print(json.dumps(row) if args.json else _table_line(row), flush=True)
    emit(args, "merge", rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
