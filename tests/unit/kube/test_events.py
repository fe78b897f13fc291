"""EventRecorder posts pod Events through the real client, correlates repeats, and never hurts its caller."""

from __future__ import annotations

import datetime
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from structlog.testing import capture_logs

from agent.kube import CoreCalls, EventOutcome, EventRecorder, EventStats
from tests.support.apiserver_emulator import ApiServerEmulator

NODE = "node-1"
POD = {"metadata": {"name": "web", "namespace": "prod", "uid": "u-1"}, "spec": {}}
T0 = datetime.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.UTC)
SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp")


class Clock:
    """A settable wall clock."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += datetime.timedelta(seconds=seconds)


@pytest.fixture
def emulator() -> Iterator[ApiServerEmulator]:
    with ApiServerEmulator() as em:
        yield em


def client_events(em: ApiServerEmulator) -> list[dict[str, Any]]:
    """The stored Events without the fields the server fills in."""
    out = []
    for event in em.events:
        event["metadata"] = {k: v for k, v in event["metadata"].items() if k not in SERVER_FIELDS}
        out.append(event)
    return out


def api_at(port: int) -> CoreCalls:
    """The agent's API calls aimed at 127.0.0.1:``port`` (where nothing, or nothing useful, answers)."""
    configuration = client.Configuration()
    configuration.host = f"http://127.0.0.1:{port}"
    return CoreCalls(configuration)


class TestPosting:
    def test_warning_fields(self, emulator: ApiServerEmulator) -> None:
        """A Warning is a core/v1 Event on the pod with source, reporting fields, timestamps and count 1."""
        recorder = EventRecorder(emulator.api(), NODE, now=Clock())
        recorder.warning(POD, "TopologyAffinityError", "Resources cannot be allocated with Topology locality")
        assert recorder.close(5.0)
        nanoseconds = (
            (T0 - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)) // datetime.timedelta(microseconds=1) * 1000
        )
        name = f"web.{nanoseconds:x}"
        expected = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": "prod"},
            "involvedObject": {"kind": "Pod", "apiVersion": "v1", "namespace": "prod", "name": "web", "uid": "u-1"},
            "type": "Warning",
            "reason": "TopologyAffinityError",
            "message": "Resources cannot be allocated with Topology locality",
            "source": {"component": "podpin", "host": NODE},
            "reportingComponent": "podpin",
            "reportingInstance": NODE,
            "firstTimestamp": "2026-01-02T03:04:05+00:00",
            "lastTimestamp": "2026-01-02T03:04:05+00:00",
            "count": 1,
        }
        assert [expected] == client_events(emulator)

    def test_normal_with_a_tuple_reference(self, emulator: ApiServerEmulator) -> None:
        """normal() accepts (namespace, name, uid) and posts type Normal under the given component."""
        recorder = EventRecorder(emulator.api(), NODE, component="podpin-agent", instance="podpin-xyz", now=Clock())
        recorder.normal(("kube-system", "dns", "u-2"), "Pinned", "CPUs 2-3 on NUMA 0")
        assert recorder.close(5.0)
        (event,) = client_events(emulator)
        assert (
            "Normal",
            "Pinned",
            {"component": "podpin-agent", "host": NODE},
            "podpin-agent",
            "podpin-xyz",
            "u-2",
        ) == (
            event["type"],
            event["reason"],
            event["source"],
            event["reportingComponent"],
            event["reportingInstance"],
            event["involvedObject"]["uid"],
        )


