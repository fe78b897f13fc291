#!/usr/bin/env python3
"""``podpin simulate`` at fleet scale: seconds and peak RSS against pods, the growth curve.

Each point runs ``podpin simulate`` as a user would, in its own process, on a
workload file: the ``seed-mesh`` preset (or ``--preset``) with every pod count
and the node count multiplied by the point's scale (200 pods on 40 nodes at
scale 1; 10,000 on 2,000 at 50; 100,000 on 20,000 at 500). A workload file
rather than ``--scale`` so that the same bench times any checkout, an older
one included (``--checkout DIR`` runs ``python -m agent`` with that tree first
on ``PYTHONPATH``), side by side in one run. The figures: wall seconds of the
whole command (start-up, both models, the report), the peak RSS of the
process (``wait4``), and the pods each model admitted, so a faster engine that
places differently shows.

Goals (issue 20): 10,000 pods on 2,000 nodes <= 5 s, 100,000 on 20,000 <= 60 s.

Usage: ``scripts/bench_sim.py [--scales 1,10,50,100,500] [--preset seed-mesh] [--checkout DIR] [--smoke]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.sim.presets import PRESETS
from scripts.benchkit import add_options, commit_of, emit

GOALS_SECONDS = {50: 5.0, 500: 60.0}


def scaled(document: dict[str, Any], scale: int) -> dict[str, Any]:
    """The workload document with every pod count and the node count times ``scale``."""
    pods = [{**pod, "count": pod["count"] * scale} for pod in document["pods"]]
    return {**document, "pods": pods, "nodes": document["nodes"] * scale}


def point(workload: Path, checkout: Path) -> dict[str, Any]:
    """One ``podpin simulate --output json`` run: seconds, peak RSS, pods admitted per model."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    argv = [sys.executable, "-m", "agent", "simulate", "--workload", str(workload), "--output", "json"]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        process = subprocess.Popen(argv, cwd=checkout, env=env, stdout=out, stderr=err)
        # wait4, not communicate(): the child's own peak RSS comes with its exit status
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.monotonic() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if process.returncode != 0:
            raise SystemExit(f"bench_sim: podpin simulate failed ({process.returncode}): {err.read()[-500:]!r}")
        document = json.loads(out.read())
    return {
        "seconds": round(seconds, 2),
        "rss_mib_max": round(usage.ru_maxrss / 1024, 1),
        "placed": {model: document[model]["pods_admitted"] for model in ("per-container", "pod-level")},
    }


def run(preset: str, scales: list[int], checkout: Path) -> list[dict[str, Any]]:
    """One row per scale."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="podpin-bench-sim-") as tmp:
        for scale in scales:
            document = scaled(dict(PRESETS[preset]), scale)
            workload = Path(tmp) / f"{preset}-x{scale}.json"
            workload.write_text(json.dumps(document))
            row = {
                "checkout": commit_of(checkout),
                "scale": scale,
                "pods": sum(p["count"] for p in document["pods"]),
                "nodes": document["nodes"],
            }
            row |= point(workload, checkout)
            row["goal_seconds"] = GOALS_SECONDS.get(scale)
            print(json.dumps(row), file=sys.stderr, flush=True)
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--scales", default="1,10,50,100,500", help="comma-separated (default: %(default)s)")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="seed-mesh")
    parser.add_argument("--checkout", type=Path, default=REPO, help="the tree to time (default: this one)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    add_options(parser)
    args = parser.parse_args(argv)
    scales = [1] if args.smoke else [int(s) for s in args.scales.split(",")]
    rows = run(args.preset, scales, args.checkout.resolve())
    variant = args.preset if args.checkout.resolve() == REPO else f"{args.preset}-{args.checkout.name}"
    emit(args, "sim", rows, variant=variant)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'pods':>8}{'nodes':>8}{'seconds':>10}{'RSS MiB':>10}  admitted (per-container / pod-level)")
    for row in rows:
        placed = row["placed"]
        print(
            f"{row['pods']:>8}{row['nodes']:>8}{row['seconds']:>10}{row['rss_mib_max']!s:>10}  "
            f"{placed.get('per-container')} / {placed.get('pod-level')}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
