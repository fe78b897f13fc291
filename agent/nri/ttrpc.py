"""ttrpc on one logical connection: a unary client and a unary server, thread based.

Wire rules (containerd/ttrpc, read at 4b166fb: ``PROTOCOL.md``, ``client.go``,
``server.go``, ``services.go``, ``request.proto``):

* A call is one Request message on a new stream, answered by one Response
  message on the same stream id. Client streams have odd ids, starting at 1 and
  rising by 2 (``Client.createStream``); the id is allocated and sent under one
  lock so ids reach the wire in increasing order. A server answers a request on
  an even or non-increasing id with InvalidArgument on that id
  (``serverConn.run``).
* Request payload (``ttrpc.Request``): service (``nri.pkg.api.v1alpha1.Plugin``),
  method (``Configure``), the protobuf-encoded argument, the caller's remaining
  deadline in nanoseconds (0: none), metadata. Response: a status
  (``google.rpc.Status`` code and message; code 0 is OK) and the encoded result.
* An unknown service or method is answered Unimplemented (``serviceSet.handle``);
  an oversized message ResourceExhausted; a Data message on a stream that is
  not open InvalidArgument; unknown message types are ignored.

podpin needs unary calls only (NRI has no streams). Each endpoint is fed the
bytes of its logical connection by the connection's reader thread
(``agent.nri.conn``) and writes whole encoded messages through a ``send``
callable. The server queues decoded requests for one dispatcher thread
(:meth:`Server.serve`), which answers them in order: NRI runtimes send one
request at a time per plugin, and the order of pod and container events matters.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum

import structlog
from google.protobuf.message import DecodeError

from agent.nri.frames import (
    MAX_MESSAGE_DATA,
    FrameError,
    Message,
    MessageDecoder,
    MessageType,
    Oversized,
    encode_message,
)
from agent.nri.proto import ttrpc_pb2

__all__ = [
    "CallTimeoutError",
    "Client",
    "ConnectionClosedError",
    "Method",
    "RPCError",
    "RPCStatusError",
    "Send",
    "Server",
    "StatusCode",
]

_IDLE_WAKE = 1.0
"""Seconds the dispatcher waits for a request before looking at its stop event again."""

_log = structlog.get_logger("podpin.nri.ttrpc")

Send = Callable[[bytes], None]
"""Writes one encoded ttrpc message on the endpoint's logical connection; raises ConnectionClosedError."""

Method = Callable[[bytes, float | None], bytes]
"""A served method: (request payload, seconds the caller waits or None) -> response payload; raises RPCStatusError."""


