"""``podpin plan --output nrt``: the NodeResourceTopology the node would publish after the given pods."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from agent.cli import main
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


PROBE = """
import sys
from agent.cli import main
status = main(sys.argv[1:])
print("GRPC", any(m in sys.modules for m in ("grpc", "grpclib", "h2", "google.protobuf")), file=sys.stderr)
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
    ],
)
def test_plan_and_topology_never_load_grpc(argv: list[str]) -> None:
    """podpin plan (any output) and podpin topology run without importing gRPC or protobuf."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], cwd=REPO, capture_output=True, text=True, check=False
    )  # what is compared is the probe's last line, printed whatever the command's status
    assert "GRPC False" == result.stderr.strip().splitlines()[-1]
