"""One NRI socket: mux frames out under one lock, one reader thread routing frames to the logical connections.

The multiplexer (containerd/nri ``pkg/net/multiplex/mux.go``) has no handshake
and no control frames: each side just starts writing frames for connection ids
1 and 2 and drops frames for ids it did not open. :class:`MuxConnection` is that
trunk for podpin: :meth:`send` cuts a ttrpc message into frames the Go reader
accepts (``agent.nri.frames.split_message``) and writes them whole under a lock
(frames of two messages never interleave); a reader thread turns what arrives
into frames and hands each payload to the byte sink registered for its id
(``agent.nri.ttrpc`` endpoints).

Anything wrong on the trunk ends it: the peer closing, a read or write error, a
frame longer than the protocol allows, or a sink that cannot make sense of its
bytes. ``on_close`` is called once with the reason; every later :meth:`send`
raises :class:`ConnectionClosedError`. :meth:`close` shuts the socket down, which
wakes the reader (and a writer blocked on a full socket) at once.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Mapping

import structlog

from agent.nri.frames import FrameError, MuxDecoder, encode_mux_frame, split_message
from agent.nri.ttrpc import ConnectionClosedError

__all__ = ["MuxConnection", "dial"]

_log = structlog.get_logger("podpin.nri.conn")

_READ_SIZE = 1 << 16


def dial(path: str, timeout: float) -> socket.socket:
    """Connect to a unix stream socket; the socket is returned in blocking mode.

    Raises:
        OSError: no such socket, nobody listening, permission denied, or no connection within ``timeout``.
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(path)
        sock.settimeout(None)
    except BaseException:
        sock.close()
        raise
    return sock


class MuxConnection:
    """The multiplexed trunk of one plugin connection.

    Args:
        sock: a connected stream socket; owned (closed) by this object.
        routes: ``{connection id: sink}``; a sink takes the payload bytes of each
            frame for its id, in order, on the reader thread, and raises
            :class:`FrameError` for bytes it cannot parse.
        on_close: called once, with the reason, when the trunk ends.
        name: names the trunk in logs and errors.
    """

    def __init__(
        self,
        sock: socket.socket,
        routes: Mapping[int, Callable[[bytes], None]],
        *,
        on_close: Callable[[str], None] | None = None,
        name: str = "nri",
    ) -> None:
        self._sock = sock
        self._routes = dict(routes)
        self._on_close = on_close
        self._name = name
        self._write_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._reason: str | None = None
        self._closed = threading.Event()
        self._reader = threading.Thread(target=self._read_loop, name=f"podpin-{name}-reader", daemon=True)

    def start(self) -> None:
        """Start the reader thread."""
        self._reader.start()

    @property
    def close_reason(self) -> str | None:
        """Why the trunk ended, or None while it is open."""
        return self._reason

    def wait_closed(self, timeout: float | None = None) -> bool:
        """Wait until the trunk has ended; True if it has."""
        return self._closed.wait(timeout)

    def send(self, conn_id: int, message: bytes) -> None:
        """Write one encoded ttrpc message on logical connection ``conn_id``.

        Raises:
            ConnectionClosedError: the trunk has ended (or ends during the write).
        """
        data = b"".join(encode_mux_frame(conn_id, chunk) for chunk in split_message(message))
        with self._write_lock:
            if self._reason is not None:
                raise ConnectionClosedError(f"{self._name}: {self._reason}")
            try:
                self._sock.sendall(data)
            except OSError as err:
                reason = f"write failed: {err.strerror or err}"
                self.close(reason)
                raise ConnectionClosedError(f"{self._name}: {reason}") from err

    def close(self, reason: str) -> None:
        """End the trunk (idempotent; the first reason wins) and wake the reader."""
        with self._state_lock:
            if self._reason is not None:
                return
            self._reason = reason
        with contextlib.suppress(OSError):  # already shut down or never fully connected: nothing to wake
            self._sock.shutdown(socket.SHUT_RDWR)
        self._closed.set()
        if self._on_close is not None:
            try:
                self._on_close(reason)
            except Exception:  # a failing callback must not keep the trunk half-closed
                _log.exception("nri.conn.on_close_failed", connection=self._name)

    def join(self, timeout: float) -> None:
        """Wait for the reader thread to end, then release the socket."""
        if self._reader.is_alive() and self._reader is not threading.current_thread():
            self._reader.join(timeout)
        if not self._reader.is_alive():
            self._sock.close()

    def _read_loop(self) -> None:
        decoder = MuxDecoder()
        while self._reason is None:
            try:
                data = self._sock.recv(_READ_SIZE)
            except OSError as err:
                self.close(f"read failed: {err.strerror or err}")
                break
            if not data:
                self.close("closed by the runtime")
                break
            try:
                for conn_id, payload in decoder.feed(data):
                    sink = self._routes.get(conn_id)
                    if sink is None:
                        _log.debug("nri.conn.unrouted_frame", connection=self._name, conn_id=conn_id, size=len(payload))
                        continue
                    sink(payload)
            except FrameError as err:
                self.close(f"bad frame: {err}")
                break
            except Exception as err:  # a sink bug ends this connection, never the plugin
                _log.exception("nri.conn.sink_failed", connection=self._name)
                self.close(f"internal error reading a frame: {type(err).__name__}: {err}")
                break
        self._closed.set()
