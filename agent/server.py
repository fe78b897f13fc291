"""The agent's HTTP endpoints: ``/metrics``, ``/healthz`` and ``/readyz``, and ``/state`` on its own address.

Two listeners (``docs/design.md``, "HTTP endpoints"):

* :class:`AgentServer` on ``metricsBindAddress`` (every address by default:
  Prometheus and the kubelet's probes come from outside the pod) answers
  ``/metrics`` — the registry in the Prometheus text format, or OpenMetrics
  when the scraper's ``Accept`` header asks for it (``choose_encoder``) — and
  ``/healthz`` and ``/readyz`` — 200 ``ok`` or 503 with the reason the check
  gave (a kubelet probe shows the body in the pod's Events);
* :class:`StateServer` on ``stateBindAddress``, only when that is set
  (``127.0.0.1:9364`` is the suggested value: loopback only, for ``kubectl
  exec`` or a port-forward), answers ``/state``, the JSON document of the
  node's allocations: it names every pod on the node and its uid, which is
  nobody else's business.

Anything else is 404 (naming the paths served); methods other than GET and
HEAD are 405. Both run on :class:`agent.httpserve.BoundedHTTPServer`: one
thread each, bounded connections and a deadline per request, so probes keep
answering while a crowd of idle or slow clients hangs on.

The server decides nothing. Health, readiness and the state document come from
callables the agent passes in, so this file knows neither the reconciler nor
the planner, and tests give it lambdas. Request lines go to structlog at debug,
never to stderr.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from agent.httpserve import BoundedHTTPServer, Handler, Limits, Request, Response

__all__ = ["AgentServer", "StateServer", "BindError", "Check", "split_address", "PATHS", "STATE_PATHS"]

Check = Callable[[], tuple[bool, str]]
"""A health or readiness check: ``(True, anything)`` when fine, ``(False, reason)`` when not."""

#: The paths the metrics server answers.
PATHS = ("/metrics", "/healthz", "/readyz")
#: The paths the state server answers.
STATE_PATHS = ("/state",)

_TEXT = "text/plain; charset=utf-8"
_JSON = "application/json"


class BindError(OSError):
    """The server could not listen on its address; the message names it and its setting."""


def split_address(address: str, setting: str = "metricsBindAddress") -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6) as ``(host, port)``; an empty host means every address.

    Raises:
        ValueError: naming the setting and the address when it has no port or the port is not 0..65535.
    """
    host, sep, port = address.rpartition(":")
    if not sep or not port.isascii() or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{setting}: {address!r} is not HOST:PORT")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"{setting}: {address!r}: write an IPv6 host in brackets, [{host}]:{port}")
    return host, int(port)


def _not_found(path: str, paths: tuple[str, ...]) -> Response:
    return Response(
        status=404, content_type=_TEXT, body=f"{path} not found; this server answers {', '.join(paths)}\n".encode()
    )


def _method_check(request: Request) -> Response | None:
    if request.method in ("GET", "HEAD"):
        return None
    return Response(status=405, content_type=_TEXT, body=b"method not allowed\n", headers={"Allow": "GET, HEAD"})


class _Listener:
    """A bounded HTTP server on one ``HOST:PORT`` setting, started and stopped on demand."""

    def __init__(
        self,
        address: str,
        setting: str,
        handler: Handler,
        limits: Limits | None,
        on_drop: Callable[[str], None] | None,
    ) -> None:
        self.address = address
        self._setting = setting
        self._bind = split_address(address, setting)
        self._handler = handler
        self._limits = limits
        self._on_drop = on_drop
        self._server: BoundedHTTPServer | None = None

    @property
    def server(self) -> BoundedHTTPServer | None:
        """The running server (None when stopped)."""
        return self._server

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
        listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((host, port))
            listener.listen(128)
        except OSError as err:
            listener.close()
            raise BindError(err.errno, f"{self._setting} {self.address}: cannot listen: {err.strerror or err}") from err
        server = BoundedHTTPServer(
            listener, self._handler, limits=self._limits, on_drop=self._on_drop, name=f"podpin-http-{port}"
        )
        server.start()
        self._server = server
        bound_host, bound_port = listener.getsockname()[:2]
        return str(bound_host), int(bound_port)

    def stop(self) -> None:
        """Stop serving and close the socket (within about a tenth of a second); a no-op when not running."""
        server, self._server = self._server, None
        if server is not None:
            server.stop()


class AgentServer(_Listener):
    """``/metrics``, ``/healthz`` and ``/readyz`` on ``metricsBindAddress``."""

    def __init__(
        self,
        address: str,
        registry: CollectorRegistry,
        *,
        health: Check,
        ready: Check,
        limits: Limits | None = None,
        on_drop: Callable[[str], None] | None = None,
    ) -> None:
        """Check the address; nothing listens until :meth:`start`.

        Args:
            address: ``HOST:PORT`` (``metricsBindAddress``); port 0 picks a free port.
            registry: what ``/metrics`` exposes.
            health: the liveness check behind ``/healthz``.
            ready: the readiness check behind ``/readyz``.
            limits: connection, time and size bounds (default :class:`agent.httpserve.Limits`).
            on_drop: called with the reason of each connection closed unanswered (a metric).

        Raises:
            ValueError: the address is not ``HOST:PORT``.
        """
        self._registry = registry
        self._health = health
        self._ready = ready
        super().__init__(address, "metricsBindAddress", self._respond, limits, on_drop)

    def _respond(self, request: Request) -> Response:
        refused = _method_check(request)
        if refused is not None:
            return refused
        if request.path == "/metrics":
            encoder, content_type = choose_encoder(request.headers.get("accept", ""))
            return Response(status=200, content_type=content_type, body=encoder(self._registry))
        if request.path in ("/healthz", "/readyz"):
            ok, reason = (self._health if request.path == "/healthz" else self._ready)()
            if ok:
                return Response(status=200, content_type=_TEXT, body=b"ok\n")
            return Response(status=503, content_type=_TEXT, body=f"{reason}\n".encode())
        return _not_found(request.path, PATHS)


class StateServer(_Listener):
    """``/state`` on ``stateBindAddress``."""

    def __init__(
        self,
        address: str,
        state: Callable[[], dict[str, Any]],
        *,
        limits: Limits | None = None,
        on_drop: Callable[[str], None] | None = None,
    ) -> None:
        """Check the address; nothing listens until :meth:`start`.

        Args:
            address: ``HOST:PORT`` (``stateBindAddress``).
            state: returns the JSON-ready document behind ``/state``.
            limits: connection, time and size bounds.
            on_drop: called with the reason of each connection closed unanswered.

        Raises:
            ValueError: the address is not ``HOST:PORT``.
        """
        self._state = state
        super().__init__(address, "stateBindAddress", self._respond, limits, on_drop)

    def _respond(self, request: Request) -> Response:
        refused = _method_check(request)
        if refused is not None:
            return refused
        if request.path == "/state":
            document = json.dumps(self._state(), indent=2, sort_keys=True)
            return Response(status=200, content_type=_JSON, body=(document + "\n").encode())
        return _not_found(request.path, STATE_PATHS)
