"""``podpin plan``: the example pods on the bundled topology, output formats, and input errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main
from tests.support.paths import REPO
from tests.support.podfactory import container, make_pod, resources

EXAMPLES = REPO / "deploy" / "examples"
TOPOLOGY = EXAMPLES / "topology-2s.json"
POD_SCOPE = EXAMPLES / "config-pod-scope.yaml"


def plan(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["plan", *args])
    out, err = capsys.readouterr()
    return status, out, err


def plan_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    status, out, _ = plan(capsys, "--topology", str(TOPOLOGY), "--config", str(POD_SCOPE), "--output", "json", *args)
    assert 0 == status
    result: dict[str, Any] = json.loads(out)
    return result


def test_product_story_json(capsys: pytest.CaptureFixture[str]) -> None:
    """After pod-level resources: 4 exclusive CPUs for the database, a 2-CPU pod pool for the sidecars."""
    result = plan_json(capsys, str(EXAMPLES / "pods" / "trading-engine-after.yaml"))
    assert {"cpus": "0-31", "reserved": "0", "shared_pool": "0,4-16,20-31"} == result["node"]
    pod = result["pods"][0]
    assert (True, [0], "1-3,17-19") == (pod["admitted"], pod["numa_affinity"], pod["bubble"])
    assert [
        {
            "name": "database",
            "kind": "app",
            "pool": "exclusive",
            "cpus": "1-2,17-18",
            "mems": None,
            "cpu_max": "max 100000",
        },
        {"name": "envoy", "kind": "app", "pool": "pod_shared", "cpus": "3,19", "mems": None, "cpu_max": None},
        {"name": "log-collector", "kind": "app", "pool": "pod_shared", "cpus": "3,19", "mems": None, "cpu_max": None},
    ] == pod["containers"]


def test_before_burns_whole_cpus_on_sidecars(capsys: pytest.CaptureFixture[str]) -> None:
    """Before pod-level resources the sidecars each pin a whole exclusive CPU: 6 exclusive CPUs instead of 4."""
    result = plan_json(capsys, str(EXAMPLES / "pods" / "trading-engine-before.yaml"))
    containers = result["pods"][0]["containers"]
    assert ["exclusive"] * 3 == [c["pool"] for c in containers]
    assert 6 == sum(len(c["cpus"].replace("-", ",").split(",")) if "-" not in c["cpus"] else 4 for c in containers)


def test_pods_are_admitted_in_the_order_given(capsys: pytest.CaptureFixture[str]) -> None:
    """The first pod named gets the first NUMA-aligned CPUs."""
    after, before = EXAMPLES / "pods" / "trading-engine-after.yaml", EXAMPLES / "pods" / "trading-engine-before.yaml"
    first = plan_json(capsys, str(after), str(before))
    second = plan_json(capsys, str(before), str(after))
    assert ["trading-engine", "trading-engine-before"] == [p["name"] for p in first["pods"]]
    assert first["pods"][0]["bubble"] != second["pods"][1]["bubble"]


def test_every_example_pod_plans(capsys: pytest.CaptureFixture[str]) -> None:
    """All example pods are admitted on the bundled machine with the pod-scope example config."""
    result = plan_json(capsys, *sorted(str(p) for p in (EXAMPLES / "pods").glob("*.yaml")))
    assert all(p["admitted"] for p in result["pods"])
    assert {"imagenet-loader", "postgres-primary", "trading-engine", "trading-engine-before", "web"} == {
        p["name"] for p in result["pods"]
    }


def test_text_output_has_tables_and_cpu_map(capsys: pytest.CaptureFixture[str]) -> None:
    """Text: a table per pod and a CPU map with owners, reserved and shared CPUs."""
    status, out, _ = plan(
        capsys,
        "--topology",
        str(TOPOLOGY),
        "--config",
        str(POD_SCOPE),
        str(EXAMPLES / "pods" / "trading-engine-after.yaml"),
    )
    assert 0 == status
    assert "CONTAINER      KIND  POOL        CPUS       NUMA  CPU.MAX" in out
    assert "database       app   exclusive   1-2,17-18  0     max 100000" in out
    assert "    core 0      0 R     16 ." in out
    assert "    core 1      1 E1    17 E1" in out
    assert "  P1  2 CPUs  trading/trading-engine pod shared pool (envoy, log-collector)" in out


def test_without_config_plans_with_a_default_reservation(capsys: pytest.CaptureFixture[str]) -> None:
    """No --config: the defaults plus one reserved CPU, said on stderr."""
    status, out, err = plan(capsys, "--topology", str(TOPOLOGY), str(EXAMPLES / "pods" / "trading-engine-after.yaml"))
    assert (0, True) == (status, "admitted" in out)
    assert "podpin plan: no --config: planning with the defaults and systemReserved cpu=1" in err


def test_rejection_is_reported(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A pod that cannot be placed is shown with the kubelet's reason and message; the exit status stays 0."""
    pod = make_pod(
        "full",
        containers=[container("a", cpu="3", memory="1Gi"), container("b", cpu="2", memory="1Gi"), container("c")],
        pod_resources=resources(cpu="5", memory="5Gi"),
    )
    path = tmp_path / "full.yaml"
    path.write_text(yaml.safe_dump(pod))
    status, out, _ = plan(capsys, "--topology", str(TOPOLOGY), "--config", str(POD_SCOPE), str(path))
    assert 0 == status
    assert (True, True) == ("default/full" in out, "REJECTED" in out)
    assert "  reason:  EmptyPodSharedPoolError" in out


