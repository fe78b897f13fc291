"""Guest scenario for ``test_runtime_e2e.py``: podpin against a real containerd + runc, the suite as the kubelet.

Arguments after ``--results``: the matrix entry (``matrix.py``, default ``containerd-1.7``) and the directory of
the built runtimes.

Steps (one VM boot, 8 vCPUs on 2 NUMA nodes; see ``runtimenode.py`` for the node):

- ``runtime``: containerd starts (NRI off), the test images are imported, the guest's topology is saved.
- ``mode_api`` then ``mode_bundle``: a fresh ``podpin run`` in that mode; the product-story pod and a classic
  1-CPU pod are published without status (bound, not started), admitted, then started over CRI with the probe
  image (each container prints the ``Cpus_allowed_list`` it started with); each container's status is
  published :data:`STATUS_DELAY` s after it started. Recorded per container: the agent's planned CPUs, its
  first view, its final ``cpuset.cpus.effective``, every ``cpuset.cpus`` value its cgroup held and when
  (the pin window), whether its bundle existed when the cgroup appeared; the sandboxes and pod cgroups; the
  agent's metrics. The API-mode pods are deleted at the end of their step; the bundle-mode ones keep running.
- ``restart_agent``: one more pod whose status is never published; then podpin is SIGKILLed and started
  again over its checkpoint: every cpuset before and after.
- ``restart_containerd``: containerd is SIGKILLed and started again while podpin runs (the containers keep
  running); a new pod started afterwards is named from its bundle.
- ``delete_during_create``: a pod of three 1-CPU containers is deleted (manifest removed) right after its
  first container started, while the kubelet stand-in is still creating the others; then torn down. The
  agent releases it and a new pod gets its CPUs.
- ``mode_nri``: every pod deleted; containerd restarted with its NRI section on; a fresh ``podpin run`` in NRI
  mode (no runtime state visible: only NRI, or the status seconds later, names a container); the story and
  cache pods as in the other modes.
- ``nri_restart_containerd``: containerd SIGKILLed and started again, with NRI's ``plugin_request_timeout`` at 1 s,
  while podpin runs: podpin registers again (a second Synchronize) and takes the 1 s budget, nothing moves, and a
  pod started afterwards is answered through NRI within it.
- ``nri_restart_agent``: podpin SIGKILLed and started again: Synchronize names every running container
  (adoption), nothing moves.
- ``nri_delete_during_create``: the doomed pod of ``delete_during_create`` again, in NRI mode.
- ``nri_resize``: an in-place resize (UpdateContainerResources without a cpuset) of a container whose pool changed
  since it was created: NRI's UpdateContainer is answered from the plan, so ``runc update`` writes the planned set.
- ``nri_big_sync``: containerd restarted with a ``plugin_request_timeout`` of 10 s, six pods with 900 KiB of
  annotations each, then podpin restarted: the runtime's Synchronize exceeds ttrpc's 4 MiB and arrives in ``more``
  chunks (NRI v0.11+; skipped on 1.7), nothing moves.
- ``runtime_log``: containerd's log lines about deprecated StateChange use and NRI errors.

In the ``api`` and ``bundle`` steps podpin keeps its default ``nri.enabled: true`` while containerd's NRI is
off (the runtime refuses plugins: no socket); the NRI log lines of each run are recorded (``nri_events``).
"""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from agent.topology.codec import topology_to_dict
from agent.topology.sysfs import read_topology
from tests.vm import ociimage
from tests.vm.cri import cri_api_pb2 as pb
from tests.vm.matrix import MATRIX
from tests.vm.runtimenode import MODES, RuntimeNode, container_records
from tests.vm.runtimepods import (
    STATUS_DELAY,
    ballast_annotations,
    ballast_pod,
    cache_pod,
    doomed_pod,
    late_pod,
    resize_pod,
    restart_pod,
    story_pod,
)
from tests.vm.scenario import Scenario, wait_until

VM_DIR = Path(os.environ.get("PODPIN_VM_DIR") or "/tmp/podpin-vm")
SETTLE = 3.0
"""Seconds a restarted agent gets to do its first passes before the cpusets are compared."""


