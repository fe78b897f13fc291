"""The HTTP endpoints over 127.0.0.1: metrics formats, probes, state, errors, HEAD, quiet logging, prompt stop."""

from __future__ import annotations

import errno
import json
import os
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from structlog.testing import capture_logs

from agent.metrics import AgentMetrics
from agent.server import AgentServer, BindError, split_address

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy from the environment


@dataclass
class Probes:
    """What the server's callables return; tests change it between requests."""

    healthy: tuple[bool, str] = (True, "")
    ready: tuple[bool, str] = (True, "")
    state: dict[str, Any] = field(default_factory=lambda: {"version": 1, "data": {"cpus": {"default": "0-15"}}})
    fail: str | None = None

    def health_check(self) -> tuple[bool, str]:
        if self.fail == "health":
            raise RuntimeError("checker broke")
        return self.healthy

    def ready_check(self) -> tuple[bool, str]:
        return self.ready

    def state_document(self) -> dict[str, Any]:
        if self.fail == "state":
            raise TypeError("Object of type CPUSet is not JSON serializable")
        return self.state


@dataclass
class Running:
    """A started server and what a test needs to talk to it and steer it."""

    base: str
    port: int
    probes: Probes
    metrics: AgentMetrics
    server: AgentServer


@pytest.fixture
def running() -> Iterator[Running]:
    """A server on a free loopback port with changeable probes and a fresh registry; stopped afterwards."""
    probes = Probes()
    metrics = AgentMetrics(lambda: None)
    server = AgentServer(
        "127.0.0.1:0",
        metrics.registry,
        health=probes.health_check,
        ready=probes.ready_check,
        state=probes.state_document,
    )
    host, port = server.start()
    yield Running(f"http://{host}:{port}", port, probes, metrics, server)
    server.stop()


