"""The agent's HTTP endpoints: ``/metrics``, ``/healthz``, ``/readyz`` and ``/state``.

A ``ThreadingHTTPServer`` from the standard library is enough: a handful of
scrapes and probes a minute, no framework, nothing to configure. Each request
runs in its own daemon thread, so a slow scraper never delays a probe and
:meth:`AgentServer.stop` never waits for a client.

The server decides nothing. Health, readiness and the state document come
from callables the agent passes in, so this file knows neither the reconciler
nor the planner, and tests give it lambdas:

* ``/metrics``: the registry in the Prometheus text format, or OpenMetrics
  when the scraper's ``Accept`` header asks for it (``choose_encoder``);
* ``/healthz`` and ``/readyz``: 200 ``ok`` or 503 with the reason the callable
  gave (a kubelet probe shows the body in the pod's Events);
* ``/state``: the JSON document of the agent's state;
* anything else: 404; methods other than GET and HEAD: 405.

Request lines go to structlog at debug, never to stderr: a probe every few
seconds would otherwise drown the decision lines.
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import structlog
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

__all__ = ["AgentServer", "BindError", "Check", "split_address", "PATHS"]

_log = structlog.get_logger("podpin.server")

Check = Callable[[], tuple[bool, str]]
"""A health or readiness check: ``(True, anything)`` when fine, ``(False, reason)`` when not."""

#: The paths the server answers.
PATHS = ("/metrics", "/healthz", "/readyz", "/state")

_TEXT = "text/plain; charset=utf-8"
_JSON = "application/json"
_REQUEST_TIMEOUT = 10.0  # seconds a client may take to send its request before the thread gives up
_POLL_INTERVAL = 0.1  # how often serve_forever looks for shutdown(); bounds stop()'s latency


class BindError(OSError):
    """The server could not listen on its address; the message names it (``metricsBindAddress``)."""


def split_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6) as ``(host, port)``; an empty host means every address.

    Raises:
        ValueError: naming the address when it has no port or the port is not 0..65535.
    """
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"metricsBindAddress: {address!r} is not HOST:PORT")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"metricsBindAddress: {address!r}: write an IPv6 host in brackets, [{host}]:{port}")
    return host, int(port)


class _Server(ThreadingHTTPServer):
    """The HTTP server with the agent's callables attached, for the handler to reach."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        family: socket.AddressFamily,
        registry: CollectorRegistry,
        health: Check,
        ready: Check,
        state: Callable[[], dict[str, Any]],
    ) -> None:
        self.address_family = family
        self.registry = registry
        self.health = health
        self.ready = ready
        self.state = state
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        """Bind without ``HTTPServer``'s reverse DNS lookup of the host, which can hang on a node without DNS."""
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)


class _Handler(BaseHTTPRequestHandler):
    """Answers one request from the callables of its :class:`_Server`."""

    server: _Server
    timeout = _REQUEST_TIMEOUT
    server_version = "podpin"

    def do_GET(self) -> None:
        self._respond(head=False)

    def do_HEAD(self) -> None:
        self._respond(head=True)

    def _not_allowed(self) -> None:
        self._send(405, _TEXT, b"method not allowed\n", head=False, extra={"Allow": "GET, HEAD"})

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _not_allowed  # noqa: N815 (the stdlib's handler names)

    def _respond(self, *, head: bool) -> None:
        path = urlsplit(self.path).path
        try:
            status, content_type, body = self._route(path)
        except Exception as err:  # a failing callable must cost one 500, never the server thread
            _log.error("http.handler_failed", path=path, error=f"{type(err).__name__}: {err}")
            status, content_type, body = 500, _TEXT, f"{path}: {type(err).__name__}: {err}\n".encode()
        self._send(status, content_type, body, head=head)

    def _route(self, path: str) -> tuple[int, str, bytes]:
        if path == "/metrics":
            encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
            return 200, content_type, encoder(self.server.registry)
        if path in ("/healthz", "/readyz"):
            ok, reason = (self.server.health if path == "/healthz" else self.server.ready)()
            if ok:
                return 200, _TEXT, b"ok\n"
            return 503, _TEXT, f"{reason}\n".encode()
        if path == "/state":
            document = json.dumps(self.server.state(), indent=2, sort_keys=True)
            return 200, _JSON, (document + "\n").encode()
        return 404, _TEXT, f"{path} not found; this server answers {', '.join(PATHS)}\n".encode()

    def _send(
        self, status: int, content_type: str, body: bytes, *, head: bool, extra: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:  # noqa: ARG002 (the stdlib's signature)
        """One debug line per request instead of the stdlib's stderr line."""
        status = int(code) if isinstance(code, int) else str(code)
        _log.debug("http.request", client=self.client_address[0], method=self.command, path=self.path, status=status)

    def log_message(self, format: str, *args: Any) -> None:
        """Everything else the stdlib would print (bad requests, timeouts), at debug."""
        _log.debug("http.message", client=self.client_address[0], message=format % args)


class AgentServer:
    """Serves the agent's endpoints from a daemon thread until :meth:`stop`."""

    def __init__(
        self,
        address: str,
        registry: CollectorRegistry,
        *,
        health: Check,
        ready: Check,
        state: Callable[[], dict[str, Any]],
    ) -> None:
        """Check the address; nothing listens until :meth:`start`.

        Args:
            address: ``HOST:PORT`` (``metricsBindAddress``); port 0 picks a free port.
            registry: what ``/metrics`` exposes.
            health: the liveness check behind ``/healthz``.
            ready: the readiness check behind ``/readyz``.
            state: returns the JSON-ready document behind ``/state``.

        Raises:
            ValueError: the address is not ``HOST:PORT``.
        """
        self.address = address
        self._bind = split_address(address)
        self._registry = registry
        self._health = health
        self._ready = ready
        self._state = state
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> tuple[str, int]:
        """Listen and serve in a daemon thread.

        Returns:
            The bound ``(host, port)`` (the real port when 0 was asked for).

        Raises:
            BindError: the address cannot be listened on (in use, not local, no permission).
            RuntimeError: the server is already running.
        """
        if self._server is not None:
            raise RuntimeError(f"the server on {self.address} is already running")
        host, port = self._bind
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            server = _Server((host, port), family, self._registry, self._health, self._ready, self._state)
        except OSError as err:
            raise BindError(
                err.errno, f"metricsBindAddress {self.address}: cannot listen: {err.strerror or err}"
            ) from err
        thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": _POLL_INTERVAL}, name="podpin-http", daemon=True
        )
        thread.start()
        self._server, self._thread = server, thread
        bound_host, bound_port = server.server_address[:2]
        return str(bound_host), int(bound_port)

    def stop(self) -> None:
        """Stop serving and close the socket (within about ``_POLL_INTERVAL``); a no-op when not running."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        server.shutdown()
        server.server_close()
        thread.join(timeout=1.0)
        self._server = self._thread = None