def sandboxes(node: RuntimeNode) -> dict[str, dict[str, Any]]:
    """Per pod: its sandbox's effective set and the ``cpuset.cpus`` values it held; its pod cgroup's set."""
    found = {}
    for run in node.runs.values():
        child = node.observer.child(run.sandbox_id)
        found[run.spec.name] = {
            "sandbox_effective": (run.sandbox_cgroup / "cpuset.cpus.effective").read_text().strip(),
            "sandbox_values": [] if child is None else [v for _, v in child.values],
            "pod_cpus": (run.cgroup / "cpuset.cpus").read_text().strip(),
        }
    return found


SUFFIX = {"api": "a", "bundle": "b", "nri": "d"}
"""The one hex digit that varies the uids of each mode's pods."""


def nri_events(node: RuntimeNode, since: int) -> list[dict[str, Any]]:
    """The agent's ``nri.*`` log lines from the ``since``-th line of its log on (the current run's)."""
    return [e for e in node.agent_events()[since:] if str(e.get("event", "")).startswith("nri.")]


def mode_step(node: RuntimeNode, mode: str, out: dict[str, Any], *, keep: bool) -> None:
    """One agent in ``mode``, the story and cache pods started with the probe image, everything recorded."""
    suffix = SUFFIX[mode]
    specs = (story_pod(1, suffix=suffix), cache_pod(2, suffix=suffix))
    since = len(node.agent_events())
    out["agent"] = node.start_agent(MODES[mode])
    plan = node.start_pods(specs, ociimage.PROBE_IMAGE, status_delay=STATUS_DELAY)
    runs = [node.runs[spec.uid] for spec in specs]
    out["records"] = container_records(node, runs, plan)
    wait_until(
        "every status published",
        lambda: len([w for w in node.status.written if w[1] in {s.uid for s in specs}]) >= 4,
        timeout=STATUS_DELAY + 30,
    )
    time.sleep(0.5)
    out["after_status"] = {f"{r['pod']}/{r['container']}": r for r in container_records(node, runs, plan)}
    out["sandboxes"] = sandboxes(node)
    out["plan"] = node.state()["plan"]
    out["metrics"] = node.metrics()
    out["nri_events"] = nri_events(node, since)
    if not keep:
        node.delete_pods(specs)
        node.kill_agent()


def restart_agent_step(node: RuntimeNode, out: dict[str, Any]) -> None:
    """A pod named only by its bundle joins; podpin is SIGKILLed and restarted: nothing may move."""
    spec = restart_pod(3)
    plan = node.start_pods([spec], ociimage.PROBE_IMAGE, status_delay=None)
    out["no_status"] = container_records(node, [node.runs[spec.uid]], plan)
    before = node.cpusets()
    node.kill_agent()
    out["agent"] = node.start_agent(MODES["bundle"], fresh_state=False)
    time.sleep(SETTLE)
    out["before"], out["after"] = before, node.cpusets()
    out["metrics"] = node.metrics()


def restart_containerd_step(node: RuntimeNode, out: dict[str, Any]) -> None:
    """containerd crashes and comes back while podpin runs; a pod started afterwards is pinned from its bundle."""
    before = node.cpusets()
    pid = node.containerd.pid
    out["containerd_restart_s"] = node.restart_containerd()
    out["containerd_pids"] = [pid, node.containerd.pid]
    out["before"], out["after"] = before, node.cpusets()
    spec = late_pod(4)
    plan = node.start_pods([spec], ociimage.PROBE_IMAGE, status_delay=STATUS_DELAY)
    out["late"] = container_records(node, [node.runs[spec.uid]], plan)
    out["agent_running"] = node.agent is not None and node.agent.running
    out["metrics"] = node.metrics()


