"""The HTTP side of the API server emulator: routing, selectors, ``Status`` bodies, chunked watch streams.

Kept apart from the state (``apiserver_emulator.py``) so each file has one job:
this module turns requests into calls on a :class:`Backend` and its answers into
HTTP as the real API server writes it; it holds no pods or Events itself.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

__all__ = [
    "ApiHTTPServer",
    "Backend",
    "Failure",
    "HTTPError",
    "Obj",
    "RequestRecord",
    "WatchStream",
    "selector",
    "status_body",
    "status_event",
]

Obj = dict[str, Any]

_POD_FIELDS: Mapping[str, tuple[str, str]] = {
    "metadata.name": ("metadata", "name"),
    "metadata.namespace": ("metadata", "namespace"),
    "spec.nodeName": ("spec", "nodeName"),
    "status.phase": ("status", "phase"),
}
_REASONS = {
    400: "BadRequest",
    404: "NotFound",
    409: "AlreadyExists",
    410: "Expired",
    405: "MethodNotAllowed",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
}
_PODS = re.compile(r"^/api/v1(?:/namespaces/(?P<ns>[^/]+))?/pods$")
_EVENTS = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/events(?:/(?P<name>[^/]+))?$")
_NODE = re.compile(r"^/api/v1/nodes/(?P<name>[^/]+)$")
_CUSTOM = re.compile(r"^/apis/(?P<group>[^/]+)/(?P<version>[^/]+)/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?$")
_POD_STATUS = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<name>[^/]+)/status$")
_NAMESPACED = re.compile(r"^/apis/apps/v1/namespaces/[^/]+/daemonsets/[^/]+$")


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestRecord:
    """One request the emulator answered (for assertions on what the client sent)."""

    method: str
    path: str
    query: Mapping[str, str]
    status: int
    authorization: str | None


@dataclass(slots=True, eq=False)
class WatchStream:
    """An open watch stream, so control methods can end it."""

    conn: socket.socket
    dropped: bool = False
    bookmark_gen: int = 0
    injected: list[Any] = field(default_factory=list)


@dataclass(slots=True)
class Failure:
    """An injected failure: answer the next ``remaining`` requests (of ``method``) with ``status``."""

    remaining: int
    status: int
    retry_after: int | None
    method: str | None


class HTTPError(Exception):
    """An HTTP error answered with a ``Status`` body."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def status_body(code: int, message: str) -> Obj:
    """A ``v1.Status`` failure object as the real server sends it."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": _REASONS.get(code, "Unknown"),
        "code": code,
    }


def status_event(code: int, message: str) -> Obj:
    """A watch ERROR event carrying a ``Status``."""
    return {"type": "ERROR", "object": status_body(code, message)}


def _field_value(pod: Obj, name: str) -> str:
    section, key = _POD_FIELDS[name]
    value = (pod.get(section) or {}).get(key)
    return "" if value is None else str(value)


def selector(field_sel: str, label_sel: str) -> Callable[[Obj], bool]:
    """A pod predicate for a ``fieldSelector`` and an equality ``labelSelector``."""
    tests: list[Callable[[Obj], bool]] = []
    for term in filter(None, (t.strip() for t in field_sel.split(","))):
        m = re.fullmatch(r"([^!=]+)(!=|==|=)(.*)", term)
        if m is None:
            raise HTTPError(400, f"invalid field selector term {term!r}")
        name, op, want = m.groups()
        if name not in _POD_FIELDS:
            raise HTTPError(400, f'field label not supported: "{name}"')

        def field_test(p: Obj, n: str = name, w: str = want, neg: bool = op == "!=") -> bool:
            return (_field_value(p, n) == w) != neg

        tests.append(field_test)
    for term in filter(None, (t.strip() for t in label_sel.split(","))):
        m = re.fullmatch(r"(!?)([A-Za-z0-9_./-]+)(?:(!=|==|=)(.*))?", term)
        if m is None:
            raise HTTPError(400, f"invalid label selector term {term!r}")
        bang, key, op, want = m.groups()

        def label_test(p: Obj, k: str = key, o: str | None = op, w: str = want or "", b: bool = bool(bang)) -> bool:
            labels = (p.get("metadata") or {}).get("labels") or {}
            if o is None:
                return (k in labels) != b
            return (labels.get(k) == w) != (o == "!=")

        tests.append(label_test)
    return lambda pod: all(t(pod) for t in tests)


class Backend(Protocol):
    """What the HTTP layer needs from the emulator's state."""

    default_watch_timeout: float

    def serve_log(self, record: RequestRecord) -> None:
        """Remember one answered request."""

    def serve_failure(self, method: str) -> Failure | None:
        """The injected failure to answer this request with, if any."""

    def serve_list_pods(self, match: Callable[[Obj], bool]) -> Obj:
        """A PodList of the matching pods."""

    def serve_watch(
        self, stream: WatchStream, match: Callable[[Obj], bool], since: str, bookmarks: bool, timeout: float
    ) -> Iterator[Obj]:
        """The events of one watch, blocking between them."""

    def serve_create_event(self, namespace: str, body: Obj) -> Obj:
        """Store a new Event."""

    def serve_patch_event(self, namespace: str, name: str, patch: Any) -> Obj:
        """Merge-patch an Event."""

    def serve_patch_pod_status(self, namespace: str, name: str, patch: Any, content_type: str) -> Obj:
        """A pod's status patched (the pod after the patch)."""

    def serve_list_events(self, namespace: str) -> Obj:
        """An EventList of a namespace."""

    def serve_object(
        self,
        method: str,
        path: str,
        body: Any,
        content_type: str,
        query: Mapping[str, str] | None = None,
        manager: str = "unknown",
    ) -> tuple[int, Obj] | None:
        """A Node or cluster-scoped custom object request: (status, body), or None when the path is neither.

        ``manager``: the request's ``fieldManager``, else its User-Agent's product name (as the real server).
        """


