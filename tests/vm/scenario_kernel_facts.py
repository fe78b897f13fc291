"""Guest scenario for ``test_kernel_facts.py``: measure the cgroup v2 / sysfs facts podpin relies on.

Runs inside the VM as root (``<venv python> scenario_kernel_facts.py --results FILE``). Every step only
observes and records; what the values must be is stated by the host tests, so a fact that changes with a
kernel shows up there as expected-vs-actual.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import statistics
import subprocess
import threading
import time
from pathlib import Path

import agent
from tests.vm import kubetree
from tests.vm.background import podpin
from tests.vm.guest_inotify import IN_CREATE, IN_DELETE, IN_ISDIR, IN_MODIFY, Inotify
from tests.vm.kubetree import (
    KubeTree,
    affinity,
    cpu_max,
    cpu_stat_window,
    cpus,
    cpus_effective,
    read,
    write,
)
from tests.vm.scenario import Scenario, wait_until

SYS_NODE = Path("/sys/devices/system/node")
SYS_CPU = Path("/sys/devices/system/cpu")


INOTIFY_ROUNDS = 40
IN_IGNORED = 0x00008000
"""inotify(7): the watch was removed (its directory went, or ``inotify_rm_watch``)."""
THROTTLE_SECONDS = 1.5
THROTTLE_DEADLINE = 15.0
"""Measure 1.5 s, longer (up to 15 s) until the limited process has been throttled: see cpu_stat_window."""


def sysfs_layout(out: dict[str, object]) -> None:
    """NUMA nodes, CPUs and packages as the guest kernel reports them."""
    nodes = sorted(SYS_NODE.glob("node[0-9]*"), key=lambda p: int(p.name[4:]))
    out["node_cpulists"] = {p.name[4:]: (p / "cpulist").read_text().strip() for p in nodes}
    out["node_distances"] = {p.name[4:]: (p / "distance").read_text().split() for p in nodes}
    out["online"] = (SYS_CPU / "online").read_text().strip()
    cpu_dirs = sorted(SYS_CPU.glob("cpu[0-9]*"), key=lambda p: int(p.name[3:]))
    out["packages"] = {p.name[3:]: (p / "topology/physical_package_id").read_text().strip() for p in cpu_dirs}
    out["core_cpus"] = {p.name[3:]: (p / "topology/core_cpus_list").read_text().strip() for p in cpu_dirs}
    out["affinity_of_scenario"] = str(affinity(0))


def podpin_topology(out: dict[str, object]) -> None:
    """``podpin topology --sysfs-root /sys --output json`` in the guest, when the command exists."""
    # A file check, not importlib: importing agent.commands imports every command (and the Kubernetes client).
    out["available"] = (Path(agent.__file__).parent / "commands" / "topology.py").is_file()
    if not out["available"]:
        return
    argv = podpin("topology", "--sysfs-root", "/sys", "--output", "json")
    started = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)
    out["seconds"] = round(time.monotonic() - started, 2)
    out["returncode"] = proc.returncode
    out["stderr"] = proc.stderr[-2000:]
    if proc.returncode == 0:
        data = json.loads(proc.stdout)
        out["numa_nodes"] = {str(node["id"]): node["cpus"] for node in data["numa_nodes"]}
        out["cpus_online"] = sum(1 for cpu in data["cpus"] if cpu["online"])


def kubetree_shape(tree: KubeTree, out: dict[str, object]) -> None:
    """The tree the kubelet + containerd would build, with controllers down to the container scopes."""
    tree.setup()
    guaranteed = tree.add_pod(qos="guaranteed", uid="0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9")
    burstable = tree.add_pod(qos="burstable", uid="11111111-2222-4333-8444-555555555555")
    ctr = tree.add_container(guaranteed, container_id="ab" * 32)
    tree.add_container(burstable, container_id="cd" * 32)
    root = tree.root
    out["cgroups"] = sorted(str(p.relative_to(root)) for p in tree.kubepods.rglob("*") if p.is_dir())
    out["subtree_control"] = {
        str(p.relative_to(root)) if p != root else "/": read(p, "cgroup.subtree_control")
        for p in (root, tree.kubepods, tree.qos_slice("burstable"), guaranteed.path, burstable.path)
    }
    out["container_files"] = sorted(f.name for f in ctr.path.iterdir() if f.name.startswith(("cpu.", "cpuset.")))
    proc = tree.start_process(ctr.path)
    out["process_cgroup"] = str(kubetree.cgroup_of(proc.pid).relative_to(root))
    tree.stop_process(proc)


def child_outside_parent(tree: KubeTree, out: dict[str, object]) -> None:
    """A child's cpuset outside its parent is accepted but not effective; effective follows the parent."""
    pod = tree.add_pod()
    ctr = tree.add_container(pod)
    proc = tree.start_process(ctr.path)
    write(pod.path, "cpuset.cpus", "0-1")
    write(ctr.path, "cpuset.cpus", "2-3")
    out["child_cpus"] = str(cpus(ctr.path))
    out["child_effective"] = str(cpus_effective(ctr.path))
    out["affinity"] = str(affinity(proc.pid))
    write(pod.path, "cpuset.cpus", "0-3")
    out["child_effective_after_parent_widened"] = str(cpus_effective(ctr.path))
    out["affinity_after_parent_widened"] = str(affinity(proc.pid))
    write(pod.path, "cpuset.cpus", "5")
    out["child_effective_after_parent_moved_away"] = str(cpus_effective(ctr.path))
    out["invalid_cpu_write"] = _write_result(ctr.path, "cpuset.cpus", "99")
    tree.stop_process(proc)