def test_list_and_multi_document_files(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """``kind: List`` and ``---``-separated documents are read in order."""
    a, b, c = (make_pod(n, containers=[container("x", cpu="1", memory="1Gi")]) for n in ("a", "b", "c"))
    listed = tmp_path / "list.yaml"
    listed.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [a, b]}))
    multi = tmp_path / "multi.yaml"
    multi.write_text(
        yaml.safe_dump(c)
        + "---\n"
        + yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
    )
    result = plan_json(capsys, str(listed), str(multi))
    assert ["a", "b", "c"] == [p["name"] for p in result["pods"]]


def test_malformed_pod_is_named_and_others_still_planned(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A malformed pod is reported on stderr with its field; the rest is planned; exit status 1."""
    bad = make_pod("bad", containers=[container("x", cpu_request="1.5.0", cpu_limit="2", memory="1Gi")])
    good = make_pod("good", containers=[container("x", cpu="1", memory="1Gi")])
    path = tmp_path / "pods.yaml"
    path.write_text(yaml.safe_dump(bad) + "---\n" + yaml.safe_dump(good))
    status, out, err = plan(
        capsys, "--topology", str(TOPOLOGY), "--config", str(POD_SCOPE), "--output", "json", str(path)
    )
    assert 1 == status
    assert f"podpin plan: {path}: pod bad: spec.containers[0].resources.requests.cpu" in err
    document = json.loads(out)
    assert (["good"], "bad") == ([p["name"] for p in document["pods"]], document["errors"][0]["pod"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--config", "/nonexistent.yaml"], "podpin plan: /nonexistent.yaml: cannot read the configuration file"),
        (["--topology", "/nonexistent.json"], "podpin plan: /nonexistent.json: cannot read"),
    ],
)
def test_bad_config_or_topology_is_one_line(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    """Unusable configuration or topology: one line on stderr, exit status 2."""
    defaults = {"--topology": str(TOPOLOGY), "--config": str(POD_SCOPE)}
    given = [flag for flag in defaults if flag not in args]
    status, _, err = plan(
        capsys,
        *[x for flag in given for x in (flag, defaults[flag])],
        *args,
        str(EXAMPLES / "pods" / "web-burstable.yaml"),
    )
    assert (2, 1) == (status, len(err.strip().splitlines()))
    assert err.startswith(message)
