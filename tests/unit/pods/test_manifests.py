"""Workload manifests: the pod templates of Deployments, StatefulSets, DaemonSets, Jobs and CronJobs become pods.

Plain pod files, lists and their errors are covered with the directory source
(``tests/unit/kube/test_dirsource.py``); this module covers what ``podpin plan``
adds: each workload's template read as pods, how many, named how, and the errors.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from agent.pods import ManifestError, parse_manifest, pod_from_dict, stable_uid
from tests.support.podfactory import container

_TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"app": "web"}, "annotations": {"team": "a"}},
    "spec": {"containers": [container("app", cpu="2", memory="1Gi")]},
}


def _workload(kind: str, name: str = "web", **spec: Any) -> dict[str, Any]:
    """A workload document of ``kind`` with the shared pod template (a CronJob's inside its job template)."""
    body: dict[str, Any] = dict(spec)
    if kind == "CronJob":
        job_spec = {"template": _TEMPLATE, **body.pop("job", {})}
        body = {"schedule": "* * * * *", "jobTemplate": {"spec": job_spec}, **body}
    else:
        body["template"] = _TEMPLATE
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": "shop", "creationTimestamp": "2026-01-01T00:00:05Z"},
        "spec": body,
    }


def _parse(*docs: dict[str, Any], replicas: int = 1) -> list[dict[str, Any]]:
    return list(parse_manifest("w.yaml", yaml.safe_dump_all(docs).encode(), workload_replicas=replicas))


@pytest.mark.parametrize("kind", ["Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "CronJob"])
def test_each_workload_kind_gives_one_pod_from_its_template(kind: str) -> None:
    """A workload's pod template is read as one pod ``<name>-0`` in its namespace, with its creation time."""
    (pod,) = _parse(_workload(kind))
    view = pod_from_dict(pod)
    expected = ("shop", "web-0", stable_uid("shop", "web-0"), "2026-01-01T00:00:05Z", ("app",), {"app": "web"})
    assert expected == (
        view.namespace,
        view.name,
        view.uid,
        view.creation_timestamp,
        tuple(c.name for c in view.containers),
        pod["metadata"]["labels"],
    )


@pytest.mark.parametrize(
    ("doc", "cap", "names"),
    [
        (_workload("Deployment", replicas=5), 1, ["web-0"]),
        (_workload("Deployment", replicas=5), 3, ["web-0", "web-1", "web-2"]),
        (_workload("StatefulSet", replicas=2), 8, ["web-0", "web-1"]),
        (_workload("Deployment"), 8, ["web-0"]),
        (_workload("Deployment", replicas=0), 8, []),
        (_workload("DaemonSet"), 8, ["web-0"]),
        (_workload("Job", parallelism=4), 2, ["web-0", "web-1"]),
        (_workload("CronJob", job={"parallelism": 3}), 8, ["web-0", "web-1", "web-2"]),
    ],
)
def test_replicas_are_honoured_up_to_the_cap(doc: dict[str, Any], cap: int, names: list[str]) -> None:
    """spec.replicas (a Job's parallelism, a CronJob's job template's) gives the pod count, capped; 1 when absent."""
    assert names == [p["metadata"]["name"] for p in _parse(doc, replicas=cap)]


def test_pods_and_workloads_keep_document_order_and_lists_hold_workloads() -> None:
    """Pods and workload pods come in document order; a List may hold workloads too."""
    pod = {"kind": "Pod", "metadata": {"name": "solo"}, "spec": {"containers": [container("a")]}}
    listed = {"kind": "List", "items": [_workload("Job", "batch")]}
    assert ["solo", "web-0", "batch-0"] == [p["metadata"]["name"] for p in _parse(pod, _workload("Deployment"), listed)]


def test_the_directory_source_leaves_workloads_out() -> None:
    """Without workload_replicas (the pods directory) a workload is another kind, skipped like a ConfigMap."""
    assert () == parse_manifest("w.yaml", yaml.safe_dump(_workload("Deployment")).encode())


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (
            {"kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 1}},
            "w.yaml: document 1 (Deployment web): spec.template.spec is missing: no pod template to plan",
        ),
        (
            {"kind": "CronJob", "metadata": {"name": "nightly"}, "spec": {"jobTemplate": {}}},
            (
                "w.yaml: document 1 (CronJob nightly): spec.jobTemplate.spec.template.spec is missing: "
                "no pod template to plan"
            ),
        ),
        (
            {"kind": "Job", "metadata": {}, "spec": {"template": _TEMPLATE}},
            "w.yaml: document 1 (Job <unnamed>): metadata.name is missing",
        ),
        (
            _workload("Deployment", replicas="three"),
            "w.yaml: document 1 (Deployment web): spec.replicas is 'three', not a replica count",
        ),
    ],
)
def test_workload_errors_name_the_document_and_the_field(doc: dict[str, Any], message: str) -> None:
    """A workload podpin cannot read as pods is an error naming the file, document, workload and field."""
    with pytest.raises(ManifestError) as raised:
        _parse(doc)
    assert message == str(raised.value)


def test_a_pod_written_by_pyyaml_with_anchors_is_read() -> None:
    """PyYAML writes an anchor and aliases when one object is used twice (as kubectl accepts): the pod is read.

    Failed before: "YAML anchors are not accepted".
    """
    limits = {"cpu": "2", "memory": "1Gi"}
    raw = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "twins", "namespace": "default", "uid": "u-twins"},
        "spec": {
            "containers": [
                {"name": "a", "resources": {"requests": limits, "limits": limits}},
                {"name": "b", "resources": {"requests": limits, "limits": limits}},
            ]
        },
    }
    text = yaml.safe_dump(raw)
    (found,) = parse_manifest("twins.yaml", text.encode())
    pod = pod_from_dict(found)
    assert (True, ["a", "b"], 2000) == (
        "&id001" in text,
        [c.name for c in pod.containers],
        pod.containers[1].resources.limits["cpu"],
    )
