"""Benchmarks that cannot rot: each fast ``scripts/bench_*.py`` runs in ``--smoke`` mode; the report is current.

The smoke runs assert that each bench produced its figures (the keys, a
provenance naming a commit and a machine), never their values: timed
assertions would flake on a shared CI machine (``docs/style.md``, "Tests").
The two benches that boot the QEMU guest run from ``tests/vm/test_vm_benches.py``, the cluster's from
``tests/cluster/test_cluster_bench.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from scripts import bench_report
from scripts.benchkit import BENCH_DIR
from tests.support.paths import REPO

FAST_BENCHES = {
    "bench_admit.py": ([], ("results", "goals")),
    "bench_memory_hints.py": ([], ("lattice_median_ms", "listing_median_ms")),
    "bench_merge.py": ([], ("podpin_ms", "literal_ms")),
    "bench_nri.py": ([], ("create_p99_ms", "agent_rss_mib")),
    "bench_pin_latency.py": (
        ["--naming", "bundle"],
        ("observed_p99_ms", "agent_p99_ms", "stage_watch_p99_ms", "stage_bundle_p99_ms", "stage_write_p99_ms"),
    ),
    "bench_agent.py": (["--all"], ("cpu_percent", "rss_mib_max", "metrics_scrapes")),
    "bench_sim.py": ([], ("seconds", "placed")),
    "bench_bounds.py": ([], ("peak_mib", "slowest_chunk_s", "truncated")),
}


def run_smoke(script: str, extra: list[str], out: Path) -> dict[str, Any]:
    """Run ``script --smoke --out out``; its JSON record."""
    subprocess.run(
        [sys.executable, str(REPO / "scripts" / script), "--smoke", "--out", str(out), *extra],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    record: dict[str, Any] = json.loads(out.read_text())
    return record


def figure_keys(result: Any) -> set[str]:
    """Every key of the result, its rows' keys included."""
    if isinstance(result, list):
        return {key for row in result for key in figure_keys(row)}
    if isinstance(result, dict):
        return set(result) | {key for value in result.values() for key in figure_keys(value)}
    return set()


@pytest.mark.parametrize("script", sorted(FAST_BENCHES))
def test_every_fast_bench_produces_its_figures_in_smoke_mode(script: str, tmp_path: Path) -> None:
    """The bench runs to the end in --smoke mode and records its figures with the commit and the machine."""
    extra, keys = FAST_BENCHES[script]
    record = run_smoke(script, extra, tmp_path / "record.json")
    provenance = record["provenance"]
    assert (True, set(keys)) == (record["smoke"], set(keys) & figure_keys(record["result"]))
    assert {"commit", "cpu", "cores", "kernel", "python", "date"} <= set(provenance)
    assert 40 == len(provenance["commit"])


def test_every_bench_script_is_covered_by_a_smoke_test() -> None:
    """A new bench without a smoke test fails here (the VM benches are in tests/vm, the cluster's in tests/cluster)."""
    vm = {"bench_pin_latency_vm.py", "bench_pin_window.py", "bench_cluster.py"}
    expected = {path.name for path in (REPO / "scripts").glob("bench_*.py")} - {"bench_report.py"}
    assert expected == set(FAST_BENCHES) | vm


def test_benchmarks_md_is_regenerated_from_the_records() -> None:
    """docs/benchmarks.md holds exactly what scripts/bench_report.py renders from docs/bench/*.json."""
    current = bench_report.DOC.read_text()
    assert current == bench_report.regenerate(current, bench_report.load(BENCH_DIR))


def test_a_report_block_renders_each_record_with_its_provenance() -> None:
    """A block names every matching record with its commit and machine, then its figures; others are left out."""
    records = {
        "agent": {
            "bench": "agent",
            "variant": "",
            "smoke": False,
            "provenance": {
                "commit": "a" * 40,
                "dirty": False,
                "cpu": "CPU X",
                "cores": 2,
                "kernel": "6.1",
                "python": "3.11.2",
                "date": "2026-12-04T15:00:00Z",
            },
            "result": {"cpu_percent": 0.9, "goals": {"rss": 60}},
        },
        "merge": {"bench": "merge", "variant": "", "smoke": False, "provenance": {}, "result": []},
    }
    text = "a\n<!-- bench-report: agent* -->\nold\n<!-- /bench-report -->\nb\n"
    expected = (
        "a\n<!-- bench-report: agent* -->\n- agent: commit aaaaaaaaaaaa, CPU X, 2 cores, Linux 6.1, "
        "Python 3.11.2, 2026-12-04T15:00:00Z\n\n| figure | agent |\n|---|---|\n| cpu_percent | 0.9 |\n"
        "| goals.rss | 60 |\n<!-- /bench-report -->\nb\n"
    )
    assert expected == bench_report.regenerate(text, records)
