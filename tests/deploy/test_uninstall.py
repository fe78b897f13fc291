"""The uninstall: the chart's pre-delete hook and deploy/uninstall/ (rendered from it), checked like the install.

The hook resets every node before podpin goes (``templates/uninstall-hook.yaml``): a DaemonSet running real
``podpin reset`` arguments (parsed by the CLI's own parser) that sees the node exactly as the agent does (the same
nodes, ServiceAccount, ConfigMap, cgroup tree and state directory, where the node's lock and the checkpoint are),
and a Job running ``podpin uninstall`` with a Role limited to the two DaemonSets. Both are made from the release's
values: another release name, namespace, driver, node selection or image gives hooks that match it. The plain file
validates strictly, passes checkov with only reasoned skips, and lives in a subdirectory, so
``kubectl apply -f deploy/`` never runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from agent.cli import build_parser
from tests.support.k8s_tools import CHART, helm_template, rendered_objects, run_helm
from tests.support.paths import REPO

UNINSTALL = REPO / "deploy" / "uninstall" / "uninstall-job.yaml"
DAEMONSET = REPO / "deploy" / "daemonset.yaml"
KUBERNETES_VERSION = "1.36"


def _documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _one(path: Path, kind: str, name: str) -> dict[str, Any]:
    found = [d for d in _documents(path) if d["kind"] == kind and d["metadata"]["name"] == name]
    assert 1 == len(found), f"{kind}/{name} in {path.name}"
    return found[0]


def _reset_pod() -> dict[str, Any]:
    spec: dict[str, Any] = _one(UNINSTALL, "DaemonSet", "podpin-uninstall")["spec"]["template"]["spec"]
    return spec


def _agent_pod() -> dict[str, Any]:
    spec: dict[str, Any] = _one(DAEMONSET, "DaemonSet", "podpin")["spec"]["template"]["spec"]
    return spec


def _host_paths(pod: dict[str, Any], container: dict[str, Any]) -> dict[str, tuple[str, bool]]:
    """mountPath -> (host path, read-only) of a container's hostPath mounts."""
    volumes = {v["name"]: v for v in pod["volumes"]}
    return {
        m["mountPath"]: (volumes[m["name"]]["hostPath"]["path"], bool(m.get("readOnly")))
        for m in container["volumeMounts"]
        if "hostPath" in volumes[m["name"]]
    }


def test_objects_and_place() -> None:
    """The reset DaemonSet, the Job, its RBAC and a deny-ingress NetworkPolicy in podpin's namespace, in a
    subdirectory of deploy/, with no Helm hook annotation left."""
    kinds = [(d["kind"], d["metadata"]["name"], d["metadata"]["namespace"]) for d in _documents(UNINSTALL)]
    top_level = [p.name for p in (REPO / "deploy").iterdir() if p.is_file() and "podpin-uninstall" in p.read_text()]
    expected = [
        (kind, "podpin-uninstall", "podpin-system")
        for kind in ("NetworkPolicy", "ServiceAccount", "Role", "RoleBinding", "DaemonSet", "Job")
    ]
    assert (expected, [], False) == (kinds, top_level, "helm.sh/hook" in UNINSTALL.read_text())


