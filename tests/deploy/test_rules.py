"""The alerting rules: a plain rule file promtool checks and unit-tests, carried by the chart's PrometheusRule.

``deploy/helm/podpin/rules/podpin.rules.yaml`` is the single source: ``promtool
check rules`` validates it, ``promtool test rules`` runs
``tests/deploy/rules/podpin.rules.test.yaml`` against it (input series, and the
alerts each rule must raise with their labels and annotations, or must not raise
yet), and the chart's ``templates/prometheusrule.yaml`` carries its groups
unchanged but for the metrics Service's name in ``up{job=...}``.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from agent.alloc.tally import AllocationEvent
from agent.metrics import AgentMetrics
from tests.deploy.test_manifests import METRICS, TARGET_LABELS, promql_names
from tests.support.k8s_tools import CHART, helm_template, rendered_objects, run_helm
from tests.support.paths import REPO
from tests.unit.test_metrics import node_snapshot

RULES = CHART / "rules" / "podpin.rules.yaml"
RULES_TEST = REPO / "tests" / "deploy" / "rules" / "podpin.rules.test.yaml"
PROMETHEUSRULE = REPO / "deploy" / "prometheusrule.yaml"
ALERTS = [
    "PodpinAgentDown",
    "PodpinAgentNotReady",
    "PodpinKubeletPinning",
    "PodpinPodsRejected",
    "PodpinPodsRunningUnpinned",
    "PodpinCgroupWritesFailing",
    "PodpinDriftNotRepairing",
    "PodpinCheckpointFailing",
    "PodpinNRIDisconnected",
    "PodpinAffinityViolation",
    "PodpinExclusiveCPUInterrupts",
    "PodpinExclusiveCPUSteal",
]


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    promtool = shutil.which("promtool")
    assert promtool is not None, "promtool is missing: apt-get install -y prometheus (Debian) provides it"
    return subprocess.run([promtool, *args], capture_output=True, text=True, timeout=120, check=False)


def _rules(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [rule for group in groups for rule in group["rules"]]


def _groups() -> list[dict[str, Any]]:
    return list(yaml.safe_load(RULES.read_text())["groups"])


def _prometheus_rule(objects: list[dict[str, Any]]) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == "PrometheusRule"]
    assert 1 == len(found), f"{len(found)} PrometheusRule objects"
    return found[0]


def test_promtool_check_rules() -> None:
    """promtool accepts the rule file: every alert, none else."""
    run = _promtool("check", "rules", str(RULES))
    assert (0, f"Checking {RULES}\n  SUCCESS: {len(ALERTS)} rules found\n\n") == (run.returncode, run.stdout)
    assert ALERTS == [rule["alert"] for rule in _rules(_groups())]


def test_promtool_unit_tests() -> None:
    """promtool test rules: every alert fires with its labels and annotations when it should, and not before."""
    run = _promtool("test", "rules", str(RULES_TEST))
    assert (0, "") == (run.returncode, run.stderr), run.stdout
    tested = {
        t["alertname"] for group in yaml.safe_load(RULES_TEST.read_text())["tests"] for t in group["alert_rule_test"]
    }
    assert set(ALERTS) == tested


def test_rules_use_contract_metrics_and_labels() -> None:
    """Every metric an expression reads is one podpin exposes (or `up`), filtered and grouped by its own labels."""
    wrong = []
    for rule in _rules(_groups()):
        metrics, labels = promql_names(rule["expr"])
        allowed = TARGET_LABELS.union(*(METRICS.get(m, frozenset()) for m in metrics))
        wrong += [(rule["alert"], name) for name in sorted(metrics - METRICS.keys() - {"up"})]
        wrong += [(rule["alert"], name) for name in sorted(labels - allowed)]
    assert [] == wrong


def test_every_alert_has_a_severity_and_annotations() -> None:
    """Each alert says how bad it is (warning or critical) and carries a summary and a description."""
    found = [
        (rule["labels"]["severity"] in ("warning", "critical"), sorted(rule["annotations"]))
        for rule in _rules(_groups())
    ]
    assert [(True, ["description", "summary"])] * len(ALERTS) == found


def test_manifest_carries_the_rule_file() -> None:
    """deploy/prometheusrule.yaml (release podpin) holds the rule file's groups as they are."""
    (rule,) = yaml.safe_load_all(PROMETHEUSRULE.read_text())
    assert ("PrometheusRule", {"groups": _groups()}) == (rule["kind"], rule["spec"])


def test_release_names_its_own_metrics_service() -> None:
    """Released as `edge`, the agent-down rule asks for job edge-metrics, the name of that release's Service."""
    run = run_helm("template", "edge", str(CHART), "--set", "monitoring.prometheusRule.enabled=true")
    assert 0 == run.returncode, run.stderr
    objects = rendered_objects(run.stdout)
    service = next(o["metadata"]["name"] for o in objects if o["kind"] == "Service")
    expressions = [r["expr"] for r in _rules(_prometheus_rule(objects)["spec"]["groups"])]
    assert ("edge-metrics", f'up{{job="{service}"}} == 0') == (service, expressions[0])
    assert [r["expr"] for r in _rules(_groups())][1:] == expressions[1:]


def test_toggles_and_labels(tmp_path: Path) -> None:
    """Off by default; on, it carries the release label kube-prometheus-stack selects on and extra labels."""
    kinds = {o["kind"] for o in rendered_objects(helm_template())}
    values = {"monitoring": {"prometheusRule": {"enabled": True, "release": "prom", "labels": {"team": "nodes"}}}}
    labels = _prometheus_rule(rendered_objects(helm_template((), values, tmp_dir=tmp_path)))["metadata"]["labels"]
    off = {"monitoring": {"enabled": False, "prometheusRule": {"enabled": True}}}
    kinds_off = {o["kind"] for o in rendered_objects(helm_template((), off, tmp_dir=tmp_path))}
    expected = (False, ("prom", "nodes"), False)
    assert expected == ("PrometheusRule" in kinds, (labels["release"], labels["team"]), "PrometheusRule" in kinds_off)


def test_contract_metrics_are_the_agents() -> None:
    """Every metric the rules and the dashboard may read is exposed by the agent with exactly those labels (the
    node audits' two families aside: ``tests/agent/test_audit.py`` reads them from a running agent)."""
    metrics = AgentMetrics(node_snapshot)
    metrics.count_allocations((AllocationEvent.memory_pinning(ok=False),))
    metrics.admission_duration.observe(0.001)
    metrics.pin_latency.observe(0.001)
    metrics.reconcile_duration.observe(0.001)
    # Label sets that are open (an errno, a file) have children only once something happened.
    metrics.cgroup_writes.labels(file="cpuset.cpus", result="ok").inc()
    metrics.cgroup_write_errors.labels(errno="EBUSY").inc()
    metrics.checkpoint_write_errors.labels(errno="ENOSPC").inc()
    exposed: dict[str, set[str]] = {}
    for family in metrics.registry.collect():
        for sample in family.samples:
            name = sample.name
            for suffix in ("_bucket", "_count", "_sum"):
                if family.type == "histogram" and name.endswith(suffix):
                    name = name.removesuffix(suffix)
            exposed.setdefault(name, set()).update(set(sample.labels) - {"le"})
    audits = {"podpin_exclusive_cpu_interference_seconds_total", "podpin_exclusive_cpu_owner"}
    wrong = {
        name: (sorted(labels), sorted(exposed.get(name, {"<not exposed>"})))
        for name, labels in METRICS.items()
        if name not in audits and exposed.get(name) != set(labels)
    }
    assert {} == wrong
