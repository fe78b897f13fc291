"""The two benches that boot the QEMU guest run to the end in ``--smoke`` mode and record their figures.

The fast benches are in ``tests/unit/test_benches.py``; these two need the VM
kernel and the guest's container runtime (``tests/vm/vm-setup.sh``). Smoke mode
creates a handful of containers, so a run is one short boot; only the presence
of the figures is asserted, never their values.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import REPO
from tests.vm import harness

VM_BENCHES = {
    "bench_pin_latency_vm.py": ("vm_ms", "native_estimate_ms", "pinned"),
    "bench_pin_window.py": ("p50_ms", "p99_ms", "native_p99_ms_est", "stage_total_p99_ms", "stage_write_p99_ms"),
}


SMOKE_TIMEOUT = 1800.0
"""Seconds a smoke run may take; past them its whole session (the bench, run-in-vm.sh's ``timeout``, QEMU) is killed."""


def run_smoke(argv: list[str]) -> None:
    """Run a bench to the end; on a failure or past :data:`SMOKE_TIMEOUT`, fail naming it (with its stderr tail)."""
    proc = subprocess.Popen(
        argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        _, err = proc.communicate(timeout=SMOKE_TIMEOUT)
    except subprocess.TimeoutExpired:
        harness.kill_session(proc.pid)
        _, err = proc.communicate()
        pytest.fail(
            f"{Path(argv[1]).name} --smoke ran past {SMOKE_TIMEOUT:.0f} s (its guest was stopped):\n{err[-3000:]}"
        )
    if proc.returncode != 0:
        pytest.fail(f"{Path(argv[1]).name} --smoke exited {proc.returncode}:\n{err[-3000:]}")


def keys_of(result: Any) -> set[str]:
    """Every key in the result, nested rows included."""
    if isinstance(result, list):
        return {key for row in result for key in keys_of(row)}
    if isinstance(result, dict):
        return set(result) | {key for value in result.values() for key in keys_of(value)}
    return set()


@pytest.mark.parametrize("script", sorted(VM_BENCHES))
def test_vm_bench_produces_its_figures_in_smoke_mode(script: str, tmp_path: Path) -> None:
    """The bench boots the guest, measures a few containers and records the figures with the commit."""
    out = tmp_path / "record.json"
    run_smoke(
        [sys.executable, str(REPO / "scripts" / script), "--smoke", "--out", str(out), "--workdir", str(tmp_path)]
    )
    record = json.loads(out.read_text())
    wanted = set(VM_BENCHES[script])
    assert (True, wanted) == (record["smoke"], wanted & keys_of(record["result"]))
