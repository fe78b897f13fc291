#!/usr/bin/env python3
"""Benchmark: the pin window of real containers under containerd 1.7 + runc, per way podpin names them.

The window of a container is the time from its cgroup appearing (runc create) to its ``cpuset.cpus``
holding its final set; ``first_view_final`` counts the containers whose entrypoint's first
``Cpus_allowed_list`` already was that set (what Go, the JVM, Envoy and DPDK size themselves from).

The script sets the VM up itself (``tests/vm/vm-setup.sh``: kernel, containerd, runc, busybox; a no-op
when done), then boots it once and runs ``tests/vm/scenario_pin_window.py``: per mode a fresh
``podpin run``, ``--containers`` containers in pods of ``--per-pod`` one-CPU exclusive containers, one pod
at a time, started over CRI by the suite playing the kubelet, each container's status published
``--status-delay`` s after it started (the API lag).

Modes (``tests/vm/runtimenode.py: MODES``): ``nri`` (containerd's NRI on, podpin connected as a plugin:
CreateContainer is answered with the container's CPUs before runc creates it; no runtime state visible),
``bundle`` (podpin reads containerd's bundles, ``--runtime-root /``) and ``api`` (only the pod status names a
container: the baseline). The modes run one after the other in one boot; switching containerd's NRI
restarts containerd.

The guest is TCG-emulated. The slowdown factor is estimated as in ``bench_pin_latency_vm.py``: the same
pure-Python work (``tests/vm/cpubench.py``, agent-like cpuset/JSON work) timed with the same interpreter on
this host and in the guest, fastest of ``--repeats`` runs, before and after. The native estimate divides
the VM window by it; not for ``api``, whose window is the API lag, not CPU work. ``p50_vs_api`` and
``p99_vs_api`` give each mode's window as a fraction of the ``api`` baseline's (when ``api`` ran). In ``nri``
mode podpin has answered before the cgroup exists, and the window ends at whichever write comes first: runc's,
of the set NRI put in the spec (runc applies the spec's resources once its init is ready), or podpin's watcher
pinning the new cgroup as in every mode. Where podpin wrote a new container's cgroup (``bundle``, ``api``), its log line
says where the time went (``pin_ms``: queue, name, wait, plan, write); the rows carry each stage's p50 and p99
in guest milliseconds (``stage_<name>_p50_ms``, ``_p99_ms``).

Usage::

    .venv/bin/python scripts/bench_pin_window.py            # a table
    .venv/bin/python scripts/bench_pin_window.py --json     # one JSON row per mode
    .venv/bin/python scripts/bench_pin_window.py --containers 10 --modes bundle
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
# The VM helpers (tests/vm) are not part of the installed package: read them from the checkout.
sys.path.insert(0, str(REPO))

from scripts.benchkit import add_options, emit
from tests.vm import cpubench, harness
from tests.vm.harness import VM_TESTS

GOAL_BUNDLE_P99_MS = 5.0
"""The bundle mode's p99 goal on native hardware (``docs/design.md``, "Performance goals")."""
NATIVE_MODES = ("bundle", "nri")
"""Modes whose window is CPU work (scaled by the slowdown factor); ``api``'s is the API lag."""


