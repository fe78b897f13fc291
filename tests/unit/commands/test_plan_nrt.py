"""``podpin plan --output nrt``: the NodeResourceTopology the node would publish after the given pods."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from agent.cli import main
from agent.topology.load import machine_name
from tests.support.paths import REPO

EXAMPLES = REPO / "deploy" / "examples"


@cache
def schema() -> dict[str, Any]:
    crd = yaml.safe_load((REPO / "deploy" / "crds" / "noderesourcetopologies.yaml").read_text())
    return dict(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])


def test_plan_prints_the_object_after_the_pods(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """After the trading engine (a 6-CPU pod bubble on NUMA node 0), node-0 has 6 fewer CPUs available."""
    config = tmp_path / "config.yaml"
    config.write_text((EXAMPLES / "config-pod-scope.yaml").read_text() + "\nnodeName: worker-1\n")
    status = main(
        [
            "plan",
            "--topology",
            str(EXAMPLES / "topology-2s.json"),
            "--config",
            str(config),
            "--output",
            "nrt",
            str(EXAMPLES / "pods" / "trading-engine-after.yaml"),
        ]
    )
    obj = json.loads(capsys.readouterr().out)
    assert 0 == status
    jsonschema.validate(obj, schema())
    assert "worker-1" == obj["metadata"]["name"]
    assert "ownerReferences" not in obj["metadata"]
    cpu = [next(r for r in z["resources"] if r["name"] == "cpu") for z in obj["zones"]]
    bubble = int(
        yaml.safe_load((EXAMPLES / "pods" / "trading-engine-after.yaml").read_text())["spec"]["resources"]["requests"][
            "cpu"
        ]
    )
    assert [str(15 - bubble), "16"] == [c["available"] for c in cpu]
    assert ["15", "16"] == [c["allocatable"] for c in cpu]


def _nrt(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["plan", "--output", "nrt", *args, str(EXAMPLES / "pods" / "trading-engine-after.yaml")])
    out, err = capsys.readouterr()
    return status, out, err


def test_the_object_is_named_after_the_machine_of_the_topology_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without nodeName the object takes the hostname the topology was saved with, never this machine's name."""
    monkeypatch.delenv("NODE_NAME", raising=False)
    saved = tmp_path / "worker-7.json"
    saved.write_text(json.dumps({"hostname": "worker-7", **json.loads((EXAMPLES / "topology-2s.json").read_text())}))
    status, out, _ = _nrt(capsys, "--topology", str(saved))
    assert (0, "worker-7") == (status, json.loads(out)["metadata"]["name"])


def test_a_topology_that_names_no_machine_needs_a_node_name(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file saved without a hostname names no machine: exit 2 asking for nodeName instead of guessing one."""
    monkeypatch.delenv("NODE_NAME", raising=False)
    example = EXAMPLES / "topology-2s.json"
    status, out, err = _nrt(capsys, "--topology", str(example))
    assert (2, "") == (status, out)
    assert (
        f"podpin plan: --output nrt: {example} does not say which machine it is (saved without a hostname, or a sysfs "
        "copy): set nodeName in --config to name the NodeResourceTopology"
    ) == err.splitlines()[-1]


def test_machine_name_of_this_machine_and_of_copies(tmp_path: Path) -> None:
    """This host's /sys is this host; a sysfs copy or a file without a hostname is nobody in particular."""
    plain = tmp_path / "plain.json"
    plain.write_text("{}")
    assert (socket.gethostname(), None, None) == (
        machine_name(None, Path("/sys")),
        machine_name(None, tmp_path),
        machine_name(plain),
    )


PROBE = """
import sys
from agent.cli import main
from agent.topology.load import machine_name
status = main(sys.argv[1:])
grpc = any(m in sys.modules for m in ("grpc", "grpclib", "h2", "google.protobuf"))
print("GRPC", grpc, "KUBERNETES", "kubernetes" in sys.modules, file=sys.stderr)
"""


@pytest.mark.parametrize(
    "argv",
    [
        [
            "plan",
            "--topology",
            "deploy/examples/topology-2s.json",
            "--output",
            "nrt",
            "deploy/examples/pods/ml-data-loader.yaml",
        ],
        ["plan", "--topology", "deploy/examples/topology-2s.json", "deploy/examples/pods/ml-data-loader.yaml"],
        ["topology", "--output", "json"],
        ["simulate", "--preset", "seed-mesh", "--nodes", "2", "--output", "json"],
    ],
)
def test_plan_and_topology_never_load_grpc(argv: list[str]) -> None:
    """podpin plan (any output), topology and simulate run without gRPC, protobuf or the Kubernetes client.

    Every sub-command module is imported at start-up to register its flags, so a shell import reached from a
    pure one (``agent.nrt``'s publisher from the NRT computation) would cost every command the client.
    """
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], cwd=REPO, capture_output=True, text=True, check=False
    )  # what is compared is the probe's last line, printed whatever the command's status
    assert "GRPC False KUBERNETES False" == result.stderr.strip().splitlines()[-1]
