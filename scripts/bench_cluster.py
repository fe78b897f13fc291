#!/usr/bin/env python3
"""Benchmark: podpin on the real cluster (issue 16 item 5) — how long from ``kubectl apply`` of a pod until every
container runs on its final CPUs, how many containers saw their final CPUs from their first instruction, and what
the control plane costs on this machine.

One cluster (tests/cluster/deploy_story.py: the release's image on a Ready 4-CPU, 2-NUMA guest node, ``kubectl
apply -f deploy/daemonset.yaml``), then ``--rounds`` rounds of the scaled examples the deploy test uses (the
burstable web pod, then the trading engine: a pod bubble with an exclusive database and sidecars on the pod's
shared CPU), each applied and waited for, then both deleted:

* ``apply_to_final_s``: from just before ``kubectl apply`` until the pod's every container's first process
  may run exactly on ``podpin plan``'s CPUs for it (``Cpus_allowed_list`` read in the guest, polled);
* ``first_views_final``: containers whose first ``Cpus_allowed_list`` (the probe image's first log line, taken
  before its first instruction of work) already was the plan's, of all containers;
* the control plane's CPU (share of one core over the rounds, from ``/proc/<pid>/stat``) and RSS (largest seen)
  per program: kube-apiserver, kube-controller-manager, kube-scheduler, kine.

The guest is TCG-emulated: ``slowdown`` is measured in the same run (tests/vm/cpubench.py in the guest and on the
host, guest time / host time of the agent-like workload), so the latencies can be read against it.

Usage::

    .venv/bin/python scripts/bench_cluster.py               # 3 rounds (6 pods)
    .venv/bin/python scripts/bench_cluster.py --record      # and write docs/bench/cluster.json
    .venv/bin/python scripts/bench_cluster.py --smoke       # 1 round

Needs what tests/cluster/test_deploy.py needs (scripts/test sets it up): the VM, the guest modules, the image
inputs and the Kubernetes build (``K8S_VERSION`` picks the version).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The cluster harness (tests/cluster) is not part of the installed package: read it from the checkout.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.benchkit import add_options, emit
from tests.cluster import build
from tests.cluster.deploy_story import (
    GUEST_PYTHON,
    REPO,
    Story,
    all_statuses,
    delete_pod,
    deployed,
    first_view,
    now_on,
    plan_of,
    planned_cpus,
    wait_agent_ready,
)
from tests.cluster.example_pods import scaled_example
from tests.cluster.node import guest_modules
from tests.cluster.procs import ClusterError
from tests.support.agent_image import missing_image_inputs
from tests.vm import cpubench
from tests.vm.harness import missing_setup

EXAMPLES = ("web-burstable.yaml", "trading-engine-after.yaml")
"""One round: the pods the deploy test starts first, scaled to the 4-CPU node as it scales them."""
CPU_DIVISOR, MEMORY_DIVISOR = 4, 16
CONTROL_PLANE = ("kine", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
FINAL_TIMEOUT = 600.0
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_GUEST_CPUBENCH = (
    "import json, sys; sys.path.insert(0, %r); from tests.vm import cpubench; print(json.dumps(cpubench.measure()))"
)


@dataclass(slots=True)
class Sampler:
    """The control plane's CPU seconds and largest RSS, sampled from /proc by pid."""

    pids: dict[str, int]
    cpu_start: dict[str, float] = field(default_factory=dict)
    rss_max: dict[str, int] = field(default_factory=dict)
    started: float = 0.0

    def _cpu(self, pid: int) -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS  # utime, stime

    def _rss_kib(self, pid: int) -> int:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def start(self) -> None:
        self.started = time.monotonic()
        self.cpu_start = {name: self._cpu(pid) for name, pid in self.pids.items()}
        self.sample()

    def sample(self) -> None:
        for name, pid in self.pids.items():
            self.rss_max[name] = max(self.rss_max.get(name, 0), self._rss_kib(pid))

    def result(self) -> dict[str, Any]:
        self.sample()
        wall = time.monotonic() - self.started
        per = {
            name: {
                "cpu_percent_of_a_core": round(100 * (self._cpu(pid) - self.cpu_start[name]) / wall, 2),
                "rss_max_mib": round(self.rss_max[name] / 1024, 1),
            }
            for name, pid in self.pids.items()
        }
        return {
            "seconds": round(wall, 1),
            "programs": per,
            "cpu_percent_of_a_core": round(sum(p["cpu_percent_of_a_core"] for p in per.values()), 2),
            "rss_max_mib": round(sum(p["rss_max_mib"] for p in per.values()), 1),
        }


