"""A small HTTP/1.1 server for a few GET endpoints that hostile or broken clients cannot exhaust.

The agent's endpoints are scraped and probed a handful of times a minute, but
they listen on the node's network, so the server must hold when a client does
not behave: 500 idle connections, clients that send one byte a second, a
process limit of a few dozen file descriptors. The standard library's
``ThreadingHTTPServer`` spends a thread and a descriptor on every connection
for as long as the client likes (``docs/design.md``, "HTTP endpoints").

This server is one thread around a ``selectors`` loop, with three bounds
(:class:`Limits`):

* **connections**: at most ``max_connections`` open at once (fewer when the
  process's descriptor limit is low: an eighth of it). A new connection beyond
  that closes the *oldest* one still waiting for its request, so a fresh probe
  always gets in and a crowd of idle sockets cannot hold the door shut. When
  every open connection is being answered (clients that ask and never read
  the answer), the new one takes one of ``probe_slots`` extra connections kept
  for probes: it is answered only if it asks for one of ``probe_paths``
  (``/healthz``, ``/readyz``), whose answers are a few bytes, and closed
  unanswered otherwise (issue 22, finding 7: 12-43 % of probes were reset
  under such a flood). Only when those are taken too is it closed at once;
* **time**: each connection has ``deadline`` seconds from accept to the last
  byte of its answer; a client that trickles its request or reads the answer
  too slowly is closed when it runs out;
* **size**: a request head (request line and headers) larger than
  ``max_head_bytes`` closes the connection; request bodies are never read.

A request is answered by the handler in the server's thread (the endpoints
are fast: they read snapshots), with ``Connection: close``: one request per
connection, which is what probes and Prometheus do anyway. Connections closed
without an answer are reported through ``on_drop(reason)``.
"""

from __future__ import annotations

import contextlib
import errno
import resource
import selectors
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus

import structlog

__all__ = [
    "Limits",
    "Request",
    "Response",
    "Handler",
    "BoundedHTTPServer",
    "effective_max_connections",
    "parse_request_head",
]

_log = structlog.get_logger("podpin.server")

