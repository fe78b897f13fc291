"""deploy/: the plain manifests generated from the Helm chart, checked against the agent and the clusters they target.

``deploy/daemonset.yaml``, ``servicemonitor.yaml``, ``prometheusrule.yaml``, ``grafana-dashboard.yaml``,
``rbac-nrt.yaml`` and ``crds/noderesourcetopologies.yaml`` are ``helm template`` output of ``deploy/helm/podpin``
(``scripts/render_manifests.py``); a test renders the chart again and asserts the files equal it, so every check here is
a check of the chart's default install too (and of its NodeResourceTopology objects). The agent's side of the contract
(config keys, ``podpin run`` flags) is read from the agent's own code. Kubernetes versions: pod-level resources
(``.spec.resources``) are beta and on by default from 1.34, so 1.34 is the minimum supported version; every minor from
it that kubernetes-validate ships is validated strictly (1.34 to 1.37 with kubernetes-validate 1.37).
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import subprocess
import time
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from agent import __version__
from agent.cli import build_parser
from agent.config import CONFIG_KEYS, config_from_mapping
from agent.config_layers import LAYER_KEYS, flatten_layers, group_label_of
from agent.quantity import cpu_millis, memory_bytes
from tests.support.discovery_server import discovery_server, kubeconfig_for
from tests.support.k8s_tools import CHART, checkov, helm_template, kubectl, supported_versions
from tests.support.paths import REPO
from tests.support.pod_security import baseline_violations, restricted_violations

DEPLOY = REPO / "deploy"
DAEMONSET = DEPLOY / "daemonset.yaml"
SERVICEMONITOR = DEPLOY / "servicemonitor.yaml"
PROMETHEUSRULE = DEPLOY / "prometheusrule.yaml"
DASHBOARD_CONFIGMAP = DEPLOY / "grafana-dashboard.yaml"
DASHBOARD = CHART / "dashboards" / "podpin.json"
RBAC_NRT = DEPLOY / "rbac-nrt.yaml"
CRD_NRT = DEPLOY / "crds" / "noderesourcetopologies.yaml"
UNINSTALL = DEPLOY / "uninstall" / "uninstall-job.yaml"
#: What `kubectl apply -f deploy/` applies (not recursive: the CRD in deploy/crds/ is applied on its own).
TOP_LEVEL = (DAEMONSET, SERVICEMONITOR, PROMETHEUSRULE, DASHBOARD_CONFIGMAP, RBAC_NRT)
MANIFESTS = (*TOP_LEVEL, CRD_NRT)
MANIFESTS_VALUES = CHART / "ci" / "manifests-values.yaml"
NRT_VALUES = CHART / "ci" / "manifests-nrt-values.yaml"
VALUES = CHART / "values.yaml"
REQUIRED_KUBERNETES = ("1.34", "1.35", "1.36")


#: Every key the agent reads, with its default as the file would spell it (the agent's own table).
CONFIG_DEFAULTS: dict[str, object] = {key.key: key.default for key in CONFIG_KEYS}

# Metric name -> its labels, as agent/metrics.py exposes them (docs/design.md, "Observability"); histograms are
# exposed as NAME_bucket/_sum/_count.
METRICS: dict[str, frozenset[str]] = {
    "podpin_pinning_requests_total": frozenset(),
    "podpin_pinning_errors_total": frozenset(),
    "podpin_shared_pool_size_millicores": frozenset(),
    "podpin_exclusive_cpu_allocation_count": frozenset(),
    "podpin_allocation_per_numa": frozenset({"numa_node"}),
    "podpin_containers": frozenset({"assignment_type"}),
    "podpin_pod_shared_pool_cpus": frozenset({"namespace", "pod"}),
    "podpin_admission_duration_seconds": frozenset(),
    "podpin_admission_requests_total": frozenset(),
    "podpin_admission_errors_total": frozenset({"reason"}),
    "podpin_cgroup_writes_total": frozenset({"file", "result"}),
    "podpin_drift_repairs_total": frozenset(),
    "podpin_pin_latency_seconds": frozenset(),
    "podpin_reconcile_duration_seconds": frozenset(),
    "podpin_pool_cpu_usage_seconds_total": frozenset({"pool", "namespace", "pod"}),
    "podpin_events_total": frozenset({"type", "result"}),
    "podpin_ready": frozenset(),
    "podpin_kubelet_pinning": frozenset(),
    "podpin_cgroup_write_errors_total": frozenset({"errno"}),
    "podpin_container_aligned_compute_resources_total": frozenset({"scope", "boundary"}),
    "podpin_container_aligned_compute_resources_failure_total": frozenset({"scope", "boundary"}),
    "podpin_build_info": frozenset({"version", "python"}),
    "podpin_checkpoint_stale": frozenset(),
    "podpin_checkpoint_write_errors_total": frozenset({"errno"}),
    "podpin_affinity_violations": frozenset({"pool"}),
    "podpin_affinity_audits_total": frozenset(),
    "podpin_exclusive_cpu_interference_seconds_total": frozenset({"cpu", "mode"}),
    "podpin_exclusive_cpu_owner": frozenset({"cpu", "namespace", "pod", "container", "pool"}),
    "podpin_pods": frozenset({"state"}),
    "podpin_numa_shared_cpus": frozenset({"numa_node"}),
    "podpin_node_cpus": frozenset({"pool", "numa_node"}),
    "podpin_reserved_cpus": frozenset({"numa_node"}),
    "podpin_memory_pinning_requests_total": frozenset(),
    "podpin_memory_pinning_errors_total": frozenset(),
    "podpin_nri_connected": frozenset(),
    "podpin_nri_available": frozenset(),
    "podpin_cgroup_unwatched_containers": frozenset(),
    "podpin_container_pins_total": frozenset({"source"}),
}
HISTOGRAMS = frozenset(
    {"podpin_admission_duration_seconds", "podpin_pin_latency_seconds", "podpin_reconcile_duration_seconds"}
)
# Labels every scraped series carries: the target's, and `node` from the ServiceMonitor's relabeling.
TARGET_LABELS = frozenset({"node", "instance", "job"})


def load_agent_config(text: str) -> dict[str, Any]:
    """Parse agent config text and validate it with the agent's own loader (``agent.config``).

    Raises:
        ValueError: naming the offending key and value (``ConfigError`` is a ``ValueError``).
    """
    config = yaml.safe_load(text)
    if not isinstance(config, dict):
        raise ValueError(f"config: expected a mapping, got {type(config).__name__}")
    # The default section, and each group's and node's as the node it is for would see it.
    label = group_label_of(config)
    views: list[tuple[str, dict[str, str]]] = [("node-1", {})]
    views += [("node-1", {label: group}) for group in config.get("groups") or {}]
    views += [(node, {}) for node in config.get("nodes") or {}]
    for node, labels in views:
        config_from_mapping(flatten_layers(config, node, labels).mapping, env={"NODE_NAME": node})
    return config


def podpin_run_flags() -> dict[str, bool]:
    """The ``podpin run`` flags from the agent's own parser, flag -> takes a value."""
    # argparse has no public way to list a parser's options or sub-commands: its private fields are the only source.
    actions = build_parser()._actions  # noqa: SLF001 (argparse lists options nowhere public)
    subparsers = next(a for a in actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001 (as above)
    run = subparsers.choices["run"]
    return {
        option: action.nargs != 0
        for action in run._actions  # noqa: SLF001 (as above)
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }


def parse_run_args(args: list[str]) -> dict[str, str | bool]:
    """Check container args against ``podpin_run_flags`` and return flag -> value (True for switches)."""
    if not args or args[0] != "run":
        raise ValueError(f"args {args!r}: the first argument must be the command 'run'")
    flags = podpin_run_flags()
    parsed: dict[str, str | bool] = {}
    rest = iter(args[1:])
    for arg in rest:
        name, has_inline, inline = arg.partition("=")
        if name not in flags:
            raise ValueError(f"args: unknown flag {name!r} of 'podpin run'")
        if not flags[name]:
            parsed[name] = True
            continue
        value = inline if has_inline else next(rest, None)
        if value is None or value.startswith("--"):
            raise ValueError(f"args: flag {name!r} needs a value")
        parsed[name] = value
    return parsed


_PROMQL_TOKEN = re.compile(
    r"""
    (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<range>\[[^\]]*\])
  | (?P<number>\d+(?:\.\d+)?)
  | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<punct>=~|!~|!=|==|>=|<=|[-+*/%^<>=(){},])
  | (?P<space>\s+)
""",
    re.VERBOSE,
)
_GROUPING = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
_KEYWORDS = _GROUPING | {"and", "or", "unless", "bool", "offset"}
_OPENERS = {")": ("(", "grouping"), "}": ("{",)}


def promql_names(expr: str) -> tuple[set[str], set[str]]:
    """The metric names and label names a PromQL expression uses.

    A small lexer, enough for dashboard queries: strings and range selectors are skipped, an identifier
    followed by ``(``, ``by`` or ``without`` is a function or aggregation, identifiers inside ``{}`` or a
    grouping list are labels.

    Raises:
        ValueError: on a character PromQL does not have or unbalanced brackets, naming the expression.
    """
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(expr):
        match = _PROMQL_TOKEN.match(expr, pos)
        if match is None:
            raise ValueError(f"PromQL {expr!r}: unexpected {expr[pos]!r} at {pos}")
        pos = match.end()
        if match.lastgroup != "space":
            tokens.append((match.lastgroup or "", match.group()))
    metrics: set[str] = set()
    labels: set[str] = set()
    stack: list[str] = []
    for index, (kind, text) in enumerate(tokens):
        following = tokens[index + 1][1] if index + 1 < len(tokens) else ""
        if kind == "punct" and text in ("(", "{"):
            stack.append("grouping" if text == "(" and index and tokens[index - 1][1] in _GROUPING else text)
        elif kind == "punct" and text in (")", "}"):
            if not stack or stack[-1] not in _OPENERS[text]:
                raise ValueError(f"PromQL {expr!r}: unbalanced {text!r}")
            stack.pop()
        elif kind == "ident" and stack and stack[-1] in ("{", "grouping"):
            labels.add(text)
        elif kind == "ident" and following not in ("(", "by", "without") and text not in _KEYWORDS:
            metrics.add(text)
    if stack:
        raise ValueError(f"PromQL {expr!r}: unclosed {stack[-1]!r}")
    return metrics, labels


@cache
def _documents(path: Path) -> list[dict[str, Any]]:
    """The non-empty YAML documents of a manifest file (parsed once; callers copy before changing one)."""
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _object(kind: str) -> dict[str, Any]:
    """The one object of ``kind`` in deploy/daemonset.yaml."""
    found = [doc for doc in _documents(DAEMONSET) if doc["kind"] == kind]
    assert 1 == len(found), f"{kind} objects in {DAEMONSET.name}"
    return found[0]


def _config_text() -> str:
    return str(_object("ConfigMap")["data"]["config.yaml"])


def _container() -> dict[str, Any]:
    containers = _object("DaemonSet")["spec"]["template"]["spec"]["containers"]
    assert 1 == len(containers)
    return dict(containers[0])


def _mounts() -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """mountPath -> (volumeMount, volume) of the agent container."""
    volumes = {v["name"]: v for v in _object("DaemonSet")["spec"]["template"]["spec"]["volumes"]}
    return {m["mountPath"]: (m, volumes[m["name"]]) for m in _container()["volumeMounts"]}


def _effective_config(key: str) -> str:
    """The value the agent uses for ``key``: the ConfigMap's, else the agent's default."""
    return str(load_agent_config(_config_text()).get(key, CONFIG_DEFAULTS[key]))


def _uncomment_examples(text: str) -> str:
    """The config text with its commented-out settings (``#key:``, ``#  nested``) switched on, prose dropped."""
    lines = []
    for line in text.splitlines():
        if (line.startswith("#") and not line.startswith("# ")) or line.startswith("#  "):
            lines.append(line[1:])
        elif not line.startswith("#"):
            lines.append(line)
    return "\n".join(lines)


def _values_config_block() -> str:
    """The ``config:`` block of the chart's values.yaml, comments included, dedented to the agent file's level."""
    lines = VALUES.read_text().splitlines()
    start = lines.index("config:") + 1
    block = []
    for line in lines[start:]:
        if line and not line.startswith("  "):
            break
        block.append(line[2:])
    return "\n".join(block)


def _kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cache_dir = kubeconfig.parent / "kubectl-cache"
    command = [str(kubectl()), "--kubeconfig", str(kubeconfig), "--cache-dir", str(cache_dir), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


class TestGenerated:
    def test_manifests_equal_helm_template(self) -> None:
        """deploy/*.yaml hold, byte for byte and in helm's order, `helm template` of the chart: the ServiceMonitor and
        the dashboard ConfigMap in their own files, everything else in daemonset.yaml; the NodeResourceTopology
        ClusterRole and CRD, off by default, from a render with them on, in rbac-nrt.yaml and crds/."""
        renders = {
            (MANIFESTS_VALUES,): {
                "servicemonitor.yaml": SERVICEMONITOR,
                "prometheusrule.yaml": PROMETHEUSRULE,
                "grafana-dashboard.yaml": DASHBOARD_CONFIGMAP,
                "uninstall-hook.yaml": UNINSTALL,
            },
            (MANIFESTS_VALUES, NRT_VALUES): {"rbac-nrt.yaml": RBAC_NRT, "crd-nrt.yaml": CRD_NRT},
        }
        expected: dict[Path, list[str]] = {path: [] for path in (*MANIFESTS, UNINSTALL)}
        for values, own in renders.items():
            rest = DAEMONSET if len(values) == 1 else None
            for block in [block for block in helm_template(values).split("---\n") if block.strip()]:
                path = own.get(block.splitlines()[0].rsplit("/", 1)[-1], rest)
                text = block
                if path == UNINSTALL:  # a hook applied with kubectl is an object like the others
                    text = re.sub(r"^ +helm\.sh/hook[-a-z]*: .*\n", "", text, flags=re.MULTILINE)
                    text = re.sub(r"^( +)annotations:\n(?!\1 )", "", text, flags=re.MULTILINE)
                if path is not None:
                    expected[path].append(text)
        actual = {path: path.read_text().split("---\n")[1:] for path in (*MANIFESTS, UNINSTALL)}
        assert expected == actual

    def test_render_script_check_passes(self) -> None:
        """scripts/render_manifests.py --check finds nothing stale (the files are what the script writes)."""
        run = subprocess.run(
            [str(REPO / ".venv" / "bin" / "python"), str(REPO / "scripts" / "render_manifests.py"), "--check"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert (0, "") == (run.returncode, run.stdout)

    def test_no_raw_json_in_deploy(self) -> None:
        """deploy/ holds only YAML manifests (kubectl apply -f deploy/ reads every .json, .yaml and .yml file)."""
        assert [] == sorted(p.name for p in DEPLOY.iterdir() if p.is_file() and p.suffix == ".json")

    def test_dashboard_configmap_carries_the_charts_dashboard(self) -> None:
        """The dashboard ConfigMap holds the chart's dashboard JSON unchanged, labelled for Grafana's sidecar."""
        configmap = _documents(DASHBOARD_CONFIGMAP)[0]
        expected = ("ConfigMap", {"grafana_dashboard": "1"}.items() <= configmap["metadata"]["labels"].items())
        assert expected == (configmap["kind"], True)
        assert json.loads(DASHBOARD.read_text()) == json.loads(configmap["data"]["podpin.json"])


class TestKubectl:
    def test_apply_dry_run_on_the_whole_directory(self, tmp_path: Path) -> None:
        """`kubectl apply --dry-run=client -f deploy/` maps every object of every top-level file and would create it,
        and leaves the CRD of deploy/crds/ alone."""
        with discovery_server() as url:
            run = _kubectl(
                kubeconfig_for(url, tmp_path / "kubeconfig"),
                "apply",
                "--dry-run=client",
                "--validate=false",
                "-f",
                str(DEPLOY),
            )
        objects = [doc for path in TOP_LEVEL for doc in _documents(path)]
        assert (0, "") == (run.returncode, run.stderr)
        assert (len(objects), False) == (
            run.stdout.count(" created (dry run)\n"),
            "customresourcedefinition" in run.stdout,
        )

    def test_apply_dry_run_of_the_crd(self, tmp_path: Path) -> None:
        """`kubectl apply --dry-run=client -f deploy/crds/` would create the NodeResourceTopology CRD."""
        with discovery_server() as url:
            run = _kubectl(
                kubeconfig_for(url, tmp_path / "kubeconfig"),
                "apply",
                "--dry-run=client",
                "--validate=false",
                "-f",
                str(CRD_NRT.parent),
            )
        expected = (0, "", "customresourcedefinition.apiextensions.k8s.io/noderesourcetopologies.topology.node.k8s.io")
        assert expected == (run.returncode, run.stderr, run.stdout.split(" created")[0])

    def test_apply_dry_run_fails_on_a_raw_dashboard(self, tmp_path: Path) -> None:
        """The same command fails on a directory holding raw dashboard JSON, as deploy/ did before the chart."""
        broken = tmp_path / "deploy"
        broken.mkdir()
        (broken / "daemonset.yaml").write_text(DAEMONSET.read_text())
        (broken / "grafana-dashboard.json").write_text(DASHBOARD.read_text())
        with discovery_server() as url:
            run = _kubectl(
                kubeconfig_for(url, tmp_path / "kubeconfig"),
                "apply",
                "--dry-run=client",
                "--validate=false",
                "-f",
                str(broken),
            )
        assert (1, True) == (run.returncode, "grafana-dashboard.json" in run.stderr)


class TestManifestValidity:
    def test_objects(self) -> None:
        """The manifests hold exactly the objects of a complete install, each file in helm's install order."""
        expected = [
            ("Namespace", "podpin-system"),
            ("NetworkPolicy", "podpin"),
            ("ResourceQuota", "podpin-critical-pods"),
            ("ServiceAccount", "podpin"),
            ("ConfigMap", "podpin-config"),
            ("ClusterRole", "podpin"),
            ("ClusterRoleBinding", "podpin"),
            ("Service", "podpin-metrics"),
            ("DaemonSet", "podpin"),
            ("ValidatingAdmissionPolicy", "podpin-podpin-system-pod-status"),
            ("ValidatingAdmissionPolicyBinding", "podpin-podpin-system-pod-status"),
            ("ServiceMonitor", "podpin"),
            ("PrometheusRule", "podpin"),
            ("ConfigMap", "podpin-dashboard"),
            ("ClusterRole", "podpin-nrt"),
            ("ClusterRoleBinding", "podpin-nrt"),
            ("CustomResourceDefinition", "noderesourcetopologies.topology.node.k8s.io"),
        ]
        assert expected == [(d["kind"], d["metadata"]["name"]) for path in MANIFESTS for d in _documents(path)]

    def test_supported_versions_have_schemas(self) -> None:
        """kubernetes-validate ships schemas for every required minor from the minimum (1.34) to 1.36."""
        assert list(REQUIRED_KUBERNETES) == [v for v in supported_versions() if v in REQUIRED_KUBERNETES]

    @pytest.mark.parametrize("version", supported_versions())
    def test_objects_validate_strictly(self, version: str) -> None:
        """Every built-in object passes strict schema validation (no unknown field) against each supported minor."""
        operator = ("ServiceMonitor", "PrometheusRule")
        builtin = [doc for path in MANIFESTS for doc in _documents(path) if doc["kind"] not in operator]
        results = [kubernetes_validate.validate(doc, version, strict=True) for doc in builtin]
        assert [version] * len(builtin) == results

    def test_strict_validation_rejects_unknown_field(self) -> None:
        """Strict validation catches a misspelt field, so the check above is not vacuous."""
        daemonset = copy.deepcopy(_object("DaemonSet"))
        daemonset["spec"]["template"]["spec"]["containers"][0]["readOnlyRootFileSystem"] = True
        with pytest.raises(kubernetes_validate.ValidationError) as caught:
            kubernetes_validate.validate(daemonset, REQUIRED_KUBERNETES[0], strict=True)
        assert "Additional properties are not allowed ('readOnlyRootFileSystem' was unexpected)" == caught.value.message

    def test_checkov(self, record_property: Any) -> None:
        """checkov finds no failed check; each skip is one of the known ones and carries its reason."""
        started = time.monotonic()
        files = [arg for path in MANIFESTS for arg in ("--file", str(path))]
        run = subprocess.run(
            [str(checkov()), "--framework", "kubernetes", "--skip-download", "--output", "json", *files],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        record_property("checkov_seconds", round(time.monotonic() - started, 1))
        report = json.loads(run.stdout)
        failed = [(c["check_id"], c["resource"]) for c in report["results"]["failed_checks"]]
        skipped = {
            c["check_id"]: c["check_result"].get("suppress_comment", "") for c in report["results"]["skipped_checks"]
        }
        assert ([], 0) == (failed, report["summary"]["parsing_errors"])
        assert {"CKV_K8S_15", "CKV_K8S_23", "CKV_K8S_38", "CKV_K8S_40", "CKV_K8S_43"} == set(skipped)
        assert [] == [check for check, reason in skipped.items() if len(reason) < 40]


class TestRBAC:
    def test_pod_status_policy_narrows_the_status_patch(self) -> None:
        """The ValidatingAdmissionPolicy matches only the agents' ServiceAccount on pods/status updates and checks the
        node its token names and the one condition; its binding denies."""
        policy, binding = _object("ValidatingAdmissionPolicy"), _object("ValidatingAdmissionPolicyBinding")
        spec = policy["spec"]
        assert (
            [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods/status"]}],
            "request.userInfo.username == 'system:serviceaccount:podpin-system:podpin'",
            True,
            (policy["metadata"]["name"], ["Deny"]),
        ) == (
            spec["matchConstraints"]["resourceRules"],
            spec["matchConditions"][0]["expression"],
            "authentication.kubernetes.io/node-name" in spec["validations"][0]["expression"],
            (binding["spec"]["policyName"], binding["spec"]["validationActions"]),
        )

    def test_cluster_role_grants_only_what_the_agent_uses(self) -> None:
        """Pods get/list/watch, their status patch (the condition podpin.io/CPUsPinned), Events create/patch and
        its Node's get (a mirror pod's owner uid is checked against it, issue 22); no wildcards."""
        expected = [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
            {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
        ]
        assert expected == _object("ClusterRole")["rules"]

    def test_binding_targets_the_service_account(self) -> None:
        """The ClusterRoleBinding gives the role to the DaemonSet's ServiceAccount."""
        account = _object("ServiceAccount")["metadata"]
        binding = _object("ClusterRoleBinding")
        pod = _object("DaemonSet")["spec"]["template"]["spec"]
        expected = (
            [{"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}],
            _object("ClusterRole")["metadata"]["name"],
            account["name"],
        )
        assert expected == (binding["subjects"], binding["roleRef"]["name"], pod["serviceAccountName"])


class TestDaemonSet:
    def test_scheduling(self) -> None:
        """Opt-in node selector, node-critical priority, tolerates every taint, not on the host's namespaces."""
        pod = _object("DaemonSet")["spec"]["template"]["spec"]
        expected = ("true", "system-node-critical", [{"operator": "Exists"}], (False, False, False))
        actual = (
            pod["nodeSelector"]["podpin.io/enabled"],
            pod["priorityClassName"],
            pod["tolerations"],
            (pod["hostNetwork"], pod["hostPID"], pod["hostIPC"]),
        )
        assert expected == actual

    def test_security_context(self) -> None:
        """uid 0 but unprivileged: no escalation, no capabilities, read-only root, RuntimeDefault seccomp."""
        expected = {
            "runAsUser": 0,
            "runAsGroup": 0,
            "runAsNonRoot": False,
            "privileged": False,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        assert expected == _container()["securityContext"]
        pod_context = _object("DaemonSet")["spec"]["template"]["spec"]["securityContext"]
        assert {"type": "RuntimeDefault"} == pod_context["seccompProfile"]

    def test_pod_security_needs_privileged_only_for_host_paths(self) -> None:
        """Measured against the Pod Security Standards: at baseline the pod breaks only "HostPath Volumes" (its host
        mounts), at restricted also the volume types and uid 0; so the Namespace enforces privileged, and says
        why in values.yaml (issue "hold under attack" item 8: "The namespace is PSA privileged")."""
        spec = _object("DaemonSet")["spec"]["template"]["spec"]
        namespace = _object("Namespace")["metadata"]["labels"]
        assert (
            {
                "HostPath Volumes": [
                    "sys",
                    "cgroup",
                    "state",
                    "kubelet-cpu-state",
                    "kubelet-pod-resources",
                    "nri",
                    "containerd-state",
                    "containerd-sandboxes",
                    "crio-state",
                ]
            },
            ["HostPath Volumes", "Running as Non-root", "Running as Non-root user", "Volume Types"],
            "privileged",
        ) == (
            baseline_violations(spec),
            sorted(restricted_violations(spec)),
            namespace["pod-security.kubernetes.io/enforce"],
        )

    def test_node_name_from_downward_api(self) -> None:
        """NODE_NAME comes from spec.nodeName."""
        expected = [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
        assert expected == _container()["env"]

    def test_host_mounts(self) -> None:
        """The cgroup tree and the state dir read-write; /sys, the kubelet's CPU manager checkpoint and pod-resources
        directory (nothing else of its directory, issue 22; its configuration file only when kubeletState.configFile
        names it, test_the_kubelet_config_file_is_not_mounted_by_default), the NRI socket's directory and
        the runtimes' state (under the agent's runtimeRoot, at their host paths) read-only. The default cgroupDriver
        auto cannot name the kubelet's subtree (kubepods.slice or kubepods, by node), so the tree is writable; a named
        driver narrows it to the subtree (tests/deploy/test_chart.py, test_only_the_pod_cgroups_are_writable)."""
        kubelet_dir = str(Path(_effective_config("kubeletCPUManagerStatePath")).parent)
        containerd = "/run/containerd/io.containerd.runtime.v2.task/k8s.io"
        sandboxes = "/run/containerd/io.containerd.sandbox.controller.v1.shim/k8s.io"
        crio = "/run/containers/storage/overlay-containers"
        runtime_root = _effective_config("runtimeRoot")
        expected = {
            "/sys": ("/sys", "Directory", True),
            _effective_config("cgroupRoot"): ("/sys/fs/cgroup", "Directory", False),
            _effective_config("stateDir"): ("/var/lib/podpin", "DirectoryOrCreate", False),
            f"{kubelet_dir}/cpu_manager_state": ("/var/lib/kubelet/cpu_manager_state", "File", True),
            f"{kubelet_dir}/pod-resources": ("/var/lib/kubelet/pod-resources", "Directory", True),
            "/var/run/nri": ("/var/run/nri", "DirectoryOrCreate", True),
            runtime_root + containerd: (containerd, "DirectoryOrCreate", True),
            runtime_root + sandboxes: (sandboxes, "DirectoryOrCreate", True),
            runtime_root + crio: (crio, "DirectoryOrCreate", True),
        }
        actual = {
            path: (volume["hostPath"]["path"], volume["hostPath"]["type"], bool(mount.get("readOnly")))
            for path, (mount, volume) in _mounts().items()
            if "hostPath" in volume
        }
        assert expected == actual

    def test_the_kubelet_config_file_is_not_mounted_by_default(self) -> None:
        """A real v1.36 kubelet refused to start the agent's pod on a node without /var/lib/kubelet/config.yaml (a
        hostPath of type File; only kubeadm writes that file): the manifests mount no such file and tell the agent
        to read none, which it says once (kubelet.config_not_read)."""
        kubelet = {volume["hostPath"]["path"] for _, volume in _mounts().values() if "hostPath" in volume}
        assert ("", set()) == (
            _effective_config("kubeletConfigPath"),
            {path for path in kubelet if path.endswith((".yaml", ".json"))},
        )

    def test_only_what_podpin_reads_of_the_kubelet_directory_is_mounted(self) -> None:
        """Issue 22, finding 9: no mount reaches the kubelet's root directory (its pods' secret and token volumes)
        but the files podpin reads, each read-only, at the paths the configuration names, not over the kubelet's."""
        paths = {
            _effective_config("kubeletCPUManagerStatePath"),
            str(Path(_effective_config("podResourcesSocket")).parent),
        }
        kubelet = {
            path: (volume["hostPath"]["path"], bool(mount.get("readOnly")))
            for path, (mount, volume) in _mounts().items()
            if "hostPath" in volume and volume["hostPath"]["path"].startswith("/var/lib/kubelet")
        }
        assert (paths, {True}, False) == (
            set(kubelet),
            {read_only for _, read_only in kubelet.values()},
            any(host in ("/var/lib/kubelet", "/var/lib/kubelet/pods") for host, _ in kubelet.values()),
        )
        assert not any(path.startswith("/var/lib/kubelet") for path in kubelet)

    def test_args_use_run_flags_and_the_mounted_config(self) -> None:
        """The container runs `podpin run` with known flags; --config is the ConfigMap's file."""
        parsed = parse_run_args(_container()["args"])
        config_path = Path(str(parsed["--config"]))
        mount, volume = _mounts()[str(config_path.parent)]
        assert (True, "podpin-config") == (mount["readOnly"], volume["configMap"]["name"])
        assert config_path.name in _object("ConfigMap")["data"]

    def test_run_args_check_rejects_unknown_flag(self) -> None:
        """The args check names a flag `podpin run` does not have."""
        with pytest.raises(ValueError) as caught:
            parse_run_args(["run", "--config", "/etc/podpin/config.yaml", "--sysfs", "/sys"])
        assert "args: unknown flag '--sysfs' of 'podpin run'" == str(caught.value)

    def test_probes_and_port(self) -> None:
        """Liveness /healthz and readiness /readyz on the `metrics` port, which is metricsBindAddress's."""
        container = _container()
        port = int(_effective_config("metricsBindAddress").rsplit(":", 1)[1])
        expected = (
            [{"name": "metrics", "containerPort": port, "protocol": "TCP"}],
            {"path": "/healthz", "port": "metrics"},
            {"path": "/readyz", "port": "metrics"},
        )
        actual = (container["ports"], container["livenessProbe"]["httpGet"], container["readinessProbe"]["httpGet"])
        assert expected == actual

    def test_resources_small_and_burstable(self) -> None:
        """Requests below limits (never Guaranteed, so never pinned) and at most 200m CPU / 256Mi memory."""
        resources = _container()["resources"]
        requests, limits = resources["requests"], resources["limits"]
        actual = (
            cpu_millis(requests["cpu"]) < cpu_millis(limits["cpu"]) <= 200,
            memory_bytes(requests["memory"]) <= memory_bytes(limits["memory"]) <= 256 * 2**20,
        )
        assert (True, True) == actual

    def test_image_tag_is_the_package_version(self) -> None:
        """The image tag is the agent's version (agent.__version__, the one version source)."""
        assert f"ghcr.io/podpin/podpin:{__version__}" == _container()["image"]

    def test_service_and_network_policy_select_the_agent(self) -> None:
        """The metrics Service and the NetworkPolicy select the agent pods and expose only the metrics port, to pods
        in namespaces labelled podpin.io/scrape=true."""
        pod_labels = _object("DaemonSet")["spec"]["template"]["metadata"]["labels"]
        service, policy = _object("Service")["spec"], _object("NetworkPolicy")["spec"]
        selects_agent = (
            service["selector"].items() <= pod_labels.items(),
            policy["podSelector"]["matchLabels"].items() <= pod_labels.items(),
        )
        expected = (
            (True, True),
            [{"name": "metrics", "port": 9363, "targetPort": "metrics", "protocol": "TCP"}],
            [
                {
                    "ports": [{"port": "metrics", "protocol": "TCP"}],
                    "from": [{"namespaceSelector": {"matchLabels": {"podpin.io/scrape": "true"}}}],
                }
            ],
        )
        assert expected == (selects_agent, service["ports"], policy["ingress"])


class TestAgentConfig:
    def test_config_map_loads_with_the_agents_loader(self) -> None:
        """The ConfigMap's config loads, with a first-install choice for scope and policy."""
        config = load_agent_config(_config_text())
        expected = ("static", "pod", "best-effort")
        assert expected == (config["cpuManagerPolicy"], config["topologyManagerScope"], config["topologyManagerPolicy"])

    def test_every_config_key_is_documented(self) -> None:
        """Each key the agent reads is explained in a comment of the chart's config values (or set by the chart)."""
        comments = "\n".join(line for line in _values_config_block().splitlines() if line.startswith("#"))
        assert [] == [key for key in CONFIG_DEFAULTS if not re.search(rf"\b{key}\b", comments)]

    def test_commented_examples_are_valid(self) -> None:
        """Switching on every commented-out example gives a config the agent loads (its group and node sections too),
        with every key but the seven the chart sets."""
        config = load_agent_config(_uncomment_examples(_values_config_block()))
        chart_set = {
            "nodeName",
            "kubeletCPUManagerStatePath",
            "podResourcesSocket",
            "kubeletConfigPath",
            "nri",
            "runtimeRoot",
            "runtimePaths",
        }
        assert [] == [key for key in (*CONFIG_DEFAULTS, *LAYER_KEYS) if key not in config and key not in chart_set]

    def test_unknown_key_is_rejected(self) -> None:
        """The config check names a key the agent does not know."""
        with pytest.raises(ValueError) as caught:
            load_agent_config("cpuManagerPolicy: static\ntopologyManagerPolicyOption: {}\n")
        assert str(caught.value).startswith("unknown configuration key 'topologyManagerPolicyOption' (known keys: ")


class TestServiceMonitor:
    def test_scrapes_the_metrics_service(self) -> None:
        """The ServiceMonitor selects the metrics Service by its labels and port name, in its namespace."""
        monitor = _documents(SERVICEMONITOR)
        assert ["ServiceMonitor"] == [doc["kind"] for doc in monitor]
        spec, service = monitor[0]["spec"], _object("Service")
        expected = (True, ["podpin-system"], ["metrics"], "/metrics")
        actual = (
            spec["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items(),
            spec["namespaceSelector"]["matchNames"],
            [e["port"] for e in spec["endpoints"]],
            spec["endpoints"][0]["path"],
        )
        assert expected == actual
        assert [p["name"] for p in service["spec"]["ports"]] == [e["port"] for e in spec["endpoints"]]

    def test_relabeling_adds_node_and_drops_target_pod_labels(self) -> None:
        """Series get `node`; the target's namespace/pod labels are dropped so workload labels stay as they are."""
        expected = [
            {"action": "replace", "sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"},
            {"action": "labeldrop", "regex": "namespace|pod"},
        ]
        assert expected == _documents(SERVICEMONITOR)[0]["spec"]["endpoints"][0]["relabelings"]


def _dashboard() -> dict[str, Any]:
    return dict(json.loads(DASHBOARD.read_text()))


def _targets() -> list[tuple[str, str]]:
    """(panel title, expr) of every query in the dashboard."""
    return [(panel["title"], target["expr"]) for panel in _dashboard()["panels"] for target in panel.get("targets", [])]


class TestDashboard:
    def test_promql_names_reader(self) -> None:
        """The PromQL reader separates metrics, functions, labels, strings and ranges."""
        expr = 'histogram_quantile(0.9, sum by (node, le) (rate(a_bucket{pool=~"x|y", node!="b"}[5m]))) / on (node) b'
        assert ({"a_bucket", "b"}, {"node", "le", "pool"}) == promql_names(expr)

    def test_promql_names_reader_rejects_unbalanced(self) -> None:
        """An unbalanced expression is an error naming it."""
        with pytest.raises(ValueError) as caught:
            promql_names("sum(rate(podpin_ready[5m])")
        assert "PromQL 'sum(rate(podpin_ready[5m])': unclosed '('" == str(caught.value)

    def test_model(self) -> None:
        """A Grafana JSON model: schemaVersion, uid, unique panel ids, a 24-column grid, queries on $datasource."""
        dashboard = _dashboard()
        panels = dashboard["panels"]
        ids = [panel["id"] for panel in panels]
        variables = {variable["name"]: variable["type"] for variable in dashboard["templating"]["list"]}
        bad_grid = [p["title"] for p in panels if p["gridPos"]["x"] + p["gridPos"]["w"] > 24]
        queried = [p for p in panels if p["type"] != "row"]
        sources = {
            p["title"]: {p["datasource"]["uid"]} | {t["datasource"]["uid"] for t in p["targets"]} for p in queried
        }
        bad_source = [title for title, uids in sources.items() if uids != {"${datasource}"}]
        no_query = [p["title"] for p in queried if not p["targets"]]
        kinds = {"datasource": "datasource", "node": "query", "pool": "query"}
        expected: tuple[object, ...] = (True, "podpin-node-agent", len(ids), [], [], [], kinds)
        actual = (
            isinstance(dashboard["schemaVersion"], int) and dashboard["schemaVersion"] >= 36,
            dashboard["uid"],
            len(set(ids)),
            bad_grid,
            bad_source,
            no_query,
            variables,
        )
        assert expected == actual

    def test_queries_use_only_contract_metrics_and_labels(self) -> None:
        """Every metric in every query is a contract metric (histograms via _bucket) with its own labels."""
        wrong = []
        for title, expr in _targets():
            metrics, labels = promql_names(expr)
            bases = {m.removesuffix("_bucket") if m.removesuffix("_bucket") in HISTOGRAMS else m for m in metrics}
            allowed = TARGET_LABELS.union(*(METRICS.get(b, frozenset()) for b in bases))
            allowed |= {"le"} if bases & HISTOGRAMS else set()
            wrong += [(title, name) for name in sorted(bases - METRICS.keys()) + sorted(labels - allowed)]
        assert [] == wrong

    def test_variables_use_contract_metrics(self) -> None:
        """label_values() of each query variable names a contract metric and one of its labels."""
        queries = [v["query"]["query"] for v in _dashboard()["templating"]["list"] if v["type"] == "query"]
        wrong = []
        for query in queries:
            match = re.fullmatch(r"label_values\((\w+), (\w+)\)", query)
            if match is None or match[1] not in METRICS or match[2] not in METRICS[match[1]] | TARGET_LABELS:
                wrong.append(query)
        expected = ["label_values(podpin_ready, node)", "label_values(podpin_pool_cpu_usage_seconds_total, pool)"]
        assert expected == queries
        assert [] == wrong

    def test_covers_the_operator_questions(self) -> None:
        """Exclusive/shared CPUs per NUMA node, pod pools, pin latency, rejections, drift, shared-pool usage by pod,
        the pinning mode (NRI, who named new containers), rejected pods left unpinned, every pool per NUMA node."""
        used = set().union(*(promql_names(expr)[0] for _, expr in _targets()))
        expected = {
            "podpin_allocation_per_numa",
            "podpin_shared_pool_size_millicores",
            "podpin_exclusive_cpu_allocation_count",
            "podpin_pod_shared_pool_cpus",
            "podpin_pin_latency_seconds_bucket",
            "podpin_admission_errors_total",
            "podpin_drift_repairs_total",
            "podpin_pool_cpu_usage_seconds_total",
            "podpin_nri_connected",
            "podpin_container_pins_total",
            "podpin_pods",
            "podpin_node_cpus",
            "podpin_reserved_cpus",
        }
        assert expected == expected & used

    def test_node_label_is_the_service_monitors(self) -> None:
        """The `node` label the dashboard filters on is the one the ServiceMonitor writes."""
        relabel = _documents(SERVICEMONITOR)[0]["spec"]["endpoints"][0]["relabelings"][0]
        assert ("node", True) == (relabel["targetLabel"], all('node=~"$node"' in expr for _, expr in _targets()))
