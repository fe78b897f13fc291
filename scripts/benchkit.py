"""What every ``scripts/bench_*.py`` shares: ``--smoke``/``--record``/``--out``, provenance, the JSON record.

A figure without the code and the machine that produced it cannot be compared
with anything, and a benchmark nobody runs rots. So every bench records its
result as one JSON document, ``{"bench", "variant", "smoke", "provenance",
"result"}``, where ``provenance`` names the commit (and whether the tree was
dirty), the machine (CPU model, cores, kernel) and the interpreter. A full
run with ``--record`` writes it to ``docs/bench/<bench>[-<variant>].json`` (only then: a test or a
quick run leaves the documented figures alone); ``scripts/bench_report.py``
turns those files into the generated blocks of ``docs/benchmarks.md``.

``--smoke`` runs the bench on the smallest input that still exercises every
code path, in seconds; ``tests/unit/test_benches.py`` runs each bench that way
in CI and asserts that the figures were produced (never their values: a timed
assertion would flake on a shared CI machine).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BENCH_DIR = REPO / "docs" / "bench"


def add_options(parser: argparse.ArgumentParser) -> None:
    """``--smoke``, ``--record`` and ``--out``, the same on every bench."""
    parser.add_argument(
        "--smoke", action="store_true", help="the smallest run that exercises every path (CI: figures exist)"
    )
    parser.add_argument(
        "--record", action="store_true", help="write the JSON record to docs/bench/ (for scripts/bench_report.py)"
    )
    parser.add_argument("--out", type=Path, help="write the JSON record here")


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=False)
    except OSError:
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def commit_of(checkout: Path) -> str:
    """The commit checked out in ``checkout`` (12 digits), for side-by-side runs of another tree."""
    done = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    )
    return done.stdout.strip()[:12] or "unknown"


def provenance() -> dict[str, Any]:
    """The commit, the machine and the interpreter of this run."""
    return {
        "commit": _git("rev-parse", "HEAD") or "unknown",
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def provenance_line(record: dict[str, Any]) -> str:
    """One line naming where a record's figures come from."""
    p = record["provenance"]
    dirty = " (dirty tree)" if p["dirty"] else ""
    return (
        f"commit {p['commit'][:12]}{dirty}, {p['cpu']}, {p['cores']} cores, Linux {p['kernel']}, "
        f"Python {p['python']}, {p['date']}"
    )


def record(bench: str, result: Any, *, smoke: bool, variant: str = "") -> dict[str, Any]:
    """The JSON document of one run."""
    return {"bench": bench, "variant": variant, "smoke": smoke, "provenance": provenance(), "result": result}


def emit(args: argparse.Namespace, bench: str, result: Any, *, variant: str = "") -> dict[str, Any]:
    """Print the provenance to stderr and write the record where ``--out`` (or the default) says."""
    doc = record(bench, result, smoke=bool(args.smoke), variant=variant)
    sys.stderr.write(f"{bench}{'-' + variant if variant else ''}: {provenance_line(doc)}\n")
    out: Path | None = args.out
    if out is None and args.record and not args.smoke:
        out = BENCH_DIR / f"{bench}{'-' + variant if variant else ''}.json"
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return doc
