#!/usr/bin/env python3
"""Soak: the agent under pod churn and every kind of fault for N minutes, invariants checked after every step.

``scripts/soak.py --minutes N [--seed S]`` builds a fixture node (the ``example-2s``
machine: 32 CPUs, 2 NUMA nodes; a systemd-driver cgroup v2 tree) and the API
server emulator on 127.0.0.1, and runs the agent as a subprocess
(``tests/support/soak_agent.py``: ``podpin run`` with the kernel emulation and
two fault switches). Then, until the time is up, it takes random steps (seeded):

* pod churn: Guaranteed pods with exclusive CPUs, Burstable pods, pods too big to
  fit, and malformed pods (a bad quantity) created and deleted through the API,
  their cgroups made and removed as the kubelet would;
* watch cuts (every open watch closed mid-stream);
* API outages (every request answered 503; 5 minutes in a run of 30 minutes or
  more, scaled down for shorter runs, churn going on meanwhile);
* cgroup write faults (every other ``cpuset.cpus``/``cpu.max`` write fails with EIO
  for a spell);
* checkpoint-disk-full spells (every checkpoint write fails with ENOSPC);
* SIGKILL of the agent and a restart; a restart with ``podpin.lock`` planted as a
  symlink to a victim file, or with the checkpoint replaced by a FIFO (issue 22);
* a tenant pod forging a mirror pod: the mirror annotation naming a running pod's
  uid and an owner reference to the Node with a made-up uid (issue 22).

After every step it waits for the agent to settle (at most ``--settle`` seconds)
and checks, from the outside (the cgroup files, the agent's ``/state`` and its log):

1. no CPU is in two pods' exclusive sets (live ``cpuset.cpus`` of the containers
   the plan calls exclusive);
2. no running exclusive container moved: a container cgroup keeps the first
   exclusive set it was seen with until it is removed;
3. the cgroups equal the plan (outside a write-fault spell): each planned
   container's cgroup holds its planned ``cpuset.cpus``, and the plan holds every
   pod the API server has (outside an outage);
4. every bad input was reported: each malformed pod has a ``pod.malformed`` line;
5. the file a planted ``podpin.lock`` symlink points to is never written.

It prints one JSON line ``{"minutes", "pods", "restarts", "faults", "violations",
"rss_mib_start", "rss_mib_end", ...}`` (``pods``: pods created; ``faults``: fault
steps taken; RSS of the agent process after its first settle and at the end, the
last agent having run since the last restart; ``--no-sigkill`` keeps one agent
process all along, to measure its growth) and exits 1 on any violation, with the
first violations on stderr.

``--tracemalloc FILE`` runs the agent with Python's allocation tracing
(``PYTHONTRACEMALLOC``, 10 frames; slower) and takes a snapshot after the first
settle and one at the end: ``FILE`` gets the 25 tracebacks whose memory grew
most in between, and the JSON line ``traced_mib_start``/``traced_mib_end``
(memory Python holds, to compare with the RSS: RSS growth that the traced memory
does not show is the allocator's, not a reference kept).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parent.parent
# The test helpers (tests/support) are not part of the installed package: read them from the checkout.
sys.path.insert(0, str(REPO))

from agent.cpuset import CPUSet  # noqa: E402
from tests.support.agentfixture import AgentNode, json_lines, kubeconfig, make_node  # noqa: E402
from tests.support.apiserver_emulator import ApiServerEmulator  # noqa: E402
from tests.support.podfactory import container, make_pod  # noqa: E402
from tests.support.soak_agent import growth_report  # noqa: E402

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_FULL_OUTAGE_SECONDS = 300.0
#: Frames kept per traced allocation with ``--tracemalloc`` (deep enough to reach podpin code from a library).
_TRACE_FRAMES = 10
_STEPS = (
    ("add_guaranteed", 30),
    ("add_burstable", 10),
    ("add_unfit", 3),
    ("add_malformed", 3),
    ("delete", 30),
    ("watch_cut", 6),
    ("cgroup_faults", 5),
    ("disk_full", 5),
    ("sigkill", 4),
    ("lock_symlink", 1),
    ("fifo_checkpoint", 1),
    ("forged_mirror", 3),
)
_NODE_UID = "5e0b4c8e-0000-4000-8000-000000000001"
_VICTIM = "a file podpin must never write\n"


@dataclass
class Child:
    """One agent process and its log lines (read by a thread)."""

    process: subprocess.Popen[str]
    logs: list[dict[str, Any]] = field(default_factory=list)
    reader: threading.Thread | None = None

    def start_reader(self) -> None:
        def read() -> None:
            assert self.process.stderr is not None
            for line in self.process.stderr:
                self.logs.extend(json_lines(line))

        self.reader = threading.Thread(target=read, name="soak-agent-stderr", daemon=True)
        self.reader.start()

    def state_url(self, timeout: float = 30.0) -> str | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for entry in list(self.logs):
                if entry.get("event") == "agent.started" and entry.get("state"):
                    return f"http://{entry['state']}/state"
            if self.process.poll() is not None:
                return None
            time.sleep(0.05)
        return None


@dataclass
class Soak:
    """The node, the API server, the agent, what was done and what was found."""

    node: AgentNode
    api: ApiServerEmulator
    rng: random.Random
    settle: float
    child: Child | None = None
    state_url: str | None = None
    live: dict[str, dict[str, Any]] = field(default_factory=dict)
    malformed: dict[str, str] = field(default_factory=dict)
    reported: set[str] = field(default_factory=set)
    first_seen: dict[str, tuple[str, str]] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    created: int = 0
    restarts: int = 0
    faults: int = 0
    outage_until: float = 0.0
    spell_until: dict[str, float] = field(default_factory=dict)
    serial: int = 0
    steps: int = 0
    tracing: bool = False
    snapshots: list[Path] = field(default_factory=list)

    # -- the agent ---------------------------------------------------------------------------
    def start_agent(self) -> None:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.soak_agent", str(self.node.base)],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={k: v for k, v in os.environ.items() if k not in ("NODE_NAME", "KUBECONFIG")}
            | ({"PYTHONTRACEMALLOC": str(_TRACE_FRAMES)} if self.tracing else {}),
        )
        self.child = Child(process)
        self.child.start_reader()
        self.state_url = self.child.state_url()
        if self.state_url is None:
            self.violations.append(f"the agent did not start (exit {process.poll()})")

    def stop_agent(self, sig: int) -> None:
        if self.child is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.child.process.send_signal(sig)
        try:
            self.child.process.wait(15)
        except subprocess.TimeoutExpired:
            self.violations.append("the agent did not stop within 15 s of SIGTERM")
            self.child.process.kill()
            self.child.process.wait()
        self._collect_reports()

    def rss_mib(self) -> float:
        if self.child is None:
            return 0.0
        try:
            return round(psutil.Process(self.child.process.pid).memory_info().rss / 2**20, 1)
        except psutil.Error:
            return 0.0

    def snapshot(self) -> None:
        """Have the agent write its next tracemalloc snapshot (``--tracemalloc``) and wait for it."""
        if not self.tracing or self.child is None:
            return
        target = self.node.base / f"tracemalloc-{len(self.snapshots)}.snapshot"
        self.child.process.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 120.0
        while not target.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        if not target.exists():
            self.violations.append(f"the agent wrote no tracemalloc snapshot {target.name} within 120 s")
            return
        self.snapshots.append(target)

    def _collect_reports(self) -> None:
        if self.child is None:
            return
        for entry in list(self.child.logs):
            if entry.get("event") == "pod.malformed" and isinstance(entry.get("uid"), str):
                self.reported.add(entry["uid"])

    # -- steps -----------------------------------------------------------------------------------
    def _name(self, kind: str) -> str:
        self.serial += 1
        return f"{kind}-{self.serial}"

    def add(self, kind: str) -> None:
        name = self._name(kind)
        states = {"app": "running"}
        if kind == "add_guaranteed":
            cpus = self.rng.choice(["1", "2", "2", "4"])
            raw = make_pod(name, containers=[container("app", cpu=cpus, memory="256Mi")], states=states)
        elif kind == "add_burstable":
            raw = make_pod(
                name, containers=[container("app", cpu_request="250m", cpu_limit="1", memory="64Mi")], states=states
            )
        elif kind == "add_forged_mirror":
            raw = make_pod(name, containers=[container("app", cpu="1", memory="64Mi")], states=states)
            victims = sorted(self.live)
            raw["metadata"]["annotations"] = {"kubernetes.io/config.mirror": victims[0] if victims else "0" * 32}
            raw["metadata"]["ownerReferences"] = [
                {"apiVersion": "v1", "kind": "Node", "name": "node-1", "uid": "forged-" + name, "controller": True}
            ]
        elif kind == "add_unfit":
            raw = make_pod(name, containers=[container("app", cpu="40", memory="1Gi")], states=states)
        else:
            raw = make_pod(name, containers=[container("app", cpu="1", memory="64Mi")], states=states)
            raw["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "1.5.0"
        raw["metadata"].pop("creationTimestamp", None)
        created = self.api.add_pod(raw)
        self.created += 1
        uid = created["metadata"]["uid"]
        if kind == "add_forged_mirror":  # the kubelet names its cgroups by its own uid: no mirror of anything
            created = {**created, "metadata": {k: v for k, v in created["metadata"].items() if k != "annotations"}}
        if kind == "add_malformed":
            self.malformed[uid] = name
        else:
            self.node.add_pod(created, manifest=False)
        self.live[uid] = created

    def delete(self) -> None:
        if not self.live:
            return
        uid = self.rng.choice(sorted(self.live))
        raw = self.live.pop(uid)
        self.api.delete_pod(raw["metadata"]["namespace"], raw["metadata"]["name"])
        self.reported.discard(uid)
        if self.malformed.pop(uid, None) is not None:
            return  # never started: no cgroups
        _remove_cgroup(self.node.pod_cgroup(raw))
        self.first_seen = {k: v for k, v in self.first_seen.items() if v[0] != uid}

    def spell(self, flag: str, seconds: float) -> None:
        self.faults += 1
        (self.node.base / "faults" / flag).touch()
        self.spell_until[flag] = time.monotonic() + seconds

    def end_spells(self) -> None:
        now = time.monotonic()
        for flag, until in list(self.spell_until.items()):
            if now >= until:
                (self.node.base / "faults" / flag).unlink(missing_ok=True)
                del self.spell_until[flag]
        if self.outage_until and now >= self.outage_until:
            self.api.outage(False)
            self.outage_until = 0.0

    def step(self, kind: str) -> None:
        if kind.startswith("add_"):
            if kind != "add_malformed" and len(self.live) >= 24:
                self.delete()
            else:
                self.add(kind)
        elif kind == "delete":
            self.delete()
        elif kind == "watch_cut":
            self.faults += 1
            self.api.drop_watches()
        elif kind == "cgroup_faults":
            self.spell("cgroup", self.rng.uniform(1.0, 4.0))
        elif kind == "disk_full":
            self.spell("disk", self.rng.uniform(1.0, 6.0))
        elif kind == "forged_mirror":
            self.faults += 1
            self.add("add_forged_mirror")
        elif kind in ("sigkill", "lock_symlink", "fifo_checkpoint"):
            self.faults += 1
            self.restarts += 1
            self.stop_agent(signal.SIGKILL)
            if kind == "lock_symlink":
                lock = self.node.state_dir / "podpin.lock"
                lock.unlink(missing_ok=True)
                lock.symlink_to(self.node.base / "victim")
            elif kind == "fifo_checkpoint":
                checkpoint = self.node.state_dir / "podpin_state.json"
                checkpoint.unlink(missing_ok=True)
                os.mkfifo(checkpoint)
            self.start_agent()

    def outage(self, seconds: float) -> None:
        self.faults += 1
        self.api.outage(True)
        self.api.drop_watches()
        self.outage_until = time.monotonic() + seconds

    # -- checks ----------------------------------------------------------------------------------
    def _state(self) -> dict[str, Any] | None:
        if self.state_url is None:
            return None
        try:
            with _OPENER.open(self.state_url, timeout=5) as response:
                document: dict[str, Any] = json.loads(response.read())
                return document
        except (OSError, urllib.error.URLError, ValueError):
            return None

    def _container_cgroup(self, raw: dict[str, Any], name: str) -> Path:
        return self.node.container_cgroup(raw, name)

    def problems(self) -> tuple[list[str], list[str]]:
        """(invariant breaches that must never happen, differences that settle) as of now."""
        hard: list[str] = []
        soft: list[str] = []
        if (self.node.base / "victim").read_text() != _VICTIM:
            hard.append("the file a planted podpin.lock symlink points to was written")
        document = self._state()
        if document is None or "plan" not in document:
            if self.outage_until and document is not None:
                return hard, []  # restarted during an outage: no pod list yet, nothing written, nothing to check
            return hard, [f"no /state from the agent ({'no answer' if document is None else document.get('reason')})"]
        exclusive: dict[int, str] = {}
        planned: set[str] = set()
        faulting = "cgroup" in self.spell_until
        for pod in document["plan"]["pods"]:
            uid = pod["uid"]
            planned.add(uid)
            raw = self.live.get(uid)
            if raw is None:
                continue
            for entry in pod["containers"]:
                path = self._container_cgroup(raw, entry["name"])
                try:
                    live = (path / "cpuset.cpus").read_text().strip()
                except OSError:
                    continue
                if entry["pool"] == "exclusive" and entry["kind"] != "init":
                    for cpu in CPUSet.parse(live):
                        other = exclusive.setdefault(cpu, uid)
                        if other != uid:
                            hard.append(f"CPU {cpu} is in the exclusive sets of pods {other} and {uid}")
                    if live == entry["cpus"]:
                        seen = self.first_seen.setdefault(str(path), (uid, live))
                        if seen[1] != live:
                            hard.append(f"{path.name} of pod {uid} moved from {seen[1]} to {live}")
                inherits = entry["pool"] == "node_shared" and not live  # the node shared pool comes from the parent
                if live != entry["cpus"] and not inherits and not faulting:
                    soft.append(f"{uid}/{entry['name']}: cgroup {live!r}, plan {entry['cpus']!r}")
        if not self.outage_until:
            wanted = set(self.live) - set(self.malformed)
            if wanted != planned:
                soft.append(
                    f"plan pods differ from the API: missing {sorted(wanted - planned)[:3]}, "
                    f"extra {sorted(planned - wanted)[:3]}"
                )
            self._collect_reports()
            missing = sorted(uid for uid in self.malformed if uid not in self.reported)
            if missing:
                soft.append(f"malformed pods not reported: {missing[:3]}")
        return hard, soft

    def settle_and_check(self, step: str) -> None:
        deadline = time.monotonic() + self.settle
        while True:
            hard, soft = self.problems()
            self.violations.extend(f"after {step}: {h}" for h in hard)
            if hard or not soft:
                return
            if time.monotonic() > deadline:
                self.violations.extend(f"after {step}: not settled after {self.settle:.0f} s: {s}" for s in soft)
                return
            time.sleep(0.2)


def _remove_cgroup(path: Path) -> None:
    """rmdir of a pod cgroup, as the kubelet does; the fixture's files can reappear while the agent writes, so retry."""
    for _ in range(20):
        try:
            shutil.rmtree(path)
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)
            continue
        return
    shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def _node() -> Iterator[tuple[AgentNode, ApiServerEmulator]]:
    with tempfile.TemporaryDirectory(prefix="podpin-soak-") as tmp, ApiServerEmulator() as api:
        node = make_node(Path(tmp))
        node.write_config(reconcilePeriod="1s", logLevel="info", podResyncPeriod="30s")
        kubeconfig(node.base / "kubeconfig", api.url)
        (node.base / "faults").mkdir()
        (node.base / "victim").write_text(_VICTIM)
        api.objects.add_node("node-1", uid=_NODE_UID)
        yield node, api


