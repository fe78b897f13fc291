"""Mux frames and ttrpc message framing: wire bytes, round trips under any fragmentation, limits."""

from __future__ import annotations

import itertools
import queue
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.nri.frames import (
    GO_BUFIO_SIZE,
    MAX_MESSAGE_DATA,
    MAX_MUX_PAYLOAD,
    FrameError,
    Message,
    MessageDecoder,
    MessageHeader,
    MessageType,
    MuxDecoder,
    Oversized,
    encode_message,
    encode_mux_frame,
    split_message,
)
from tests.support.go_mux import GoReader, GoReadError


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    """``data`` cut at the given offsets (taken modulo its length)."""
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def test_mux_frame_bytes_are_conn_id_then_length_big_endian() -> None:
    """A mux frame is a big-endian u32 connection id, a big-endian u32 payload length, then the payload."""
    assert b"\x00\x00\x00\x02\x00\x00\x00\x03abc" == encode_mux_frame(2, b"abc")


def test_ttrpc_header_bytes_are_length_stream_type_flags() -> None:
    """A ttrpc header is length u32, stream id u32, type u8, flags u8 (big-endian), then the data."""
    expected = b"\x00\x00\x00\x02" + b"\x00\x00\x00\x05" + b"\x01" + b"\x04" + b"hi"
    assert expected == encode_message(5, MessageType.REQUEST, b"hi", flags=4)


def test_ttrpc_header_decodes_its_fields() -> None:
    """Decoding the 10 header bytes gives back length, stream id, type and flags."""
    header = MessageHeader.decode(b"\x00\x00\x01\x00\x00\x00\x00\x07\x02\x00")
    assert MessageHeader(length=256, stream_id=7, type=2, flags=0) == header


def test_short_ttrpc_header_is_an_error() -> None:
    """Fewer than 10 bytes are not a header, and the error says how many there were."""
    with pytest.raises(FrameError, match="3 bytes, need 10"):
        MessageHeader.decode(b"abc")


@settings(max_examples=200)
@given(
    frames=st.lists(st.tuples(st.integers(1, 2**32 - 1), st.binary(max_size=300)), max_size=8),
    cuts=st.lists(st.integers(0, 5000), max_size=12),
)
def test_mux_frames_survive_any_fragmentation(frames: list[tuple[int, bytes]], cuts: list[int]) -> None:
    """Frames written back to back come out whole and in order, however the reads split the stream."""
    stream = b"".join(encode_mux_frame(conn, payload) for conn, payload in frames)
    decoder = MuxDecoder()
    out: list[tuple[int, bytes]] = []
    for chunk in _chunks(stream, cuts):
        out += decoder.feed(chunk)
    assert frames == out


@settings(max_examples=200)
@given(
    messages=st.lists(
        st.tuples(
            st.integers(0, 2**32 - 1), st.sampled_from(list(MessageType)), st.integers(0, 255), st.binary(max_size=9000)
        ),
        max_size=5,
    ),
    cuts=st.lists(st.integers(0, 50_000), max_size=12),
)
def test_ttrpc_messages_survive_any_fragmentation(
    messages: list[tuple[int, MessageType, int, bytes]], cuts: list[int]
) -> None:
    """Messages of one connection come out whole and in order, however their bytes were cut."""
    stream = b"".join(encode_message(sid, kind, data, flags) for sid, kind, flags, data in messages)
    decoder = MessageDecoder()
    out = []
    for chunk in _chunks(stream, cuts):
        out += decoder.feed(chunk)
    expected = [
        Message(header=MessageHeader(length=len(data), stream_id=sid, type=int(kind), flags=flags), data=data)
        for sid, kind, flags, data in messages
    ]
    assert expected == out


@settings(max_examples=100)
@given(
    one=st.lists(st.binary(max_size=6000), max_size=4),
    two=st.lists(st.binary(max_size=6000), max_size=4),
    order=st.lists(st.booleans(), max_size=40),
    cuts=st.lists(st.integers(0, 60_000), max_size=10),
)
def test_interleaved_connections_demultiplex(
    one: list[bytes], two: list[bytes], order: list[bool], cuts: list[int]
) -> None:
    """Frames of connections 1 and 2 interleaved on one trunk give each connection its own messages back."""
    frames = {
        1: [
            encode_mux_frame(1, c)
            for i, d in enumerate(one)
            for c in split_message(encode_message(2 * i + 1, MessageType.REQUEST, d))
        ],
        2: [
            encode_mux_frame(2, c)
            for i, d in enumerate(two)
            for c in split_message(encode_message(2 * i + 1, MessageType.RESPONSE, d))
        ],
    }
    trunk = []
    picks = iter(order)
    while frames[1] or frames[2]:
        conn = 1 if (next(picks, True) and frames[1]) or not frames[2] else 2
        trunk.append(frames[conn].pop(0))
    mux = MuxDecoder()
    decoders = {1: MessageDecoder(), 2: MessageDecoder()}
    out: dict[int, list[bytes]] = {1: [], 2: []}
    for chunk in _chunks(b"".join(trunk), cuts):
        for conn, payload in mux.feed(chunk):
            out[conn] += [m.data for m in decoders[conn].feed(payload) if isinstance(m, Message)]
    assert {1: one, 2: two} == out