def setup_vm() -> None:
    """Run ``vm-setup.sh`` (idempotent) so the VM dir has the kernel and the runtime."""
    env = {**os.environ, "VM_DIR": str(harness.vm_dir())}
    proc = subprocess.run(["bash", str(VM_TESTS / "vm-setup.sh")], env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"bench_pin_window: vm-setup.sh failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
    if (reason := harness.missing_setup()) is not None:
        raise SystemExit(f"bench_pin_window: {reason}")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Set the VM up, run every mode, and put the rows together."""
    setup_vm()
    host_before = cpubench.measure(args.repeats)
    config = harness.VMConfig(cpus=8, nodes=2, timeout_s=args.timeout)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="podpin-pinwindow-"))
    workdir.mkdir(parents=True, exist_ok=True)
    scenario_args = ["--containers", str(args.containers), "--per-pod", str(args.per_pod), "--modes", args.modes]
    scenario_args += ["--status-delay", str(args.status_delay), "--cpubench"]
    guest = harness.run_scenario(  # a guest frozen by TCG (harness.GuestFrozenError) boots once more
        VM_TESTS / "scenario_pin_window.py",
        config,
        workdir,
        args=scenario_args,
        env={"VM_ENV": "PODPIN_VM_DIR"},
        stall_retries=1,
    )
    host_after = cpubench.measure(args.repeats)
    host = {name: min(host_before[name], host_after[name]) for name in host_before}
    first, last = guest.step("cpubench").values, guest.step("cpubench_after").values
    factor = round(min(float(first["agent_like"]), float(last["agent_like"])) / host["agent_like"], 2)
    rows = []
    for mode in args.modes.split(","):
        step = guest.step(f"mode_{mode}")
        summary = step["summary"]
        row: dict[str, Any] = {
            "mode": mode,
            "containers": summary["containers"],
            "first_view_final": summary["first_view_final"],
            "p50_ms": summary["p50_ms"],
            "p99_ms": summary["p99_ms"],
            "pinned": summary["pinned"],
            "max_ms": summary["max_ms"],
            "started_after_p50_ms": summary.get("started_after_p50_ms"),
            "slowdown": factor,
            "native_p50_ms_est": None,
            "native_p99_ms_est": None,
        }
        if mode in NATIVE_MODES and summary["p50_ms"] is not None:
            row["native_p50_ms_est"] = round(summary["p50_ms"] / factor, 2)
            row["native_p99_ms_est"] = round(summary["p99_ms"] / factor, 2)
        for stage, figures in summary.get("stages", {}).items():  # the agent's own account, guest milliseconds
            row[f"stage_{stage}_p50_ms"] = figures["p50_ms"]
            row[f"stage_{stage}_p99_ms"] = figures["p99_ms"]
        rows.append(row)
    _against_api(rows)
    return {
        "rows": rows,
        "layout": config.label,
        "kernel": guest.meta.get("kernel"),
        "runtime": guest.step("runtime")["runtime"],
        "status_delay_s": args.status_delay,
        "per_pod": args.per_pod,
        "vm_wall_s": guest.wall_seconds,
        "workdir": str(workdir),
    }


def _against_api(rows: list[dict[str, Any]]) -> None:
    """Add each row's p50 and p99 as a fraction of the ``api`` row's (the baseline the other modes replace)."""
    api = next((row for row in rows if row["mode"] == "api"), None)
    for row in rows:
        for key in ("p50_ms", "p99_ms"):
            base = api[key] if api is not None else None
            value = row[key]
            ratio = round(value / base, 4) if base and value is not None else None
            row[key.replace("_ms", "_vs_api")] = ratio


def _table(result: dict[str, Any]) -> str:
    title = (
        f"pin window, {result['runtime']} + runc in the VM {result['layout']} (kernel {result['kernel']}), pods of "
        f"{result['per_pod']} one-CPU exclusive containers, API lag {result['status_delay_s']} s"
    )
    factor = f"slowdown factor (guest/host, same interpreter, agent-like work): {result['rows'][0]['slowdown']}x"
    header = (
        f"{'mode':<8} {'first view final':>17} {'VM p50':>10} {'VM p99':>10} {'VM max':>10} "
        f"{'native~p50':>11} {'native~p99':>11}"
    )
    lines = [title, factor, "", header]
    for row in result["rows"]:
        native = (
            f"{row['native_p50_ms_est']:>9.2f}ms {row['native_p99_ms_est']:>9.2f}ms"
            if row["native_p50_ms_est"] is not None
            else f"{'(API lag)':>11} {'(API lag)':>11}"
        )
        lines.append(
            f"{row['mode']:<8} {row['first_view_final']:>8}/{row['containers']:<8} {row['p50_ms']:>8.1f}ms "
            f"{row['p99_ms']:>8.1f}ms {row['max_ms']:>8.1f}ms {native}"
        )
    for row in result["rows"]:
        stages = [
            f"{key[6:-7]} {row[key]}/{row[key[:-7] + '_p99_ms']}"
            for key in row
            if key.startswith("stage_") and key.endswith("_p50_ms")
        ]
        if stages:
            lines.append(f"{row['mode']}: the agent's pin stages, VM ms p50/p99: {', '.join(stages)}")
    lines.append(f"goal: bundle native p99 <= {GOAL_BUNDLE_P99_MS} ms; VM wall {result['vm_wall_s']} s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--containers", type=int, default=50, help="containers per mode (default 50)")
    parser.add_argument("--per-pod", type=int, default=5, help="containers per pod, one CPU each (default 5)")
    parser.add_argument(
        "--modes", default="nri,bundle,api", help="modes to run, comma-separated (default nri,bundle,api)"
    )
    parser.add_argument("--status-delay", type=float, default=2.0, help="API lag in seconds (default 2)")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each CPU micro-benchmark (default 5)")
    parser.add_argument("--timeout", type=int, default=3600, help="VM run limit in seconds (default 3600)")
    parser.add_argument("--workdir", help="keep the guest's results and logs here (default: a temp dir)")
    parser.add_argument("--json", action="store_true", help="print one JSON row per mode instead of the table")
    add_options(parser)
    args = parser.parse_args(argv)
    if args.smoke:
        args.containers, args.per_pod, args.repeats, args.status_delay = 2, 1, 1, 0.5
    result = run(args)
    emit(args, "pin_window", result)
    if args.json:
        for row in result["rows"]:
            print(json.dumps(row))
    else:
        print(_table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
