"""The API server emulator answers the official client as a real API server would (within its documented scope)."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator
from typing import Any, cast
from urllib.parse import urlsplit

import pytest
import urllib3
from kubernetes.client import V1Pod
from kubernetes.client.exceptions import ApiException

from agent.kube import CoreCalls
from tests.support.apiserver_emulator import ApiServerEmulator, RequestRecord
from tests.support.kubewatch import TypedWatch


def pod(
    name: str, node: str | None = None, *, namespace: str = "default", labels: dict[str, str] | None = None
) -> dict[str, Any]:
    """A minimal valid pod manifest."""
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "busybox"}]}
    if node is not None:
        spec["nodeName"] = node
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = labels
    return {"metadata": metadata, "spec": spec}


def _name(pod: V1Pod) -> str | None:
    """A client model pod's name."""
    assert pod.metadata is not None
    return pod.metadata.name


@pytest.fixture
def emulator() -> Iterator[ApiServerEmulator]:
    with ApiServerEmulator() as em:
        yield em


def raw_get(em: ApiServerEmulator, target: str) -> tuple[http.client.HTTPResponse, bytes]:
    """A plain HTTP GET (no client library), the whole body read."""
    url = urlsplit(em.url)
    conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=5)
    conn.request("GET", target)
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response, body


def list_names(api: CoreCalls, **kwargs: Any) -> tuple[list[str], str]:
    """Names of the pods a list returns, and the list's resourceVersion."""
    doc = json.loads(api.list_pod_for_all_namespaces(_preload_content=False, **kwargs).data)
    return [p["metadata"]["name"] for p in doc["items"]], doc["metadata"]["resourceVersion"]


def take(api: CoreCalls, n: int, **kwargs: Any) -> list[tuple[str, str | None]]:
    """The first ``n`` watch events as (type, pod name), read through the official Watch."""
    watcher = TypedWatch()
    out: list[tuple[str, str | None]] = []
    kwargs.setdefault("timeout_seconds", 5)
    for event in watcher.stream(api.list_pod_for_all_namespaces, **kwargs):
        out.append((event["type"], event["raw_object"]["metadata"].get("name")))
        if len(out) == n:
            watcher.stop()
    return out


class TestList:
    def test_field_selector_on_node_name(self, emulator: ApiServerEmulator) -> None:
        """``spec.nodeName=n1`` returns only that node's pods, with the current resourceVersion."""
        emulator.add_pod(pod("a", "n1"))
        emulator.add_pod(pod("b", "n2"))
        emulator.add_pod(pod("c", "n1"))
        assert (["a", "c"], "4") == list_names(emulator.api(), field_selector="spec.nodeName=n1")

    def test_empty_node_name_matches_unscheduled(self, emulator: ApiServerEmulator) -> None:
        """``spec.nodeName=`` matches pods not bound to any node, as on a real server."""
        emulator.add_pod(pod("pending"))
        emulator.add_pod(pod("bound", "n1"))
        assert ["pending"] == list_names(emulator.api(), field_selector="spec.nodeName=")[0]

    def test_label_and_namespace_selectors(self, emulator: ApiServerEmulator) -> None:
        """Equality and inequality label terms combine with a namespaced path."""
        emulator.add_pod(pod("a", namespace="x", labels={"app": "db", "tier": "1"}))
        emulator.add_pod(pod("b", namespace="x", labels={"app": "db", "tier": "2"}))
        emulator.add_pod(pod("c", namespace="y", labels={"app": "db"}))
        # With _preload_content=False the client returns the raw HTTP response; its annotation says V1PodList.
        response = cast(
            urllib3.BaseHTTPResponse,
            emulator.core_v1().list_namespaced_pod("x", label_selector="app=db,tier!=2", _preload_content=False),
        )
        doc = json.loads(response.data)
        assert ["a"] == [p["metadata"]["name"] for p in doc["items"]]

    def test_list_items_deserialise_with_the_client_models(self, emulator: ApiServerEmulator) -> None:
        """A preloaded list goes through the client's own model deserialisation."""
        emulator.add_pod(pod("a", "n1"))
        result = emulator.core_v1().list_pod_for_all_namespaces()
        assert ["a"] == [_name(p) for p in result.items]

    def test_unsupported_field_is_400(self, emulator: ApiServerEmulator) -> None:
        """An unknown field label is refused with 400 and the real server's message."""
        with pytest.raises(ApiException) as caught:
            emulator.api().list_pod_for_all_namespaces(field_selector="spec.bogus=1")
        assert caught.value.body is not None
        assert (400, 'field label not supported: "spec.bogus"') == (
            caught.value.status,
            json.loads(caught.value.body)["message"],
        )