def delete_during_create_step(
    node: RuntimeNode, out: dict[str, Any], *, order: int = 5, fresh_suffix: str = "c"
) -> None:
    """The doomed pod is deleted while its containers are being created; its CPUs then serve a new pod."""
    node.delete_pods([late_pod(4), restart_pod(3), cache_pod(2, suffix="b")])
    since = len(node.agent_events())
    spec = doomed_pod(order)
    node.status.publish(spec)
    out["planned"] = {name: cpus for (uid, name), cpus in node.wait_admitted([spec]).items() if uid == spec.uid}
    cgroup = node.cri.create_pod_cgroup(spec)
    node.observer.watch_pod(cgroup)
    run = node.cri.run_sandbox(spec, cgroup)
    node.runs[spec.uid] = run
    node.cri.create_container(run, "c0", ociimage.SLEEP_IMAGE)
    node.cri.start_container(run, "c0")
    deleted = threading.Thread(target=node.status.forget, args=(spec,))
    deleted.start()
    for name in ("c1", "c2"):
        node.cri.create_container(run, name, ociimage.SLEEP_IMAGE)
        node.cri.start_container(run, name)
    deleted.join()
    out["children_effective"] = {
        name: (run.container_cgroup(name) / "cpuset.cpus.effective").read_text().strip() for name in run.containers
    }
    node.delete_pod(spec)
    out["pod_cgroup_removed"] = not cgroup.exists()
    wait_until(
        "the doomed pod released", lambda: spec.uid not in {p["uid"] for p in node.state()["plan"]["pods"]}, timeout=30
    )
    out["shared_pool_after"] = node.state()["plan"]["node"]["shared_pool"]
    fresh = cache_pod(order + 1, suffix=fresh_suffix)
    plan = node.start_pods([fresh], ociimage.PROBE_IMAGE, status_delay=STATUS_DELAY)
    out["fresh"] = container_records(node, [node.runs[fresh.uid]], plan)
    out["agent_running"] = node.agent is not None and node.agent.running
    events = node.agent_events()[since:]
    out["released"] = [e.get("pod") for e in events if e.get("event") == "pod.released"]
    out["errors"] = [e for e in events if e.get("event") in ("cgroup.error", "runtime.identity_error")]
    out["vanished"] = len([e for e in events if e.get("event") == "cgroup.vanished"])
    out["metrics"] = node.metrics()


def nri_mode_step(node: RuntimeNode, out: dict[str, Any]) -> None:
    """Every earlier pod deleted, containerd's NRI switched on, then the story and cache pods in NRI mode."""
    node.delete_pods([story_pod(1, suffix="b"), cache_pod(6, suffix="c")])
    node.kill_agent()
    mode_step(node, "nri", out, keep=True)


def nri_restart_containerd_step(node: RuntimeNode, out: dict[str, Any]) -> None:
    """containerd crashes and comes back, now with NRI's ``plugin_request_timeout`` at 1 s, while podpin runs in NRI
    mode: podpin registers again, takes the runtime's 1 s budget, and answers a new pod within it."""
    since = len(node.agent_events())
    before = node.cpusets()
    pid = node.containerd.pid
    out["containerd_restart_s"] = node.restart_containerd(config=node.containerd_config(nri=True, request_timeout="1s"))
    out["containerd_pids"] = [pid, node.containerd.pid]
    synchronized = node.wait_synchronized(since)
    out["synchronized"] = len(synchronized)
    out["request_timeout"] = synchronized[-1].get("request_timeout")
    out["before"], out["after"] = before, node.cpusets()
    spec = late_pod(7, suffix="d")
    plan = node.start_pods([spec], ociimage.PROBE_IMAGE, status_delay=STATUS_DELAY)
    out["late"] = container_records(node, [node.runs[spec.uid]], plan)
    out["agent_running"] = node.agent is not None and node.agent.running
    out["nri_events"] = nri_events(node, since)
    out["metrics"] = node.metrics()


def nri_restart_agent_step(node: RuntimeNode, out: dict[str, Any]) -> None:
    """podpin crashes and starts again in NRI mode: Synchronize names the running containers, nothing moves."""
    before = node.cpusets()
    node.kill_agent()
    since = len(node.agent_events())
    out["agent"] = node.start_agent(MODES["nri"], fresh_state=False)  # returns once it synchronized
    time.sleep(SETTLE)
    out["before"], out["after"] = before, node.cpusets()
    out["running"] = sum(len(run.containers) for run in node.runs.values())
    out["adopted"] = [e.get("containers") for e in nri_events(node, since) if e.get("event") == "nri.adopted"]
    out["nri_events"] = nri_events(node, since)
    out["metrics"] = node.metrics()


def nri_delete_during_create_step(node: RuntimeNode, out: dict[str, Any]) -> None:
    """The doomed pod deleted while created, in NRI mode (the earlier NRI pods deleted first, for its CPUs)."""
    node.delete_pods([story_pod(1, suffix="d"), cache_pod(2, suffix="d"), late_pod(7, suffix="d")])
    since = len(node.agent_events())
    delete_during_create_step(node, out, order=8, fresh_suffix="e")
    out["nri_events"] = nri_events(node, since)


