"""ttrpc endpoints: stream ids, statuses, refusals of bad requests, timeouts and closing."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from agent.nri.frames import MessageDecoder, MessageHeader, MessageType, encode_message
from agent.nri.proto import ttrpc_pb2
from agent.nri.ttrpc import (
    CallTimeoutError,
    Client,
    ConnectionClosedError,
    Method,
    RPCError,
    RPCStatusError,
    Server,
    StatusCode,
)


class Wire:
    """Collects what an endpoint sends, decoded back into messages."""

    def __init__(self) -> None:
        self.decoder = MessageDecoder()
        self.messages: list[tuple[MessageHeader, bytes]] = []
        self.sent = threading.Event()

    def __call__(self, data: bytes) -> None:
        for message in self.decoder.feed(data):
            self.messages.append((message.header, message.data))  # type: ignore[union-attr]
        self.sent.set()


def _request(
    stream_id: int, service: str, method: str, payload: bytes = b"", kind: MessageType = MessageType.REQUEST
) -> bytes:
    body = ttrpc_pb2.Request(service=service, method=method, payload=payload).SerializeToString()
    return encode_message(stream_id, kind, body)


def _responses(wire: Wire) -> list[tuple[int, int, str, bytes]]:
    out = []
    for header, data in wire.messages:
        response = ttrpc_pb2.Response.FromString(data)
        out.append((header.stream_id, response.status.code, response.status.message, response.payload))
    return out


@pytest.fixture
def served() -> Iterator[tuple[Server, Wire]]:
    """A server with svc/echo and svc/fail, its dispatcher running."""

    def echo(payload: bytes, timeout: float | None) -> bytes:
        return payload + (b"!" if timeout is None else b"?")

    def fail(_payload: bytes, _timeout: float | None) -> bytes:
        raise RPCStatusError(StatusCode.NOT_FOUND, "no such pod")

    def crash(_payload: bytes, _timeout: float | None) -> bytes:
        raise KeyError("bug")

    methods: dict[str, Method] = {"echo": echo, "fail": fail, "crash": crash}
    wire = Wire()
    server = Server(wire, {"svc": methods}, name="test")
    stop = threading.Event()
    thread = threading.Thread(target=server.serve, args=(stop,), daemon=True)
    thread.start()
    yield server, wire
    stop.set()
    thread.join(1)


def _wait(wire: Wire, count: int) -> None:
    for _ in range(200):
        if len(wire.messages) >= count:
            return
        wire.sent.wait(0.01)
        wire.sent.clear()
    raise AssertionError(f"expected {count} messages, got {len(wire.messages)}")


def test_server_answers_on_the_request_stream(served: tuple[Server, Wire]) -> None:
    """A request is answered OK with the method's payload, on the same stream id, as a Response message."""
    server, wire = served
    server.feed(_request(1, "svc", "echo", b"hi"))
    _wait(wire, 1)
    assert [(1, 0, "", b"hi!")] == _responses(wire)
    assert MessageType.RESPONSE == wire.messages[0][0].type


def test_server_passes_the_callers_deadline(served: tuple[Server, Wire]) -> None:
    """timeout_nano reaches the method as seconds."""
    server, wire = served
    body = ttrpc_pb2.Request(service="svc", method="echo", payload=b"t", timeout_nano=2_000_000_000)
    server.feed(encode_message(1, MessageType.REQUEST, body.SerializeToString()))
    _wait(wire, 1)
    assert [(1, 0, "", b"t?")] == _responses(wire)


@pytest.mark.parametrize(
    ("frames", "expected"),
    [
        ([_request(2, "svc", "echo")], [(2, StatusCode.INVALID_ARGUMENT, "stream id 2 is even: a client's are odd")]),
        ([_request(1, "other", "echo")], [(1, StatusCode.UNIMPLEMENTED, "service other")]),
        ([_request(1, "svc", "nope")], [(1, StatusCode.UNIMPLEMENTED, "method nope")]),
        (
            [_request(5, "svc", "echo"), _request(3, "svc", "echo")],
            [(5, 0, ""), (3, StatusCode.INVALID_ARGUMENT, "stream id 3 does not increase (last was 5)")],
        ),
        (
            [_request(1, "svc", "echo", kind=MessageType.DATA)],
            [(1, StatusCode.INVALID_ARGUMENT, "stream 1 is not open for data")],
        ),
        (
            [encode_message(1, MessageType.REQUEST, b"\xff\xff")],
            [(1, StatusCode.INVALID_ARGUMENT, "undecodable ttrpc Request")],
        ),
        ([_request(1, "svc", "fail")], [(1, StatusCode.NOT_FOUND, "no such pod")]),
        ([_request(1, "svc", "crash")], [(1, StatusCode.INTERNAL, "KeyError: 'bug'")]),
    ],
)
def test_server_refuses_bad_requests_with_a_status(
    served: tuple[Server, Wire], frames: list[bytes], expected: list[tuple[int, int, str]]
) -> None:
    """Each bad request gets its own status on its stream id, and the server keeps serving."""
    server, wire = served
    for frame in frames:
        server.feed(frame)
    _wait(wire, len(expected))
    got = sorted(_responses(wire))
    want = sorted((sid, int(code), text) for sid, code, text in expected)
    # Refusals go out at once, answers when the dispatcher gets to them: compare by stream id. The status
    # text is compared up to the expected prefix (protobuf's decode error detail varies).
    assert want == [(sid, code, text[: len(w[2])]) for (sid, code, text, _), w in zip(got, want, strict=True)]
    server.feed(_request(101, "svc", "echo", b"ok"))
    _wait(wire, len(expected) + 1)
    assert (101, 0, "", b"ok!") == _responses(wire)[-1]


