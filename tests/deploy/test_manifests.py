"""deploy/: the DaemonSet manifest, the ServiceMonitor and the Grafana dashboard, checked against the contract.

The contract (config keys, ``podpin run`` flags, metric names) is written down here from the config contract
until ``agent/config.py``, ``podpin run`` and ``agent/metrics.py`` exist. Each place that should then switch to
the real code is one named function: ``load_agent_config`` and ``podpin_run_flags``.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import time
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from agent.config import config_from_mapping
from agent.quantity import cpu_millis, memory_bytes
from tests.support.paths import REPO

DAEMONSET = REPO / "deploy" / "daemonset.yaml"
SERVICEMONITOR = REPO / "deploy" / "servicemonitor.yaml"
DASHBOARD = REPO / "deploy" / "grafana-dashboard.json"
KUBERNETES_VERSION = "1.36"

# Config key -> the values it accepts (None: not an enumeration). From the config contract.
CONFIG_KEYS: dict[str, frozenset[object] | None] = {
    "cpuManagerPolicy": frozenset({"static", "none"}),
    "memoryManagerPolicy": frozenset({"None", "Static"}),
    "topologyManagerPolicy": frozenset({"none", "best-effort", "restricted", "single-numa-node"}),
    "topologyManagerScope": frozenset({"container", "pod"}),
    "cgroupDriver": frozenset({"auto", "systemd", "cgroupfs"}),
    "dryRun": frozenset({True, False}),
    "logLevel": frozenset({"debug", "info", "warning", "error"}),
    "logFormat": frozenset({"auto", "json", "console"}),
    **dict.fromkeys(
        (
            "cpuManagerPolicyOptions",
            "topologyManagerPolicyOptions",
            "reservedSystemCPUs",
            "kubeReserved",
            "systemReserved",
            "evictionHard",
            "reservedMemory",
            "cpuCFSQuotaPeriod",
            "nodeName",
            "cgroupRoot",
            "reconcilePeriod",
            "podResyncPeriod",
            "stateDir",
            "kubeletCPUManagerStatePath",
            "metricsBindAddress",
        )
    ),
}
CONFIG_DEFAULTS = {
    "cgroupRoot": "/sys/fs/cgroup",
    "stateDir": "/var/lib/podpin",
    "kubeletCPUManagerStatePath": "/var/lib/kubelet/cpu_manager_state",
    "metricsBindAddress": "0.0.0.0:9363",
}

# Metric name -> its labels; histograms are exposed as NAME_bucket/_sum/_count. From the config contract.
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
    config_from_mapping(config, env={"NODE_NAME": "node-1"})
    return config


def podpin_run_flags() -> dict[str, bool]:
    """The ``podpin run`` flags, flag -> takes a value.

    From the config contract until ``podpin run`` exists; then read them from ``podpin run --help`` here.
    """
    valued = (
        "--config",
        "--kubeconfig",
        "--pods-dir",
        "--sysfs-root",
        "--cgroup-root",
        "--state-dir",
        "--metrics-bind-address",
    )
    return {**dict.fromkeys(valued, True), "--dry-run": False, "--once": False}


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
    """The value the agent uses for ``key``: the ConfigMap's, else the contract default."""
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


