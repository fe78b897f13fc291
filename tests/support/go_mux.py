"""The runtime's end of an NRI socket, framed the way the Go code frames it - an oracle for podpin's framing.

Written apart from ``agent.nri.frames``/``ttrpc``/``conn`` on purpose: a bug
shared by both ends would pass every round trip. It follows the Go sources
step by step (containerd/nri ``pkg/net/multiplex/mux.go``; containerd/ttrpc
``channel.go``, ``client.go``, ``server.go``):

* Writing: ttrpc writes a message through a 4096-byte ``bufio.Writer`` (header,
  then data, then ``Flush``); each buffer flush or direct large write becomes
  mux frames of at most ``10 + 4 MiB``. :class:`GoWriter` replays
  ``bufio.Writer.Write`` literally.
* Reading: mux hands each frame whole to ttrpc's 4096-byte ``bufio.Reader``;
  ``conn.Read`` fails (ENOMEM) when the frame is larger than the space the
  reader offers. :class:`GoReader` replays ``bufio.Reader.Read`` literally and
  raises :class:`GoReadError` where Go would fail, so a plugin that writes
  frames real containerd could not read fails the tests.

:class:`GoTrunk` runs one accepted connection: ``call`` makes unary ttrpc calls
on one mux connection (odd stream ids from 1, one lock for id and send),
``serve`` answers requests on the other with a table of methods.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import struct
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from agent.nri.proto import ttrpc_pb2

__all__ = [
    "GoReadError",
    "GoReader",
    "GoWriter",
    "GoMessage",
    "GoTrunk",
    "RemoteError",
    "DeadlineExceededError",
    "TrunkClosedError",
    "ServedMethod",
]

_BUFIO = 4096
_MAX_DATA = 4 << 20
_MAX_FRAME = 10 + _MAX_DATA

ServedMethod = Callable[[bytes], tuple[int, str, bytes]]
"""A served method: request payload -> (status code, status message, response payload)."""


class GoReadError(Exception):
    """Where Go's mux + bufio reader would fail (ENOMEM: a frame larger than the read buffer offered)."""


class TrunkClosedError(Exception):
    """The trunk is closed."""


class DeadlineExceededError(Exception):
    """No response within the call's timeout (the runtime then closes the plugin, as containerd does)."""


class RemoteError(Exception):
    """A response with a non-OK status."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"status {code}: {message}")
        self.code = code
        self.status_message = message


class GoWriter:
    """``bufio.Writer`` (4096) over mux frames of one connection id; ``flush`` ends each message."""

    def __init__(self, write_frame: Callable[[bytes], None]) -> None:
        self._write_frame = write_frame
        self._buf = bytearray()

    def _direct(self, data: bytes) -> None:
        for start in range(0, len(data), _MAX_FRAME):
            self._write_frame(data[start : start + _MAX_FRAME])

    def write(self, data: bytes) -> None:
        while len(data) > _BUFIO - len(self._buf):
            if not self._buf:
                self._direct(data)
                return
            room = _BUFIO - len(self._buf)
            self._buf += data[:room]
            self.flush()
            data = data[room:]
        self._buf += data

    def flush(self) -> None:
        if self._buf:
            self._direct(bytes(self._buf))
            self._buf.clear()


class GoReader:
    """``bufio.Reader`` (4096) over the frames of one mux connection, with mux ``conn.Read``'s size check."""

    def __init__(self, frames: queue.Queue[bytes | None]) -> None:
        self._frames = frames
        self._buf = b""
        self._r = 0

    def _conn_read(self, offered: int) -> bytes:
        frame = self._frames.get()
        if frame is None:
            raise TrunkClosedError("trunk closed")
        if len(frame) > offered:
            raise GoReadError(f"ENOMEM: a {len(frame)}-byte frame met a read of {offered} bytes")
        return frame

    def _read(self, want: int) -> bytes:
        if self._r == len(self._buf):
            if want >= _BUFIO:
                return self._conn_read(want)  # large read, empty buffer: straight into the caller's slice
            self._buf, self._r = self._conn_read(_BUFIO), 0
        chunk = self._buf[self._r : self._r + want]
        self._r += len(chunk)
        return chunk

    def read_full(self, size: int) -> bytes:
        out = bytearray()
        while len(out) < size:
            out += self._read(size - len(out))
        return bytes(out)


@dataclass(frozen=True, slots=True)
class GoMessage:
    stream_id: int
    kind: int
    flags: int
    data: bytes


