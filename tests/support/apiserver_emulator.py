"""A small Kubernetes API server for tests: pods, watches and Events over real HTTP on 127.0.0.1.

No kube-apiserver can be installed on this workplace, and a monkeypatched client
would skip exactly the code that breaks in production (urllib3, chunked
streaming, deserialisation, retries). This emulator speaks enough of the real
protocol for the official client's own code paths to run:

- one global, monotonically increasing ``resourceVersion`` shared by pods and
  Events (as etcd's revision is shared by every resource);
- ``GET /api/v1/pods`` and ``/api/v1/namespaces/{ns}/pods`` with ``fieldSelector``
  (``metadata.name``, ``metadata.namespace``, ``spec.nodeName``, ``status.phase``;
  ``=``, ``==``, ``!=``) and equality ``labelSelector``; an unset ``spec.nodeName``
  matches ``spec.nodeName=`` as in the real server;
- ``watch=true`` from a ``resourceVersion`` (``""``/``"0"`` replay the current pods
  as ADDED), replaying newer changes from a bounded history; a version older than
  the history gets an ERROR event carrying a 410 ``Status``; a pod that starts or
  stops matching the selector arrives as ADDED or DELETED, as from the real
  server; ``allowWatchBookmarks`` (BOOKMARK on :meth:`send_bookmarks` or every
  ``bookmark_interval``); ``timeoutSeconds`` ends the stream with the terminating
  chunk; one JSON object per line, one chunk per line;
- ``PATCH /api/v1/namespaces/{ns}/pods/{name}/status`` (strategic merge of ``status.conditions``, uid
  precondition);
- ``GET``/``DELETE`` of apps/v1 DaemonSets the test stores (status and all: the test is their controller);
- ``GET /api/v1/nodes/{name}`` and cluster-scoped custom objects of registered
  CRDs (create, get, replace, merge patch, schema-validated): ``cluster_objects.py``;
- ``POST /api/v1/namespaces/{ns}/events``, ``PATCH .../events/{name}`` (JSON merge
  patch, which equals a strategic merge patch for the scalar fields of an Event),
  and ``GET`` of the Events of a namespace.

Not emulated: authentication (the ``Authorization`` header is only recorded),
``limit``/``continue`` paging, set-based label selectors, JSON patch, and any
other resource (404).

This module holds the state and the control methods tests call; the HTTP
protocol (routing, selectors, chunked streams) is in ``apiserver_http.py``.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

from agent.kube.api import CoreCalls
from tests.support.apiserver_http import (
    ApiHTTPServer,
    Failure,
    HTTPError,
    Obj,
    RequestRecord,
    WatchStream,
    status_body,
    status_event,
)
from tests.support.cluster_objects import ClusterObjects, ObjectError

__all__ = ["ApiServerEmulator", "RequestRecord"]


@dataclass(frozen=True, slots=True)
class _Change:
    """One pod change in the history: ``old`` is the object before (None when added)."""

    rv: int
    type: str
    old: Obj | None
    new: Obj


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (``null`` deletes a key)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class ApiServerEmulator:
    """The emulator: start it (``with ApiServerEmulator() as em``), point a client at ``em.url``.

    Args:
        history_size: how many pod changes are kept for watch replay; older
            versions get 410 Gone.
        bookmark_interval: seconds between BOOKMARK events on watches that
            allow them; None sends them only on :meth:`send_bookmarks`.
        default_watch_timeout: seconds a watch without ``timeoutSeconds`` lasts.
        tls: ``(certificate, key)`` files to serve HTTPS with, as a real API server does (the agent's
            in-cluster configuration always speaks HTTPS); None serves plain HTTP.
    """

    def __init__(
        self,
        *,
        history_size: int = 1000,
        bookmark_interval: float | None = None,
        default_watch_timeout: float = 1800.0,
        tls: tuple[Path, Path] | None = None,
    ) -> None:
        self._history_size = history_size
        self._bookmark_interval = bookmark_interval
        self.default_watch_timeout = default_watch_timeout
        self._cond = threading.Condition(threading.RLock())
        self._rv = 1
        self._pods: dict[tuple[str, str], Obj] = {}
        self._history: list[_Change] = []
        self._compacted = 0  # a watch must start at or after this version
        self._dropped_max = 0  # newest change removed from the history
        self._events: dict[tuple[str, str], Obj] = {}
        self._requests: list[RequestRecord] = []
        self._failures: list[Failure] = []
        self._streams: set[WatchStream] = set()
        self._bookmark_gen = 0
        self._closing = False
        self._outage: Failure | None = None
        self.objects = ClusterObjects(self._cond, self._bump)
        #: Every pod status patch received: (namespace, name, patch).
        self.status_patches: list[tuple[str, str, Obj]] = []
        self._server = ApiHTTPServer(self)
        self._scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            # The handshake happens in each connection's handler thread, not in the accepting one.
            self._server.socket = context.wrap_socket(
                self._server.socket, server_side=True, do_handshake_on_connect=False
            )
            self._scheme = "https"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="apiserver-emulator", daemon=True
        )

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> ApiServerEmulator:
        """Serve on 127.0.0.1 at an ephemeral port."""
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and close every open connection."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._server.shutdown()
        self._server.close_all()
        self._server.server_close()

    def __enter__(self) -> ApiServerEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def url(self) -> str:
        """The base URL, e.g. ``http://127.0.0.1:40123`` (``https`` when serving TLS)."""
        return f"{self._scheme}://127.0.0.1:{self._server.server_address[1]}"

    @property
    def port(self) -> int:
        """The port it serves on."""
        return int(self._server.server_address[1])

    def api(self, **config: Any) -> CoreCalls:
        """The agent's official-client calls for this server (``config`` sets ``Configuration`` attributes)."""
        configuration = client.Configuration()
        configuration.host = self.url
        for key, value in config.items():
            setattr(configuration, key, value)
        return CoreCalls(configuration)

    def core_v1(self, **config: Any) -> client.CoreV1Api:
        """The full generated ``CoreV1Api`` for this server, for tests of calls the agent does not make."""
        configuration = client.Configuration()
        configuration.host = self.url
        for key, value in config.items():
            setattr(configuration, key, value)
        return client.CoreV1Api(client.ApiClient(configuration))

    # -- pods ----------------------------------------------------------------------------------

    def add_pod(self, pod: Obj) -> Obj:
        """Create a pod (namespace defaults to ``default``, uid and timestamps are filled)."""
        new = copy.deepcopy(pod)
        meta = new.setdefault("metadata", {})
        meta.setdefault("namespace", "default")
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", _now())
        new.setdefault("kind", "Pod")
        new.setdefault("apiVersion", "v1")
        with self._cond:
            key = (meta["namespace"], meta["name"])
            if key in self._pods:
                raise ValueError(f"pod {key[0]}/{key[1]} already exists")
            return self._record("ADDED", None, new)

    def update_pod(self, pod: Obj) -> Obj:
        """Replace a pod; its uid and creationTimestamp are kept when not given."""
        new = copy.deepcopy(pod)
        meta = new.setdefault("metadata", {})
        meta.setdefault("namespace", "default")
        with self._cond:
            old = self._pods.get((meta["namespace"], meta["name"]))
            if old is None:
                raise KeyError(f"pod {meta['namespace']}/{meta['name']} does not exist")
            for key in ("uid", "creationTimestamp"):
                meta.setdefault(key, old["metadata"][key])
            new.setdefault("kind", "Pod")
            new.setdefault("apiVersion", "v1")
            return self._record("MODIFIED", old, new)

    def delete_pod(self, namespace: str, name: str) -> Obj:
        """Delete a pod; watchers get DELETED with the object at the deletion's version."""
        with self._cond:
            old = self._pods.get((namespace, name))
            if old is None:
                raise KeyError(f"pod {namespace}/{name} does not exist")
            return self._record("DELETED", old, copy.deepcopy(old))

    @property
    def pods(self) -> list[Obj]:
        """Copies of the current pods."""
        with self._cond:
            return copy.deepcopy(list(self._pods.values()))

    @property
    def resource_version(self) -> int:
        """The newest resourceVersion handed out."""
        with self._cond:
            return self._rv

    def _record(self, kind: str, old: Obj | None, new: Obj) -> Obj:
        self._rv += 1
        new["metadata"]["resourceVersion"] = str(self._rv)
        key = (new["metadata"]["namespace"], new["metadata"]["name"])
        if kind == "DELETED":
            del self._pods[key]
        else:
            self._pods[key] = new
        self._history.append(_Change(self._rv, kind, old, new))
        if len(self._history) > self._history_size:
            gone = self._history.pop(0)
            self._dropped_max = gone.rv
            self._compacted = max(self._compacted, gone.rv)
        self._cond.notify_all()
        return copy.deepcopy(new)

    # -- control -------------------------------------------------------------------------------

    def compact_history(self) -> None:
        """Forget every change, as an etcd compaction does, and advance the version once.

        The version advances as if another resource had been written, so a
        client resuming from any version it has seen so far gets 410 Gone.
        Open watches are not affected (they have missed nothing).
        """
        with self._cond:
            self._rv += 1
            self._compacted = self._rv
            self._history.clear()
            self._cond.notify_all()

    def fail_next(self, n: int, status: int, *, retry_after: int | None = None, method: str | None = None) -> None:
        """Answer the next ``n`` requests (of ``method`` if given) with ``status`` and a Status body."""
        with self._cond:
            self._failures.append(Failure(n, status, retry_after, method))

    def outage(self, active: bool, status: int = 503) -> None:
        """While ``active``, answer every request with ``status`` (an API server that is down), until called off."""
        with self._cond:
            self._outage = Failure(1, status, None, None) if active else None

    def drop_watches(self, *, abrupt: bool = True) -> int:
        """End every open watch: ``abrupt`` closes the socket mid-stream, else the stream ends cleanly.

        Returns:
            how many streams were ended.
        """
        with self._cond:
            streams = list(self._streams)
            for stream in streams:
                stream.dropped = True
                if abrupt:
                    with contextlib.suppress(OSError):  # already closed by the client
                        stream.conn.shutdown(socket.SHUT_RDWR)
            self._cond.notify_all()
            return len(streams)

    def send_bookmarks(self) -> None:
        """Send a BOOKMARK with the current version on every watch that allows bookmarks."""
        with self._cond:
            self._bookmark_gen += 1
            self._cond.notify_all()

    def inject_watch_event(self, event: Any) -> None:
        """Send ``event`` verbatim (any JSON value) on every open watch, e.g. a malformed one."""
        with self._cond:
            for stream in self._streams:
                stream.injected.append(event)
            self._cond.notify_all()

    @property
    def active_watches(self) -> int:
        """How many watch streams are open."""
        with self._cond:
            return len(self._streams)

    @property
    def events(self) -> list[Obj]:
        """Copies of the Events received (after PATCHes), in creation order."""
        with self._cond:
            return copy.deepcopy(list(self._events.values()))

    @property
    def requests(self) -> list[RequestRecord]:
        """Every request answered so far, in order."""
        with self._cond:
            return list(self._requests)

    def wait_for(self, predicate: Callable[[ApiServerEmulator], bool], timeout: float = 5.0) -> bool:
        """Wait until ``predicate(self)`` holds (checked on every state change); False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(self):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(min(remaining, 0.05))
            return True

    # -- the Backend the HTTP layer calls (apiserver_http.Backend) -----------------------------------

    def serve_log(self, record: RequestRecord) -> None:
        with self._cond:
            self._requests.append(record)
            self._cond.notify_all()

    def serve_failure(self, method: str) -> Failure | None:
        with self._cond:
            if self._outage is not None:
                return self._outage
            for failure in self._failures:
                if failure.method in (None, method):
                    failure.remaining -= 1
                    if failure.remaining <= 0:
                        self._failures.remove(failure)
                    return failure
            return None

    def serve_list_pods(self, match: Callable[[Obj], bool]) -> Obj:
        with self._cond:
            items = []
            for pod in sorted(self._pods.values(), key=lambda p: int(p["metadata"]["resourceVersion"])):
                if match(pod):
                    item = copy.deepcopy(pod)
                    item.pop("kind", None)
                    item.pop("apiVersion", None)
                    items.append(item)
            return {
                "kind": "PodList",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": str(self._rv)},
                "items": items,
            }

    def serve_watch(
        self, stream: WatchStream, match: Callable[[Obj], bool], since: str, bookmarks: bool, timeout: float
    ) -> Iterator[Obj]:
        """The events of one watch, blocking between them; ends at the timeout or on a drop."""
        deadline = time.monotonic() + timeout
        interval = self._bookmark_interval
        next_bookmark = time.monotonic() + interval if interval is not None else None
        with self._cond:
            self._streams.add(stream)
            stream.bookmark_gen = self._bookmark_gen
            if since in ("", "0"):
                pos = self._rv
                initial = [
                    {"type": "ADDED", "object": copy.deepcopy(p)}
                    for p in sorted(self._pods.values(), key=lambda p: int(p["metadata"]["resourceVersion"]))
                    if match(p)
                ]
            else:
                pos = int(since)
                initial = []
                if pos < self._compacted:
                    initial = [
                        {
                            "type": "ERROR",
                            "object": status_body(410, f"too old resource version: {pos} ({self._compacted})"),
                        }
                    ]
        try:
            yield from initial
            if initial and initial[0]["type"] == "ERROR":
                return
            while True:
                out: list[Obj] = []
                with self._cond:
                    while True:
                        if stream.dropped or self._closing:
                            return
                        if self._dropped_max > pos:
                            yield status_event(410, f"too old resource version: {pos} ({self._dropped_max})")
                            return
                        pending = [c for c in self._history if c.rv > pos]
                        now = time.monotonic()
                        bookmark = bookmarks and (
                            stream.bookmark_gen != self._bookmark_gen
                            or (next_bookmark is not None and now >= next_bookmark)
                        )
                        if pending or bookmark or stream.injected:
                            break
                        if now >= deadline:
                            return
                        wake = deadline if next_bookmark is None else min(deadline, next_bookmark)
                        self._cond.wait(max(wake - now, 0.001))
                    out.extend(stream.injected)
                    stream.injected.clear()
                    for change in pending:
                        out.extend(_translate(change, match))
                        pos = change.rv
                    if bookmark:
                        pos = self._rv
                        stream.bookmark_gen = self._bookmark_gen
                        if interval is not None:
                            next_bookmark = time.monotonic() + interval
                        out.append(
                            {
                                "type": "BOOKMARK",
                                "object": {
                                    "kind": "Pod",
                                    "apiVersion": "v1",
                                    "metadata": {"resourceVersion": str(pos)},
                                },
                            }
                        )
                yield from out
        finally:
            with self._cond:
                self._streams.discard(stream)
                self._cond.notify_all()

    def serve_create_event(self, namespace: str, body: Obj) -> Obj:
        meta = body.setdefault("metadata", {})
        name = meta.get("name")
        if not name:
            raise HTTPError(400, "Event.metadata.name: Required value")
        if meta.setdefault("namespace", namespace) != namespace:
            raise HTTPError(
                400,
                f"the namespace of the object ({meta['namespace']}) does not match"
                f" the namespace on the request ({namespace})",
            )
        if not isinstance(body.get("involvedObject"), dict):
            raise HTTPError(400, "Event.involvedObject: Required value")
        with self._cond:
            if (namespace, name) in self._events:
                raise HTTPError(409, f'events "{name}" already exists')
            self._rv += 1
            meta.update(uid=str(uuid.uuid4()), resourceVersion=str(self._rv), creationTimestamp=_now())
            body.setdefault("kind", "Event")
            body.setdefault("apiVersion", "v1")
            self._events[(namespace, name)] = body
            self._cond.notify_all()
            return copy.deepcopy(body)

    def serve_patch_event(self, namespace: str, name: str, patch: Any) -> Obj:
        if not isinstance(patch, dict):
            raise HTTPError(415, "only merge patches (a JSON object) are supported")
        with self._cond:
            old = self._events.get((namespace, name))
            if old is None:
                raise HTTPError(404, f'events "{name}" not found')
            new = merge_patch(old, patch)
            self._rv += 1
            new["metadata"]["resourceVersion"] = str(self._rv)
            self._events[(namespace, name)] = new
            self._cond.notify_all()
            return copy.deepcopy(new)

    def _bump(self) -> int:
        """The next resourceVersion (shared by every resource, as etcd's revision)."""
        with self._cond:
            self._rv += 1
            return self._rv

    def serve_object(
        self,
        method: str,
        path: str,
        body: Any,
        content_type: str,
        query: Mapping[str, str] | None = None,
        manager: str = "unknown",
    ) -> tuple[int, Obj] | None:
        parts = path.strip("/").split("/")
        try:
            if parts[:3] == ["api", "v1", "nodes"] and len(parts) == 4 and method == "GET":
                return 200, self.objects.get_node(parts[3])
            if parts[:4] == ["apis", "apps", "v1", "namespaces"] and len(parts) == 7 and parts[5] == "daemonsets":
                return self.objects.serve_daemonset(method, parts[4], parts[6])
            if parts[0] == "apis" and len(parts) in (4, 5):
                name = parts[4] if len(parts) == 5 else None
                return self.objects.serve_custom(
                    method, parts[1], parts[2], parts[3], name, body, content_type, query, manager
                )
        except ObjectError as err:
            raise HTTPError(err.status, err.message) from None
        return None

    def serve_patch_pod_status(self, namespace: str, name: str, patch: Any, content_type: str) -> Obj:
        """A strategic merge patch of a pod's status, as the API server applies one to ``status.conditions``
        (merged by ``type``; other status fields replaced when given); ``metadata.uid`` in the patch is a
        precondition (409 when it differs). Watchers get MODIFIED."""
        if content_type.split(";", maxsplit=1)[0].strip() != "application/strategic-merge-patch+json":
            raise HTTPError(
                415, f"the emulator supports only strategic merge patches of pod status, not {content_type!r}"
            )
        if not isinstance(patch, dict):
            raise HTTPError(400, "the patch is not an object")
        with self._cond:
            old = self._pods.get((namespace, name))
            if old is None:
                raise HTTPError(404, f'pods "{name}" not found')
            uid = (patch.get("metadata") or {}).get("uid")
            if uid is not None and uid != old["metadata"]["uid"]:
                raise HTTPError(
                    409,
                    f"Precondition failed: UID in precondition: {uid}, UID in object meta: {old['metadata']['uid']}",
                )
            new = copy.deepcopy(old)
            status = new.setdefault("status", {})
            for key, value in (patch.get("status") or {}).items():
                if key != "conditions":
                    status[key] = copy.deepcopy(value)
                    continue
                conditions = {c.get("type"): c for c in status.get("conditions") or []}
                for condition in value or []:
                    conditions[condition.get("type")] = {**conditions.get(condition.get("type"), {}), **condition}
                status["conditions"] = list(conditions.values())
            self.status_patches.append((namespace, name, copy.deepcopy(patch)))
            return self._record("MODIFIED", old, new)

    def serve_list_events(self, namespace: str) -> Obj:
        with self._cond:
            items = [copy.deepcopy(e) for (ns, _), e in self._events.items() if ns == namespace]
            return {
                "kind": "EventList",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": str(self._rv)},
                "items": items,
            }


def _translate(change: _Change, match: Callable[[Obj], bool]) -> list[Obj]:
    """What one change looks like through a selector (entering -> ADDED, leaving -> DELETED)."""
    was = change.old is not None and match(change.old)
    is_ = change.type != "DELETED" and match(change.new)
    if change.type == "DELETED":
        kind = "DELETED" if was else None
    elif was and is_:
        kind = "MODIFIED"
    elif is_:
        kind = "ADDED"
    elif was:
        kind = "DELETED"
    else:
        kind = None
    return [] if kind is None else [{"type": kind, "object": copy.deepcopy(change.new)}]