def test_oversized_mux_frame_is_refused_before_its_payload() -> None:
    """A frame header announcing more than 10 + 4 MiB is an error naming the connection and the length."""
    with pytest.raises(FrameError, match=f"connection 1: payload length {MAX_MUX_PAYLOAD + 1} exceeds"):
        MuxDecoder().feed(struct.pack(">II", 1, MAX_MUX_PAYLOAD + 1))


def test_mux_frame_encoding_refuses_reserved_id_and_oversize() -> None:
    """Connection id 0 is reserved, and a payload over the maximum cannot be framed."""
    with pytest.raises(FrameError, match="0 is reserved"):
        encode_mux_frame(0, b"")
    with pytest.raises(FrameError, match="exceeds the maximum"):
        encode_mux_frame(1, bytes(MAX_MUX_PAYLOAD + 1))


def test_message_over_four_mib_cannot_be_encoded() -> None:
    """Data over 4 MiB is refused with the size named."""
    with pytest.raises(FrameError, match=f"{MAX_MESSAGE_DATA + 1} bytes of data exceed"):
        encode_message(1, MessageType.REQUEST, bytes(MAX_MESSAGE_DATA + 1))


@given(cuts=st.lists(st.integers(0, 100), max_size=8))
def test_oversized_message_is_skipped_and_the_stream_goes_on(cuts: list[int]) -> None:
    """A message over the limit is reported as Oversized without its data, and the next message is read intact."""
    big = MessageHeader(length=40, stream_id=3, type=1).encode() + bytes(40)
    after = encode_message(5, MessageType.REQUEST, b"next")
    decoder = MessageDecoder(limit=32)
    out = []
    for chunk in _chunks(big + after, cuts):
        out += decoder.feed(chunk)
    assert [
        Oversized(header=MessageHeader(length=40, stream_id=3, type=1)),
        Message(header=MessageHeader(length=4, stream_id=5, type=1), data=b"next"),
    ] == out


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        (0, []),
        (10, [10]),
        (GO_BUFIO_SIZE, [GO_BUFIO_SIZE]),
        (GO_BUFIO_SIZE + 1, [GO_BUFIO_SIZE, 1]),
        (70_000, [GO_BUFIO_SIZE, 70_000 - GO_BUFIO_SIZE]),
    ],
)
def test_split_message_cuts_like_go_bufio_writer(size: int, expected: list[int]) -> None:
    """A message up to 4096 bytes is one frame; a longer one is the first 4096 bytes and then the rest."""
    assert expected == [len(chunk) for chunk in split_message(bytes(size))]


def _go_read(frames: list[bytes], sizes: list[int]) -> list[bytes]:
    """Read messages of the given data sizes the way Go's ttrpc reads them from these mux frame payloads."""
    pipe: queue.Queue[bytes | None] = queue.Queue()
    for frame in frames:
        pipe.put(frame)
    reader = GoReader(pipe)
    out = []
    for _ in sizes:
        length = struct.unpack(">I", reader.read_full(10)[:4])[0]
        out.append(reader.read_full(length))
    return out


@settings(max_examples=60)
@given(sizes=st.lists(st.integers(0, 3 * GO_BUFIO_SIZE), min_size=1, max_size=4))
def test_go_reader_accepts_every_frame_podpin_writes(sizes: list[int]) -> None:
    """Go's mux + bufio reader reads back every message podpin frames, whatever its size (no ENOMEM)."""
    datas = [bytes([i % 251]) * size for i, size in enumerate(sizes)]
    frames = [c for i, d in enumerate(datas) for c in split_message(encode_message(2 * i + 1, MessageType.RESPONSE, d))]
    assert datas == _go_read(frames, sizes)


def test_go_reader_fails_on_one_big_frame() -> None:
    """The oracle is strict: a 5000-byte message sent as a single frame is what real containerd cannot read."""
    message = encode_message(1, MessageType.RESPONSE, bytes(4990))
    with pytest.raises(GoReadError, match="ENOMEM"):
        _go_read([message], [4990])