def _write_result(cgroup: Path, name: str, value: str) -> str:
    """Write and report ``"ok"`` or the kernel's error text (a refused write is a fact, not a failure)."""
    try:
        write(cgroup, name, value)
        return "ok"
    except kubetree.KubeTreeError as err:
        cause = err.__cause__
        return cause.strerror if isinstance(cause, OSError) and cause.strerror else str(err)


def empty_write(tree: KubeTree, out: dict[str, object]) -> None:
    """What an empty ``cpuset.cpus`` write does, with and without tasks in the cgroup.

    ``echo "" >`` (a newline) un-pins a cgroup without tasks (effective = the parent's); a zero-byte
    ``write(2)`` never reaches the kernel's parser; a cgroup with tasks refuses the newline.
    """
    pod = tree.add_pod()
    write(pod.path, "cpuset.cpus", "0-5")
    ctr = tree.add_container(pod, cpuset="2-3")
    out["unpopulated_zero_byte_write"] = _write_result(ctr.path, "cpuset.cpus", "")
    out["unpopulated_zero_byte_cpus"] = read(ctr.path, "cpuset.cpus")
    out["unpopulated_newline_write"] = _write_result(ctr.path, "cpuset.cpus", "\n")
    out["unpopulated_newline_cpus"] = read(ctr.path, "cpuset.cpus")
    out["unpopulated_newline_effective"] = str(cpus_effective(ctr.path))
    proc = tree.start_process(ctr.path)
    out["affinity_of_task_joining_unpinned"] = str(affinity(proc.pid))
    write(ctr.path, "cpuset.cpus", "2-3")
    out["populated_affinity_pinned"] = str(affinity(proc.pid))
    out["populated_newline_write"] = _write_result(ctr.path, "cpuset.cpus", "\n")
    out["populated_cpus_after"] = read(ctr.path, "cpuset.cpus")
    out["populated_affinity_after"] = str(affinity(proc.pid))
    tree.stop_process(proc)