class TestWatch:
    def test_replays_changes_after_a_version(self, emulator: ApiServerEmulator) -> None:
        """A watch from a list's version replays later ADDED/MODIFIED/DELETED in order."""
        emulator.add_pod(pod("a", "n1"))
        _, version = list_names(emulator.api())
        emulator.add_pod(pod("b", "n1"))
        emulator.update_pod({**pod("a", "n1"), "status": {"phase": "Running"}})
        emulator.delete_pod("default", "b")
        events = take(emulator.api(), 3, resource_version=version)
        assert [("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")] == events

    def test_version_zero_replays_current_pods(self, emulator: ApiServerEmulator) -> None:
        """``resourceVersion=0`` starts with the current pods as ADDED."""
        emulator.add_pod(pod("a", "n1"))
        emulator.add_pod(pod("b", "n1"))
        assert [("ADDED", "a"), ("ADDED", "b")] == take(emulator.api(), 2, resource_version="0")

    def test_selector_entry_and_exit(self, emulator: ApiServerEmulator) -> None:
        """Binding a pod to the node shows as ADDED, moving it away as DELETED."""
        emulator.add_pod(pod("p"))
        version = str(emulator.resource_version)
        emulator.update_pod(pod("p", "n1"))
        emulator.update_pod(pod("p", "n2"))
        events = take(emulator.api(), 2, resource_version=version, field_selector="spec.nodeName=n1")
        assert [("ADDED", "p"), ("DELETED", "p")] == events

    def test_live_events_arrive_while_watching(self, emulator: ApiServerEmulator) -> None:
        """A change made while a watch is open is streamed to it."""
        version = str(emulator.resource_version)
        api = emulator.api()
        watcher = TypedWatch()
        stream = watcher.stream(api.list_pod_for_all_namespaces, resource_version=version, timeout_seconds=5)
        emulator.add_pod(pod("late", "n1"))
        event = next(stream)
        stream.close()
        assert ("ADDED", "late", str(emulator.resource_version)) == (
            event["type"],
            event["raw_object"]["metadata"]["name"],
            event["raw_object"]["metadata"]["resourceVersion"],
        )

    def test_compacted_version_is_an_error_event_410(self, emulator: ApiServerEmulator) -> None:
        """After compaction a watch from an old version gets an ERROR event with a 410 Status."""
        emulator.add_pod(pod("a"))
        emulator.compact_history()
        response, body = raw_get(emulator, "/api/v1/pods?watch=true&resourceVersion=2")
        event = json.loads(body.splitlines()[0])
        assert (200, "chunked", "ERROR", 410, "Expired", "too old resource version: 2 (3)") == (
            response.status,
            response.getheader("Transfer-Encoding"),
            event["type"],
            event["object"]["code"],
            event["object"]["reason"],
            event["object"]["message"],
        )

    def test_client_sees_410_as_api_exception(self, emulator: ApiServerEmulator) -> None:
        """The official Watch with timeout_seconds raises ApiException(410) for the ERROR event."""
        emulator.compact_history()
        with pytest.raises(ApiException) as caught:
            take(emulator.api(), 1, resource_version="1", timeout_seconds=1)
        assert 410 == caught.value.status

    def test_bounded_history_expires_old_versions(self) -> None:
        """With history_size=2 a version three changes back is too old."""
        with ApiServerEmulator(history_size=2) as em:
            for name in ("a", "b", "c"):
                em.add_pod(pod(name))
            _, body = raw_get(em, "/api/v1/pods?watch=true&resourceVersion=1")
            assert "ERROR" == json.loads(body.splitlines()[0])["type"]

    def test_bookmarks_on_request(self, emulator: ApiServerEmulator) -> None:
        """send_bookmarks() gives a BOOKMARK with the current version to watches that allow them."""
        api = emulator.api()
        version = str(emulator.resource_version)
        watcher = TypedWatch()
        stream = watcher.stream(
            api.list_pod_for_all_namespaces,
            resource_version=version,
            allow_watch_bookmarks=True,
            field_selector="spec.nodeName=n1",
            timeout_seconds=5,
        )
        emulator.add_pod(pod("elsewhere", "n2"))

        def bookmark_once_watching() -> None:
            if emulator.wait_for(lambda em: em.active_watches == 1):
                emulator.send_bookmarks()

        helper = threading.Thread(target=bookmark_once_watching)
        helper.start()
        event = next(stream)
        helper.join()
        stream.close()
        assert ("BOOKMARK", "2") == (event["type"], event["raw_object"]["metadata"]["resourceVersion"])

    def test_no_bookmarks_unless_allowed(self) -> None:
        """A watch without allowWatchBookmarks never gets one, even on an interval."""
        with ApiServerEmulator(bookmark_interval=0.02) as em:
            ender = threading.Timer(0.2, lambda: em.drop_watches(abrupt=False))
            ender.start()
            _, body = raw_get(em, "/api/v1/pods?watch=true&resourceVersion=1&timeoutSeconds=5")
            ender.join()
            assert b"" == body

    def test_periodic_bookmarks(self) -> None:
        """With bookmark_interval set, bookmarks arrive without being asked for."""
        with ApiServerEmulator(bookmark_interval=0.05) as em:
            events = take(em.api(), 2, resource_version="1", allow_watch_bookmarks=True)
            assert [("BOOKMARK", None), ("BOOKMARK", None)] == events

    def test_timeout_seconds_ends_the_stream_cleanly(self, emulator: ApiServerEmulator) -> None:
        """timeoutSeconds=1 ends the stream with the terminating chunk after about a second."""
        start = time.monotonic()
        response, body = raw_get(emulator, "/api/v1/pods?watch=true&resourceVersion=1&timeoutSeconds=1")
        elapsed = time.monotonic() - start
        assert (200, b"", True) == (response.status, body, 0.9 < elapsed < 2.0)

    def test_drop_watches_abrupt_breaks_the_stream(self, emulator: ApiServerEmulator) -> None:
        """An abrupt drop reaches the client as a protocol error mid-stream."""
        watcher = TypedWatch()
        stream = watcher.stream(emulator.api().list_pod_for_all_namespaces, resource_version="1", timeout_seconds=5)
        emulator.add_pod(pod("a"))
        next(stream)
        assert 1 == emulator.drop_watches()
        with pytest.raises(urllib3.exceptions.ProtocolError):
            next(stream)

    def test_drop_watches_graceful_ends_the_stream(self, emulator: ApiServerEmulator) -> None:
        """A graceful drop ends the stream normally."""
        watcher = TypedWatch()
        stream = watcher.stream(emulator.api().list_pod_for_all_namespaces, resource_version="1", timeout_seconds=5)
        emulator.add_pod(pod("a"))
        next(stream)
        emulator.drop_watches(abrupt=False)
        assert [] == list(stream)