_EMFILE_PAUSE = 0.1  # seconds to wait when out of descriptors with nothing of ours to close
_ACCEPTS_PER_TURN = 64  # accept() calls per readiness event, so reading clients are not starved
_RECV_BYTES = 4096


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """The server's bounds; see the module docstring."""

    max_connections: int = 64
    deadline: float = 10.0
    max_head_bytes: int = 8192
    probe_slots: int = 4
    probe_paths: frozenset[str] = frozenset({"/healthz", "/readyz"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """One parsed request head: method, path (query string removed), headers with lower-case names."""

    method: str
    path: str
    headers: Mapping[str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class Response:
    """What the handler answers; ``Content-Length``, ``Cache-Control`` and ``Connection`` are added."""

    status: int
    content_type: str
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)


Handler = Callable[[Request], Response]
"""Answers one request (runs in the server's thread; an exception becomes a 500)."""


def effective_max_connections(limits: Limits) -> int:
    """``max_connections``, lowered to an eighth of the descriptor limit (at least 4) so the agent keeps enough."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return limits.max_connections
    return max(4, min(limits.max_connections, soft // 8))


@dataclass(slots=True)
class _Conn:
    """One client connection: its socket, deadline, request bytes so far, and answer bytes still to send."""

    sock: socket.socket
    client: str
    deadline: float
    received: bytearray = field(default_factory=bytearray)
    outgoing: memoryview | None = None
    probe_slot: bool = False
    """Taken beyond ``max_connections``: answered only for a probe path."""


class BoundedHTTPServer:
    """Serves ``handler`` on a bound socket from one daemon thread until :meth:`stop`."""

    def __init__(
        self,
        listener: socket.socket,
        handler: Handler,
        *,
        limits: Limits | None = None,
        on_drop: Callable[[str], None] | None = None,
        name: str = "podpin-http",
    ) -> None:
        """Take a bound, listening socket; nothing is served until :meth:`start`.

        Args:
            listener: the listening socket (the server closes it on :meth:`stop`).
            handler: answers each request.
            limits: the bounds (default :class:`Limits`).
            on_drop: called with ``capacity``, ``deadline`` or ``too_large`` for each connection closed unanswered.
            name: the thread's name.
        """
        self._listener = listener
        self._handler = handler
        self._limits = limits or Limits()
        self._max = effective_max_connections(self._limits)
        self._on_drop = on_drop
        self._name = name
        self._conns: dict[socket.socket, _Conn] = {}
        self._selector = selectors.DefaultSelector()
        self._stopping = threading.Event()
        self._wake_r, self._wake_w = socket.socketpair()
        self._thread: threading.Thread | None = None

    @property
    def max_connections(self) -> int:
        """The connection bound in force (``Limits.max_connections``, lowered under a small descriptor limit)."""
        return self._max

    @property
    def open_connections(self) -> int:
        """Connections open right now (read from another thread: a snapshot)."""
        return len(self._conns)

    def start(self) -> None:
        """Serve in a daemon thread."""
        self._listener.setblocking(False)
        self._wake_r.setblocking(False)
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving (the wake socket ends the loop's wait), close every connection and the listener."""
        self._stopping.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        for conn in list(self._conns.values()):
            self._close(conn)
        self._selector.close()
        self._listener.close()
        self._wake_r.close()
        self._wake_w.close()

    # -- the loop --------------------------------------------------------------------------------
    def _serve(self) -> None:
        while not self._stopping.is_set():
            try:
                self._turn()
            except Exception as err:  # one bad turn must never end the endpoints
                _log.error("http.loop_failed", error=f"{type(err).__name__}: {err}")

    def _turn(self) -> None:
        # Idle, the loop sleeps until a client or stop() (the wake socket) arrives: no periodic wake-ups.
        soonest = min((c.deadline for c in self._conns.values()), default=None)
        timeout = None if soonest is None else max(0.0, soonest - time.monotonic())
        for key, mask in self._selector.select(timeout):
            if key.fileobj is self._listener:
                self._accept()
            elif key.fileobj is self._wake_r:
                with contextlib.suppress(OSError):
                    self._wake_r.recv(64)
            else:
                conn = key.data
                if not isinstance(conn, _Conn) or conn.sock not in self._conns:
                    continue
                if mask & selectors.EVENT_READ:
                    self._read(conn)
                elif mask & selectors.EVENT_WRITE:
                    self._write(conn)
        now = time.monotonic()
        for conn in [c for c in self._conns.values() if c.deadline <= now]:
            self._drop(conn, "deadline")

    def _accept(self) -> None:
        for _ in range(_ACCEPTS_PER_TURN):
            try:
                sock, address = self._listener.accept()
            except BlockingIOError:
                return
            except OSError as err:
                if err.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    # Out of descriptors: free one; the client still waiting is accepted on the next turn.
                    if not self._evict_oldest_reading():
                        time.sleep(_EMFILE_PAUSE)  # nothing of ours to free: do not spin on a readable listener
                    return
                if err.errno in (errno.ECONNABORTED, errno.EPROTO, errno.EPERM, errno.EINTR):
                    continue
                raise
            sock.setblocking(False)
            probe_slot = False
            if self._regular() >= self._max and not self._evict_oldest_reading():
                probe_slot = True
                if self._probe_slots() >= self._limits.probe_slots and not self._evict_oldest_reading(probe=True):
                    self._dropped("capacity", str(address[0]))
                    sock.close()
                    continue
            conn = _Conn(
                sock=sock,
                client=str(address[0]),
                deadline=time.monotonic() + self._limits.deadline,
                probe_slot=probe_slot,
            )
            self._conns[sock] = conn
            self._selector.register(sock, selectors.EVENT_READ, conn)

    def _regular(self) -> int:
        return sum(1 for c in self._conns.values() if not c.probe_slot)

    def _probe_slots(self) -> int:
        return sum(1 for c in self._conns.values() if c.probe_slot)

    def _evict_oldest_reading(self, *, probe: bool = False) -> bool:
        """Close the oldest connection of its kind (regular or probe slot) still waiting for its request."""
        oldest = next((c for c in self._conns.values() if c.outgoing is None and c.probe_slot == probe), None)
        if oldest is None:
            return False
        self._drop(oldest, "capacity")
        return True

    def _read(self, conn: _Conn) -> None:
        try:
            chunk = conn.sock.recv(_RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        if not chunk:
            self._close(conn)
            return
        conn.received += chunk
        end = conn.received.find(b"\r\n\r\n")
        if end < 0:
            end = conn.received.find(b"\n\n")
        if end < 0:
            if len(conn.received) > self._limits.max_head_bytes:
                self._drop(conn, "too_large")
            return
        if end > self._limits.max_head_bytes:
            self._drop(conn, "too_large")
            return
        self._answer(conn, bytes(conn.received[:end]))

    def _answer(self, conn: _Conn, head: bytes) -> None:
        request = parse_request_head(head)
        if conn.probe_slot and (request is None or request.path not in self._limits.probe_paths):
            self._drop(conn, "capacity")  # a probe slot is for probes only
            return
        if request is None:
            response = Response(status=400, content_type="text/plain; charset=utf-8", body=b"bad request\n")
            method, path = "-", "-"
        else:
            method, path = request.method, request.path
            try:
                response = self._handler(request)
            except Exception as err:  # a failing handler costs one 500, never the server
                _log.error("http.handler_failed", path=path, error=f"{type(err).__name__}: {err}")
                body = f"{path}: {type(err).__name__}: {err}\n".encode()
                response = Response(status=500, content_type="text/plain; charset=utf-8", body=body)
        _log.debug("http.request", client=conn.client, method=method, path=path, status=response.status)
        conn.outgoing = memoryview(_encode(response, head_only=method == "HEAD"))
        self._selector.modify(conn.sock, selectors.EVENT_WRITE, conn)
        self._write(conn)

    def _write(self, conn: _Conn) -> None:
        assert conn.outgoing is not None
        try:
            sent = conn.sock.send(conn.outgoing)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        conn.outgoing = conn.outgoing[sent:]
        if not conn.outgoing:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_WR)
                for _ in range(16):  # unread bytes would turn the close into a reset; a little is read, not more
                    if not conn.sock.recv(_RECV_BYTES):
                        break
            self._close(conn)

    def _drop(self, conn: _Conn, reason: str) -> None:
        self._dropped(reason, conn.client)  # counted before the client can see the close
        self._close(conn)

    def _dropped(self, reason: str, client: str) -> None:
        _log.debug("http.dropped", client=client, reason=reason)
        if self._on_drop is not None:
            self._on_drop(reason)

    def _close(self, conn: _Conn) -> None:
        if self._conns.pop(conn.sock, None) is None:
            return
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.unregister(conn.sock)
        conn.sock.close()


def parse_request_head(head: bytes) -> Request | None:
    """The request line and headers, or None when they are not HTTP/1.x."""
    try:
        lines = head.decode("iso-8859-1").replace("\r\n", "\n").split("\n")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
        return None
    parts = lines[0].split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return None
    method, target, _version = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep and name.strip():
            headers[name.strip().lower()] = value.strip()
    return Request(method=method, path=target.split("?", 1)[0].split("#", 1)[0], headers=headers)


def _encode(response: Response, *, head_only: bool) -> bytes:
    try:
        phrase = HTTPStatus(response.status).phrase
    except ValueError:
        phrase = ""
    lines = [
        f"HTTP/1.1 {response.status} {phrase}",
        "Server: podpin",
        f"Content-Type: {response.content_type}",
        f"Content-Length: {len(response.body)}",
        "Cache-Control: no-store",
        "Connection: close",
        *(f"{name}: {value}" for name, value in response.headers.items()),
    ]
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head if head_only else head + response.body