def cpu_max_formats(tree: KubeTree, out: dict[str, object]) -> None:
    """What ``cpu.max`` reads back after each form podpin may write."""
    ctr = tree.add_container(tree.add_pod())
    out["initial"] = cpu_max(ctr.path)
    for value in ("20000 100000", "max 100000", "50000", "max", "30000 50000"):
        write(ctr.path, "cpu.max", value)
        out[f"after {value!r}"] = cpu_max(ctr.path)


def throttling(tree: KubeTree, out: dict[str, object]) -> None:
    """A busy process under ``cpu.max 20000 100000`` is throttled; one under ``max`` is not."""
    pod = tree.add_pod()
    limited = tree.add_container(pod, cpu_max="20000 100000", cpuset="2")
    unlimited = tree.add_container(pod, cpu_max="max 100000", cpuset="6")
    procs = [tree.start_process(limited.path, busy=True), tree.start_process(unlimited.path, busy=True)]
    window = cpu_stat_window(
        {"limited": limited.path, "unlimited": unlimited.path},
        seconds=THROTTLE_SECONDS,
        until=lambda deltas: deltas["limited"].nr_throttled > 0,
        deadline=THROTTLE_DEADLINE,
    )
    for proc in procs:
        tree.stop_process(proc)
    window["limited"]["cpu_max"] = cpu_max(limited.path)
    window["unlimited"]["cpu_max"] = cpu_max(unlimited.path)
    out.update(window)


def affinity_follows_cpuset(tree: KubeTree, out: dict[str, object]) -> None:
    """``sched_getaffinity`` follows ``cpuset.cpus.effective``; a cpuset change resets a self-pinned task."""
    pod = tree.add_pod()
    ctr = tree.add_container(pod)
    proc = tree.start_process(ctr.path)
    out["unpinned"] = str(affinity(proc.pid))
    steps = {}
    for value in ("1-2", "4-6", "0,7", "3"):
        write(ctr.path, "cpuset.cpus", value)
        steps[value] = {"effective": str(cpus_effective(ctr.path)), "affinity": str(affinity(proc.pid))}
    out["after_write"] = steps
    write(ctr.path, "cpuset.cpus", "2-5")
    os.sched_setaffinity(proc.pid, {3})
    out["self_pinned"] = str(affinity(proc.pid))
    write(ctr.path, "cpuset.cpus", "2-5")
    out["self_pinned_after_same_value"] = str(affinity(proc.pid))
    write(pod.path, "cpuset.cpus", "1-6")
    out["self_pinned_after_parent_widened"] = str(affinity(proc.pid))
    write(ctr.path, "cpuset.cpus", "2-6")
    out["self_pinned_after_own_change"] = str(affinity(proc.pid))
    tree.stop_process(proc)