class TestFailures:
    def test_fail_next_500(self, emulator: ApiServerEmulator) -> None:
        """An injected 500 reaches the caller; the request after it succeeds."""
        emulator.fail_next(1, 500)
        with pytest.raises(ApiException) as caught:
            emulator.api().list_pod_for_all_namespaces()
        emulator.api().list_pod_for_all_namespaces()
        assert (500, [500, 200]) == (caught.value.status, [r.status for r in emulator.requests])

    def test_429_with_retry_after_is_retried_inside_the_client(self, emulator: ApiServerEmulator) -> None:
        """A 429 with Retry-After is retried by urllib3; the caller only sees the success."""
        emulator.fail_next(2, 429, retry_after=0)
        emulator.api().list_pod_for_all_namespaces()
        assert [429, 429, 200] == [r.status for r in emulator.requests]

    def test_fail_next_by_method(self, emulator: ApiServerEmulator) -> None:
        """A failure for POST leaves GETs alone."""
        emulator.fail_next(1, 503, method="POST")
        emulator.api().list_pod_for_all_namespaces()
        assert [("GET", 200)] == [(r.method, r.status) for r in emulator.requests]


def event_body(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "a", "namespace": "default", "uid": "u1"},
        "reason": "Pinned",
        "message": "m",
        "type": "Normal",
        "count": 1,
    }


