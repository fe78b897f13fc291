"""Byte framing of the NRI connection: multiplexer frames and ttrpc message headers (pure, no I/O).

An NRI plugin talks to the runtime over one unix socket that carries two
logical connections. Each chunk on the socket is a *mux frame*
(containerd/nri: ``pkg/net/multiplex/mux.go``)::

    +----------------------+----------------------+-----------------+
    | connection id (u32)  | payload length (u32) | payload (bytes) |
    +----------------------+----------------------+-----------------+

big-endian, 8 header bytes, at most ``10 + 4 MiB`` of payload per frame
(``maxPayloadSize`` = ttrpc header + ttrpc maximum). Connection id 0 is
reserved; id 1 carries the plugin's service (the plugin serves, the runtime
calls: Configure, Synchronize, the events) and id 2 the runtime's service (the
runtime serves, the plugin calls: RegisterPlugin, UpdateContainers)
(``pkg/net/multiplex/ttrpc.go``: ``PluginServiceConn``, ``RuntimeServiceConn``;
``pkg/stub/stub.go`` listens on the first and dials the second,
``pkg/adaptation/plugin.go`` the other way round). A frame for an id nobody
opened is dropped by the Go reader.

Each logical connection is a byte stream of *ttrpc messages*
(containerd/ttrpc: ``channel.go``, ``PROTOCOL.md``)::

    +-------------------+----------------+-----------+-----------+--------+
    | data length (u32) | stream id (u32)| type (u8) | flags (u8)| data   |
    +-------------------+----------------+-----------+-----------+--------+

10 header bytes, big-endian, data at most 4 MiB (``messageLengthMax``). Types:
1 request, 2 response, 3 data; flags 1 remote-closed, 2 remote-open, 4
no-data. A receiver that reads a longer message discards its data and answers
ResourceExhausted on that stream (``channel.recv``).

A ttrpc message is not aligned with mux frames: the reader must treat each
connection as a byte stream (:class:`MuxDecoder` then :class:`MessageDecoder`).
The writer must not send frames the Go reader cannot take: Go's mux hands each
frame whole to ttrpc's ``bufio.Reader`` (4096 bytes), and a frame larger than
the buffer space the reader offers fails with ENOMEM and kills the connection
(``mux.go`` ``conn.Read``). :func:`split_message` therefore cuts a message
exactly as Go's own writer does (ttrpc writes through a 4096-byte
``bufio.Writer``): one frame of the first 4096 bytes, then one frame of the
rest, which Go's reader takes straight into the message buffer.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

__all__ = [
    "FLAG_NO_DATA",
    "FLAG_REMOTE_CLOSED",
    "FLAG_REMOTE_OPEN",
    "FrameError",
    "GO_BUFIO_SIZE",
    "MAX_MESSAGE_DATA",
    "MAX_MUX_PAYLOAD",
    "MESSAGE_HEADER_LEN",
    "MUX_HEADER_LEN",
    "Message",
    "MessageDecoder",
    "MessageHeader",
    "MessageType",
    "MuxDecoder",
    "Oversized",
    "PLUGIN_SERVICE_CONN",
    "RUNTIME_SERVICE_CONN",
    "encode_message",
    "encode_mux_frame",
    "split_message",
]

MUX_HEADER_LEN = 8
"""Bytes of a mux frame header: connection id and payload length, both big-endian u32."""

MESSAGE_HEADER_LEN = 10
"""Bytes of a ttrpc message header: length u32, stream id u32, type u8, flags u8."""

MAX_MESSAGE_DATA = 4 << 20
"""Largest ttrpc message data (``messageLengthMax`` in containerd/ttrpc ``channel.go``)."""

MAX_MUX_PAYLOAD = MESSAGE_HEADER_LEN + MAX_MESSAGE_DATA
"""Largest mux frame payload (``maxPayloadSize`` in containerd/nri ``pkg/net/multiplex/mux.go``)."""

GO_BUFIO_SIZE = 4096
"""The ``bufio`` buffer size ttrpc reads and writes through (Go's default)."""

PLUGIN_SERVICE_CONN = 1
"""Mux connection of the plugin's ttrpc service: the runtime is the client, the plugin the server."""

RUNTIME_SERVICE_CONN = 2
"""Mux connection of the runtime's ttrpc service: the plugin is the client, the runtime the server."""

FLAG_REMOTE_CLOSED = 0x1
FLAG_REMOTE_OPEN = 0x2
FLAG_NO_DATA = 0x4

_MUX = struct.Struct(">II")
_MESSAGE = struct.Struct(">IIBB")
_U32 = 0xFFFFFFFF


class FrameError(ValueError):
    """Bytes that are not a valid frame or message; the message says which field and value."""


class MessageType(IntEnum):
    """The ttrpc message types (``PROTOCOL.md``)."""

    REQUEST = 1
    RESPONSE = 2
    DATA = 3


def encode_mux_frame(conn_id: int, payload: bytes) -> bytes:
    """One mux frame: header and payload.

    Raises:
        FrameError: the connection id is not 1..2**32-1 or the payload exceeds :data:`MAX_MUX_PAYLOAD`.
    """
    if not 0 < conn_id <= _U32:
        raise FrameError(f"mux frame: connection id {conn_id} is not in 1..{_U32} (0 is reserved)")
    if len(payload) > MAX_MUX_PAYLOAD:
        raise FrameError(f"mux frame: payload of {len(payload)} bytes exceeds the maximum of {MAX_MUX_PAYLOAD}")
    return _MUX.pack(conn_id, len(payload)) + payload


def split_message(message: bytes) -> list[bytes]:
    """Cut one encoded ttrpc message into mux frame payloads the way Go's ttrpc writer does.

    Go writes the message through a 4096-byte ``bufio.Writer``: a message that
    fits goes out as one frame; a longer one as the first 4096 bytes, then the
    rest in one frame (written past the buffer). Go's reader accepts exactly
    these cuts (see the module docstring). An empty message gives no frame.
    """
    if len(message) <= GO_BUFIO_SIZE:
        return [message] if message else []
    return [message[:GO_BUFIO_SIZE], message[GO_BUFIO_SIZE:]]


class MuxDecoder:
    """Reassembles mux frames from socket reads of any size.

    :meth:`feed` takes the bytes of one read and returns every frame they
    complete, as ``(connection id, payload)``, in order. A length above
    :data:`MAX_MUX_PAYLOAD` raises :class:`FrameError` at once (before the
    payload arrives): such a stream cannot be resynchronised, the connection
    must be closed.
    """

    __slots__ = ("_buffer", "_pending")

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._pending: tuple[int, int] | None = None  # (conn id, length) of the frame being read

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        """Add received bytes; return the frames they complete."""
        self._buffer += data
        frames: list[tuple[int, bytes]] = []
        while True:
            if self._pending is None:
                if len(self._buffer) < MUX_HEADER_LEN:
                    return frames
                conn_id, length = _MUX.unpack_from(self._buffer)
                if length > MAX_MUX_PAYLOAD:
                    raise FrameError(
                        f"mux frame for connection {conn_id}: payload length {length} exceeds the maximum of "
                        f"{MAX_MUX_PAYLOAD}"
                    )
                del self._buffer[:MUX_HEADER_LEN]
                self._pending = (conn_id, length)
            conn_id, length = self._pending
            if len(self._buffer) < length:
                return frames
            frames.append((conn_id, bytes(self._buffer[:length])))
            del self._buffer[:length]
            self._pending = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageHeader:
    """A ttrpc message header; ``length`` is the length of the data that follows."""

    length: int
    stream_id: int
    type: int
    flags: int = 0

    def encode(self) -> bytes:
        """The 10 header bytes."""
        return _MESSAGE.pack(self.length, self.stream_id, self.type, self.flags)

    @classmethod
    def decode(cls, data: bytes | bytearray) -> MessageHeader:
        """Parse the first 10 bytes of ``data``.

        Raises:
            FrameError: fewer than 10 bytes.
        """
        if len(data) < MESSAGE_HEADER_LEN:
            raise FrameError(f"ttrpc header: {len(data)} bytes, need {MESSAGE_HEADER_LEN}")
        length, stream_id, kind, flags = _MESSAGE.unpack_from(data)
        return cls(length=length, stream_id=stream_id, type=kind, flags=flags)


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One complete ttrpc message."""

    header: MessageHeader
    data: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class Oversized:
    """A message whose data exceeded :data:`MAX_MESSAGE_DATA`; its data was discarded.

    The receiver answers ResourceExhausted on ``header.stream_id`` (as
    containerd/ttrpc ``channel.recv`` does) and the stream goes on.
    """

    header: MessageHeader


def encode_message(stream_id: int, kind: MessageType, data: bytes, flags: int = 0) -> bytes:
    """Header and data of one ttrpc message.

    Raises:
        FrameError: the data exceeds :data:`MAX_MESSAGE_DATA`, or the stream id or flags do not fit their fields.
    """
    if len(data) > MAX_MESSAGE_DATA:
        raise FrameError(f"ttrpc message: {len(data)} bytes of data exceed the maximum of {MAX_MESSAGE_DATA}")
    if not 0 <= stream_id <= _U32:
        raise FrameError(f"ttrpc message: stream id {stream_id} does not fit 32 bits")
    if not 0 <= flags <= 0xFF:
        raise FrameError(f"ttrpc message: flags {flags} do not fit 8 bits")
    return MessageHeader(length=len(data), stream_id=stream_id, type=int(kind), flags=flags).encode() + data


class MessageDecoder:
    """Reassembles ttrpc messages from the byte stream of one logical connection.

    :meth:`feed` takes whatever bytes a mux frame carried and returns every
    message they complete. A message longer than the limit is not buffered: its
    data is skipped as it arrives and an :class:`Oversized` item is returned in
    its place, so the stream stays in step.
    """

    __slots__ = ("_buffer", "_header", "_limit", "_skip")

    def __init__(self, limit: int = MAX_MESSAGE_DATA) -> None:
        self._buffer = bytearray()
        self._header: MessageHeader | None = None
        self._skip = 0  # data bytes of an oversized message still to discard
        self._limit = limit

    def feed(self, data: bytes) -> list[Message | Oversized]:
        """Add bytes of this connection; return the messages (or oversize notices) they complete."""
        self._buffer += data
        out: list[Message | Oversized] = []
        while True:
            if self._skip:
                dropped = min(self._skip, len(self._buffer))
                del self._buffer[:dropped]
                self._skip -= dropped
                if self._skip:
                    return out
            if self._header is None:
                if len(self._buffer) < MESSAGE_HEADER_LEN:
                    return out
                header = MessageHeader.decode(self._buffer)
                del self._buffer[:MESSAGE_HEADER_LEN]
                if header.length > self._limit:
                    self._skip = header.length
                    out.append(Oversized(header=header))
                    continue
                self._header = header
            if len(self._buffer) < self._header.length:
                return out
            length = self._header.length
            out.append(Message(header=self._header, data=bytes(self._buffer[:length])))
            del self._buffer[:length]
            self._header = None