def nri_resize_step(node: RuntimeNode, out: dict[str, Any]) -> None:
    """An in-place resize after the pool changed: the shared container's cpuset is the planned one at every read.

    ``resize`` starts (NRI answers ``s`` with the shared pool), then a 1-CPU pod takes a CPU of that pool (podpin
    narrows ``s`` directly); then the kubelet stand-in resizes ``s`` (UpdateContainerResources with a new quota and no
    cpuset, as a kubelet with the CPU manager off sends it; containerd merges it into the spec, which still holds the
    creation-time cpuset, and runs ``runc update`` after asking NRI).
    """
    since = len(node.agent_events())
    spec, taker = resize_pod(9), cache_pod(10, suffix="f")
    node.start_pods([spec], ociimage.SLEEP_IMAGE, status_delay=STATUS_DELAY)
    run = node.runs[spec.uid]
    shared = run.container_cgroup("s")
    out["created"] = (shared / "cpuset.cpus").read_text().strip()
    node.start_pods([taker], ociimage.SLEEP_IMAGE, status_delay=STATUS_DELAY)

    def narrowed() -> str | None:
        value = (shared / "cpuset.cpus").read_text().strip()
        return value if value != out["created"] else None

    planned = wait_until("s narrowed to the new pool", narrowed, timeout=30)
    out["planned_before"] = node.plan().get((spec.uid, "s"))
    out["narrowed"] = planned
    resized_at = time.monotonic()
    resources = pb.LinuxContainerResources(cpu_period=100000, cpu_quota=75000, cpu_shares=768)
    node.cri.client.update_container_resources(run.containers["s"], resources)
    time.sleep(SETTLE)
    child = node.observer.child(run.containers["s"])
    out["values_after_resize"] = [v for at, v in (child.values if child else []) if at >= resized_at]
    out["final"] = (shared / "cpuset.cpus").read_text().strip()
    out["cpu_max"] = (shared / "cpu.max").read_text().strip()
    out["planned_after"] = node.plan().get((spec.uid, "s"))
    events = node.agent_events()[since:]
    out["errors"] = [e for e in events if e.get("event") in ("cgroup.error", "nri.invalid_input")]
    out["metrics"] = node.metrics()


BALLAST_PODS = 6
"""Ballast pods of :data:`~tests.vm.runtimepods.BALLAST_BYTES` each: a Synchronize of about 5.4 MiB."""


BIG_SYNC_TIMEOUT = "10s"
"""containerd's ``plugin_request_timeout`` for :func:`nri_big_sync_step`: room for the emulator, not a figure."""


def nri_big_sync_step(node: RuntimeNode, out: dict[str, Any]) -> None:
    """A Synchronize larger than ttrpc's 4 MiB message: the runtime splits it into ``more`` chunks (NRI v0.11+).

    Six ballast pods run their sandboxes with 900 KiB of annotations each (NRI hands a pod's annotations to plugins
    in every PodSandbox); podpin is SIGKILLed and started again, and the runtime's Synchronize of every pod and
    container now exceeds 4 MiB: containerd's first attempt fails on its side, it resends in chunks, podpin
    collects them into one adoption. Recorded: the request timeout the restarted runtime told, what the agent said
    of the Synchronize (``nri.synchronized``) and the seconds from its ``nri.connected`` to it, the cpusets before
    and after, the sandboxes running, and containerd's NRI errors. Skipped for a runtime whose NRI
    does not split (1.7: the plugin could never synchronize)."""
    if not node.runtime.splits_synchronize:
        out["skipped"] = f"{node.runtime.name} vendors NRI {node.runtime.nri}, which does not split a Synchronize"
        return
    # NRI gives the whole Synchronize one plugin_request_timeout: its oversized first attempt, every chunk and the
    # plugin's answers (pkg/adaptation/plugin.go synchronize). On an emulated guest 5.4 MiB take 1-2 s of it
    # (containerd marshals them twice; from nri.connected to nri.synchronized 2.05 s on a loaded two-core host),
    # so the 1 s of nri_restart_containerd, or even the default 2 s, would test the emulator's speed, not the split.
    since = len(node.agent_events())
    node.restart_containerd(config=node.containerd_config(nri=True, request_timeout=BIG_SYNC_TIMEOUT))
    out["request_timeout"] = node.wait_synchronized(since)[-1].get("request_timeout")
    specs = [ballast_pod(20 + i, i) for i in range(BALLAST_PODS)]
    for spec in specs:
        node.status.publish(spec)
    node.wait_admitted(specs)
    for index, spec in enumerate(specs):
        node.start_pod(spec, ociimage.SLEEP_IMAGE, status_delay=None, names=(), annotations=ballast_annotations(index))
    before = node.cpusets()
    node.kill_agent()
    since = len(node.agent_events())
    node.start_agent(MODES["nri"], fresh_state=False)  # returns once it synchronized
    time.sleep(SETTLE)
    events = node.agent_events()[since:]
    synchronized = [e for e in events if e.get("event") == "nri.synchronized"]
    out["synchronized"] = synchronized[-1] if synchronized else None
    out["sync_seconds"] = sync_seconds(events)
    out["before"], out["after"] = before, node.cpusets()
    out["sandboxes"] = len(node.runs)
    out["containers"] = sum(len(run.containers) for run in node.runs.values())
    out["nri_warnings"] = [e for e in nri_events(node, since) if e.get("level") in ("warning", "error")]
    log = node.containerd.log_path.read_text(errors="replace").splitlines()
    out["split_refused"] = [line[-300:] for line in log if "split sync" in line]
    node.delete_pods(specs)


