"""Every parser of untrusted input, fuzzed with Hypothesis on a small budget: only its documented errors escape,
no input hangs, and the worst inputs stay within a memory bound.

The targets and their documented errors are in ``tests/support/fuzz_targets.py`` (the list is in
``docs/design.md``, "Parsers and their errors"); ``scripts/fuzz.py --examples N`` runs the same targets on a large
budget. Each target's explicit examples are the crashes fuzzing found, run every time: before the fixes a
5,000-digit CPU id or ``MemTotal`` raised Python's int-digits ``ValueError``, a ``cpu.stat`` value of ``²`` an
``int()`` ``ValueError``, and 100,000 brackets in the kubelet's ``cpu_manager_state`` a ``RecursionError``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from tests.support.fuzz_targets import DOCUMENTED_ERRORS, TARGETS, Target, check, fuzz
from tests.support.paths import REPO

#: Generated inputs per target in the suite (the sysfs target writes and reads a tree per input: fewer).
SUITE_EXAMPLES = {"sysfs": 15}
DEFAULT_EXAMPLES = 40


@pytest.mark.parametrize("target", TARGETS, ids=[t.name for t in TARGETS])
def test_only_documented_errors_escape(target: Target) -> None:
    """The explicit examples and a small random budget raise nothing but the target's documented errors."""
    examples = SUITE_EXAMPLES.get(target.name, DEFAULT_EXAMPLES)
    assert fuzz(target, examples) >= examples + len(target.examples)


@pytest.mark.parametrize(
    ("target", "value"),
    [(t, w) for t in TARGETS for w in t.worst],
    ids=[f"{t.name}-{i}" for t in TARGETS for i, _ in enumerate(t.worst)],
)
def test_worst_inputs_stay_within_memory(target: Target, value: object) -> None:
    """The largest and deepest inputs a target can get cost less than its memory bound (traced peak)."""
    tracemalloc.start()
    try:
        check(target, value)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < target.memory_bound, f"{target.name}: peak {peak >> 20} MiB"


def test_every_target_and_its_errors_are_documented() -> None:
    """docs/design.md lists every fuzzed parser with exactly the error types the fuzzing allows."""
    text = (REPO / "docs" / "design.md").read_text()
    section = text.split("## Parsers and their errors", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0] in DOCUMENTED_ERRORS:
            rows[cells[0]] = tuple(e.strip().strip("`") for e in cells[2].split(",") if e.strip() != "none")
    assert dict(DOCUMENTED_ERRORS) == rows


def test_fuzz_script_runs_every_target(tmp_path: Path) -> None:
    """``scripts/fuzz.py --examples N`` runs every target and reports count and seconds per target as JSON."""
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "fuzz.py"), "--examples", str(3 * len(TARGETS)), "--json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        cwd=tmp_path,
    )
    report = json.loads(result.stdout)
    assert (0, sorted(t.name for t in TARGETS), True, []) == (
        result.returncode,
        sorted(report["targets"]),
        report["examples"] >= 3 * len(TARGETS),
        [name for name, entry in report["targets"].items() if entry["failure"] is not None],
    )
