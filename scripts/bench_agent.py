#!/usr/bin/env python3
"""The agent at rest: resident memory and CPU of ``podpin run`` with 110 pods, for 60 s.

The agent runs as a real process against the project's API server emulator (on
127.0.0.1) with 110 pods bound to its node — 20 pod-level pods (a 2-CPU
exclusive container and a sidecar), 20 classic Guaranteed 1-CPU pods and 70
Burstable pods — over a fixture cgroup v2 tree and a 112-CPU, 4-NUMA-node sysfs
tree (``intel-spr-2s-snc2``). After the agent is ready (every pod admitted and
written), it is sampled once a second: RSS (``psutil``), and CPU time over the
window. The default reconcile period (10 s) and the watch stay on, so the
figure includes the periodic resyncs.

Goals (``docs/design.md``, "Performance goals"): RSS <= 60 MiB, CPU <= 1% of one core at rest.

``--nrt`` turns on the NodeResourceTopology export (``nrt.enabled``; the
emulator serves the CRD and the Node); ``--devices`` also makes the Node
advertise GPUs and serves the kubelet's PodResources API on a unix socket
(the project's emulator), so the agent loads gRPC to read the devices.
``--all`` is every feature at once, as a production node runs it: NRT and
devices, the NRI plugin connected to the project's NRI runtime, and
``/metrics`` scraped every 15 s (the interference metrics and the affinity
audit's figures are computed per scrape), as Prometheus would.

The agent finds the API server as in a DaemonSet (``--auth in-cluster``, the default): a service account
directory (token, CA) and ``KUBERNETES_SERVICE_HOST``/``_PORT``, the emulator serving HTTPS
(``tests/support/incluster.py``). ``--auth kubeconfig`` gives it a kubeconfig file instead, which also loads
the client's kubeconfig loader (requests, oauthlib, the ``ApiClient``: about 15 MiB).

``/state`` is read from its own address (``stateBindAddress``), as the agent
serves it since the hardening work. ``--smoke`` samples for 2 s (CI,
``tests/unit/test_benches.py``); ``--record`` writes
``docs/bench/agent[-variant].json`` (``scripts/benchkit.py``).

The interpreter matters for the RSS: the test virtualenv also holds
``kubernetes-validate``, which the Kubernetes client imports when present (with
pydantic and jsonschema). Measure the shipped footprint with a runtime-only
environment::

    python3 -m venv /tmp/podpin-rt && /tmp/podpin-rt/bin/pip install -q .
    scripts/bench_agent.py --python /tmp/podpin-rt/bin/python

Usage: ``scripts/bench_agent.py [--seconds 60] [--python PATH] [--nrt [--devices] | --all]
[--auth in-cluster|kubeconfig] [--json] [--smoke]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
import yaml

REPO = Path(__file__).resolve().parent.parent
# The test helpers (tests/support) are not part of the installed package: read them from the checkout.
sys.path.insert(0, str(REPO))

from scripts.benchkit import add_options, commit_of, emit
from tests.support.agentfixture import Spawned, fetch, kubeconfig, make_node, wait_until
from tests.support.apiserver_emulator import ApiServerEmulator
from tests.support.emulated_agent import SERVICE_ACCOUNT_DIR_VARIABLE
from tests.support.incluster import in_cluster
from tests.support.podfactory import container, make_pod, resources, sidecar

RSS_GOAL_MIB = 60.0
CPU_GOAL_PERCENT = 1.0
SCRAPE_SECONDS = 15.0


def pods() -> list[dict[str, Any]]:
    """The 110 pods: 20 pod-level, 20 classic Guaranteed, 70 Burstable, all running on node-1."""
    mesh = [
        make_pod(
            f"mesh-{i}",
            containers=[container("main", cpu="2", memory="1Gi")],
            init_containers=[
                sidecar("proxy", cpu_request="100m", cpu_limit="500m", memory_request="128Mi", memory_limit="256Mi")
            ],
            pod_resources=resources(cpu="3", memory="2Gi"),
            states={"main": "running", "proxy": "running"},
            creation_timestamp=f"2026-01-01T00:00:{i:02d}Z",
        )
        for i in range(20)
    ]
    caches = [
        make_pod(
            f"cache-{i}",
            containers=[container("redis", cpu="1", memory="1Gi")],
            states={"redis": "running"},
            creation_timestamp=f"2026-01-01T00:01:{i:02d}Z",
        )
        for i in range(20)
    ]
    web = [
        make_pod(
            f"web-{i}",
            containers=[
                container("app", cpu_request="100m", cpu_limit="1", memory_request="128Mi", memory_limit="256Mi")
            ],
            states={"app": "running"},
            creation_timestamp=f"2026-01-01T00:02:{i:02d}Z",
        )
        for i in range(70)
    ]
    return mesh + caches + web


def measure(
    seconds: float,
    python: str,
    *,
    checkout: Path = REPO,
    nrt: bool = False,
    devices: bool = False,
    nri: bool = False,
    scrape: bool = False,
    auth: str = "in-cluster",
) -> dict[str, Any]:
    """Start the agent, wait until it is ready, sample it for ``seconds``; the figures."""
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="podpin-bench-agent-"))
        account = in_cluster(Path(tmp) / "in-cluster") if auth == "in-cluster" else None
        emulator = stack.enter_context(ApiServerEmulator(tls=account.tls if account else None))
        node = make_node(Path(tmp), machine="intel-spr-2s-snc2")
        node.write_config(reconcilePeriod="10s", logLevel="info", stateBindAddress="127.0.0.1:0")
        if nri:
            from tests.support.nri_runtime import NRIRuntime

            socket_path = Path(tmp) / "nri.sock"
            runtime = stack.enter_context(NRIRuntime(socket_path))
            node.write_config(nri={"socketPath": str(socket_path)})
        if nrt:
            emulator.objects.register_crd(
                yaml.safe_load((REPO / "deploy/crds/noderesourcetopologies.yaml").read_text())
            )
            emulator.objects.add_node("node-1", capacity={"nvidia.com/gpu": "2"} if devices else {})
            node.write_config(nrt={"enabled": True})
        if devices:
            from tests.support.podresources_emulator import PodResourcesEmulator

            kubelet = stack.enter_context(PodResourcesEmulator(Path(tmp)))
            kubelet.set_allocatable([("nvidia.com/gpu", ("gpu-0",), (0,)), ("nvidia.com/gpu", ("gpu-1",), (2,))])
            node.write_config(podResourcesSocket=str(kubelet.socket))
        for pod in pods():
            node.add_pod(pod, manifest=False)
            emulator.add_pod(pod)
        # podpin run with cgroup writes through the kernel emulation (tests/support/emulated_agent.py), run as
        # a script so that --checkout's tree supplies agent/ and the emulation
        launcher = str(REPO / "tests" / "support" / "emulated_agent.py")
        env = {**os.environ, "PYTHONPATH": str(checkout)}
        if account is not None:
            # as in a DaemonSet: the service account's token and CA, the API server's address in the environment
            env.update(account.environ(emulator.port))
            env[SERVICE_ACCOUNT_DIR_VARIABLE] = str(account.service_account_dir)
            argv = [python, launcher, *node.cli_args(pods_dir=False)[1:]]
        else:
            config = kubeconfig(Path(tmp) / "kubeconfig", emulator.url)
            argv = [python, launcher, *node.cli_args("--kubeconfig", str(config), pods_dir=False)[1:]]
        process = subprocess.Popen(
            argv, cwd=checkout, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        spawned = Spawned(process)
        try:
            ready_at = time.monotonic()
            wait_until(lambda: fetch(spawned.base_url + "/readyz")[0] == 200, 120.0, "the agent ready")
            ready_seconds = time.monotonic() - ready_at
            nri_synchronized = nri and runtime.wait_ready(30.0) is not None
            proc = psutil.Process(process.pid)
            time.sleep(2.0)  # let the first full pass and its log lines settle
            start_cpu, start = proc.cpu_times(), time.monotonic()
            rss: list[float] = []
            scrapes, next_scrape = 0, start
            while time.monotonic() - start < seconds:
                if scrape and time.monotonic() >= next_scrape:
                    status, _ = fetch(spawned.base_url + "/metrics")
                    scrapes += status == 200
                    next_scrape += SCRAPE_SECONDS
                rss.append(proc.memory_info().rss / 2**20)
                time.sleep(1.0)
            end_cpu, end = proc.cpu_times(), time.monotonic()
            _, state = fetch(f"http://{spawned.wait_log('agent.started')['state']}/state")
            admitted = len(json.loads(state)["state"]["pods"])
            published = emulator.objects.custom("topology.node.k8s.io", "noderesourcetopologies", "node-1")
        finally:
            process.terminate()
            spawned.finish(15)
    cpu = (end_cpu.user + end_cpu.system - start_cpu.user - start_cpu.system) / (end - start) * 100
    return {
        "nrt": nrt,
        "devices": devices,
        "nri": nri,
        "nri_synchronized": nri_synchronized,
        "metrics_scrapes": scrapes,
        "nrt_published": published is not None,
        "nrt_device_resources": sorted(
            {r["name"] for z in (published or {}).get("zones", []) for r in z["resources"] if "/" in r["name"]}
        ),
        "pods": 110,
        "auth": auth,
        "admitted": admitted,
        "seconds": round(end - start, 1),
        "ready_seconds": round(ready_seconds, 2),
        "rss_mib_max": round(max(rss), 1),
        "rss_mib_median": round(statistics.median(rss), 1),
        "cpu_percent": round(cpu, 3),
        "python": python,
        "rss_goal_mib": RSS_GOAL_MIB,
        "cpu_goal_percent": CPU_GOAL_PERCENT,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=60.0, help="sampling window (default: %(default)s)")
    parser.add_argument("--python", default=str(Path(sys.executable)), help="interpreter that runs the agent")
    parser.add_argument("--nrt", action="store_true", help="enable the NodeResourceTopology export")
    parser.add_argument("--devices", action="store_true", help="with --nrt: a node with GPUs and a PodResources socket")
    parser.add_argument("--checkout", type=Path, default=REPO, help="the tree whose agent runs (default: this one)")
    parser.add_argument("--all", action="store_true", help="every feature: NRT, devices, NRI, /metrics scraped")
    parser.add_argument(
        "--auth",
        choices=("in-cluster", "kubeconfig"),
        default="in-cluster",
        help="how the agent finds the API server: a service account over HTTPS, as in a DaemonSet (default), "
        "or a kubeconfig file (which also loads the client's kubeconfig loader)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_options(parser)
    args = parser.parse_args(argv)
    if args.devices and not args.nrt:
        parser.error("--devices needs --nrt")
    if args.all:
        args.nrt = args.devices = True
    seconds = 2.0 if args.smoke else args.seconds
    result = measure(
        seconds,
        args.python,
        checkout=args.checkout.resolve(),
        nrt=args.nrt,
        devices=args.devices,
        nri=args.all,
        scrape=args.all,
        auth=args.auth,
    )
    result["checkout"] = commit_of(args.checkout.resolve())
    variant = "all" if args.all else "-".join(name for name in ("nrt", "devices") if getattr(args, name))
    if args.auth != "in-cluster":
        variant = "-".join(v for v in (variant, args.auth) if v)
    if args.checkout.resolve() != REPO:
        variant = "-".join(v for v in (variant, args.checkout.name) if v)
    emit(args, "agent", result, variant=variant)
    if args.json:
        print(json.dumps(result))
        return 0
    if args.nrt:
        print(f"NodeResourceTopology published: {result['nrt_published']}, devices: {result['nrt_device_resources']}")
    print(
        f"podpin run, {result['admitted']}/{result['pods']} pods admitted, ready after {result['ready_seconds']} s, "
        f"sampled {result['seconds']} s ({result['python']})"
    )
    print(f"{'measure':<22}{'value':>10}{'goal':>10}")
    print(f"{'RSS max (MiB)':<22}{result['rss_mib_max']:>10}{RSS_GOAL_MIB:>10}")
    print(f"{'RSS median (MiB)':<22}{result['rss_mib_median']:>10}{'':>10}")
    print(f"{'CPU (% of a core)':<22}{result['cpu_percent']:>10}{CPU_GOAL_PERCENT:>10}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
