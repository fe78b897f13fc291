"""``scripts/soak.py --minutes 0.5``: churn, watch cuts, an API outage, cgroup and disk faults, SIGKILL restarts.

The short run of the soak (issue "hold under attack", "Soak"): the agent as a subprocess against the API server
emulator and a fixture tree; every invariant is checked after every step (no CPU in two exclusive sets, no running
exclusive container moved, cgroups equal to the plan, every malformed pod reported). The 30-minute run is
``scripts/soak.py --minutes 30``.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.paths import REPO


def test_short_soak_has_no_violation() -> None:
    """Half a minute of steps (seed 3): exit 0 and one JSON line with 0 violations and every key the issue names."""
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "soak.py"), "--minutes", "0.5", "--seed", "3"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    keys = {"minutes", "pods", "restarts", "faults", "violations", "rss_mib_start", "rss_mib_end"}
    assert (0, 0, set(), "", True, True) == (
        result.returncode,
        summary["violations"],
        keys - set(summary),
        result.stderr,
        summary["pods"] > 0,
        summary["faults"] > 0,
    )