def test_the_job_runs_podpin_uninstall_with_a_role_for_two_daemonsets() -> None:
    """The Job runs a real ``podpin uninstall`` naming the agents' and the resets' DaemonSets; its Role may get and
    delete the agents' DaemonSet, get the resets', and list pods: nothing else."""
    job = _one(UNINSTALL, "Job", "podpin-uninstall")["spec"]["template"]["spec"]
    (container,) = job["containers"]
    args = build_parser().parse_args(container["args"])
    role = _one(UNINSTALL, "Role", "podpin-uninstall")["rules"]
    assert (("uninstall", "podpin-system", "podpin", "podpin-uninstall"), "podpin-uninstall", True) == (
        (args.command, args.namespace, args.agents, args.resets),
        job["serviceAccountName"],
        container["securityContext"]["runAsNonRoot"],
    )
    assert [
        {"apiGroups": ["apps"], "resources": ["daemonsets"], "resourceNames": ["podpin"], "verbs": ["get", "delete"]},
        {"apiGroups": ["apps"], "resources": ["daemonsets"], "resourceNames": ["podpin-uninstall"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
    ] == role


def test_hooks_are_made_from_the_releases_values(tmp_path: Path) -> None:
    """Released as pp in infra, with its own node label, cgroupfs driver and image, the hooks follow every one
    (finding 3: the old manifest hard-coded them all)."""
    values = {
        "nodeSelector": {"pool": "latency"},
        "image": {"repository": "registry.local/podpin", "tag": "9.9.9"},
        "config": {"cgroupDriver": "cgroupfs"},
    }
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    run = run_helm("template", "pp", str(CHART), "--namespace", "infra", "--values", str(path))
    assert 0 == run.returncode, run.stderr
    objects = {(o["kind"], o["metadata"]["name"]): o for o in rendered_objects(run.stdout)}
    resets = objects[("DaemonSet", "pp-uninstall")]
    pod = resets["spec"]["template"]["spec"]
    job = objects[("Job", "pp-uninstall")]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert (
        "infra",
        "pp",
        "pp-config",
        "/sys/fs/cgroup/kubepods",
        {"kubernetes.io/os": "linux", "podpin.io/enabled": "true", "pool": "latency"},
        {"registry.local/podpin:9.9.9"},
        ["uninstall", "--namespace", "infra", "--agents", "pp", "--resets", "pp-uninstall"],
    ) == (
        resets["metadata"]["namespace"],
        pod["serviceAccountName"],
        volumes["config"]["configMap"]["name"],
        volumes["cgroup-pods"]["hostPath"]["path"],
        pod["nodeSelector"],
        {c["image"] for c in [*pod["initContainers"], *pod["containers"], *job["containers"]]},
        job["containers"][0]["args"][:7],
    )


def test_hook_order_and_cleanup(tmp_path: Path) -> None:
    """pre-delete hooks, RBAC first, then the resets, then the Job Helm waits for; all deleted once they succeeded
    (the holds end with them) and recreated on a second helm uninstall."""
    objects = rendered_objects(helm_template((), {}, tmp_dir=tmp_path))
    hooks = {
        (o["kind"], o["metadata"]["annotations"]["helm.sh/hook-weight"]): (
            o["metadata"]["annotations"]["helm.sh/hook"],
            o["metadata"]["annotations"]["helm.sh/hook-delete-policy"],
        )
        for o in objects
        if "helm.sh/hook" in (o["metadata"].get("annotations") or {})
    }
    policy = ("pre-delete", "before-hook-creation,hook-succeeded")
    assert {
        ("ServiceAccount", "-10"): policy,
        ("Role", "-10"): policy,
        ("RoleBinding", "-10"): policy,
        ("DaemonSet", "-5"): policy,
        ("NetworkPolicy", "-5"): policy,
        ("Job", "0"): policy,
    } == hooks


@pytest.mark.parametrize("doc", _documents(UNINSTALL), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_objects_validate_strictly(doc: dict[str, Any]) -> None:
    """Every object passes strict schema validation (no unknown fields) against Kubernetes 1.36."""
    assert KUBERNETES_VERSION == kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_init_container_resets_and_the_container_holds() -> None:
    """The init container runs a real ``podpin reset`` that waits for the agent and forgets the state; the
    container runs it again with ``--hold`` (both parsed by podpin's own command line)."""
    pod = _reset_pod()
    (init,) = pod["initContainers"]
    (hold,) = pod["containers"]
    parser = build_parser()
    reset, held = parser.parse_args(init["args"]), parser.parse_args(hold["args"])
    assert (
        ("reset", True, 600.0, False),
        ("reset", True, 600.0, True),
        str(reset.config),
    ) == (
        (reset.command, reset.forget_state, reset.wait_for_agent, reset.hold),
        (held.command, held.forget_state, held.wait_for_agent, held.hold),
        "/etc/podpin/config.yaml",
    )


def test_sees_the_node_as_the_agent_does() -> None:
    """Same nodes, tolerations, ServiceAccount, ConfigMap, node name, cgroup tree and state directory as the agent."""
    pod, agent = _reset_pod(), _agent_pod()
    (agent_container,) = agent["containers"]
    agent_mounts = _host_paths(agent, agent_container)
    shared = ("/sys", "/sys/fs/cgroup", "/var/lib/podpin")
    expected = {path: agent_mounts[path] for path in shared}
    config_maps = {v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v}
    for container in [*pod["initContainers"], *pod["containers"]]:
        assert (expected, agent_container["env"], agent_container["securityContext"]) == (
            _host_paths(pod, container),
            container["env"],
            container["securityContext"],
        )
    assert (agent["nodeSelector"], agent["tolerations"], agent["serviceAccountName"], {"podpin-config"}) == (
        pod["nodeSelector"],
        pod["tolerations"],
        pod["serviceAccountName"],
        config_maps,
    )


def test_image_is_the_agents() -> None:
    """The reset runs the agent's release image (the tag the install test keeps equal to the package version)."""
    (agent_container,) = _agent_pod()["containers"]
    pod = _reset_pod()
    assert {agent_container["image"]} == {c["image"] for c in [*pod["initContainers"], *pod["containers"]]}


def test_network_policy_selects_the_reset_pods_and_admits_nothing() -> None:
    """The NetworkPolicy selects the reset pods and the Job's and lists no ingress rule: nothing may connect."""
    policy = _one(UNINSTALL, "NetworkPolicy", "podpin-uninstall")["spec"]
    selected = [
        policy["podSelector"]["matchLabels"].items() <= labels.items()
        and labels["app.kubernetes.io/component"] in policy["podSelector"]["matchExpressions"][0]["values"]
        for labels in (
            _one(UNINSTALL, "DaemonSet", "podpin-uninstall")["spec"]["template"]["metadata"]["labels"],
            _one(UNINSTALL, "Job", "podpin-uninstall")["spec"]["template"]["metadata"]["labels"],
        )
    ]
    assert ([True, True], ["Ingress"], None) == (selected, policy["policyTypes"], policy.get("ingress"))


def test_checkov() -> None:
    """checkov finds no failed check; each skip is one of the known ones and carries its reason."""
    checkov = Path(os.environ.get("PODPIN_CHECKOV", Path(sys.prefix) / "tools" / "checkov" / "bin" / "checkov"))
    assert checkov.is_file(), (
        f"{checkov} missing: python -m venv .venv/tools/checkov && "
        ".venv/tools/checkov/bin/pip install checkov (or set PODPIN_CHECKOV)"
    )
    run = subprocess.run(
        [str(checkov), "--framework", "kubernetes", "--skip-download", "--output", "json", "--file", str(UNINSTALL)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    report = json.loads(run.stdout)
    failed = [(c["check_id"], c["resource"]) for c in report["results"]["failed_checks"]]
    skipped = {
        c["check_id"]: c["check_result"].get("suppress_comment", "") for c in report["results"]["skipped_checks"]
    }
    expected_skips = {"CKV_K8S_8", "CKV_K8S_9", "CKV_K8S_15", "CKV_K8S_23", "CKV_K8S_38", "CKV_K8S_40", "CKV_K8S_43"}
    assert ([], 0, expected_skips, []) == (
        failed,
        report["summary"]["parsing_errors"],
        set(skipped),
        [check for check, reason in skipped.items() if len(reason) < 40],
    )
