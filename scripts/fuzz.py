#!/usr/bin/env python3
"""Fuzz every parser of untrusted input with Hypothesis and report the inputs run and the time, per parser.

Usage: ``scripts/fuzz.py --examples N [--target NAME ...] [--json]``. N generated inputs are shared evenly among the
targets (``tests/support/fuzz_targets.py``; each also runs its explicit examples, the crashes found so far). A
target fails when anything but its documented errors escapes, or one input runs longer than 10 s; the failing
input is printed (shrunk by Hypothesis) and the exit status is 1. Issue 9 asks for N >= 100000 when measuring;
the test suite runs a few dozen per target (``tests/unit/test_fuzz.py``).

Output: one JSON document, ``{"examples", "seconds", "targets": {name: {"examples", "seconds", "per_second",
"failure"}}}``, after a table on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.fuzz_targets import TARGETS, fuzz


def _failure(err: BaseException) -> str:
    errors = list(err.exceptions) if isinstance(err, BaseExceptionGroup) else [err]
    lines = []
    for one in errors:
        where = traceback.extract_tb(one.__traceback__)[-1]
        notes = " ".join(getattr(one, "__notes__", []))
        lines.append(f"{type(one).__name__}: {one} at {where.filename}:{where.lineno}; {notes[:2000]}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=100_000, help="generated inputs in all (default: %(default)s)")
    parser.add_argument("--target", action="append", choices=[t.name for t in TARGETS], help="only these targets")
    parser.add_argument("--json", action="store_true", help="print only the JSON document")
    args = parser.parse_args(argv)
    targets = [t for t in TARGETS if not args.target or t.name in args.target]
    share = max(1, args.examples // len(targets))
    report: dict[str, Any] = {"examples": 0, "seconds": 0.0, "targets": {}}
    started = time.perf_counter()
    for target in targets:
        begun = time.perf_counter()
        failure = None
        try:
            count = fuzz(target, share)
        except BaseException as err:  # report every target, then fail
            count, failure = -1, _failure(err)
        seconds = time.perf_counter() - begun
        report["targets"][target.name] = {
            "examples": count,
            "seconds": round(seconds, 2),
            "per_second": round(count / seconds, 1) if seconds and count > 0 else 0.0,
            "failure": failure,
        }
        report["examples"] += max(count, 0)
        if not args.json:
            print(f"{target.name:16} {count:>9} inputs {seconds:9.1f} s  {failure or 'ok'}", file=sys.stderr)
    report["seconds"] = round(time.perf_counter() - started, 2)
    print(json.dumps(report, indent=1))
    return 1 if any(entry["failure"] for entry in report["targets"].values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