class TestCorrelation:
    def test_repeats_patch_the_count(self, emulator: ApiServerEmulator) -> None:
        """Identical Events within 10 minutes PATCH count and lastTimestamp of the first one."""
        clock = Clock()
        recorder = EventRecorder(emulator.api(), NODE, now=clock)
        for _ in range(3):
            recorder.warning(POD, "SMTAlignmentError", "not enough free physical CPUs")
            clock.advance(120)
        assert recorder.close(5.0)
        (event,) = client_events(emulator)
        assert (3, "2026-01-02T03:04:05+00:00", "2026-01-02T03:08:05+00:00", ["POST", "PATCH", "PATCH"]) == (
            event["count"],
            event["firstTimestamp"],
            event["lastTimestamp"],
            [r.method for r in emulator.requests],
        )

    def test_gone_pods_are_forgotten_live_ones_still_correlate(self, emulator: ApiServerEmulator) -> None:
        """forget_gone drops the correlation entries of pods not alive (a repeat about one is a new Event); a pod
        still alive keeps its entry (its repeat patches the count)."""
        recorder = EventRecorder(emulator.api(), NODE, now=Clock())
        gone = ("prod", "old", "u-9")
        recorder.warning(POD, "SMTAlignmentError", "m")
        recorder.warning(gone, "SMTAlignmentError", "m")
        deadline = time.monotonic() + 5.0
        while len(emulator.events) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        recorder.forget_gone({"u-1"})
        recorder.warning(POD, "SMTAlignmentError", "m")
        recorder.warning(gone, "SMTAlignmentError", "m")
        assert recorder.close(5.0)
        assert [("web", 2), ("old", 1), ("old", 1)] == [
            (e["involvedObject"]["name"], e["count"]) for e in emulator.events
        ]

    def test_after_the_window_a_new_event(self, emulator: ApiServerEmulator) -> None:
        """A repeat more than 10 minutes after the last one starts a new Event."""
        clock = Clock()
        recorder = EventRecorder(emulator.api(), NODE, now=clock)
        recorder.warning(POD, "SMTAlignmentError", "m")
        clock.advance(601)
        recorder.warning(POD, "SMTAlignmentError", "m")
        assert recorder.close(5.0)
        assert [1, 1] == [e["count"] for e in emulator.events]

    def test_different_message_is_a_different_event(self, emulator: ApiServerEmulator) -> None:
        """Only identical pod, type, reason and message correlate."""
        recorder = EventRecorder(emulator.api(), NODE, now=Clock())
        recorder.warning(POD, "R", "one")
        recorder.warning(POD, "R", "two")
        recorder.normal(POD, "R", "one")
        assert recorder.close(5.0)
        assert [("Warning", "one"), ("Warning", "two"), ("Normal", "one")] == [
            (e["type"], e["message"]) for e in emulator.events
        ]

    def test_expired_event_is_recreated_with_the_count(self, emulator: ApiServerEmulator) -> None:
        """A PATCH answered 404 (Event expired on the server) becomes a new Event carrying the count."""
        recorder = EventRecorder(emulator.api(), NODE, now=Clock())
        recorder.warning(POD, "R", "m")
        emulator.wait_for(lambda em: len(em.events) == 1)
        emulator.fail_next(1, 404, method="PATCH")
        recorder.warning(POD, "R", "m")
        assert recorder.close(5.0)
        assert ([1, 2], ["POST", "PATCH", "POST"]) == (
            [e["count"] for e in emulator.events],
            [r.method for r in emulator.requests],
        )