class TestEvents:
    def test_create_and_patch(self, emulator: ApiServerEmulator) -> None:
        """POST stores the Event, PATCH merges into it, and both are logged."""
        api = emulator.api()
        api.create_namespaced_event("default", event_body("a.1"))
        api.patch_namespaced_event("a.1", "default", {"count": 2, "message": "again"})
        (stored,) = emulator.events
        assert (2, "again", "Pinned", ["POST", "PATCH"]) == (
            stored["count"],
            stored["message"],
            stored["reason"],
            [r.method for r in emulator.requests],
        )

    def test_duplicate_name_is_409(self, emulator: ApiServerEmulator) -> None:
        """Creating an Event whose name exists is refused with 409."""
        api = emulator.api()
        api.create_namespaced_event("default", event_body("a.1"))
        with pytest.raises(ApiException) as caught:
            api.create_namespaced_event("default", event_body("a.1"))
        assert 409 == caught.value.status

    def test_patch_of_missing_event_is_404(self, emulator: ApiServerEmulator) -> None:
        """Patching an Event that does not exist is 404 (as after the API's Event TTL)."""
        with pytest.raises(ApiException) as caught:
            emulator.api().patch_namespaced_event("gone.1", "default", {"count": 2})
        assert 404 == caught.value.status


class TestControl:
    def test_request_log(self, emulator: ApiServerEmulator) -> None:
        """Each request is logged with method, path, query, status and Authorization."""
        api = emulator.core_v1(api_key={"BearerToken": "Bearer t0k"})
        api.list_namespaced_pod("kube-system", label_selector="a=b", _preload_content=False)
        expected = RequestRecord(
            method="GET",
            path="/api/v1/namespaces/kube-system/pods",
            query={"labelSelector": "a=b"},
            status=200,
            authorization="Bearer t0k",
        )
        assert [expected] == emulator.requests

    def test_unknown_path_is_404(self, emulator: ApiServerEmulator) -> None:
        """A resource the emulator does not serve is 404, not a silent empty answer."""
        response, _ = raw_get(emulator, "/api/v1/nodes")
        assert 404 == response.status

    def test_add_existing_pod_is_refused(self, emulator: ApiServerEmulator) -> None:
        """Adding a pod twice is a test bug, reported as such."""
        emulator.add_pod(pod("a"))
        with pytest.raises(ValueError, match=r"^pod default/a already exists$"):
            emulator.add_pod(pod("a"))

    def test_update_keeps_uid(self, emulator: ApiServerEmulator) -> None:
        """update_pod keeps the uid and bumps the resourceVersion."""
        created = emulator.add_pod(pod("a"))
        updated = emulator.update_pod(pod("a", "n1"))
        assert (created["metadata"]["uid"], "3") == (updated["metadata"]["uid"], updated["metadata"]["resourceVersion"])

    def test_wait_for_times_out(self, emulator: ApiServerEmulator) -> None:
        """wait_for returns False when the condition never holds."""
        assert False is emulator.wait_for(lambda em: em.active_watches == 5, timeout=0.1)
