"""``podpin run --once`` as a subprocess: it writes exactly what ``podpin plan`` decides, and its exit codes.

The plan comparison is the agent's contract with ``podpin plan``: the same pods, topology
and configuration through ``podpin plan --output json`` and through ``podpin run
--once --pods-dir`` over a fixture tree, and every ``cpuset.cpus`` and ``cpu.max``
of the tree afterwards must be what the plan says (``docs/design.md``, "cgroup values"; ``agent/alloc/plan.py``)
and nothing else may have changed. The subprocess writes plain files, so its
read-back check logs mismatches (the files do not emulate the kernel); only the
written values are compared here.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent.config import ASSUMED_RESERVATION
from agent.cpuset import CPUSet
from tests.support.agentfixture import PODPIN, AgentNode, json_lines, lines, make_node
from tests.support.cgroupfs_builder import build_v1_tree
from tests.support.podfactory import container, make_pod, resources, sidecar


def _ts(n: int) -> str:
    return f"2026-01-01T00:00:{n:02d}Z"


#: A node's worth of pods, in creation order: pod-level bubbles, classic static, Burstable, BestEffort,
#: a fractional Guaranteed pod, one that cannot fit, one whose second container has not started.
PODS: list[dict[str, Any]] = [
    make_pod(
        "db",
        containers=[container("db", cpu="4", memory="1Gi"), container("proxy", cpu="100m", memory="64Mi")],
        pod_resources=resources(cpu="5", memory="2Gi"),
        states={"db": "running", "proxy": "running"},
        creation_timestamp=_ts(1),
    ),
    make_pod(
        "trader",
        containers=[container("engine", cpu="2", memory="1Gi"), container("logger", cpu="500m", memory="64Mi")],
        states={"engine": "running", "logger": "running"},
        creation_timestamp=_ts(2),
    ),
    make_pod(
        "loader",
        containers=[container("load", cpu="2", memory="1Gi")],
        init_containers=[sidecar("mesh", cpu="200m", memory="64Mi")],
        pod_resources=resources(cpu="3", memory="2Gi"),
        states={"load": "running", "mesh": "running"},
        creation_timestamp=_ts(3),
    ),
    make_pod(
        "web",
        containers=[container("web", cpu_request="250m", memory_request="64Mi")],
        states={"web": "running"},
        creation_timestamp=_ts(4),
    ),
    make_pod("batch", containers=[container("job")], states={"job": "running"}, creation_timestamp=_ts(5)),
    make_pod(
        "frac",
        containers=[container("app", cpu="1500m", memory="1Gi")],
        states={"app": "running"},
        creation_timestamp=_ts(6),
    ),
    make_pod(
        "huge",
        containers=[container("app", cpu="40", memory="1Gi")],
        states={"app": "running"},
        creation_timestamp=_ts(7),
    ),
    make_pod(
        "pending",
        containers=[container("a", cpu="2", memory="1Gi"), container("b", cpu="1", memory="1Gi")],
        states={"a": "running"},
        creation_timestamp=_ts(8),
    ),
]
_SANDBOXED = ("db", "trader")


def _node(tmp_path: Path, driver: str) -> AgentNode:
    node = make_node(tmp_path, driver=driver)
    for raw in PODS:
        node.add_pod(raw, sandbox=raw["metadata"]["name"] in _SANDBOXED)
    return node


def _plan(node: AgentNode) -> dict[str, Any]:
    """``podpin plan --output json`` for the node's pods, in creation order."""
    files = [str(node.pods_dir / f"{raw['metadata']['name']}.yaml") for raw in PODS]
    result = subprocess.run(
        [
            PODPIN,
            "plan",
            "--sysfs-root",
            str(node.sysfs),
            "--config",
            str(node.config_path),
            "--output",
            "json",
            *files,
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    assert (0, "") == (result.returncode, result.stderr)
    plan: dict[str, Any] = json.loads(result.stdout)
    return plan


def _expected(node: AgentNode, plan: dict[str, Any], before: dict[str, str]) -> dict[str, str]:
    """The tree's files as the plan says they must be after one pass (plan.py's rules, from the JSON)."""
    files = dict(before)
    root = node.tree.root

    def put(cgroup: Path, file: str, value: str) -> None:
        key = str((cgroup / file).relative_to(root))
        assert key in files, f"{key} is not a file of the tree"
        files[key] = value

    shared = CPUSet.parse(plan["node"]["shared_pool"])
    for qos in ("Burstable", "BestEffort"):
        put(node.tree.qos_dir(qos), "cpuset.cpus", str(shared))
    by_name = {raw["metadata"]["name"]: raw for raw in PODS}
    for pod in plan["pods"]:
        raw = by_name[pod["name"]]
        containers = pod["containers"]
        managed = any(c["pool"] in ("exclusive", "pod_shared") for c in containers)
        cgroup = node.pod_cgroup(raw)
        if not managed:
            if pod["qos"] == "Guaranteed":
                put(cgroup, "cpuset.cpus", str(shared))
            continue
        slices = CPUSet().union(
            *(CPUSet.parse(c["cpus"]) for c in containers if c["pool"] == "exclusive" and c["kind"] != "init")
        )
        bubble = CPUSet.parse(pod["bubble"]) if pod["bubble"] else None
        interim = ((bubble - slices) or shared) if bubble is not None else shared
        union = CPUSet().union(interim, *(CPUSet.parse(c["cpus"]) for c in containers))
        put(cgroup, "cpuset.cpus", str(union))
        if any(c["pool"] == "exclusive" for c in containers):
            put(cgroup, "cpu.max", "max 100000")
        status = raw["status"]
        statuses = {s["name"] for s in status["containerStatuses"] + status.get("initContainerStatuses", [])}
        for c in containers:
            if c["name"] in statuses:
                child = node.container_cgroup(raw, c["name"])
                put(child, "cpuset.cpus", c["cpus"])
                if c["cpu_max"] is not None:
                    put(child, "cpu.max", c["cpu_max"])
        if pod["name"] in _SANDBOXED:
            put(node.sandbox_cgroup(raw), "cpuset.cpus", str(interim))
    return files


@pytest.mark.parametrize("driver", ["systemd", "cgroupfs"])
def test_once_writes_exactly_the_plan(tmp_path: Path, driver: str) -> None:
    """Every cpuset.cpus and cpu.max after ``run --once`` is what ``podpin plan`` decided; nothing else changed."""
    node = _node(tmp_path, driver)
    plan = _plan(node)
    before = node.files()
    result = node.cli("--once")
    assert 0 == result.returncode, result.stderr
    assert _expected(node, plan, before) == node.files()


def test_plan_covers_every_kind_of_pod(tmp_path: Path) -> None:
    """The comparison above is not vacuous: the plan has bubbles, both static pools, a rejection and the shared pool."""
    plan = _plan(_node(tmp_path, "systemd"))
    summary = {
        p["name"]: (p["admitted"], p["reason"], sorted({c["pool"] for c in p["containers"]})) for p in plan["pods"]
    }
    assert {
        "db": (True, None, ["exclusive", "pod_shared"]),
        "trader": (True, None, ["exclusive", "node_shared"]),
        "loader": (True, None, ["exclusive", "pod_shared"]),
        "web": (True, None, ["node_shared"]),
        "batch": (True, None, ["node_shared"]),
        "frac": (True, None, ["node_shared"]),
        "huge": (False, "UnexpectedAdmissionError", ["node_shared"]),
        "pending": (True, None, ["exclusive"]),
    } == summary


def test_once_logs_one_line_per_decision(tmp_path: Path) -> None:
    """The run logs pod.admitted per admitted pod, pod.rejected with the kubelet reason, and agent.stopped."""
    node = _node(tmp_path, "systemd")
    result = node.cli("--once")
    logs = json_lines(result.stderr)
    admitted = sorted(e["pod"] for e in lines(logs, "pod.admitted", node="node-1"))
    rejected = [(e["pod"], e["reason"], e["pool"]) for e in lines(logs, "pod.rejected")]
    assert (
        0,
        ["batch", "db", "frac", "loader", "pending", "trader", "web"],
        [("huge", "UnexpectedAdmissionError", "node_shared")],
        1,
    ) == (result.returncode, admitted, rejected, len(lines(logs, "agent.stopped")))


def test_dry_run_writes_nothing_and_says_what_it_would(tmp_path: Path) -> None:
    """``--dry-run``: no cgroup file and no checkpoint is written; each would-be write is logged."""
    node = _node(tmp_path, "systemd")
    before = node.files()
    result = node.cli("--once", "--dry-run")
    would = {e["path"] for e in lines(json_lines(result.stderr), "cgroup.dry_run")}
    db = node.container_cgroup(PODS[0], "db")
    assert (0, before, False, True) == (
        result.returncode,
        node.files(),
        (node.state_dir / "podpin_state.json").exists(),
        str(db) in would,
    )


def test_node_name_from_the_environment_and_other_nodes_pods(tmp_path: Path) -> None:
    """NODE_NAME names the node when the config does not; pods bound elsewhere are ignored, unbound ones count."""
    node = make_node(tmp_path)
    node.write_config(nodeName=None)
    mine = make_pod(
        "mine", containers=[container("app", cpu="2", memory="1Gi")], node_name="node-7", states={"app": "running"}
    )
    unbound = make_pod(
        "unbound", containers=[container("app", cpu="2", memory="1Gi")], node_name=None, states={"app": "running"}
    )
    theirs = make_pod(
        "theirs", containers=[container("app", cpu="2", memory="1Gi")], node_name="node-8", states={"app": "running"}
    )
    for raw in (mine, unbound, theirs):
        node.add_pod(raw)
    result = node.cli("--once", env={"NODE_NAME": "node-7"})
    admitted = sorted(e["pod"] for e in lines(json_lines(result.stderr), "pod.admitted", node="node-7"))
    assert (0, ["mine", "unbound"], "") == (result.returncode, admitted, node.cpus(theirs, "app"))


def test_malformed_pod_does_not_fail_the_run(tmp_path: Path) -> None:
    """A pod that cannot be read is logged (pod.malformed naming the field), the others are pinned, exit 0."""
    node = make_node(tmp_path)
    good = make_pod("good", containers=[container("app", cpu="2", memory="1Gi")], states={"app": "running"})
    bad = make_pod("bad", containers=[container("app", cpu_request="2", cpu_limit="2.5.1", memory="1Gi")])
    node.add_pod(good)
    node.write_manifest(bad)
    result = node.cli("--once")
    malformed = [(e["pod"], e["field"]) for e in lines(json_lines(result.stderr), "pod.malformed")]
    assert (0, [("bad", "spec.containers[0].resources.limits.cpu")], "1,17") == (
        result.returncode,
        malformed,
        node.cpus(good, "app"),
    )


def _one_line(result: subprocess.CompletedProcess[str]) -> tuple[int, list[str]]:
    """Exit status and the non-JSON stderr lines (the one-line reason)."""
    return result.returncode, [line for line in result.stderr.splitlines() if not line.startswith("{")]


def test_without_config_runs_on_the_built_in_defaults(tmp_path: Path) -> None:
    """No --config: the built-in defaults are accepted (one CPU reserved, said in the log) and pin like the node's file.

    The node's configuration file differs from the defaults only in the resync period and log level, so the tree
    must end up as ``podpin plan`` with that file says.
    """
    node = _node(tmp_path, "systemd")
    expected = _expected(node, _plan(node), node.files())
    args = [a for a in node.cli_args("--once") if a not in ("--config", str(node.config_path))]
    result = subprocess.run(
        args, capture_output=True, text=True, timeout=30, check=False, env={**os.environ, "NODE_NAME": "node-1"}
    )
    logs = json_lines(result.stderr)
    assumed = [e["assumption"] for e in lines(logs, "config.assumed")]
    assert (0, [ASSUMED_RESERVATION], expected) == (result.returncode, assumed, node.files())


def test_bad_config_exits_2_naming_the_key(tmp_path: Path) -> None:
    """An unknown configuration key: exit 2 and one line naming it."""
    node = make_node(tmp_path)
    node.write_config(cpuManagerPolicyOption={"full-pcpus-only": "true"})
    status, reason = _one_line(node.cli("--once"))
    assert (2, True) == (status, len(reason) == 1 and "unknown configuration key 'cpuManagerPolicyOption'" in reason[0])


def test_no_node_name_exits_2(tmp_path: Path) -> None:
    """Neither nodeName nor NODE_NAME: exit 2 with one line saying so."""
    node = make_node(tmp_path)
    node.write_config(nodeName=None)
    reason = "podpin run: no node name: set nodeName in the configuration or the NODE_NAME environment variable"
    assert (2, [reason]) == _one_line(node.cli("--once"))


def test_cgroup_v1_exits_2(tmp_path: Path) -> None:
    """A cgroup v1 mount: exit 2, one line naming the missing cgroup.controllers."""
    node = make_node(tmp_path)
    v1 = build_v1_tree(tmp_path)
    result = node.cli("--once", "--cgroup-root", str(v1))
    assert (
        2,
        [
            (
                f"podpin run: cgroups: cgroup v1 is not supported: {v1}/cgroup.controllers not found; "
                "podpin needs the unified cgroup v2 hierarchy"
            )
        ],
    ) == _one_line(result)


def test_unreadable_topology_exits_2(tmp_path: Path) -> None:
    """A sysfs root without CPUs: exit 2 with one ``topology:`` line."""
    node = make_node(tmp_path)
    empty = tmp_path / "empty-sys"
    empty.mkdir()
    status, reason = _one_line(node.cli("--once", "--sysfs-root", str(empty)))
    assert (2, 1, True) == (status, len(reason), reason[0].startswith("podpin run: topology: "))


def test_config_that_does_not_fit_the_machine_exits_2(tmp_path: Path) -> None:
    """reservedSystemCPUs naming CPUs the machine lacks: exit 2, one line naming the setting."""
    node = make_node(tmp_path)
    node.write_config(systemReserved=None, reservedSystemCPUs="0,40")
    assert (
        2,
        [
            (
                "podpin run: configuration does not fit this machine: reservedSystemCPUs: CPUs 40 are not online "
                "CPUs of this machine (0-31)"
            )
        ],
    ) == _one_line(node.cli("--once"))


def test_bad_metrics_address_exits_2(tmp_path: Path) -> None:
    """A --metrics-bind-address that is not HOST:PORT: exit 2 with one line, not a traceback."""
    node = make_node(tmp_path)
    status, reason = _one_line(node.cli("--once", "--metrics-bind-address", "localhost"))
    assert (2, ["podpin run: metricsBindAddress: 'localhost' is not HOST:PORT"]) == (status, reason)


def test_kubelet_pinning_exits_3_and_writes_nothing(tmp_path: Path) -> None:
    """The kubelet's cpu_manager_state says static: nothing written, exit 3, one line saying why."""
    node = _node(tmp_path, "systemd")
    node.kubelet_state.parent.mkdir()
    node.kubelet_state.write_text('{"policyName":"static","defaultCpuSet":"0-31","checksum":1}')
    before = node.files()
    result = node.cli("--once")
    reason = (
        f"podpin run: {node.kubelet_state}: the kubelet runs cpuManagerPolicy static and pins CPUs itself; "
        "set cpuManagerPolicy: none (drain the node, delete the state file, restart the kubelet) for podpin "
        "to take over"
    )
    assert ((3, [reason]), before) == (_one_line(result), node.files())


def test_kubelet_policy_none_is_fine(tmp_path: Path) -> None:
    """A kubelet cpu_manager_state with policy none: podpin pins as usual."""
    node = _node(tmp_path, "systemd")
    node.kubelet_state.parent.mkdir()
    node.kubelet_state.write_text('{"policyName":"none","defaultCpuSet":"","checksum":1}')
    result = node.cli("--once")
    assert (0, "1-2,17-18") == (result.returncode, node.cpus(PODS[0], "db"))


def test_missing_pods_dir_exits_2(tmp_path: Path) -> None:
    """--pods-dir naming no directory: exit 2 with one line."""
    node = make_node(tmp_path)
    result = node.cli("--once", "--pods-dir", str(tmp_path / "nope"))
    assert (2, [f"podpin run: --pods-dir {tmp_path / 'nope'}: not a directory"]) == _one_line(result)


def test_static_pod_is_pinned_through_its_config_hash(tmp_path: Path) -> None:
    """A mirror pod's cgroup is named after the static pod's config hash, not the API uid: it is found and pinned."""
    node = make_node(tmp_path)
    static = make_pod(
        "etcd-node-1",
        containers=[container("etcd", cpu="2", memory="1Gi")],
        states={"etcd": "running"},
        namespace="kube-system",
        creation_timestamp=_ts(1),
    )
    static["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "0123456789abcdef0123456789abcdef"}
    static["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": "node-1", "uid": "n-1"}]
    node.add_pod(static)
    path = node.container_cgroup(static, "etcd")
    assert "kubepods-pod0123456789abcdef0123456789abcdef.slice" == path.parent.name
    node.run_once()
    assert ("1,17", "max 100000") == (node.read(path), node.read(path, "cpu.max"))
