"""``podpin plan``: the example pods on the bundled topology, output formats, and input errors."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main
from agent.config import ASSUMED_RESERVATION
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
    """After pod-level resources: 4 exclusive CPUs for the database, a 2-CPU pod pool for the sidecars, and why."""
    result = plan_json(capsys, str(EXAMPLES / "pods" / "trading-engine-after.yaml"))
    assert {"cpus": "0-31", "reserved": "0", "shared_pool": "0,4-16,20-31"} == result["node"]
    pod = result["pods"][0]
    assert (True, [0], "1-3,17-19") == (pod["admitted"], pod["numa_affinity"], pod["bubble"])
    shared = "cpu request {} ≠ limit {}: not eligible for exclusive CPUs → pod shared pool"
    assert [
        {
            "name": "database",
            "kind": "app",
            "pool": "exclusive",
            "cpus": "1-2,17-18",
            "mems": None,
            "cpu_max": "max 100000",
            "reason": "exclusive: 4 whole CPUs, cpu and memory request == limit → a slice of the pod's CPUs",
            "reason_kind": "exclusive",
            "eligibility": "whole_cpus",
            "devices": [],
            "device_alignment": None,
        },
        {
            "name": "envoy",
            "kind": "app",
            "pool": "pod_shared",
            "cpus": "3,19",
            "mems": None,
            "cpu_max": None,
            "reason": shared.format("100m", "1500m"),
            "reason_kind": "not_eligible",
            "eligibility": "cpu_request_not_limit",
            "devices": [],
            "device_alignment": None,
        },
        {
            "name": "log-collector",
            "kind": "app",
            "pool": "pod_shared",
            "cpus": "3,19",
            "mems": None,
            "cpu_max": None,
            "reason": shared.format("50m", "500m"),
            "reason_kind": "not_eligible",
            "eligibility": "cpu_request_not_limit",
            "devices": [],
            "device_alignment": None,
        },
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


def plan_text(capsys: pytest.CaptureFixture[str], example: str) -> tuple[int, str, str]:
    """``podpin plan`` of one example pod on the bundled topology, pod scope, as text."""
    return plan(capsys, "--topology", str(TOPOLOGY), "--config", str(POD_SCOPE), str(EXAMPLES / "pods" / example))


def test_text_output_has_tables_and_cpu_map(capsys: pytest.CaptureFixture[str]) -> None:
    """Text: a table per pod and a CPU map with owners, reserved and shared CPUs."""
    status, out, _ = plan_text(capsys, "trading-engine-after.yaml")
    assert 0 == status
    assert "CONTAINER      KIND  POOL        CPUS       NUMA  CPU.MAX" in out
    assert "database       app   exclusive   1-2,17-18  0     max 100000" in out
    assert "    core 0      0 R     16 ." in out
    assert "    core 1      1 E1    17 E1" in out
    assert "  P1  2 CPUs  trading/trading-engine pod shared pool (envoy, log-collector)" in out


def test_cpu_map_draws_an_init_containers_slice_with_its_later_owner(capsys: pytest.CaptureFixture[str]) -> None:
    """The init container's CPU, reused by the pod shared pool once it finished, shows both owners, as the legend."""
    status, out, _ = plan_text(capsys, "postgres-with-sidecars.yaml")
    legend = out.split("legend\n")[1].splitlines()
    assert (0, True) == (status, "    core 0      0 R        16 P1/E1" in out.splitlines())
    assert (
        "  E1  1 CPU   databases/postgres-primary/schema-migrate (init container): its CPUs go to P1 once it finished"
    ) == legend[0]


@pytest.mark.parametrize(
    ("config", "header"),
    [
        ({"reservedSystemCPUs": "0"}, "reserved CPU 0, node shared pool 0-31 (32 CPUs)"),
        ({"reservedSystemCPUs": "0,16"}, "reserved CPUs 0,16, node shared pool 0-31 (32 CPUs)"),
        ({"cpuManagerPolicy": "none"}, "reserved none, node shared pool 0-31 (32 CPUs)"),
    ],
)
def test_the_header_names_the_reserved_cpus_unmistakably(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, config: dict[str, str], header: str
) -> None:
    """The header's reserved CPUs read "CPU 0", "CPUs 0,16" or "none": never a bare "0" (CPU 0, or no CPU?)."""
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    status, out, _ = plan(
        capsys, "--topology", str(TOPOLOGY), "--config", str(path), str(EXAMPLES / "pods" / "web-burstable.yaml")
    )
    assert (0, f"node: 32 CPUs (0-31), {header}") == (status, out.splitlines()[0])


def test_without_config_plans_with_a_default_reservation(capsys: pytest.CaptureFixture[str]) -> None:
    """No --config: the built-in defaults, which reserve one CPU, said on stderr."""
    status, out, err = plan(capsys, "--topology", str(TOPOLOGY), str(EXAMPLES / "pods" / "trading-engine-after.yaml"))
    assert (0, True) == (status, "admitted" in out)
    assert f"podpin plan: assumed {ASSUMED_RESERVATION}\n" == err