def test_server_answers_oversized_request_and_continues(served: tuple[Server, Wire]) -> None:
    """A request over 4 MiB is answered ResourceExhausted on its stream; the next request is served."""
    server, wire = served
    big = MessageHeader(length=(4 << 20) + 1, stream_id=1, type=1).encode() + bytes((4 << 20) + 1)
    server.feed(big + _request(3, "svc", "echo", b"x"))
    _wait(wire, 2)
    first, second = _responses(wire)
    assert (1, StatusCode.RESOURCE_EXHAUSTED) == first[:2]
    assert (3, 0, "", b"x!") == second


class Peer:
    """Answers a Client's requests from the test thread."""

    def __init__(self) -> None:
        self.wire = Wire()
        self.client = Client(self.wire, name="peer")

    def answer(self, index: int, code: int = 0, message: str = "", payload: bytes = b"") -> None:
        header, _ = self.wire.messages[index]
        response = ttrpc_pb2.Response(status=ttrpc_pb2.Status(code=code, message=message), payload=payload)
        self.client.feed(encode_message(header.stream_id, MessageType.RESPONSE, response.SerializeToString()))


def _call_async(client: Client, method: str, timeout: float = 2.0) -> tuple[threading.Thread, list[object]]:
    result: list[object] = []

    def run() -> None:
        try:
            result.append(client.call("svc", method, b"req", timeout))
        except Exception as err:  # the test inspects it
            result.append(err)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def test_client_stream_ids_are_odd_and_rising() -> None:
    """Calls use stream ids 1, 3, 5 and carry service, method, payload and the timeout in nanoseconds."""
    peer = Peer()
    threads = []
    for index, name in enumerate(["a", "b", "c"]):
        thread, result = _call_async(peer.client, name, timeout=1.5)
        _wait(peer.wire, index + 1)
        peer.answer(index, payload=name.encode())
        thread.join(1)
        threads.append(result)
    assert [1, 3, 5] == [h.stream_id for h, _ in peer.wire.messages]
    first = ttrpc_pb2.Request.FromString(peer.wire.messages[0][1])
    assert ("svc", "a", b"req", 1_500_000_000) == (first.service, first.method, first.payload, first.timeout_nano)
    assert [[b"a"], [b"b"], [b"c"]] == threads


def test_client_raises_the_peers_status() -> None:
    """A non-OK status becomes RPCError carrying the code and message."""
    peer = Peer()
    thread, result = _call_async(peer.client, "m")
    _wait(peer.wire, 1)
    peer.answer(0, code=3, message="invalid plugin index")
    thread.join(1)
    error = result[0]
    assert isinstance(error, RPCError)
    assert (3, "invalid plugin index") == (error.code, error.status_message)
    assert "svc/m: INVALID_ARGUMENT: invalid plugin index" == str(error)


def test_client_times_out_and_ignores_the_late_answer() -> None:
    """No answer within the timeout raises CallTimeoutError; an answer arriving later is dropped."""
    peer = Peer()
    with pytest.raises(CallTimeoutError, match=r"svc/m: no answer from peer within 0\.05s"):
        peer.client.call("svc", "m", b"", 0.05)
    peer.answer(0, payload=b"late")
    thread, result = _call_async(peer.client, "n")
    _wait(peer.wire, 2)
    peer.answer(1, payload=b"fresh")
    thread.join(1)
    assert [b"fresh"] == result


def test_close_fails_waiting_and_later_calls() -> None:
    """Closing fails a waiting call and every later one with ConnectionClosedError naming the reason."""
    peer = Peer()
    thread, result = _call_async(peer.client, "m")
    _wait(peer.wire, 1)
    peer.client.close("runtime restarted")
    thread.join(1)
    assert isinstance(result[0], ConnectionClosedError)
    assert "peer closed: runtime restarted" == str(result[0])
    with pytest.raises(ConnectionClosedError, match="runtime restarted"):
        peer.client.call("svc", "m", b"", 1)


def test_concurrent_calls_get_their_own_answers_out_of_order() -> None:
    """Two calls in flight on streams 1 and 3, answered 3 first: each caller gets the answer of its stream."""
    peer = Peer()
    first, first_result = _call_async(peer.client, "slow")
    _wait(peer.wire, 1)
    second, second_result = _call_async(peer.client, "fast")
    _wait(peer.wire, 2)
    peer.answer(1, payload=b"for 3")
    second.join(1)
    peer.answer(0, payload=b"for 1")
    first.join(1)
    assert ([b"for 1"], [b"for 3"]) == (first_result, second_result)