class GoTrunk:
    """One accepted plugin connection as the Go runtime runs it.

    Args:
        sock: the accepted socket.
        served: ``{conn id: {"service/method": method}}`` answered by this side.
        called: the conn ids this side makes calls on.
    """

    def __init__(self, sock: socket.socket, served: Mapping[int, Mapping[str, ServedMethod]], called: tuple[int, ...]):
        self.sock = sock
        self._served = served
        self._write_lock = threading.Lock()
        self._frames: dict[int, queue.Queue[bytes | None]] = {conn: queue.Queue() for conn in (*served.keys(), *called)}
        self._responses: dict[int, queue.Queue[GoMessage]] = {}
        self._call_lock = threading.Lock()
        self._next_id: dict[int, int] = dict.fromkeys(called, 1)
        self.closed = threading.Event()
        self.error: str | None = None
        self.unknown_frames = 0
        self._threads = [threading.Thread(target=self._demux, daemon=True, name="go-mux-reader")]
        for conn in served:
            self._threads.append(threading.Thread(target=self._serve, args=(conn,), daemon=True, name=f"go-srv-{conn}"))
        for conn in called:
            self._threads.append(threading.Thread(target=self._responses_of, args=(conn,), daemon=True))

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    # -- writing -----------------------------------------------------------------------------
    def send_frame(self, conn: int, payload: bytes) -> None:
        """One raw mux frame (tests use it for malformed input)."""
        self.send_raw(struct.pack(">II", conn, len(payload)) + payload)

    def send_raw(self, data: bytes) -> None:
        with self._write_lock:
            self.sock.sendall(data)

    def send_message(self, conn: int, stream_id: int, kind: int, data: bytes, flags: int = 0) -> None:
        """One ttrpc message, written as Go's channel.send writes it (header, data, flush)."""
        with self._write_lock:
            writer = GoWriter(lambda chunk: self.sock.sendall(struct.pack(">II", conn, len(chunk)) + chunk))
            writer.write(struct.pack(">IIBB", len(data), stream_id, kind, flags))
            writer.write(data)
            writer.flush()

    # -- calls -----------------------------------------------------------------------------------
    def call(self, conn: int, service: str, method: str, payload: bytes, timeout: float) -> bytes:
        """A unary call; the response payload.

        Raises:
            RemoteError: non-OK status. DeadlineExceededError: no answer in time. TrunkClosedError: closed first.
        """
        request = ttrpc_pb2.Request(service=service, method=method, payload=payload, timeout_nano=int(timeout * 1e9))
        answers: queue.Queue[GoMessage] = queue.Queue()
        with self._call_lock:
            if self.closed.is_set():
                raise TrunkClosedError(self.error or "closed")
            stream_id = self._next_id[conn]
            self._next_id[conn] += 2
            self._responses[stream_id] = answers
            self.send_message(conn, stream_id, 1, request.SerializeToString())
        try:
            msg = answers.get(timeout=timeout)
        except queue.Empty:
            raise DeadlineExceededError(f"{service}/{method}: no answer within {timeout}s") from None
        finally:
            self._responses.pop(stream_id, None)
        if msg.kind == 0:
            raise TrunkClosedError(self.error or "closed")
        response = ttrpc_pb2.Response.FromString(msg.data)
        if response.status.code != 0:
            raise RemoteError(response.status.code, response.status.message)
        return response.payload

    def exchange(self, conn: int, kind: int, data: bytes, timeout: float, *, stream_id: int | None = None) -> GoMessage:
        """Send a raw message (on the next call stream id unless given) and wait for what answers it."""
        answers: queue.Queue[GoMessage] = queue.Queue()
        with self._call_lock:
            if stream_id is None:
                stream_id = self._next_id[conn]
                self._next_id[conn] += 2
            self._responses[stream_id] = answers
            self.send_message(conn, stream_id, kind, data)
        try:
            return answers.get(timeout=timeout)
        finally:
            self._responses.pop(stream_id, None)

    # -- reading -------------------------------------------------------------------------------
    def _demux(self) -> None:
        try:
            while True:
                header = self._recv_exact(8)
                conn, length = struct.unpack(">II", header)
                payload = self._recv_exact(length)
                target = self._frames.get(conn)
                if target is None:
                    self.unknown_frames += 1  # Go's mux drops frames of connections it did not open
                    continue
                target.put(payload)
        except (OSError, TrunkClosedError) as err:
            self.close(f"read: {err}")

    def _recv_exact(self, size: int) -> bytes:
        out = bytearray()
        while len(out) < size:
            chunk = self.sock.recv(size - len(out))
            if not chunk:
                raise TrunkClosedError("peer closed the connection")
            out += chunk
        return bytes(out)

    def _messages(self, conn: int) -> Callable[[], GoMessage]:
        reader = GoReader(self._frames[conn])

        def next_message() -> GoMessage:
            length, stream_id, kind, flags = struct.unpack(">IIBB", reader.read_full(10))
            if length > _MAX_DATA:
                raise GoReadError(f"message of {length} bytes exceeds {_MAX_DATA}")
            return GoMessage(stream_id, kind, flags, reader.read_full(length) if length else b"")

        return next_message

    def _responses_of(self, conn: int) -> None:
        next_message = self._messages(conn)
        try:
            while True:
                msg = next_message()
                waiting = self._responses.get(msg.stream_id)
                if waiting is not None:
                    waiting.put(msg)
        except (GoReadError, TrunkClosedError) as err:
            self.close(f"conn {conn}: {err}")

    def _serve(self, conn: int) -> None:
        next_message = self._messages(conn)
        methods = self._served[conn]
        last = 0
        try:
            while True:
                msg = next_message()
                if msg.kind != 1:
                    continue
                if msg.stream_id % 2 != 1 or msg.stream_id <= last:
                    self._answer(conn, msg.stream_id, 3, f"bad stream id {msg.stream_id}", b"")
                    continue
                last = msg.stream_id
                request = ttrpc_pb2.Request.FromString(msg.data)
                method = methods.get(f"{request.service}/{request.method}")
                if method is None:
                    self._answer(conn, msg.stream_id, 12, f"method {request.method}", b"")
                    continue
                code, text, payload = method(request.payload)
                self._answer(conn, msg.stream_id, code, text, payload)
        except (GoReadError, TrunkClosedError, OSError) as err:
            self.close(f"conn {conn}: {err}")

    def _answer(self, conn: int, stream_id: int, code: int, message: str, payload: bytes) -> None:
        response = ttrpc_pb2.Response(status=ttrpc_pb2.Status(code=code, message=message), payload=payload)
        self.send_message(conn, stream_id, 2, response.SerializeToString())

    def close(self, reason: str) -> None:
        with self._call_lock:
            if self.closed.is_set():
                return
            self.error = reason
            self.closed.set()
        with contextlib.suppress(OSError):  # already shut down by the peer
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        for frames in self._frames.values():
            frames.put(None)
        for waiting in list(self._responses.values()):
            waiting.put(GoMessage(0, 0, 0, b""))
