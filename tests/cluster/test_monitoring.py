"""The operator's part done by the test (monitoring.py), without a cluster: the chart's own ServiceMonitor and
PrometheusRule, EndpointSlices shaped as the real API server returns them, and promtool's word on the result."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster.monitoring import alert_expressions, file_sd_groups, prometheus_config, rule_file, scrape_job
from tests.support.k8s_tools import helm_template, rendered_objects

MONITORING = {"monitoring": {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}}}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The chart's Service, ServiceMonitor and PrometheusRule with monitoring on, by kind."""
    objects = rendered_objects(helm_template(values=MONITORING, tmp_dir=tmp_path_factory.mktemp("values")))
    kinds = ("Service", "ServiceMonitor", "PrometheusRule")
    return {obj["kind"]: obj for obj in objects if obj["kind"] in kinds}


def _slice(service: str, *endpoints: dict[str, Any], namespace: str = "podpin-system") -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"{service}-abcde",
            "namespace": namespace,
            "labels": {"kubernetes.io/service-name": service},
        },
        "ports": [{"name": "metrics", "port": 9363, "protocol": "TCP"}],
        "endpoints": list(endpoints),
    }


def _endpoint(address: str, pod: str, node: str, *, ready: bool = True) -> dict[str, Any]:
    return {
        "addresses": [address],
        "conditions": {"ready": ready, "serving": ready, "terminating": False},
        "nodeName": node,
        "targetRef": {"kind": "Pod", "name": pod, "namespace": "podpin-system"},
    }


def test_ready_endpoints_of_the_selected_service_are_the_targets(rendered: dict[str, dict[str, Any]]) -> None:
    """The chart's metrics Service is selected; its ready endpoints become targets on the named port with the node
    and pod they run on; a not-ready endpoint and another Service's slice are left out."""
    other = {"metadata": {"name": "other", "namespace": "podpin-system", "labels": {"app": "other"}}}
    slices = [
        _slice(
            "podpin-metrics",
            _endpoint("10.88.0.5", "podpin-abcde", "node-a"),
            _endpoint("10.88.0.6", "podpin-fghij", "node-b", ready=False),
        ),
        _slice("other", _endpoint("10.88.0.7", "other-1", "node-a")),
    ]
    groups = file_sd_groups(rendered["ServiceMonitor"], [rendered["Service"], other], slices)
    assert [
        (
            ["10.88.0.5:9363"],
            {
                "__meta_kubernetes_namespace": "podpin-system",
                "__meta_kubernetes_service_name": "podpin-metrics",
                "__meta_kubernetes_endpointslice_name": "podpin-metrics-abcde",
                "__meta_kubernetes_endpointslice_port_name": "metrics",
                "__meta_kubernetes_pod_name": "podpin-abcde",
                "__meta_kubernetes_pod_node_name": "node-a",
            },
        )
    ] == [(g["targets"], g["labels"]) for g in groups]


def test_the_job_keeps_the_monitors_relabelings_after_the_operators(rendered: dict[str, dict[str, Any]]) -> None:
    """The operator's labels first (job from the Service's name), then the chart's: `node` from the pod's node and
    the target's namespace/pod dropped; interval and timeout as the chart sets them."""
    job = scrape_job(rendered["ServiceMonitor"], "/t/targets.json")
    assert (
        "30s",
        "10s",
        {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job"},
        [
            {"action": "replace", "source_labels": ["__meta_kubernetes_pod_node_name"], "target_label": "node"},
            {"action": "labeldrop", "regex": "namespace|pod"},
        ],
    ) == (job["scrape_interval"], job["scrape_timeout"], job["relabel_configs"][3], job["relabel_configs"][5:])


def test_a_relabeling_field_the_test_cannot_translate_is_refused(rendered: dict[str, dict[str, Any]]) -> None:
    """A ServiceMonitor relabeling with a field the translation does not know is an error naming it, not dropped."""
    monitor = yaml.safe_load(yaml.safe_dump(rendered["ServiceMonitor"]))
    monitor["spec"]["endpoints"][0]["relabelings"].append({"action": "keep", "sourceLabels": ["x"], "extra": 1})
    with pytest.raises(ValueError, match="extra"):
        scrape_job(monitor, "/t/targets.json")


def test_the_alerts_are_the_rule_files(rendered: dict[str, dict[str, Any]]) -> None:
    """The PrometheusRule carries the chart's rule file; its alert names and expressions are read in order."""
    alerts = alert_expressions(rendered["PrometheusRule"])
    chart = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "podpin" / "rules" / "podpin.rules.yaml"
    plain = yaml.safe_load(chart.read_text())
    assert [r["alert"] for g in plain["groups"] for r in g["rules"]] == list(alerts)
    assert 'up{job="podpin-metrics"} == 0' == alerts["PodpinAgentDown"]


def test_promtool_accepts_the_generated_configuration(rendered: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    """promtool checks the whole configuration, the rule file it names and the targets file it reads."""
    promtool = shutil.which("promtool")
    assert promtool is not None, "promtool is missing: apt-get install -y prometheus (Debian) provides it"
    targets, rules, config = tmp_path / "targets.json", tmp_path / "rules.yaml", tmp_path / "prometheus.yml"
    targets.write_text("[]")
    rules.write_text(yaml.safe_dump(rule_file(rendered["PrometheusRule"])))
    config.write_text(
        yaml.safe_dump(
            prometheus_config(
                rendered["ServiceMonitor"], targets_file=str(targets), rules_file=str(rules), evaluation_interval="10s"
            )
        )
    )
    run = subprocess.run([promtool, "check", "config", str(config)], capture_output=True, text=True, check=False)
    assert 0 == run.returncode, run.stdout + run.stderr
    assert "SUCCESS" in run.stdout + run.stderr
