"""Memory footprint guards: the agent does not load what it does not need.

The agent's budget is 60 MiB of resident memory (``docs/design.md``, "Performance goals"). Two imports would
break it on their own: the generated ``CoreV1Api`` module (~22 MiB; podpin
makes its three calls through ``agent.kube.api.CoreCalls``) and NumPy (~11 MiB;
only lattices of more than 8 NUMA nodes need it). The gRPC client (grpclib, h2) and protobuf load only when the
NodeResourceTopology publisher asks the kubelet's PodResources API for devices, never on import. The NRI plugin
(protobuf) loads only once the runtime's NRI socket exists.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.apiserver_emulator import ApiServerEmulator
from tests.support.incluster import TOKEN, in_cluster
from tests.support.paths import REPO

PROBE = """
import json, sys
import agent.runner
from agent.alloc.planner import Planner
from agent.config import config_from_mapping
from agent.pods.model import pod_from_dict
from agent.topology.codec import topology_from_dict
topology = topology_from_dict(json.load(open(sys.argv[1])))
planner = Planner(topology, config_from_mapping({"systemReserved": {"cpu": "1"}}, env={}).planner)
pod = {"metadata": {"name": "p", "uid": "0c9e8a54-52d4-4c1e-8f61-3b7a9e2d4c11"},
       "spec": {"resources": {"requests": {"cpu": "4", "memory": "1Gi"}, "limits": {"cpu": "4", "memory": "1Gi"}},
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "2", "memory": "512Mi"},
                                                           "limits": {"cpu": "2", "memory": "512Mi"}}}, {"name": "s"}]}}
assert planner.admit(pod_from_dict(pod)).admitted
print(json.dumps({"numpy": "numpy" in sys.modules,
                  "core_v1_api": "kubernetes.client.api.core_v1_api" in sys.modules,
                  "grpc": any(m in sys.modules for m in ("grpc", "grpclib", "h2", "google.protobuf"))}))
"""


def test_agent_on_a_two_socket_node_loads_neither_numpy_nor_core_v1_api_nor_grpc() -> None:
    """Importing the agent (NRT publisher and PodResources client included) and admitting a pod on a 2-NUMA machine
    loads none of the heavy modules."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(REPO / "deploy" / "examples" / "topology-2s.json")],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    assert '{"numpy": false, "core_v1_api": false, "grpc": false}' == result.stdout.strip()


RUNNING_PROBE = """
import json, sys, tempfile, time
from pathlib import Path
from tests.support.agentfixture import make_node, running, wait_until
node = make_node(Path(tempfile.mkdtemp()))
node.write_config(nri={"enabled": True, "socketPath": str(Path(tempfile.mkdtemp()) / "absent.sock")})
with running(node.agent()) as agent:
    wait_until(lambda: agent.reconciler.sweeps > 0, what="a full pass")
    time.sleep(1.5)  # the NRI thread looked for its socket at least once more
print(json.dumps({"protobuf": "google.protobuf" in sys.modules, "plugin": "agent.nri.plugin" in sys.modules}))
"""


def test_running_agent_without_an_nri_socket_loads_no_protobuf() -> None:
    """NRI enabled but its socket absent: the running agent looks for the socket and loads neither the plugin nor
    protobuf (they load only once a socket exists)."""
    result = subprocess.run(
        [sys.executable, "-c", RUNNING_PROBE], capture_output=True, text=True, check=True, cwd=REPO, timeout=60
    )
    assert '{"protobuf": false, "plugin": false}' == result.stdout.strip().splitlines()[-1]


IN_CLUSTER_PROBE = """
import json, sys, tempfile, time
from pathlib import Path
from tests.support.emulated_agent import use_service_account_dir
from tests.support.agentfixture import make_node, running, wait_until
use_service_account_dir(Path(sys.argv[1]))
node = make_node(Path(tempfile.mkdtemp()))
with running(node.agent(pods_dir=None)) as agent:
    wait_until(lambda: agent.reconciler.sweeps > 0, what="a full pass")
    time.sleep(1.0)  # the watch is open
print(json.dumps(sorted(m for m in sys.argv[2].split(",") if m in sys.modules)))
"""

HEAVY_FOR_RUN = (
    # the client's ApiClient and models (pydantic), its kubeconfig loader (requests, oauthlib), and what the
    # kubernetes package's __init__ imports besides: agent/kube/official.py keeps them all out
    "pydantic",
    "requests",
    "oauthlib",
    "kubernetes.client.api_client",
    "kubernetes.config.kube_config",
    "kubernetes.dynamic",
    "kubernetes.stream",
    "kubernetes.leaderelection",
    "kubernetes.informer",
    "websocket",
    # numpy only past 8 NUMA nodes, matplotlib only for `simulate --output png`, gRPC only with devices
    "numpy",
    "matplotlib",
    "grpclib",
    "google.protobuf",
)


def test_podpin_run_in_a_cluster_loads_none_of_the_heavy_modules(tmp_path: Path) -> None:
    """`podpin run` as a DaemonSet runs it (service account over HTTPS, list and watch of the node's pods, a full
    pass) loads neither the client's ApiClient, models and kubeconfig loader nor numpy, matplotlib or gRPC."""
    account = in_cluster(tmp_path)
    with ApiServerEmulator(tls=account.tls) as emulator:
        result = subprocess.run(
            [sys.executable, "-c", IN_CLUSTER_PROBE, str(account.service_account_dir), ",".join(HEAVY_FOR_RUN)],
            check=False,
            capture_output=True,
            text=True,
            cwd=REPO,
            env={**os.environ, **account.environ(emulator.port), "NODE_NAME": "node-1"},
            timeout=120,
        )
        assert 0 == result.returncode, result.stderr[-2000:]
        watched = [r for r in emulator.requests if r.path == "/api/v1/pods" and r.query.get("watch") == "true"]
    assert [] == json.loads(result.stdout.strip().splitlines()[-1])
    assert watched
    assert {f"bearer {TOKEN}"} == {r.authorization for r in watched}  # the in-cluster loader's spelling


CLI_PROBE = """
import contextlib, io, json, sys
from agent.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
    main(sys.argv[1:])
loaded = [m for m in ("agent.commands.simulate", "agent.sim", "agent.commands.plan", "matplotlib") if m in sys.modules]
print(json.dumps({"loaded": loaded, "lists_simulate": "simulate" in out.getvalue()}))
"""


def test_podpin_run_imports_only_its_own_command() -> None:
    """``podpin run`` builds only its own sub-command: the simulator and the other commands' modules stay out;
    ``podpin --help`` still lists (and so loads) every command."""

    def probe(*argv: str) -> dict[str, object]:
        result = subprocess.run(
            [sys.executable, "-c", CLI_PROBE, *argv], capture_output=True, text=True, check=True, cwd=REPO
        )
        answer: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
        return answer

    assert {"loaded": [], "lists_simulate": False} == probe("run", "--help")
    assert {"loaded": ["agent.commands.simulate", "agent.sim", "agent.commands.plan"], "lists_simulate": True} == probe(
        "--help"
    )
