"""Real-kernel VM tests: mark them ``vm`` and report how long each VM run took.

The summary at the end of the run lists every VM boot of the session (scenario, layout, wall time on the
host, guest uptime when the scenario began, scenario time), so the cost of the VM part of the suite is
visible in every CI log.
"""

from __future__ import annotations

import pytest

from tests.vm import harness


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under ``tests/vm`` carries the ``vm`` marker (``-m "not vm"`` deselects them)."""
    for item in items:
        if "tests/vm/" in item.nodeid or item.nodeid.startswith("vm/"):
            item.add_marker(pytest.mark.vm)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the VM timings of this session, if any VM was booted."""
    if not harness.TIMINGS:
        return
    terminalreporter.section("podpin VM runs")
    total = 0.0
    for t in harness.TIMINGS:
        total += t.wall_seconds
        terminalreporter.write_line(
            f"{t.scenario:<28} {t.label:<20} wall {t.wall_seconds:6.1f} s   "
            f"guest up at scenario start {t.guest_uptime_at_start:5.1f} s   scenario {t.scenario_seconds:5.1f} s"
        )
    terminalreporter.write_line(f"{len(harness.TIMINGS)} VM runs, {total:.1f} s wall in total")