def _slowdown(story: Story) -> dict[str, float]:
    """Guest time / host time of each cpubench workload (fastest of 5 runs on each side)."""
    host = cpubench.measure()
    guest = json.loads(story.node.sh(str(GUEST_PYTHON), "-c", _GUEST_CPUBENCH % str(REPO), timeout=900).stdout)
    return {name: round(guest[name] / host[name], 1) for name in host}


def _on_plan(story: Story, namespace: str, name: str, planned: dict[str, str]) -> bool:
    """Whether every planned container runs and its first process may run exactly on its planned CPUs."""
    pod = story.plane.admin.json("-n", namespace, "get", "pod", name)
    running = {s["name"] for s in all_statuses(pod) if "running" in s.get("state", {}) and s.get("containerID")}
    if not set(planned) <= running:
        return False
    try:
        return all(now_on(story, pod, c) == cpus for c, cpus in planned.items())
    except ClusterError:  # a cgroup not there yet, or a process between exec and its first read
        return False


def _apply_and_time(story: Story, example: str, sampler: Sampler) -> dict[str, Any]:
    """Apply one scaled example; seconds until its containers run on the plan's CPUs; its first views."""
    manifest = scaled_example(example, cpu_divisor=CPU_DIVISOR, memory_divisor=MEMORY_DIVISOR)
    namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
    story.plane.admin.run("create", "namespace", namespace, check=False)
    started = time.monotonic()
    story.kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    story.applied.append((namespace, name))
    planned = planned_cpus(plan_of(story, story.applied), name)
    while not _on_plan(story, namespace, name, planned):
        sampler.sample()
        if time.monotonic() > started + FINAL_TIMEOUT:
            raise ClusterError(f"{namespace}/{name} did not reach its planned CPUs {planned} in {FINAL_TIMEOUT} s")
        time.sleep(0.5)
    final = time.monotonic() - started
    views = {container: first_view(story, namespace, name, container) for container in planned}
    return {
        "pod": f"{namespace}/{name}",
        "containers": len(planned),
        "apply_to_final_s": round(final, 1),
        "first_views_final": sum(views[c] == planned[c] for c in planned),
    }


def run(rounds: int, workdir: Path) -> dict[str, Any]:
    """The cluster up, `rounds` rounds of :data:`EXAMPLES`, the figures."""
    with deployed(build.version(), workdir) as story:
        agent_ready_started = time.monotonic()
        wait_agent_ready(story)
        agent_ready_s = time.monotonic() - agent_ready_started
        slowdown_before = _slowdown(story)
        sampler = Sampler(
            {p.name: p.popen.pid for p in story.plane.procs if p.name in CONTROL_PLANE and p.popen is not None}
        )
        sampler.start()
        pods = []
        for _ in range(rounds):
            pods += [_apply_and_time(story, example, sampler) for example in EXAMPLES]
            for namespace, name in list(reversed(story.applied)):
                delete_pod(story, namespace, name)
        control_plane = sampler.result()
        slowdown_after = _slowdown(story)
    finals = [pod["apply_to_final_s"] for pod in pods]
    return {
        "kubernetes": build.version(),
        "rounds": rounds,
        "pods": pods,
        "apply_to_final_s": {"median": round(statistics.median(finals), 1), "max": max(finals)},
        "first_views_final": sum(pod["first_views_final"] for pod in pods),
        "containers": sum(pod["containers"] for pod in pods),
        "agent_ready_after_apply_s": round(agent_ready_s, 1),
        "slowdown": {"before": slowdown_before, "after": slowdown_after},
        "control_plane": control_plane,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_options(parser)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the two example pods (default 3)")
    parser.add_argument("--workdir", type=Path, help="keep the cluster's files and logs here (default: a temp dir)")
    args = parser.parse_args(argv)
    missing = missing_setup() or guest_modules() or missing_image_inputs()
    version = build.version()
    if missing is None and not build.built(version):
        missing = f"Kubernetes {version} is not built: run tests/cluster/k8s-build.sh"
    if missing:
        print(f"bench_cluster: {missing}", file=sys.stderr)
        return 2
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    result = run(1 if args.smoke else args.rounds, workdir)
    emit(args, "cluster", result)
    print(json.dumps(result, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
