#!/usr/bin/env python3
"""NRI plugin overhead: what a runtime request costs on top of the handler, and what the plugin costs in memory.

* latency: the project's NRI runtime emulator (``tests/support/nri_runtime.py``,
  Go's framing) calls CreateContainer ``--calls`` times on a connected plugin
  whose handler returns a fixed adjustment at once; each call is timed on the
  runtime's side (encode, mux framing, socket, the plugin's decode, dispatch to
  the handler thread, answer, decode). The same for Synchronize with
  ``--containers`` containers and an update for each. The handler does no work,
  so the figures are the plugin's own overhead.
* agent path: the same CreateContainer calls through the agent's hand-off to a
  loop thread that answers at once (``agent/reconcile/nri_handler.py``, as
  ``agent/runner.py`` wires it): the round trip, and the threads the request
  crosses, observed (the plugin's dispatcher, the thread that queues it for the
  loop, the loop): ``agent_thread_hops`` is their number minus one.
* memory: resident set of a fresh interpreter after ``import agent.runner``
  (the agent without NRI), then after also importing ``agent.nri.plugin``
  (protobuf and the generated modules); the difference is what enabling NRI adds.

Run: ``.venv/bin/python scripts/bench_nri.py [--calls 2000] [--containers 200] [--json]``
"""

from __future__ import annotations

import argparse
import json
import queue
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.cpuset import CPUSet
from agent.log import configure_logging
from agent.nri import ContainerAdjustment, ContainerUpdate, CreateResult, Job
from agent.nri.plugin import NRIPlugin
from agent.nri.proto import nri_pb2 as pb
from agent.reconcile.nri_handler import LoopCalls
from scripts.benchkit import add_options, emit
from tests.support.nri_plugin import RecordingHandler, short_socket_path
from tests.support.nri_runtime import NRIRuntime, make_container, make_pod

_RSS = """
import sys, psutil
rss = lambda: psutil.Process().memory_info().rss
import agent.runner
base = rss()
if sys.argv[1] == "nri":
    import agent.nri.plugin
print(rss() - base if sys.argv[1] == "nri" else base)
"""


def _rss(kind: str) -> int:
    out = subprocess.run([sys.executable, "-c", _RSS, kind], capture_output=True, text=True, check=True, cwd=REPO)
    return int(out.stdout)


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


_DISPATCHER = "podpin-nri-dispatcher"
"""The plugin's thread that reads a request off the connection and calls the service (``agent/nri/session.py``)."""


def _agent_path(calls: int, adjustment: CreateResult) -> dict[str, Any]:
    """CreateContainer round trips through the agent's hand-off to a loop thread, and the threads crossed."""
    jobs: queue.Queue[tuple[LoopCalls, Job] | None] = queue.Queue()
    submitters: set[str] = set()
    answerers: set[str] = set()

    def loop() -> None:
        while (item := jobs.get()) is not None:
            item[0].run(item[1])

    def make_calls(on_late: Any) -> LoopCalls:
        made: LoopCalls

        def submit(job: Job) -> None:
            submitters.add(threading.current_thread().name)
            jobs.put((made, job))

        made = LoopCalls(submit, on_late)
        return made

    def answer(_pod: Any, _container: Any) -> CreateResult:
        answerers.add(threading.current_thread().name)
        return adjustment

    handler = RecordingHandler(answers={"create_container": answer})
    loop_thread = threading.Thread(target=loop, name="podpin-loop", daemon=True)
    loop_thread.start()
    pods = [make_pod("u0")]
    with short_socket_path() as path, NRIRuntime(path, pods=pods, containers=[]) as runtime:
        stop = threading.Event()
        plugin = NRIPlugin(handler, socket_path=path, calls=make_calls)
        thread = threading.Thread(target=plugin.run, args=(stop,), daemon=True)
        thread.start()
        conn = runtime.wait_ready(timeout=30)
        round_ms = []
        for i in range(calls):
            container = make_container(f"agent{i}", pods[0])
            t0 = time.perf_counter()
            conn.create_container(pods[0], container)
            round_ms.append((time.perf_counter() - t0) * 1000)
        stop.set()
        thread.join(5)
    jobs.put(None)
    loop_thread.join(5)
    path_threads = [_DISPATCHER, *sorted(submitters - {_DISPATCHER}), *sorted(answerers)]
    return {
        "agent_create_p50_ms": round(statistics.median(round_ms), 3),
        "agent_create_p99_ms": round(_quantile(round_ms, 0.99), 3),
        "agent_threads": " -> ".join(path_threads),
        "agent_thread_hops": len(path_threads) - 1,
    }


def measure(calls: int, containers: int) -> dict[str, Any]:
    adjustment = CreateResult(
        adjustment=ContainerAdjustment(cpuset_cpus=CPUSet([2, 3]), cpu_quota=-1, cpu_period=100000)
    )
    updates = [ContainerUpdate(container_id=f"{i:064x}", cpuset_cpus=CPUSet([i % 8])) for i in range(containers)]
    handler = RecordingHandler(
        answers={
            "create_container": lambda _pod, _container: adjustment,
            "synchronize": lambda _pods, _containers: updates,
        }
    )
    pods = [make_pod(f"u{i}") for i in range(containers)]
    existing = [make_container(f"{i:064x}", pods[i]) for i in range(containers)]
    with short_socket_path() as path, NRIRuntime(path, pods=pods, containers=existing) as runtime:
        stop = threading.Event()
        plugin = NRIPlugin(handler, socket_path=path)
        thread = threading.Thread(target=plugin.run, args=(stop,), daemon=True)
        started = time.perf_counter()
        thread.start()
        conn = runtime.wait_ready(timeout=30)
        connect_s = time.perf_counter() - started
        pod = pods[0]
        create_ms = []
        for i in range(calls):
            container = make_container(f"new{i}", pod)
            t0 = time.perf_counter()
            conn.create_container(pod, container)
            create_ms.append((time.perf_counter() - t0) * 1000)
        sync_ms = []
        for _ in range(5):
            t0 = time.perf_counter()
            conn.call("Synchronize", pb.SynchronizeRequest(pods=pods, containers=existing), pb.SynchronizeResponse)
            sync_ms.append((time.perf_counter() - t0) * 1000)
        stop.set()
        thread.join(5)
    return {
        "create_calls": calls,
        "create_p50_ms": round(statistics.median(create_ms), 3),
        "create_p99_ms": round(_quantile(create_ms, 0.99), 3),
        "sync_containers": containers,
        "sync_median_ms": round(statistics.median(sync_ms), 2),
        "connect_register_sync_s": round(connect_s, 3),
        **_agent_path(calls, adjustment),
        "agent_rss_mib": round(_rss("base") / 2**20, 1),
        "nri_plugin_extra_rss_mib": round(_rss("nri") / 2**20, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--containers", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    add_options(parser)
    args = parser.parse_args(argv)
    configure_logging(json=True, level="warning")
    result = measure(20, 10) if args.smoke else measure(args.calls, args.containers)
    emit(args, "nri", result)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:28} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