class TestManifestValidity:
    def test_objects(self) -> None:
        """daemonset.yaml holds exactly the objects of a complete install, in apply order."""
        expected = [
            ("Namespace", "podpin-system"),
            ("ResourceQuota", "podpin-critical-pods"),
            ("ServiceAccount", "podpin"),
            ("ClusterRole", "podpin"),
            ("ClusterRoleBinding", "podpin"),
            ("ConfigMap", "podpin-config"),
            ("DaemonSet", "podpin"),
            ("Service", "podpin-metrics"),
            ("NetworkPolicy", "podpin"),
        ]
        assert expected == [(d["kind"], d["metadata"]["name"]) for d in _documents(DAEMONSET)]

    def test_schemas_for_the_target_version_exist(self) -> None:
        """kubernetes-validate ships schemas for the targeted Kubernetes minor."""
        assert f"{KUBERNETES_VERSION}.0" in kubernetes_validate.utils.all_versions()

    @pytest.mark.parametrize("doc", _documents(DAEMONSET), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
    def test_object_validates_strictly(self, doc: dict[str, Any]) -> None:
        """Every object passes strict schema validation (no unknown fields) against Kubernetes 1.36."""
        assert KUBERNETES_VERSION == kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)

    def test_strict_validation_rejects_unknown_field(self) -> None:
        """Strict validation catches a misspelt field, so the check above is not vacuous."""
        daemonset = copy.deepcopy(_object("DaemonSet"))
        daemonset["spec"]["template"]["spec"]["containers"][0]["readOnlyRootFileSystem"] = True
        with pytest.raises(kubernetes_validate.ValidationError) as caught:
            kubernetes_validate.validate(daemonset, KUBERNETES_VERSION, strict=True)
        assert "Additional properties are not allowed ('readOnlyRootFileSystem' was unexpected)" == caught.value.message

    def test_checkov(self, record_property: Any) -> None:
        """checkov finds no failed check; each skip is one of the known ones and carries its reason."""
        checkov = Path(os.environ.get("PODPIN_CHECKOV", Path(sys.prefix) / "tools" / "checkov" / "bin" / "checkov"))
        assert checkov.is_file(), (
            f"{checkov} missing: python -m venv .venv/tools/checkov && "
            ".venv/tools/checkov/bin/pip install checkov (or set PODPIN_CHECKOV)"
        )
        started = time.monotonic()
        run = subprocess.run(
            [
                str(checkov),
                "--framework",
                "kubernetes",
                "--skip-download",
                "--output",
                "json",
                "--file",
                str(DAEMONSET),
                "--file",
                str(SERVICEMONITOR),
            ],
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
    def test_cluster_role_grants_only_what_the_agent_uses(self) -> None:
        """Pods get/list/watch and Events create/patch; no nodes, no wildcards."""
        expected = [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
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

    def test_node_name_from_downward_api(self) -> None:
        """NODE_NAME comes from spec.nodeName."""
        expected = [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
        assert expected == _container()["env"]

    def test_host_mounts(self) -> None:
        """cgroup tree read-write, /sys read-only, state dir read-write, kubelet state a read-only File."""
        expected = {
            "/sys": ("/sys", "Directory", True),
            _effective_config("cgroupRoot"): ("/sys/fs/cgroup", "Directory", False),
            _effective_config("stateDir"): ("/var/lib/podpin", "DirectoryOrCreate", False),
            _effective_config("kubeletCPUManagerStatePath"): ("/var/lib/kubelet/cpu_manager_state", "File", True),
        }
        actual = {
            path: (volume["hostPath"]["path"], volume["hostPath"]["type"], bool(mount.get("readOnly")))
            for path, (mount, volume) in _mounts().items()
            if "hostPath" in volume
        }
        assert expected == actual

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
        """The image tag is the version in pyproject.toml."""
        version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
        assert f"ghcr.io/podpin/podpin:{version}" == _container()["image"]

    def test_service_and_network_policy_select_the_agent(self) -> None:
        """The metrics Service and the NetworkPolicy select the agent pods and expose only the metrics port."""
        pod_labels = _object("DaemonSet")["spec"]["template"]["metadata"]["labels"]
        service, policy = _object("Service")["spec"], _object("NetworkPolicy")["spec"]
        selects_agent = (
            service["selector"].items() <= pod_labels.items(),
            policy["podSelector"]["matchLabels"].items() <= pod_labels.items(),
        )
        expected = (
            (True, True),
            [{"name": "metrics", "port": 9363, "targetPort": "metrics", "protocol": "TCP"}],
            [{"ports": [{"port": "metrics", "protocol": "TCP"}]}],
        )
        assert expected == (selects_agent, service["ports"], policy["ingress"])


class TestAgentConfig:
    def test_config_map_sets_only_contract_keys(self) -> None:
        """The ConfigMap's config loads, with a first-install choice for scope and policy."""
        config = load_agent_config(_config_text())
        expected = ("static", "pod", "best-effort")
        assert expected == (config["cpuManagerPolicy"], config["topologyManagerScope"], config["topologyManagerPolicy"])

    def test_every_contract_key_is_documented(self) -> None:
        """Each contract key is explained in a comment of the ConfigMap's config."""
        comments = "\n".join(line for line in _config_text().splitlines() if line.startswith("#"))
        assert [] == [key for key in CONFIG_KEYS if not re.search(rf"\b{key}\b", comments)]

    def test_commented_examples_are_valid(self) -> None:
        """Switching on every commented-out example still gives a config of contract keys only."""
        config = load_agent_config(_uncomment_examples(_config_text()))
        assert [] == [key for key in CONFIG_KEYS if key not in config]

    def test_unknown_key_is_rejected(self) -> None:
        """The config check names a key outside the contract."""
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
        """Exclusive/shared CPUs per NUMA node, pod pools, pin latency, rejections, drift, shared-pool usage by pod."""
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
        }
        assert expected == expected & used

    def test_node_label_is_the_service_monitors(self) -> None:
        """The `node` label the dashboard filters on is the one the ServiceMonitor writes."""
        relabel = _documents(SERVICEMONITOR)[0]["spec"]["endpoints"][0]["relabelings"][0]
        assert ("node", True) == (relabel["targetLabel"], all('node=~"$node"' in expr for _, expr in _targets()))
