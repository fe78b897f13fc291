"""``soak.py --tracemalloc``: the agent's SIGUSR1 snapshots and the growth report that names the growing lines.

Run in this process: tracemalloc on, the handler installed, SIGUSR1 sent to
ourselves around an allocation this file keeps, so the report must name this
file's line first.
"""

from __future__ import annotations

import os
import signal
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.soak_agent import growth_report, snapshot_on_sigusr1

KEPT: list[bytes] = []


def _grow() -> None:
    KEPT.extend(bytes(4096) for _ in range(512))  # 2 MiB kept until the test ends


@pytest.fixture
def tracing() -> Iterator[None]:
    previous = signal.getsignal(signal.SIGUSR1)
    tracemalloc.start(5)
    try:
        yield
    finally:
        tracemalloc.stop()
        signal.signal(signal.SIGUSR1, previous)
        KEPT.clear()


@pytest.mark.usefixtures("tracing")
def test_snapshots_and_report_name_the_growing_line(tmp_path: Path) -> None:
    """Two SIGUSR1s write snapshots 0 and 1; the report's largest growth is ``_grow``'s 2 MiB, in this file."""
    snapshot_on_sigusr1(tmp_path)
    os.kill(os.getpid(), signal.SIGUSR1)
    _grow()
    os.kill(os.getpid(), signal.SIGUSR1)
    first, last = tmp_path / "tracemalloc-0.snapshot", tmp_path / "tracemalloc-1.snapshot"
    totals = growth_report(first, last, tmp_path / "growth.txt")
    report = (tmp_path / "growth.txt").read_text().splitlines()
    grown_kib = float(report[0].split()[0])
    assert (True, True, True) == (
        grown_kib >= 2048,
        "test_soak_tracemalloc.py" in report[1],
        totals["traced_mib_end"] - totals["traced_mib_start"] >= 2.0,
    )


def test_no_handler_without_tracing(tmp_path: Path) -> None:
    """Without tracemalloc the agent keeps SIGUSR1 as it was (no snapshot machinery in a normal soak)."""
    previous = signal.getsignal(signal.SIGUSR1)
    snapshot_on_sigusr1(tmp_path)
    assert previous == signal.getsignal(signal.SIGUSR1)