def inotify_events(tree: KubeTree, out: dict[str, object]) -> None:
    """Whether IN_CREATE / IN_DELETE fire on a watched cgroup2 dir for child mkdir/rmdir, and how fast.

    A watcher thread blocks in ``select`` like the agent's watcher will and timestamps each wake-up; the
    latency is from just before ``mkdir`` to that wake-up (same monotonic clock).
    """
    notify = Inotify()
    pod = tree.add_pod()
    wd_kubepods = notify.watch(tree.kubepods, IN_CREATE | IN_DELETE)
    wd_pod = notify.watch(pod.path, IN_CREATE | IN_DELETE)
    created: list[tuple[int, int, str]] = []
    first = tree.add_pod(uid="22222222-3333-4444-8555-666666666666")
    ctr = tree.add_container(pod, container_id="ef" * 32)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and len(created) < 2:
        created += notify.read(0.5)
    out["create_events"] = [
        {
            "watch": {wd_kubepods: "kubepods.slice", wd_pod: "pod"}.get(wd, str(wd)),
            "mask": hex(mask),
            "in_create": bool(mask & IN_CREATE),
            "is_dir": bool(mask & IN_ISDIR),
            "name": name,
        }
        for wd, mask, name in created
    ]
    tree.remove(ctr.path)
    tree.remove(first.path)
    removed: list[tuple[int, int, str]] = []
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and len(removed) < 2:
        removed += notify.read(0.5)
    out["delete_events"] = [
        {"mask": hex(mask), "in_delete": bool(mask & IN_DELETE), "is_dir": bool(mask & IN_ISDIR), "name": name}
        for _wd, mask, name in removed
    ]

    woke: list[tuple[int, list[tuple[int, int, str]]]] = []
    stop = threading.Event()

    def watcher() -> None:
        while not stop.is_set():
            events = notify.read(0.2)
            if events:
                woke.append((time.monotonic_ns(), events))

    def first_wake(since: int, kind: int, name: str) -> int | None:
        """Monotonic ns of the first wake-up after index ``since`` that delivered ``kind`` for ``name``."""
        for stamp, events in woke[since:]:
            if any(mask & kind and event_name == name for _, mask, event_name in events):
                return stamp
        return None

    thread = threading.Thread(target=watcher, daemon=True)
    thread.start()
    latencies_ms, mkdir_ms = [], []
    for n in range(INOTIFY_ROUNDS):
        path = tree.kubepods / kubetree.pod_slice_name(f"33333333-4444-4555-8666-{n:012x}", "guaranteed")
        seen = len(woke)
        t0 = time.monotonic_ns()
        path.mkdir()
        t1 = time.monotonic_ns()
        stamp = wait_until(
            f"IN_CREATE for {path.name}",
            functools.partial(first_wake, seen, IN_CREATE, path.name),
            timeout=5,
            interval=0.0005,
        )
        latencies_ms.append((stamp - t0) / 1e6)
        mkdir_ms.append((t1 - t0) / 1e6)
        path.rmdir()
        wait_until(f"IN_DELETE for {path.name}", functools.partial(first_wake, seen, IN_DELETE, path.name), timeout=5)
    stop.set()
    thread.join()
    notify.close()
    ordered = sorted(latencies_ms)
    out["latency_ms"] = {
        "rounds": INOTIFY_ROUNDS,
        "median": round(statistics.median(ordered), 3),
        "p90": round(ordered[int(0.9 * (len(ordered) - 1))], 3),
        "max": round(ordered[-1], 3),
        "mkdir_median": round(statistics.median(mkdir_ms), 3),
    }


def file_modify_event(tree: KubeTree, out: dict[str, object]) -> None:
    """A watch (mask IN_MODIFY) on a container cgroup *directory* reports another process's write to its
    ``cpu.max``, by file name, and a rewrite of the same value too; what becomes of the watch at rmdir.

    What the agent's watcher relies on to notice runc rewriting ``cpu.max`` after podpin pinned a container
    (``agent/cgroups/watch.py``): the writer is a separate process (``sh -c 'echo ... > cpu.max'``), as runc is.
    """
    ctr = tree.add_container(tree.add_pod())
    write(ctr.path, "cpu.max", "max 100000")
    notify = Inotify()
    wd = notify.watch(ctr.path, IN_MODIFY)

    def other_process_writes(value: str) -> list[dict[str, object]]:
        script = 'echo "$1" > "$0/cpu.max"'
        subprocess.run(["/bin/sh", "-c", script, str(ctr.path), value], check=True, timeout=30)
        events = [(w, mask, name) for w, mask, name in notify.read(2.0) if w == wd]
        return [{"name": name, "in_modify": bool(mask & IN_MODIFY)} for _, mask, name in events]

    out["on_quota_write"] = other_process_writes("100000 100000")
    out["cpu_max_after"] = cpu_max(ctr.path)
    out["on_same_value_write"] = other_process_writes("100000 100000")
    out["on_max_write"] = other_process_writes("max")
    tree.remove(ctr.path)
    gone: list[tuple[int, int, str]] = []
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        gone += notify.read(0.5)
    out["masks_after_rmdir"] = [hex(mask) for w, mask, _ in gone if w == wd]
    out["ignored_on_rmdir"] = any(w == wd and mask & IN_IGNORED for w, mask, _ in gone)
    libc = ctypes.CDLL(None, use_errno=True)
    out["rm_watch_after_rmdir"] = int(libc.inotify_rm_watch(notify.fd, wd))
    out["ignored_after_rm_watch"] = any(w == wd and mask & IN_IGNORED for w, mask, _ in notify.read(2.0))
    notify.close()