class StatusCode(IntEnum):
    """The gRPC status codes ttrpc answers with (those podpin sends or tells apart)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    RESOURCE_EXHAUSTED = 8
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14


class ConnectionClosedError(Exception):
    """The connection is closed (or closed while a call waited); the text says why."""


class CallTimeoutError(TimeoutError):
    """No answer to a call within its timeout."""


class RPCError(Exception):
    """The peer answered a call with a non-OK status."""

    def __init__(self, method: str, code: int, message: str) -> None:
        try:
            name = StatusCode(code).name
        except ValueError:
            name = str(code)
        super().__init__(f"{method}: {name}: {message}")
        self.method = method
        self.code = code
        self.status_message = message


class RPCStatusError(Exception):
    """Raised by a served method to answer with this status instead of a result."""

    def __init__(self, code: StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(slots=True)
class _Pending:
    """A call waiting for its response."""

    done: threading.Event
    data: bytes | None = None
    error: Exception | None = None


class Client:
    """Unary calls to the peer's server on this logical connection.

    Args:
        send: writes one encoded message.
        name: names the connection in errors and logs.
    """

    def __init__(self, send: Send, *, name: str) -> None:
        self._send = send
        self._name = name
        self._decoder = MessageDecoder()
        self._lock = threading.Lock()  # stream ids, the pending table, the closed flag
        self._send_lock = threading.Lock()  # an id is allocated and sent under one lock
        self._next_id = 1
        self._pending: dict[int, _Pending] = {}
        self._closed: str | None = None

    def call(self, service: str, method: str, payload: bytes, timeout: float) -> bytes:
        """Call ``service/method`` and return the response payload.

        Raises:
            RPCError: the peer answered with a non-OK status.
            CallTimeoutError: no answer within ``timeout`` seconds.
            ConnectionClosedError: the connection closed before the answer.
            FrameError: the request exceeds the maximum message size.
        """
        full = f"{service}/{method}"
        request = ttrpc_pb2.Request(service=service, method=method, payload=payload, timeout_nano=int(timeout * 1e9))
        data = request.SerializeToString()
        if len(data) > MAX_MESSAGE_DATA:
            raise FrameError(f"{full}: request of {len(data)} bytes exceeds the maximum message of {MAX_MESSAGE_DATA}")
        pending = _Pending(done=threading.Event())
        with self._send_lock:
            with self._lock:
                if self._closed is not None:
                    raise ConnectionClosedError(f"{full}: {self._name} is closed ({self._closed})")
                stream_id = self._next_id
                self._next_id += 2
                self._pending[stream_id] = pending
            try:
                self._send(encode_message(stream_id, MessageType.REQUEST, data))
            except BaseException:
                with self._lock:
                    self._pending.pop(stream_id, None)
                raise
        if not pending.done.wait(timeout):
            with self._lock:
                self._pending.pop(stream_id, None)
            raise CallTimeoutError(f"{full}: no answer from {self._name} within {timeout:g}s")
        if pending.error is not None:
            raise pending.error
        try:
            response = ttrpc_pb2.Response.FromString(pending.data or b"")
        except DecodeError as err:
            raise RPCError(full, StatusCode.INTERNAL, f"undecodable ttrpc Response: {err}") from err
        if response.status.code != StatusCode.OK:
            raise RPCError(full, response.status.code, response.status.message)
        return response.payload

    def feed(self, data: bytes) -> None:
        """Bytes of this logical connection, from the reader thread."""
        for item in self._decoder.feed(data):
            stream_id = item.header.stream_id
            with self._lock:
                pending = self._pending.pop(stream_id, None)
            if pending is None:
                _log.debug("nri.ttrpc.inactive_stream", connection=self._name, stream=stream_id)
                continue
            if isinstance(item, Oversized):
                pending.error = RPCError(
                    f"stream {stream_id}",
                    StatusCode.RESOURCE_EXHAUSTED,
                    f"response of {item.header.length} bytes exceeds the maximum message of {MAX_MESSAGE_DATA}",
                )
            elif item.header.type != MessageType.RESPONSE:
                pending.error = RPCError(
                    f"stream {stream_id}", StatusCode.INTERNAL, f"unexpected message type {item.header.type}"
                )
            else:
                pending.data = item.data
            pending.done.set()

    def close(self, reason: str) -> None:
        """Fail every waiting call with :class:`ConnectionClosedError`; later calls fail at once."""
        with self._lock:
            if self._closed is None:
                self._closed = reason
            pending, self._pending = self._pending, {}
        for call in pending.values():
            call.error = ConnectionClosedError(f"{self._name} closed: {reason}")
            call.done.set()


@dataclass(frozen=True, slots=True)
class _Request:
    stream_id: int
    full: str
    method: Method
    payload: bytes
    timeout: float | None


class Server:
    """Answers the peer's unary calls on this logical connection.

    Args:
        send: writes one encoded message.
        services: ``{service name: {method name: method}}``.
        name: names the connection in errors and logs.
        max_queued: requests waiting for the dispatcher beyond this are answered
            ResourceExhausted at once.
    """

    def __init__(
        self, send: Send, services: Mapping[str, Mapping[str, Method]], *, name: str, max_queued: int = 64
    ) -> None:
        self._send = send
        self._services = services
        self._name = name
        self._decoder = MessageDecoder()
        self._queue: queue.Queue[_Request | None] = queue.Queue(maxsize=max_queued)
        self._last_id = 0
        self._closed = threading.Event()

    def feed(self, data: bytes) -> None:
        """Bytes of this logical connection, from the reader thread: queue requests, refuse bad ones at once."""
        for item in self._decoder.feed(data):
            stream_id = item.header.stream_id
            if isinstance(item, Oversized):
                self._refuse(
                    stream_id,
                    StatusCode.RESOURCE_EXHAUSTED,
                    f"message of {item.header.length} bytes exceeds the maximum of {MAX_MESSAGE_DATA}",
                )
            elif stream_id % 2 != 1:
                self._refuse(
                    stream_id, StatusCode.INVALID_ARGUMENT, f"stream id {stream_id} is even: a client's are odd"
                )
            elif item.header.type == MessageType.DATA:
                self._refuse(stream_id, StatusCode.INVALID_ARGUMENT, f"stream {stream_id} is not open for data")
            elif item.header.type == MessageType.REQUEST:
                self._request(item)

    def _request(self, item: Message) -> None:
        stream_id = item.header.stream_id
        if stream_id <= self._last_id:
            self._refuse(
                stream_id,
                StatusCode.INVALID_ARGUMENT,
                f"stream id {stream_id} does not increase (last was {self._last_id})",
            )
            return
        self._last_id = stream_id
        try:
            request = ttrpc_pb2.Request.FromString(item.data)
        except DecodeError as err:
            self._refuse(stream_id, StatusCode.INVALID_ARGUMENT, f"undecodable ttrpc Request: {err}")
            return
        methods = self._services.get(request.service)
        if methods is None:
            self._refuse(stream_id, StatusCode.UNIMPLEMENTED, f"service {request.service}")
            return
        method = methods.get(request.method)
        if method is None:
            self._refuse(stream_id, StatusCode.UNIMPLEMENTED, f"method {request.method}")
            return
        timeout = request.timeout_nano / 1e9 if request.timeout_nano > 0 else None
        work = _Request(stream_id, f"{request.service}/{request.method}", method, request.payload, timeout)
        try:
            self._queue.put_nowait(work)
        except queue.Full:
            self._refuse(stream_id, StatusCode.RESOURCE_EXHAUSTED, f"{self._queue.maxsize} requests already waiting")

    def serve(self, stop: threading.Event) -> None:
        """Answer queued requests in order until ``stop`` is set or the server is closed."""
        while not stop.is_set() and not self._closed.is_set():
            try:
                # close() wakes this at once; the timeout only bounds a stop without a close. An idle agent
                # used to wake 20 times a second here (docs/benchmarks.md, "Agent at rest").
                work = self._queue.get(timeout=_IDLE_WAKE)
            except queue.Empty:
                continue
            if work is None:
                continue
            started = time.monotonic()
            try:
                payload = work.method(work.payload, work.timeout)
                status = ttrpc_pb2.Status(code=StatusCode.OK)
            except RPCStatusError as err:
                payload, status = b"", ttrpc_pb2.Status(code=err.code, message=str(err))
            except Exception as err:  # a method bug becomes an Internal status, not a dead server
                _log.exception("nri.ttrpc.method_failed", connection=self._name, method=work.full)
                payload, status = (
                    b"",
                    ttrpc_pb2.Status(code=StatusCode.INTERNAL, message=f"{type(err).__name__}: {err}"),
                )
            if not self._answer(work.stream_id, ttrpc_pb2.Response(status=status, payload=payload)):
                return
            _log.debug(
                "nri.ttrpc.answered",
                connection=self._name,
                method=work.full,
                code=status.code,
                seconds=round(time.monotonic() - started, 6),
            )

    def close(self) -> None:
        """Stop answering (the dispatcher is woken and returns)."""
        self._closed.set()
        with contextlib.suppress(queue.Full):  # a full queue wakes the dispatcher anyway
            self._queue.put_nowait(None)

    def _refuse(self, stream_id: int, code: StatusCode, message: str) -> None:
        _log.warning("nri.ttrpc.refused", connection=self._name, stream=stream_id, code=code.name, error=message)
        self._answer(stream_id, ttrpc_pb2.Response(status=ttrpc_pb2.Status(code=code, message=message)))

    def _answer(self, stream_id: int, response: ttrpc_pb2.Response) -> bool:
        data = response.SerializeToString()
        if len(data) > MAX_MESSAGE_DATA:
            message = f"response of {len(data)} bytes exceeds the maximum message of {MAX_MESSAGE_DATA}"
            _log.error("nri.ttrpc.oversized_response", connection=self._name, stream=stream_id, error=message)
            status = ttrpc_pb2.Status(code=StatusCode.RESOURCE_EXHAUSTED, message=message)
            data = ttrpc_pb2.Response(status=status).SerializeToString()
        try:
            self._send(encode_message(stream_id, MessageType.RESPONSE, data))
        except ConnectionClosedError:
            return False
        return True
