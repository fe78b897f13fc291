"""The socket trunk: frames out in Go's cuts, frames in routed by connection id, one close with its reason."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Iterator

import pytest

from agent.nri.conn import MuxConnection
from agent.nri.frames import MuxDecoder
from agent.nri.ttrpc import ConnectionClosedError


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A connected unix socket pair: (podpin's end, the runtime's end)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    yield ours, theirs
    ours.close()
    theirs.close()


def _read_frames(sock: socket.socket, count: int) -> list[tuple[int, bytes]]:
    decoder = MuxDecoder()
    frames: list[tuple[int, bytes]] = []
    while len(frames) < count:
        frames += decoder.feed(sock.recv(1 << 16))
    return frames


def test_send_cuts_a_long_message_into_go_sized_frames(pair: tuple[socket.socket, socket.socket]) -> None:
    """A 10000-byte message goes out as a 4096-byte frame and a 5904-byte frame on its connection id."""
    ours, theirs = pair
    trunk = MuxConnection(ours, {})
    trunk.send(2, bytes(10_000))
    assert [(2, 4096), (2, 5904)] == [(conn, len(data)) for conn, data in _read_frames(theirs, 2)]
    trunk.close("test over")


def test_frames_are_routed_by_connection_id(pair: tuple[socket.socket, socket.socket]) -> None:
    """Payloads reach the sink of their connection id, in order; a frame for another id is dropped."""
    ours, theirs = pair
    got: dict[int, list[bytes]] = {1: [], 2: []}
    done = threading.Event()

    def sink(conn: int) -> Callable[[bytes], None]:
        def take(data: bytes) -> None:
            got[conn].append(data)
            if data == b"last":
                done.set()

        return take

    trunk = MuxConnection(ours, {1: sink(1), 2: sink(2)})
    trunk.start()
    for conn, data in [(1, b"a"), (7, b"nobody"), (2, b"b"), (1, b"c"), (2, b"last")]:
        theirs.sendall(struct.pack(">II", conn, len(data)) + data)
    assert done.wait(2)
    assert {1: [b"a", b"c"], 2: [b"b", b"last"]} == got
    trunk.close("test over")


def test_peer_close_ends_the_trunk_once_with_the_reason(pair: tuple[socket.socket, socket.socket]) -> None:
    """The runtime closing is reported once to on_close; later sends raise ConnectionClosedError with the reason."""
    ours, theirs = pair
    reasons: list[str] = []
    trunk = MuxConnection(ours, {}, on_close=reasons.append)
    trunk.start()
    theirs.close()
    assert trunk.wait_closed(2)
    trunk.close("again")
    assert ["closed by the runtime"] == reasons
    with pytest.raises(ConnectionClosedError, match="closed by the runtime"):
        trunk.send(1, b"x")
    trunk.join(1)


def test_bad_frame_ends_the_trunk_naming_it(pair: tuple[socket.socket, socket.socket]) -> None:
    """A frame longer than the protocol allows ends the trunk with 'bad frame' and the numbers."""
    ours, theirs = pair
    reasons: list[str] = []
    trunk = MuxConnection(ours, {}, on_close=reasons.append)
    trunk.start()
    theirs.sendall(struct.pack(">II", 2, 0xFFFFFFFF))
    assert trunk.wait_closed(2)
    assert [
        f"bad frame: mux frame for connection 2: payload length {0xFFFFFFFF} exceeds the maximum of 4194314"
    ] == reasons


def test_close_wakes_the_reader(pair: tuple[socket.socket, socket.socket]) -> None:
    """close() from another thread ends a reader blocked on an idle socket at once."""
    ours, _ = pair
    trunk = MuxConnection(ours, {})
    trunk.start()
    trunk.close("plugin stopped")
    trunk.join(1)
    assert ("plugin stopped", True) == (trunk.close_reason, trunk.wait_closed(0))
