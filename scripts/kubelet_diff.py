#!/usr/bin/env python3
"""The differential harness (issue 17): run scenarios on the kubelet's own pod-level resource managers and on podpin,
and compare every container (tests/cluster/scenarios/README.md says the format and the output).

Usage:
    scripts/kubelet_diff.py [--json] [--workdir DIR] [SCENARIO ...]   # no SCENARIO: the whole corpus

The Kubernetes version is the built one that ``K8S_VERSION`` picks (tests/cluster/k8s-build.sh; default the pin
of tests/cluster/k8s). Scenarios sharing a machine shape run in one boot of the QEMU guest. With ``--json`` stdout
has one JSON line per container, one per scenario that could not run (``{scenario, error}``) and a summary line;
without it, a line per container and the summary. Progress goes to stderr. Exit status 0 when every row is equal
and every scenario ran, 1 otherwise, 2 for bad arguments or missing setup.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.cluster import build  # noqa: E402
from tests.cluster.controlplane import ControlPlane  # noqa: E402
from tests.cluster.diff_rows import Row, summary  # noqa: E402
from tests.cluster.diff_run import run_scenarios  # noqa: E402
from tests.cluster.node import guest_modules  # noqa: E402
from tests.cluster.scenario_format import SCENARIOS, ScenarioError, load_all, load_scenario  # noqa: E402


def _say(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


def _line(row: Row) -> str:
    k, p = row.kubelet, row.podpin
    verdict = "equal" if row.equal else f"DIFFERENT ({row.cause})"
    return (
        f"{row.scenario} {row.pod}/{row.container}: kubelet {k.reason or 'admitted'} cpus={k.cpus} mems={k.mems} | "
        f"podpin {p.reason or 'admitted'} cpus={p.cpus} mems={p.mems}: {verdict}"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenarios", nargs="*", help="scenario directory names under tests/cluster/scenarios")
    parser.add_argument("--json", action="store_true", help="JSON lines on stdout")
    parser.add_argument("--workdir", type=Path, help="keep the logs here (default: a temporary directory)")
    args = parser.parse_args(argv)
    try:
        scenarios = [load_scenario(SCENARIOS / name) for name in args.scenarios] if args.scenarios else load_all()
    except ScenarioError as err:
        print(f"kubelet_diff: {err}", file=sys.stderr)
        return 2
    version = build.version()
    missing = None if build.built(version) else f"Kubernetes {version} is not built: run tests/cluster/k8s-build.sh"
    missing = missing or guest_modules()
    if missing:
        print(f"kubelet_diff: {missing}", file=sys.stderr)
        return 2
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="kubelet-diff-"))
    _say(f"{len(scenarios)} scenario(s) on Kubernetes {version}; logs in {workdir}")
    rows: list[Row] = []
    failed = 0
    with ControlPlane(workdir / "plane", version=version) as plane:
        for outcome in run_scenarios(plane, workdir, scenarios, _say):
            phases = ", ".join(f"{name} {seconds:.0f}" for name, seconds in outcome.phases)
            _say(f"{outcome.scenario}: {len(outcome.rows)} container(s) in {outcome.seconds:.0f} s ({phases})")
            if outcome.error is not None:
                failed += 1
                print(
                    json.dumps({"scenario": outcome.scenario, "error": outcome.error})
                    if args.json
                    else f"{outcome.scenario}: could not run: {outcome.error}",
                    flush=True,
                )
            for row in outcome.rows:
                rows.append(row)
                print(json.dumps(row.as_json()) if args.json else _line(row), flush=True)
    total = summary(rows, version=version)
    total["not_run"] = failed
    print(json.dumps(total), flush=True)
    return 0 if failed == 0 and total["equal"] == total["containers"] else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