class ApiHTTPServer(ThreadingHTTPServer):
    """A threaded HTTP/1.1 server on 127.0.0.1 (ephemeral port) answering for a :class:`Backend`."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, backend: Backend) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.backend = backend
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()

    def track(self, conn: socket.socket, add: bool) -> None:
        """Remember (or forget) an open connection, so :meth:`close_all` can cut it."""
        with self._conns_lock:
            if add:
                self._conns.add(conn)
            else:
                self._conns.discard(conn)

    def close_all(self) -> None:
        """Shut every open connection down (idle keep-alive ones included), for a prompt close."""
        with self._conns_lock:
            for conn in self._conns:
                with contextlib.suppress(OSError):  # already closed by the client
                    conn.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Connections the tests cut on purpose are not errors worth a traceback."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ApiHTTPServer

    def setup(self) -> None:
        super().setup()
        self.server.track(self.connection, True)

    def finish(self) -> None:
        self.server.track(self.connection, False)
        with contextlib.suppress(OSError):  # flushing a connection a test cut
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the emulator keeps its own request log."""

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        backend = self.server.backend
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        authorization = self.headers.get("Authorization")

        def record(status: int) -> None:
            backend.serve_log(
                RequestRecord(method=method, path=url.path, query=query, status=status, authorization=authorization)
            )

        failure = backend.serve_failure(method)
        if failure is not None:
            record(failure.status)
            extra = {"Retry-After": str(failure.retry_after)} if failure.retry_after is not None else {}
            self._send_json(failure.status, status_body(failure.status, "injected failure"), extra)
            return
        try:
            pods, events = _PODS.match(url.path), _EVENTS.match(url.path)
            if method == "GET" and pods:
                match = selector(query.get("fieldSelector", ""), query.get("labelSelector", ""))
                namespace = pods.group("ns")
                if namespace is not None:
                    inner, match = match, lambda p: (p["metadata"]["namespace"] == namespace) and inner(p)
                if query.get("watch") in ("true", "1"):
                    since = query.get("resourceVersion", "")
                    if since not in ("", "0") and not since.isdigit():
                        raise HTTPError(400, f"invalid resource version: {since!r}")
                    record(200)
                    self._stream(match, since, query)
                    return
                body, status = backend.serve_list_pods(match), 200
            elif events and method == "POST" and events.group("name") is None:
                body, status = backend.serve_create_event(events.group("ns"), _json(raw)), 201
            elif events and method == "PATCH" and events.group("name"):
                body, status = backend.serve_patch_event(events.group("ns"), events.group("name"), _json(raw)), 200
            elif method == "PATCH" and (status_of := _POD_STATUS.match(url.path)):
                content_type = self.headers.get("Content-Type") or ""
                body = backend.serve_patch_pod_status(status_of["ns"], status_of["name"], _json(raw), content_type)
                status = 200
            elif events and method == "GET" and events.group("name") is None:
                body, status = backend.serve_list_events(events.group("ns")), 200
            elif (_NODE.match(url.path) or _CUSTOM.match(url.path) or _NAMESPACED.match(url.path)) and (
                answer := backend.serve_object(
                    method,
                    url.path,
                    _json(raw),
                    self.headers.get("Content-Type") or "",
                    query,
                    query.get("fieldManager") or (self.headers.get("User-Agent") or "unknown").split("/")[0],
                )
            ):
                status, body = answer
            else:
                raise HTTPError(404, f"the server could not find the requested resource ({method} {url.path})")
        except HTTPError as err:
            body, status = status_body(err.status, err.message), err.status
        record(status)
        self._send_json(status, body)

    def _send_json(self, status: int, body: Obj, headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, match: Callable[[Obj], bool], since: str, query: Mapping[str, str]) -> None:
        backend = self.server.backend
        timeout = float(query.get("timeoutSeconds") or backend.default_watch_timeout)
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        stream = WatchStream(conn=self.connection)
        try:
            for event in backend.serve_watch(stream, match, since, bookmarks, timeout):
                line = json.dumps(event).encode() + b"\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw or b"null")
    except ValueError as err:
        raise HTTPError(400, f"request body is not JSON: {err}") from None