def test_rejection_is_reported(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A pod that cannot be placed is shown with the kubelet's reason and message and its whole request; exit 0."""
    pod = make_pod(
        "full",
        containers=[container("a", cpu="3", memory="1Gi"), container("b", cpu="2", memory="1Gi"), container("c")],
        pod_resources=resources(cpu="5", memory="5Gi"),
    )
    path = tmp_path / "full.yaml"
    path.write_text(yaml.safe_dump(pod))
    status, out, _ = plan(capsys, "--topology", str(TOPOLOGY), "--config", str(POD_SCOPE), str(path))
    document = plan_json(capsys, str(path))["pods"][0]
    request = (
        "pod requests cpu 5 memory 5Gi: 5 CPUs of its own; containers: a cpu 3 memory 1Gi (3 exclusive), "
        "b cpu 2 memory 1Gi (2 exclusive), c no requests; free for exclusive use: NUMA 0 15 CPUs, "
        "NUMA 1 16 CPUs"
    )
    assert (0, True, True, True) == (
        status,
        "default/full" in out and "REJECTED" in out,
        "  reason:  EmptyPodSharedPoolError" in out,
        f"  request: {request}" in out,
    )
    assert (request, "5", [(0, 15, None), (1, 16, None)]) == (
        document["rejection"]["text"],
        document["rejection"]["pod_cpu"],
        [(f["numa"], f["cpus"], f["memory"]) for f in document["rejection"]["free"]],
    )


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


def test_dash_reads_the_pods_from_standard_input(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``podpin plan -`` reads pods from standard input (as ``kubectl get pod -o yaml | podpin plan -``)."""
    piped = make_pod("piped", containers=[container("x", cpu="1", memory="1Gi")])
    given = make_pod("given", containers=[container("x", cpu="1", memory="1Gi")])
    path = tmp_path / "given.yaml"
    path.write_text(yaml.safe_dump(given))
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(yaml.safe_dump(piped).encode())))
    result = plan_json(capsys, str(path), "-")
    assert ["given", "piped"] == [p["name"] for p in result["pods"]]


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


def _write(tmp_path: Path, name: str, *docs: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs))
    return path


def test_fail_on_reject_exits_3(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """``--fail-on-reject``: a rejected pod makes the exit status 3; without rejections it stays 0."""
    fits = _write(tmp_path, "fits.yaml", make_pod("fits", containers=[container("a", cpu="2", memory="1Gi")]))
    huge = _write(tmp_path, "huge.yaml", make_pod("huge", containers=[container("a", cpu="40", memory="1Gi")]))
    common = ["--topology", str(TOPOLOGY), "--config", str(POD_SCOPE), "--fail-on-reject"]
    statuses = [plan(capsys, *common, str(fits))[0], plan(capsys, *common, str(fits), str(huge))[0]]
    without_flag = plan(capsys, "--topology", str(TOPOLOGY), "--config", str(POD_SCOPE), str(huge))[0]
    assert [0, 3, 0] == [*statuses, without_flag]


def test_unreadable_input_wins_over_fail_on_reject(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """An unreadable file and a rejection together exit 1: the answer is incomplete."""
    huge = _write(tmp_path, "huge.yaml", make_pod("huge", containers=[container("a", cpu="40", memory="1Gi")]))
    status, _, _ = plan(
        capsys, "--topology", str(TOPOLOGY), "--fail-on-reject", str(huge), str(tmp_path / "missing.yaml")
    )
    assert 1 == status


def test_pods_are_admitted_in_creation_order(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Timestamps decide the admission order; equal timestamps keep the file order; pods without one come first."""
    pods = [
        make_pod("late", containers=[container("a", cpu="1", memory="1Gi")], creation_timestamp="2026-01-01T00:00:09Z"),
        make_pod(
            "tie-1", containers=[container("a", cpu="1", memory="1Gi")], creation_timestamp="2026-01-01T00:00:02Z"
        ),
        make_pod(
            "early", containers=[container("a", cpu="1", memory="1Gi")], creation_timestamp="2026-01-01T00:00:01Z"
        ),
        make_pod(
            "tie-2", containers=[container("a", cpu="1", memory="1Gi")], creation_timestamp="2026-01-01T00:00:02Z"
        ),
        make_pod("none", containers=[container("a", cpu="1", memory="1Gi")]),
    ]
    result = plan_json(capsys, str(_write(tmp_path, "pods.yaml", *pods)))
    alone = plan_json(capsys, str(_write(tmp_path, "none.yaml", pods[4])))
    # The plan lists pods in admission order, and the first admitted pod gets the CPUs a pod alone would get.
    assert (["none", "early", "tie-1", "tie-2", "late"], alone["pods"][0]["containers"][0]["cpus"]) == (
        [p["name"] for p in result["pods"]],
        result["pods"][0]["containers"][0]["cpus"],
    )


def test_workload_templates_are_planned(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A Deployment's template is one pod, or up to ``--replicas N``; a StatefulSet's pods are numbered."""
    template = {"spec": {"containers": [container("app", cpu="2", memory="1Gi")]}}
    deployment = {"kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 3, "template": template}}
    stateful = {"kind": "StatefulSet", "metadata": {"name": "db"}, "spec": {"replicas": 2, "template": template}}
    path = _write(tmp_path, "workloads.yaml", deployment, stateful)
    one = plan_json(capsys, str(path))
    many = plan_json(capsys, "--replicas", "2", str(path))
    assert (["web-0", "db-0"], ["web-0", "web-1", "db-0", "db-1"], [True] * 4) == (
        [p["name"] for p in one["pods"]],
        [p["name"] for p in many["pods"]],
        [p["admitted"] for p in many["pods"]],
    )


def test_replicas_must_be_a_positive_number(capsys: pytest.CaptureFixture[str]) -> None:
    """``--replicas 0`` is refused by the parser with status 2."""
    with pytest.raises(SystemExit) as raised:
        main(["plan", "--replicas", "0", str(EXAMPLES / "pods" / "web-burstable.yaml")])
    assert (2, True) == (raised.value.code, "'0' must be at least 1" in capsys.readouterr().err)


def test_explain_walks_through_one_pod(capsys: pytest.CaptureFixture[str]) -> None:
    """``--explain namespace/name``: instead of the plan, that pod's hints, merge, chosen nodes and CPUs taken."""
    after = EXAMPLES / "pods" / "trading-engine-after.yaml"
    status, out, _ = plan(
        capsys,
        "--topology",
        str(TOPOLOGY),
        "--config",
        str(POD_SCOPE),
        "--explain",
        "trading/trading-engine",
        str(after),
    )
    lines = out.splitlines()
    assert (0, True, "hints for the pod:", "chosen NUMA nodes: 0", False) == (
        status,
        lines[0].startswith("trading/trading-engine  (uid "),
        lines[4],
        lines[9],
        "CPU map" in out,
    )


@pytest.mark.parametrize("how", ["name", "file"])
def test_explain_by_name_or_by_file(capsys: pytest.CaptureFixture[str], tmp_path: Path, how: str) -> None:
    """A name only one pod has, or a file holding one pod, names the pod to explain; other pods are still admitted."""
    first = _write(tmp_path, "first.yaml", make_pod("first", containers=[container("a", cpu="4", memory="1Gi")]))
    second = _write(tmp_path, "second.yaml", make_pod("second", containers=[container("a", cpu="4", memory="1Gi")]))
    target = "second" if how == "name" else str(second)
    status, out, _ = plan(capsys, "--topology", str(TOPOLOGY), "--explain", target, str(first), str(second))
    # "first" was admitted before, so the explained pod sees its 4 CPUs gone from NUMA 0.
    assert (0, "default/second", "free for exclusive use: NUMA 0 11 CPUs, NUMA 1 16 CPUs") == (
        status,
        out.split()[0],
        out.splitlines()[1].split("; ")[-1],
    )


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("nobody", "--explain nobody: no pod match; name one as namespace/name (the pods are: default/a, default/b)"),
        ("two.yaml", "2 pods match; name one as namespace/name (the file {dir}/two.yaml holds: default/a, default/b)"),
    ],
)
def test_explain_names_exactly_one_pod(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, target: str, message: str
) -> None:
    """An --explain that matches no pod, or a file with several: exit 2, one line listing the candidates."""
    two = _write(
        tmp_path,
        "two.yaml",
        make_pod("a", containers=[container("x", cpu="1", memory="1Gi")]),
        make_pod("b", containers=[container("x", cpu="1", memory="1Gi")]),
    )
    wanted = str(two) if target == "two.yaml" else target
    status, out, err = plan(capsys, "--topology", str(TOPOLOGY), "--explain", wanted, str(two))
    expected = message.format(dir=tmp_path)
    assert (2, "", True) == (status, out, err.rstrip().endswith(expected))


def test_explain_json(capsys: pytest.CaptureFixture[str]) -> None:
    """``--explain`` with ``--output json``: the pod's plan entry and the walk-through."""
    after = EXAMPLES / "pods" / "trading-engine-after.yaml"
    document = plan_json(capsys, "--explain", "trading/trading-engine", str(after))
    assert (["explain", "pod"], "trading-engine", "best-effort", [0], True) == (
        sorted(document),
        document["pod"]["name"],
        document["explain"]["policy"],
        document["explain"]["numa_affinity"],
        document["explain"]["steps"][0]["admitted"],
    )
