"""deploy/crds/noderesourcetopologies.yaml and deploy/rbac-nrt.yaml: valid objects that define and grant exactly what
the NodeResourceTopology publisher uses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from agent.nrt.compute import GROUP, KIND, PLURAL, VERSION
from tests.support.paths import REPO

CRD = REPO / "deploy" / "crds" / "noderesourcetopologies.yaml"
RBAC = REPO / "deploy" / "rbac-nrt.yaml"
KUBERNETES_VERSION = "1.36"


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


@pytest.mark.parametrize("doc", documents(CRD) + documents(RBAC), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_objects_validate_strictly(doc: dict[str, Any]) -> None:
    """The CRD and the RBAC objects pass strict schema validation against Kubernetes 1.36."""
    assert KUBERNETES_VERSION == kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_crd_defines_the_api_the_publisher_writes() -> None:
    """One cluster-scoped CRD, topology.node.k8s.io/v1alpha2 NodeResourceTopology, served and stored."""
    (crd,) = documents(CRD)
    spec = crd["spec"]
    assert f"{PLURAL}.{GROUP}" == crd["metadata"]["name"]
    assert (GROUP, "Cluster", KIND, PLURAL) == (
        spec["group"],
        spec["scope"],
        spec["names"]["kind"],
        spec["names"]["plural"],
    )
    assert [(VERSION, True, True)] == [(v["name"], v["served"], v["storage"]) for v in spec["versions"]]
    schema = spec["versions"][0]["schema"]["openAPIV3Schema"]
    resource = schema["properties"]["zones"]["items"]["properties"]["resources"]["items"]
    assert ["name", "capacity", "allocatable", "available"] == resource["required"]


def test_rbac_grants_only_what_the_publisher_calls() -> None:
    """nodes get; noderesourcetopologies get/create/update/patch; bound to podpin's ServiceAccount."""
    role, binding = documents(RBAC)
    assert [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
        {"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["get", "create", "update", "patch"]},
    ] == role["rules"]
    assert {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": role["metadata"]["name"],
    } == binding["roleRef"]
    daemonset = documents(REPO / "deploy" / "daemonset.yaml")
    (account,) = [d for d in daemonset if d["kind"] == "ServiceAccount"]
    assert [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": account["metadata"]["namespace"]}
    ] == binding["subjects"]