class TestFailures:
    def test_api_error_is_counted_not_raised(self, emulator: ApiServerEmulator) -> None:
        """A 500 on POST is logged and counted; the same Event later is posted anew."""
        emulator.fail_next(1, 500, method="POST")
        recorder = EventRecorder(emulator.api(), NODE, now=Clock())
        with capture_logs() as logs:
            recorder.warning(POD, "R", "m")
            recorder.warning(POD, "R", "m")
            assert recorder.close(5.0)
        failed = [e for e in logs if e["event"] == "event.failed"]
        assert (EventStats(posted=1, patched=0, failed=1, dropped=0), ["HTTP 500 Internal Server Error"], [1]) == (
            recorder.stats(),
            [e["error"] for e in failed],
            [e["count"] for e in emulator.events],
        )

    def test_dead_api_server_never_blocks_the_caller(self) -> None:
        """With nothing listening, warning() returns in well under 1 ms and every failure is counted."""
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        recorder = EventRecorder(api_at(port), NODE)
        durations = []
        for i in range(200):
            start = time.perf_counter()
            recorder.warning(POD, "R", f"message {i % 5}")
            durations.append(time.perf_counter() - start)
        flushed = recorder.close(10.0)
        durations.sort()
        median, p90 = statistics.median(durations), durations[179]
        assert (True, True, True, 200) == (flushed, median < 0.001, p90 < 0.001, recorder.stats().failed)

    def test_hanging_api_server_close_gives_up(self) -> None:
        """A server that never answers: warning() stays instant, close(timeout) returns False in time."""
        with socket.socket() as silent:
            silent.bind(("127.0.0.1", 0))
            silent.listen(16)
            recorder = EventRecorder(api_at(silent.getsockname()[1]), NODE, request_timeout=5.0)
            start = time.perf_counter()
            for _ in range(3):
                recorder.warning(POD, "R", "m")
            call = time.perf_counter() - start
            start = time.perf_counter()
            flushed = recorder.close(0.2)
            waited = time.perf_counter() - start
        assert (False, True, True, 2) == (flushed, call < 0.003, waited < 1.0, recorder.stats().dropped)

    def test_full_queue_drops_the_oldest(self, emulator: ApiServerEmulator) -> None:
        """With the thread busy and the queue full, the oldest waiting Event is dropped and counted."""
        busy, release = threading.Event(), threading.Event()
        outcomes: list[EventOutcome] = []

        def hook(_event_type: str, outcome: EventOutcome) -> None:
            outcomes.append(outcome)
            if not busy.is_set():
                busy.set()
                release.wait(5.0)

        recorder = EventRecorder(emulator.api(), NODE, queue_size=2, now=Clock(), on_outcome=hook)
        recorder.warning(POD, "R", "first")
        busy.wait(5.0)
        for message in ("second", "third", "fourth"):
            recorder.warning(POD, "R", message)
        release.set()
        assert recorder.close(5.0)
        assert (["first", "third", "fourth"], 1, ["posted", "dropped", "posted", "posted"]) == (
            [e["message"] for e in emulator.events],
            recorder.stats().dropped,
            outcomes,
        )

    def test_pod_without_name_is_counted(self, emulator: ApiServerEmulator) -> None:
        """A pod dict without metadata.name cannot carry an Event: logged and counted as failed, no raise."""
        recorder = EventRecorder(emulator.api(), NODE)
        with capture_logs() as logs:
            recorder.warning({"metadata": {"namespace": "x"}}, "R", "m")
        recorder.close(5.0)
        assert (["event.skipped"], 1, []) == ([e["event"] for e in logs], recorder.stats().failed, emulator.events)

    def test_after_close_events_are_dropped(self, emulator: ApiServerEmulator) -> None:
        """Recording after close() drops the Event (counted) instead of raising."""
        recorder = EventRecorder(emulator.api(), NODE)
        recorder.close(5.0)
        recorder.warning(POD, "R", "m")
        assert (EventStats(posted=0, patched=0, failed=0, dropped=1), []) == (recorder.stats(), emulator.events)


class TestClose:
    def test_close_flushes_the_queue(self, emulator: ApiServerEmulator) -> None:
        """close() posts everything queued before returning True."""
        recorder = EventRecorder(emulator.api(), NODE, now=Clock())
        for i in range(5):
            recorder.normal(POD, "Pinned", f"container c{i}")
        assert (True, 5) == (recorder.close(5.0), len(emulator.events))

    def test_hook_sees_each_outcome(self, emulator: ApiServerEmulator) -> None:
        """on_outcome is called once per Event with its type and posted / patched."""
        outcomes: list[tuple[str, EventOutcome]] = []
        recorder = EventRecorder(emulator.api(), NODE, now=Clock(), on_outcome=lambda t, o: outcomes.append((t, o)))
        recorder.warning(POD, "R", "m")
        recorder.warning(POD, "R", "m")
        recorder.normal(POD, "Pinned", "m")
        recorder.close(5.0)
        assert [("Warning", "posted"), ("Warning", "patched"), ("Normal", "posted")] == outcomes

    def test_bad_queue_size(self, emulator: ApiServerEmulator) -> None:
        """A queue size below 1 is refused, naming the argument."""
        with pytest.raises(ValueError) as caught:
            EventRecorder(emulator.api(), NODE, queue_size=0)
        assert "EventRecorder queue_size: must be >= 1, got 0" == str(caught.value)