def sync_seconds(events: list[dict[str, Any]]) -> float | None:
    """Seconds from the agent's last ``nri.connected`` to the ``nri.synchronized`` after it (None without both):
    the runtime's Configure and Synchronize with podpin's answers, against the runtime's one request timeout."""
    connected = synchronized = None
    for event in events:
        if event.get("event") == "nri.connected":
            connected, synchronized = event, None
        elif event.get("event") == "nri.synchronized" and connected is not None:
            synchronized = event
    if connected is None or synchronized is None:
        return None
    start = datetime.fromisoformat(str(connected["timestamp"]))
    return round((datetime.fromisoformat(str(synchronized["timestamp"])) - start).total_seconds(), 3)


def runtime_log_step(node: RuntimeNode) -> dict[str, Any]:
    """What containerd logged about the plugin: NRI's deprecated-StateChange warnings (none expected where NRI calls
    the dedicated methods: podpin implements them), and its NRI errors."""
    text = node.containerd.log_path.read_text(errors="replace")
    lines = text.splitlines()
    return {
        "deprecated_state_change": [line[-300:] for line in lines if "deprecated StateChange" in line],
        "nri_errors": [line[-300:] for line in lines if "level=error" in line and "nri" in line.lower()][:20],
    }


def main() -> int:
    """Every step in order; the node is torn down at the end whatever failed."""
    sc = Scenario.from_argv("runtime")
    name = sc.args[0] if sc.args else "containerd-1.7"
    built_root = Path(sc.args[1]) if len(sc.args) > 1 else Path("/tmp/podpin-runtimes")
    node = RuntimeNode(sc.workdir, VM_DIR, runtime=MATRIX[name], built_root=built_root)
    try:
        with sc.step("runtime") as out:
            out.update(node.start_runtime(nri=False))
            topology = topology_to_dict(read_topology(Path("/sys")))
            (sc.workdir / "topology.json").write_text(json.dumps(topology, indent=1))
        with sc.step("mode_api") as out:
            mode_step(node, "api", out, keep=False)
        with sc.step("mode_bundle") as out:
            mode_step(node, "bundle", out, keep=True)
        with sc.step("restart_agent") as out:
            restart_agent_step(node, out)
        with sc.step("restart_containerd") as out:
            restart_containerd_step(node, out)
        with sc.step("delete_during_create") as out:
            delete_during_create_step(node, out)
        with sc.step("mode_nri") as out:
            nri_mode_step(node, out)
        with sc.step("nri_restart_containerd") as out:
            nri_restart_containerd_step(node, out)
        with sc.step("nri_restart_agent") as out:
            nri_restart_agent_step(node, out)
        with sc.step("nri_delete_during_create") as out:
            nri_delete_during_create_step(node, out)
        with sc.step("nri_resize") as out:
            nri_resize_step(node, out)
        with sc.step("nri_big_sync") as out:
            nri_big_sync_step(node, out)
        with sc.step("runtime_log") as out:
            out.update(runtime_log_step(node))
    finally:
        node.close()
    status: int = sc.finish()
    return status


if __name__ == "__main__":
    raise SystemExit(main())
