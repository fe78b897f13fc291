"""The API server emulator's Nodes and custom objects, through the official client, as the real server answers."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from agent.nrt.calls import TopologyCalls
from tests.support.apiserver_emulator import ApiServerEmulator
from tests.support.paths import REPO

GROUP, PLURAL = "topology.node.k8s.io", "noderesourcetopologies"


@pytest.fixture
def api() -> Iterator[ApiServerEmulator]:
    with ApiServerEmulator() as em:
        em.objects.register_crd(yaml.safe_load((REPO / "deploy" / "crds" / "noderesourcetopologies.yaml").read_text()))
        yield em


def calls(api: ApiServerEmulator) -> TopologyCalls:
    return TopologyCalls(api.api().configuration)


def body(name: str = "n1", available: str = "4") -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": name},
        "zones": [
            {
                "name": "node-0",
                "type": "Node",
                "resources": [{"name": "cpu", "capacity": "8", "allocatable": "8", "available": available}],
            }
        ],
    }


def status(call: Any) -> int:
    with pytest.raises(ApiException) as caught:
        call()
    return int(caught.value.status)


def test_node_get(api: ApiServerEmulator) -> None:
    """A Node is read with its uid and status; an unknown one is 404."""
    api.objects.add_node("n1", uid="u1", capacity={"cpu": "8"})
    node = calls(api).read_node("n1")
    assert ("u1", {"cpu": "8"}) == (node["metadata"]["uid"], node["status"]["capacity"])
    assert 404 == status(lambda: calls(api).read_node("n2"))


def test_create_get_replace_and_conflicts(api: ApiServerEmulator) -> None:
    """Create sets uid/resourceVersion/generation; a second create is 409; a stale PUT is 409; a fresh one bumps the
    generation."""
    client = calls(api)
    created = client.create_topology(body())
    assert 1 == created["metadata"]["generation"]
    assert 409 == status(lambda: client.create_topology(body()))
    fresh = client.read_topology("n1")
    stale = dict(body(available="2"), metadata={"name": "n1", "resourceVersion": "1"})
    assert 409 == status(lambda: client.replace_topology("n1", stale))
    replaced = client.replace_topology("n1", dict(body(available="2"), metadata=fresh["metadata"]))
    assert (2, fresh["metadata"]["uid"]) == (replaced["metadata"]["generation"], replaced["metadata"]["uid"])
    assert 404 == status(lambda: client.read_topology("n2"))


def test_invalid_objects_are_refused_with_422(api: ApiServerEmulator) -> None:
    """An object the CRD schema refuses is 422 Invalid, naming the field."""
    bad = body()
    del bad["zones"][0]["type"]
    with pytest.raises(ApiException) as caught:
        calls(api).create_topology(bad)
    assert 422 == caught.value.status
    assert "zones.0: 'type' is a required property" in str(caught.value.body)


def test_merge_patch_and_other_patch_types(api: ApiServerEmulator) -> None:
    """A JSON merge patch is applied; a JSON patch is 415."""
    calls(api).create_topology(body())
    url = urlsplit(api.url)
    statuses = []
    for content_type in ("application/merge-patch+json", "application/json-patch+json"):
        conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=5)
        conn.request(
            "PATCH",
            f"/apis/{GROUP}/v1alpha2/{PLURAL}/n1",
            body=json.dumps({"attributes": [{"name": "a", "value": "b"}]}),
            headers={"Content-Type": content_type, "Accept": "application/json"},
        )
        response = conn.getresponse()
        response.read()
        conn.close()
        statuses.append(response.status)
    assert [200, 415] == statuses
    stored = api.objects.custom(GROUP, PLURAL, "n1")
    assert stored is not None
    assert [{"name": "a", "value": "b"}] == stored["attributes"]


def test_unknown_crd_is_404() -> None:
    """Without the CRD the resource is not found, as on a cluster that lacks it."""
    with ApiServerEmulator() as bare:
        assert 404 == status(lambda: calls(bare).create_topology(body()))


def test_node_deletion_collects_owned_objects(api: ApiServerEmulator) -> None:
    """Deleting a Node deletes the objects whose ownerReference names its uid, and only those."""
    api.objects.add_node("n1", uid="u1")
    owned = dict(
        body(),
        metadata={"name": "n1", "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "u1"}]},
    )
    calls(api).create_topology(owned)
    calls(api).create_topology(body("other"))
    api.objects.delete_node("n1")
    assert ["other"] == [o["metadata"]["name"] for o in api.objects.customs(GROUP, PLURAL)]
