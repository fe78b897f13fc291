"""The Prometheus Operator's part, done by the test: podpin's ServiceMonitor and PrometheusRule turned into a plain
Prometheus configuration over the real API server's EndpointSlices.

The cluster has no Prometheus Operator, and Debian's prometheus (2.42) is built without ``kubernetes_sd``; so the
test reads the objects the operator would read and writes what it would generate:

* the targets: every ready endpoint of the Services the ServiceMonitor selects (``namespaceSelector`` and
  ``selector.matchLabels`` over the Services' labels), on the port the endpoint names, as a ``file_sd`` group
  carrying the ``__meta_kubernetes_*`` labels Prometheus's endpointslice discovery would give it;
* the scrape job: the endpoint's interval, timeout, path and scheme; the operator's own relabelings (``namespace``,
  ``service``, ``pod``, ``container``, ``job`` from the Service's name, ``endpoint`` from the port name), then the
  ServiceMonitor's ``relabelings`` as written — the chart's ``node`` label and its ``labeldrop`` are what is tested;
* the rule file: the PrometheusRule's ``spec`` as it is (its ``groups``).

Pure functions over parsed objects; the test (test_deploy.py) does the I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "alert_expressions",
    "file_sd_groups",
    "prometheus_config",
    "rule_file",
    "scrape_job",
    "selected_services",
]

_RELABEL_KEYS = {
    "sourceLabels": "source_labels",
    "targetLabel": "target_label",
    "separator": "separator",
    "regex": "regex",
    "modulus": "modulus",
    "replacement": "replacement",
    "action": "action",
}
"""The ServiceMonitor's RelabelConfig fields and Prometheus's names for them."""


def _only_endpoint(monitor: Mapping[str, Any]) -> Mapping[str, Any]:
    endpoints = monitor["spec"].get("endpoints", [])
    if len(endpoints) != 1:
        raise ValueError(
            f"ServiceMonitor {monitor['metadata']['name']}: {len(endpoints)} endpoints; the test reads one"
        )
    endpoint: Mapping[str, Any] = endpoints[0]
    return endpoint


def selected_services(monitor: Mapping[str, Any], services: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The Services the ServiceMonitor selects: in its ``namespaceSelector.matchNames`` (its own namespace when it
    names none) and carrying every label of ``selector.matchLabels``."""
    spec = monitor["spec"]
    namespaces = set(spec.get("namespaceSelector", {}).get("matchNames", [])) or {monitor["metadata"]["namespace"]}
    wanted = spec["selector"].get("matchLabels", {})
    return [
        service
        for service in services
        if service["metadata"]["namespace"] in namespaces
        and all(service["metadata"].get("labels", {}).get(key) == value for key, value in wanted.items())
    ]


def file_sd_groups(
    monitor: Mapping[str, Any], services: Iterable[Mapping[str, Any]], slices: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """One ``file_sd`` group per ready endpoint of the selected Services' EndpointSlices, on the named port.

    Endpoints that are not ready are left out, as the operator's generated configuration drops them.
    """
    port_name = _only_endpoint(monitor)["port"]
    chosen = {(s["metadata"]["namespace"], s["metadata"]["name"]) for s in selected_services(monitor, services)}
    groups: list[dict[str, Any]] = []
    for piece in slices:
        namespace = piece["metadata"]["namespace"]
        service = piece["metadata"].get("labels", {}).get("kubernetes.io/service-name", "")
        if (namespace, service) not in chosen:
            continue
        ports = [p["port"] for p in piece.get("ports") or [] if p.get("name") == port_name]
        for endpoint in piece.get("endpoints") or []:
            if endpoint.get("conditions", {}).get("ready") is False:
                continue
            target = endpoint.get("targetRef", {})
            labels = {
                "__meta_kubernetes_namespace": namespace,
                "__meta_kubernetes_service_name": service,
                "__meta_kubernetes_endpointslice_name": piece["metadata"]["name"],
                "__meta_kubernetes_endpointslice_port_name": port_name,
                "__meta_kubernetes_pod_name": target.get("name", "") if target.get("kind") == "Pod" else "",
                "__meta_kubernetes_pod_node_name": endpoint.get("nodeName", ""),
            }
            groups += [
                {"targets": [f"{address}:{port}"], "labels": labels}
                for address in endpoint.get("addresses", [])
                for port in ports
            ]
    return groups


def _relabeling(rule: Mapping[str, Any]) -> dict[str, Any]:
    unknown = set(rule) - set(_RELABEL_KEYS)
    if unknown:
        raise ValueError(f"relabeling {dict(rule)}: fields the test does not translate: {sorted(unknown)}")
    return {_RELABEL_KEYS[key]: value for key, value in rule.items()}


def scrape_job(monitor: Mapping[str, Any], targets_file: str) -> dict[str, Any]:
    """The scrape job the operator would generate for the ServiceMonitor's one endpoint, its targets read from
    `targets_file` (:func:`file_sd_groups`)."""
    endpoint = _only_endpoint(monitor)
    meta = monitor["metadata"]
    operator = [
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job"},
        {"target_label": "endpoint", "replacement": endpoint["port"]},
    ]
    job: dict[str, Any] = {
        "job_name": f"serviceMonitor/{meta['namespace']}/{meta['name']}/0",
        "metrics_path": endpoint.get("path", "/metrics"),
        "scheme": endpoint.get("scheme", "http"),
        "file_sd_configs": [{"files": [targets_file], "refresh_interval": "10s"}],
        "relabel_configs": operator + [_relabeling(rule) for rule in endpoint.get("relabelings", [])],
    }
    if "interval" in endpoint:
        job["scrape_interval"] = endpoint["interval"]
    if "scrapeTimeout" in endpoint:
        job["scrape_timeout"] = endpoint["scrapeTimeout"]
    return job


def rule_file(rule: Mapping[str, Any]) -> dict[str, Any]:
    """The PrometheusRule's spec as a rule file (the operator writes its ``groups`` unchanged)."""
    groups = rule["spec"].get("groups")
    if not groups:
        raise ValueError(f"PrometheusRule {rule['metadata']['name']} has no groups")
    return {"groups": groups}


def alert_expressions(rule: Mapping[str, Any]) -> dict[str, str]:
    """Every alerting rule's name and expression, in file order."""
    return {
        entry["alert"]: str(entry["expr"]).strip()
        for group in rule["spec"]["groups"]
        for entry in group.get("rules", [])
        if "alert" in entry
    }


def prometheus_config(
    monitor: Mapping[str, Any], *, targets_file: str, rules_file: str, evaluation_interval: str
) -> dict[str, Any]:
    """A whole Prometheus configuration: the ServiceMonitor's job and the rule file, evaluated every
    `evaluation_interval`."""
    return {
        "global": {"evaluation_interval": evaluation_interval},
        "rule_files": [rules_file],
        "scrape_configs": [scrape_job(monitor, targets_file)],
    }