def _soak(
    soak: Soak, rng: random.Random, total: float, minutes: float, outage: float, kinds: list[str], weights: list[int]
) -> tuple[float, float]:
    """The steps and checks of one soak; returns the agent's RSS after its first settle and at the end (MiB)."""
    for _ in range(6):
        soak.add("add_guaranteed")
    soak.start_agent()
    soak.settle_and_check("start")
    rss_start = soak.rss_mib()
    soak.snapshot()
    started = time.monotonic()
    # Outages at a third and two thirds of the run (one in short runs).
    outages = [started + total / 3] + ([started + 2 * total / 3] if minutes >= 30 else [])
    while time.monotonic() - started < total:
        soak.end_spells()
        if outages and time.monotonic() >= outages[0] and not soak.outage_until:
            outages.pop(0)
            soak.outage(outage)
        kind = rng.choices(kinds, weights)[0]
        soak.step(kind)
        soak.steps += 1
        soak.settle_and_check(f"step {soak.steps} ({kind}{', outage' if soak.outage_until else ''})")
        time.sleep(rng.uniform(0.0, 0.3))
    for flag in list(soak.spell_until):
        soak.spell_until[flag] = 0.0
    soak.end_spells()
    if soak.outage_until:
        soak.api.outage(False)
        soak.outage_until = 0.0
    soak.settle_and_check("the end")
    rss_end = soak.rss_mib()
    soak.snapshot()
    soak.stop_agent(signal.SIGTERM)
    if soak.child is not None and soak.child.process.returncode not in (0, None):
        soak.violations.append(f"the agent exited {soak.child.process.returncode} on SIGTERM")
    return rss_start, rss_end