def populated_event(tree: KubeTree, out: dict[str, object]) -> None:
    """``cgroup.events`` raises IN_MODIFY when the first process enters a container cgroup and the last leaves."""
    ctr = tree.add_container(tree.add_pod())
    notify = Inotify()
    notify.watch(ctr.path / "cgroup.events", IN_MODIFY)
    out["before"] = read(ctr.path, "cgroup.events").splitlines()
    proc = tree.start_process(ctr.path)
    out["modify_on_enter"] = any(mask & IN_MODIFY for _, mask, _ in notify.read(2.0))
    out["after_enter"] = read(ctr.path, "cgroup.events").splitlines()
    tree.stop_process(proc)
    out["modify_on_exit"] = any(mask & IN_MODIFY for _, mask, _ in notify.read(2.0))
    out["after_exit"] = read(ctr.path, "cgroup.events").splitlines()
    notify.close()


def no_capabilities(tree: KubeTree, out: dict[str, object]) -> None:
    """uid 0 with every capability dropped writes ``cpuset.cpus`` and ``cpu.max`` of existing cgroups."""
    ctr = tree.add_container(tree.add_pod())
    script = (
        'grep -E "^(Uid|CapEff|CapPrm|CapBnd):" /proc/self/status; '
        'echo 1-2 > "$0/cpuset.cpus" && echo cpuset-ok; echo "30000 100000" > "$0/cpu.max" && echo cpumax-ok'
    )
    argv = [
        "setpriv",
        "--bounding-set=-all",
        "--inh-caps=-all",
        "--ambient-caps=-all",
        "--",
        "/bin/sh",
        "-c",
        script,
        str(ctr.path),
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    lines = proc.stdout.splitlines()
    out["returncode"] = proc.returncode
    out["stderr"] = proc.stderr
    out["status"] = {k.strip(): v.split()[0] for k, v in (line.split(":", 1) for line in lines if ":" in line)}
    out["writes"] = [line for line in lines if line.endswith("-ok")]
    out["cpus_after"] = str(cpus(ctr.path))
    out["cpu_max_after"] = cpu_max(ctr.path)


def main() -> int:
    """Run every step, each on a fresh part of the tree, and always tear the tree down."""
    sc = Scenario.from_argv("kernel_facts")
    tree = KubeTree()
    with sc.step("sysfs_layout") as out:
        sysfs_layout(out)
    with sc.step("root_cgroup") as out:
        out["controllers"] = read(tree.root, "cgroup.controllers").split()
        out["subtree_control"] = read(tree.root, "cgroup.subtree_control").split()
    with sc.step("podpin_topology") as out:
        podpin_topology(out)
    with sc.step("kubetree_shape") as out:
        kubetree_shape(tree, out)
    for name, func in (
        ("child_outside_parent", child_outside_parent),
        ("empty_write", empty_write),
        ("cpu_max_formats", cpu_max_formats),
        ("throttling", throttling),
        ("affinity_follows_cpuset", affinity_follows_cpuset),
        ("inotify_events", inotify_events),
        ("populated_event", populated_event),
        ("file_modify_event", file_modify_event),
        ("no_capabilities", no_capabilities),
    ):
        with sc.step(name) as out:
            func(tree, out)
    with sc.step("teardown") as out:
        tree.close()
        out["kubepods_left"] = tree.kubepods.exists()
    return sc.finish()


if __name__ == "__main__":
    raise SystemExit(main())