def fetch(url: str, *, method: str = "GET", headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of one request; HTTP errors are answers too."""
    request = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with _OPENER.open(request, timeout=5) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


class TestMetrics:
    def test_prometheus_text_by_default(self, running: Running) -> None:
        """/metrics serves the registry in the 0.0.4 text format."""
        running.metrics.pinning_requests.inc(2)
        status, headers, body = fetch(running.base + "/metrics")
        actual = (status, headers["Content-Type"], "\npodpin_pinning_requests_total 2.0\n" in body.decode())
        assert (200, "text/plain; version=0.0.4; charset=utf-8", True) == actual

    def test_openmetrics_when_asked(self, running: Running) -> None:
        """An OpenMetrics Accept header gets OpenMetrics, ending in # EOF."""
        status, headers, body = fetch(
            running.base + "/metrics",
            headers={"Accept": "application/openmetrics-text; version=1.0.0,text/plain;q=0.5"},
        )
        actual = (status, headers["Content-Type"].split(";")[0], body.decode().endswith("# EOF\n"))
        assert (200, "application/openmetrics-text", True) == actual

    def test_head_has_headers_and_no_body(self, running: Running) -> None:
        """HEAD /state answers with the GET's status, type and length, and no body."""
        _, _, get_body = fetch(running.base + "/state")
        status, headers, body = fetch(running.base + "/state", method="HEAD")
        assert (200, "application/json", str(len(get_body)), b"") == (
            status,
            headers["Content-Type"],
            headers["Content-Length"],
            body,
        )


class TestProbes:
    @pytest.mark.parametrize("path", ["/healthz", "/readyz"])
    def test_ok(self, running: Running, path: str) -> None:
        """A passing check answers 200 "ok"."""
        status, headers, body = fetch(running.base + path)
        assert (200, "text/plain; charset=utf-8", b"ok\n") == (status, headers["Content-Type"], body)

    def test_unhealthy_names_the_reason(self, running: Running) -> None:
        """A failing liveness check answers 503 with its reason."""
        running.probes.healthy = (False, "reconcile loop stalled for 120s")
        assert (503, b"reconcile loop stalled for 120s\n") == fetch(running.base + "/healthz")[::2]

    def test_not_ready_names_the_reason(self, running: Running) -> None:
        """A failing readiness check answers 503 with its reason, while /healthz stays 200."""
        running.probes.ready = (False, "kubelet cpuManagerPolicy is static; podpin does not write")
        actual = (fetch(running.base + "/readyz")[::2], fetch(running.base + "/healthz")[0])
        assert ((503, b"kubelet cpuManagerPolicy is static; podpin does not write\n"), 200) == actual

    def test_query_string_is_ignored(self, running: Running) -> None:
        """/healthz?verbose is /healthz."""
        assert (200, b"ok\n") == fetch(running.base + "/healthz?verbose=1")[::2]

    def test_failing_check_is_a_500_not_a_dead_server(self, running: Running) -> None:
        """A check that raises gives 500 naming the error, and the next request is served."""
        running.probes.fail = "health"
        first = fetch(running.base + "/healthz")[::2]
        running.probes.fail = None
        assert ((500, b"/healthz: RuntimeError: checker broke\n"), 200) == (first, fetch(running.base + "/healthz")[0])


class TestState:
    def test_state_is_json(self, running: Running) -> None:
        """/state serves the state callable's document as JSON."""
        status, headers, body = fetch(running.base + "/state")
        assert (200, "application/json", running.probes.state) == (status, headers["Content-Type"], json.loads(body))

    def test_unserialisable_state_is_a_500(self, running: Running) -> None:
        """A state callable that fails answers 500 with the error."""
        running.probes.fail = "state"
        expected = (500, b"/state: TypeError: Object of type CPUSet is not JSON serializable\n")
        assert expected == fetch(running.base + "/state")[::2]


class TestOtherRequests:
    def test_unknown_path_is_404(self, running: Running) -> None:
        """Any other path is 404, listing the paths served."""
        expected = (404, b"/debug/pprof not found; this server answers /metrics, /healthz, /readyz, /state\n")
        assert expected == fetch(running.base + "/debug/pprof")[::2]

    def test_post_is_405(self, running: Running) -> None:
        """Only GET and HEAD are allowed."""
        status, headers, body = fetch(running.base + "/metrics", method="POST")
        assert (405, "GET, HEAD", b"method not allowed\n") == (status, headers["Allow"], body)

    def test_requests_go_to_structlog_debug_not_stderr(
        self, running: Running, capfd: pytest.CaptureFixture[str]
    ) -> None:
        """The stdlib request line is not printed; a debug http.request event is logged instead."""
        with capture_logs() as logs:
            fetch(running.base + "/healthz")
            fetch(running.base + "/nope")
        requests = [(e["log_level"], e["method"], e["path"], e["status"]) for e in logs if e["event"] == "http.request"]
        captured = capfd.readouterr()
        assert ([("debug", "GET", "/healthz", 200), ("debug", "GET", "/nope", 404)], "") == (requests, captured.err)

    def test_idle_client_does_not_block_probes(self, running: Running) -> None:
        """A client that connects and sends nothing holds its own thread only."""
        with socket.create_connection(("127.0.0.1", running.port), timeout=5):
            assert 200 == fetch(running.base + "/healthz")[0]


class TestLifecycle:
    def test_stop_is_prompt_and_closes_the_port(self) -> None:
        """stop() returns within a second, even with an idle client connected, and the port refuses connections."""
        server = AgentServer(
            "127.0.0.1:0",
            AgentMetrics(lambda: None).registry,
            health=lambda: (True, ""),
            ready=lambda: (True, ""),
            state=dict,
        )
        host, port = server.start()
        idle = socket.create_connection((host, port), timeout=5)
        try:
            started = time.monotonic()
            server.stop()
            elapsed = time.monotonic() - started
        finally:
            idle.close()
        with pytest.raises(urllib.error.URLError) as err:
            _OPENER.open(f"http://{host}:{port}/healthz", timeout=2)
        assert (True, ConnectionRefusedError) == (elapsed < 1.0, type(err.value.reason))

    def test_stop_twice_and_stop_before_start(self) -> None:
        """stop() on a server not running does nothing; after a stop the server can start again."""
        server = AgentServer(
            "127.0.0.1:0",
            AgentMetrics(lambda: None).registry,
            health=lambda: (True, ""),
            ready=lambda: (True, ""),
            state=dict,
        )
        server.stop()
        host, port = server.start()
        server.stop()
        server.stop()
        host, port = server.start()
        try:
            assert 200 == fetch(f"http://{host}:{port}/healthz")[0]
        finally:
            server.stop()

    def test_start_twice(self, running: Running) -> None:
        """Starting a running server is an error naming its address."""
        with pytest.raises(RuntimeError) as err:
            running.server.start()
        assert "the server on 127.0.0.1:0 is already running" == str(err.value)

    def test_address_in_use(self, running: Running) -> None:
        """A port already taken is a BindError naming metricsBindAddress and the address."""
        other = AgentServer(
            f"127.0.0.1:{running.port}",
            AgentMetrics(lambda: None).registry,
            health=lambda: (True, ""),
            ready=lambda: (True, ""),
            state=dict,
        )
        with pytest.raises(BindError) as err:
            other.start()
        expected = (
            errno.EADDRINUSE,
            (
                f"[Errno {errno.EADDRINUSE}] metricsBindAddress 127.0.0.1:{running.port}: cannot listen: "
                f"{os.strerror(errno.EADDRINUSE)}"
            ),
        )
        assert expected == (err.value.errno, str(err.value))


class TestSplitAddress:
    @pytest.mark.parametrize(
        ("address", "expected"),
        [
            ("0.0.0.0:9363", ("0.0.0.0", 9363)),
            ("127.0.0.1:0", ("127.0.0.1", 0)),
            (":9363", ("", 9363)),
            ("[::]:9363", ("::", 9363)),
            ("[fe80::1]:80", ("fe80::1", 80)),
            ("metrics.local:8080", ("metrics.local", 8080)),
        ],
    )
    def test_valid(self, address: str, expected: tuple[str, int]) -> None:
        """HOST:PORT and [IPv6]:PORT split into host and port."""
        assert expected == split_address(address)

    @pytest.mark.parametrize(
        ("address", "message"),
        [
            ("9363", "metricsBindAddress: '9363' is not HOST:PORT"),
            ("host:http", "metricsBindAddress: 'host:http' is not HOST:PORT"),
            ("host:70000", "metricsBindAddress: 'host:70000' is not HOST:PORT"),
            ("::1:80", "metricsBindAddress: '::1:80': write an IPv6 host in brackets, [::1]:80"),
        ],
    )
    def test_invalid(self, address: str, message: str) -> None:
        """A malformed address is a ValueError naming metricsBindAddress and the value."""
        with pytest.raises(ValueError) as err:
            split_address(address)
        assert message == str(err.value)

    def test_constructor_checks_the_address(self) -> None:
        """AgentServer refuses a bad address before anything listens."""
        with pytest.raises(ValueError) as err:
            AgentServer(
                "nope",
                AgentMetrics(lambda: None).registry,
                health=lambda: (True, ""),
                ready=lambda: (True, ""),
                state=dict,
            )
        assert "metricsBindAddress: 'nope' is not HOST:PORT" == str(err.value)
