#!/usr/bin/env python3
"""What a peer can make the agent hold (issue 22, findings 5 and 6), measured; prints one JSON line per case.

* ``podresources``: a PodResources ``List`` answer of ``--answer-mib`` MiB (the kubelet emulator in this process,
  the client in a child process, so its peak resident memory, ``VmHWM``, is the client's alone), once with the
  agent's 16 MiB cap and once without a cap (1 GiB);
* ``synchronize``: an NRI runtime (the emulator, Go framing) synchronizing ``--containers`` containers in chunks
  of 2,000 with the agent's plugin (a recording handler): the slowest chunk's answer against the runtime's 2 s
  request timeout, the whole Synchronize, what the handler got, and the process's peak memory above what it held
  before (the emulator's own messages are built first; ``/proc/self/clear_refs`` resets the peak).

Usage: ``scripts/bench_bounds.py [--answer-mib 58] [--containers 100000]`` (results in docs/benchmarks.md);
``--smoke`` runs just past each bound (a 17 MiB answer, 12,000 containers) so every path is taken in seconds.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from scripts.benchkit import add_options, emit

SMOKE_ANSWER_MIB = 17.0
"""Just over the agent's 16 MiB PodResources cap: the refusal path runs."""
SMOKE_CONTAINERS = 12_000
"""Just over the 10,000 containers a Synchronize keeps: the truncation path runs."""

_CHILD = """
import json, sys
from pathlib import Path
from agent.podresources import PodResourcesClient, PodResourcesError
client = PodResourcesClient(Path(sys.argv[1]), timeout=60, max_answer_bytes=int(sys.argv[2]))
try:
    outcome = f"{len(client.list().containers)} containers"
except PodResourcesError as err:
    outcome = str(err).split(": ", 2)[-1]
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(json.dumps({"outcome": outcome, "peak_mib": round(peak / 1024, 1)}))
"""


def _mib(field: str) -> float:
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(field)) / 1024


def podresources(answer_mib: float) -> list[dict[str, object]]:
    from agent.podresources import MAX_ANSWER_BYTES
    from agent.podresources.v1 import api_pb2
    from tests.support.podresources_emulator import PodResourcesEmulator

    per_pod = 200 * 50  # bytes, roughly: 200 device ids of ~50 bytes
    pods = [
        api_pb2.PodResources(
            name=f"p{i}",
            namespace="ns",
            containers=[
                api_pb2.ContainerResources(
                    name="c",
                    devices=[
                        api_pb2.ContainerDevices(
                            resource_name="x.io/d", device_ids=[f"dev-{i}-{j}-{'y' * 40}" for j in range(200)]
                        )
                    ],
                )
            ],
        )
        for i in range(int(answer_mib * (1 << 20) / per_pod))
    ]
    raw = api_pb2.ListPodResourcesResponse(pod_resources=pods).SerializeToString()
    rows = []
    with PodResourcesEmulator() as kubelet:
        kubelet.raw_list = raw
        for cap in (MAX_ANSWER_BYTES, 1 << 30):
            out = subprocess.run(
                [sys.executable, "-c", _CHILD, str(kubelet.socket), str(cap)],
                capture_output=True,
                text=True,
                check=True,
                cwd=REPO,
            ).stdout
            rows.append(
                {"case": "podresources", "answer_mib": round(len(raw) / (1 << 20), 1), "cap": cap} | json.loads(out)
            )
    return rows


def synchronize(count: int) -> dict[str, object]:
    import structlog

    from agent.nri import CallResult
    from agent.nri.plugin import NRIPlugin
    from tests.support.nri_plugin import RecordingHandler, Reports, running_plugin, short_socket_path
    from tests.support.nri_runtime import NRIRuntime, make_container, make_pod

    answered: list[float] = []

    def keep(_logger: object, _name: str, event: MutableMapping[str, Any]) -> Mapping[str, Any]:
        if event.get("event") == "nri.ttrpc.answered" and str(event.get("method", "")).endswith("/Synchronize"):
            answered.append(float(event.get("seconds", 0.0)))
        raise structlog.DropEvent

    structlog.configure(processors=[keep])
    pods = [make_pod(f"u{i:06d}", name=f"p{i}") for i in range(count // 2)]
    containers = [make_container(f"{i:064x}", pods[i // 2], f"c{i}", cpus="0-63") for i in range(count)]
    handler, reports = RecordingHandler(), Reports()
    before = _mib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")
    with short_socket_path() as path, NRIRuntime(path, pods=pods, containers=containers, sync_chunk=2000) as runtime:
        plugin = NRIPlugin(handler, socket_path=path, on_report=reports, backoff=(0.05, 0.2))
        start = time.monotonic()
        with running_plugin(plugin):
            runtime.wait_ready(timeout=300)
            whole = time.monotonic() - start
    return {
        "case": "synchronize",
        "containers": count,
        "chunks": len(answered),
        "slowest_chunk_s": round(max(answered, default=0.0), 3),
        "last_chunk_s": round(answered[-1] if answered else 0.0, 3),
        "whole_s": round(whole, 2),
        "handler_got": [(len(p), len(c)) for _, p, c in handler.calls],
        "truncated": len(reports.calls(CallResult.TRUNCATED)),
        "peak_above_mib": round(_mib("VmHWM") - before, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--answer-mib", type=float, default=58.0)
    parser.add_argument("--containers", type=int, default=100_000)
    add_options(parser)
    args = parser.parse_args(argv)
    answer_mib = SMOKE_ANSWER_MIB if args.smoke else args.answer_mib
    containers = SMOKE_CONTAINERS if args.smoke else args.containers
    rows = podresources(answer_mib)
    for row in rows:
        print(json.dumps(row), flush=True)
    sync = synchronize(containers)
    print(json.dumps(sync), flush=True)
    emit(args, "bounds", {"podresources": rows, "synchronize": sync})
    return 0


if __name__ == "__main__":
    sys.exit(main())
