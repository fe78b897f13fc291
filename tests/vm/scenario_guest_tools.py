"""Guest scenario for ``test_guest_tools.py``: the guest helpers themselves, on the real kernel.

Exercises ``background.Background`` (start, wait for output, SIGKILL, restart, SIGTERM: what end-to-end
scenarios do with ``podpin run``), the parts of ``kubetree`` the kernel-facts scenario does not use, and one
step that fails on purpose so the host can check that a failing step explains itself.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from tests.vm import kubetree
from tests.vm.background import Background, BackgroundError
from tests.vm.kubetree import KubeTree, cpu_stat, read
from tests.vm.scenario import Scenario, WaitTimeoutError, wait_until

DAEMON = (
    "/bin/sh",
    "-c",
    'echo "ready pid $$"; trap "echo got TERM; exit 3" TERM; while :; do sleep 0.05; done',
)


def background(sc: Scenario, out: dict[str, object]) -> None:
    """Start a daemon, SIGKILL it, start it again, and stop it with SIGTERM."""
    daemon = Background(DAEMON, log_path=sc.workdir / "daemon.log")
    try:
        first = daemon.start()
        out["first_ready"] = daemon.wait_for_output(r"^ready pid", timeout=10).replace(str(first), "<pid1>")
        killed = daemon.kill()
        out["killed"] = {"returncode": killed.returncode, "same_pid": killed.pid == first, "running": daemon.running}
        second = daemon.restart()
        out["second_pid_differs"] = second != first
        out["second_ready"] = daemon.wait_for_output(r"^ready pid", timeout=10).replace(str(second), "<pid2>")
        out["second_output_only"] = daemon.output().replace(str(second), "<pid2>")
        try:
            daemon.wait_for_output(r"never printed", timeout=0.3)
            out["missing_output"] = "found"
        except BackgroundError as err:
            out["missing_output"] = str(err).splitlines()[0]
        stopped = daemon.stop(timeout=10)
        out["stopped_returncode"] = stopped.returncode
        out["runs"] = len(daemon.runs)
        out["log_headers"] = [line for line in daemon.log_tail(100).splitlines() if line.startswith("===")]
        try:
            daemon.signal(15)
            out["signal_when_stopped"] = "sent"
        except BackgroundError as err:
            out["signal_when_stopped"] = str(err)
    finally:
        daemon.close()


def kubetree_extras(tree: KubeTree, out: dict[str, object]) -> None:
    """BestEffort pods, kubelet-style pod ``cpu.max``, ``cpu.stat`` and the errors ``kubetree`` reports."""
    tree.setup()
    pod = tree.add_pod(qos="besteffort", uid="44444444-5555-4666-8777-888888888888")
    out["besteffort_pod"] = str(pod.path.relative_to(tree.root))
    limited = tree.add_pod(qos="burstable", uid="55555555-6666-4777-8888-999999999999", cpu_max="150000 100000")
    out["pod_cpu_max"] = read(limited.path, "cpu.max")
    ctr = tree.add_container(limited, container_id="12" * 32, cpu_max="50000 100000", cpuset="1-2")
    out["container_values"] = [read(ctr.path, "cpu.max"), read(ctr.path, "cpuset.cpus")]
    stat = cpu_stat(ctr.path)
    out["fresh_cpu_stat"] = [stat.nr_periods, stat.nr_throttled, stat.throttled_usec]
    try:
        tree.start_process(limited.path)
        out["process_in_pod_slice"] = "started"
    except kubetree.KubeTreeError as err:
        out["process_in_pod_slice"] = str(err).replace(str(tree.root), "<root>")
    missing = limited.path / "cri-containerd-missing.scope"
    try:
        tree.start_process(missing)
        out["process_in_missing_cgroup"] = "started"
    except kubetree.KubeTreeError as err:
        out["process_in_missing_cgroup"] = str(err).replace(str(tree.root), "<root>")
    try:
        kubetree.write(missing, "cpu.max", "max")
        out["write_to_missing_cgroup"] = "written"
    except kubetree.KubeTreeError as err:
        out["write_to_missing_cgroup"] = str(err).replace(str(tree.root), "<root>")
    tree.close()
    out["kubepods_left"] = tree.kubepods.exists()


def main() -> int:
    """Run the helper checks, one deliberately failing step, and a wait that times out."""
    sc = Scenario.from_argv("guest_tools")
    tree = KubeTree()
    with sc.step("background") as out:
        background(sc, out)
    with sc.step("kubetree_extras") as out:
        kubetree_extras(tree, out)
    with sc.step("wait_until_timeout") as out:
        try:
            wait_until("the impossible", lambda: 0, timeout=0.2)
        except WaitTimeoutError as err:
            out["message"] = str(err)
    with sc.step("deliberate_failure") as out:
        out["before_failure"] = "recorded"
        print("guest stderr marker: about to fail on purpose", file=sys.stderr, flush=True)
        raise ValueError("deliberate failure for the harness test")
    with (
        sc.step("loopback") as out,
        socket.create_server(("127.0.0.1", 0)) as server,
        socket.create_connection(server.getsockname(), timeout=5) as client,
    ):
        conn, _ = server.accept()
        client.sendall(b"ping")
        out["received"] = conn.recv(4).decode()
        conn.close()
    with sc.step("paths") as out:
        out["workdir_is_results_dir"] = sc.workdir == Path(sc.results_path).parent
        out["args"] = sc.args
    return sc.finish()


if __name__ == "__main__":
    raise SystemExit(main())