def run(
    minutes: float, seed: int, settle: float, *, sigkill: bool = True, trace_to: Path | None = None
) -> dict[str, Any]:
    """One soak; returns the summary (``violations`` is the count, ``first_violations`` the first few).

    ``trace_to``: run the agent under tracemalloc and write the growth report there (needs ``sigkill`` off: the
    snapshots must come from one process).
    """
    rng = random.Random(seed)
    total = minutes * 60.0
    outage_seconds = _FULL_OUTAGE_SECONDS if minutes >= 30 else max(2.0, total / 6)
    steps = [(k, w) for k, w in _STEPS if sigkill or k not in ("sigkill", "lock_symlink", "fifo_checkpoint")]
    kinds = [k for k, _ in steps]
    weights = [w for _, w in steps]
    with _node() as (node, api):
        soak = Soak(node=node, api=api, rng=rng, settle=settle, tracing=trace_to is not None)
        try:
            rss_start, rss_end = _soak(soak, rng, total, minutes, outage_seconds, kinds, weights)
        finally:
            if soak.child is not None and soak.child.process.poll() is None:
                soak.child.process.kill()  # never leave an agent behind (an exception, a KeyboardInterrupt)
                soak.child.process.wait()
        traced = {}
        if trace_to is not None and len(soak.snapshots) == 2:
            traced = growth_report(soak.snapshots[0], soak.snapshots[1], trace_to)
    return {
        "minutes": minutes,
        "pods": soak.created,
        "restarts": soak.restarts,
        "faults": soak.faults,
        "steps": soak.steps,
        "violations": len(soak.violations),
        "rss_mib_start": rss_start,
        "rss_mib_end": rss_end,
        "seed": seed,
        **traced,
        "first_violations": soak.violations[:10],
    }


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--minutes", type=float, default=1.0, help="how long to churn and fault (default 1)")
    parser.add_argument("--seed", type=int, default=1, help="the random seed of the steps (default 1)")
    parser.add_argument("--settle", type=float, default=20.0, help="seconds the agent gets to settle after a step")
    parser.add_argument(
        "--no-sigkill", action="store_true", help="no SIGKILL restarts: one agent process all along (for its RSS)"
    )
    parser.add_argument(
        "--tracemalloc",
        type=Path,
        metavar="FILE",
        help="trace the agent's allocations and write the largest growths to FILE (implies --no-sigkill)",
    )
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)  # so the agent subprocess is killed on the way out
    sigkill = not (args.no_sigkill or args.tracemalloc is not None)
    summary = run(args.minutes, args.seed, args.settle, sigkill=sigkill, trace_to=args.tracemalloc)
    first = summary.pop("first_violations")
    for line in first:
        print(f"violation: {line}", file=sys.stderr)
    print(json.dumps(summary), flush=True)
    return 1 if summary["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
