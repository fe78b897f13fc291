"""Prometheus, for real: promtool on a running agent's /metrics, and a Prometheus server scraping it.

Both binaries come from Debian's ``prometheus`` package (``.ci/run`` installs
it); the tests fail, never skip, without them. The server listens on
127.0.0.1 only and keeps its data in the test's temp dir.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.agentfixture import AgentNode, Spawned, fetch, make_node, wait_until
from tests.support.podfactory import container, make_pod, resources

#: The one finding promtool's linter has: the contract keeps the kubelet's metric name.
KUBELET_NAME_LINT = (
    'podpin_exclusive_cpu_allocation_count non-histogram and non-summary metrics should not have "_count" suffix\n'
)


def _binary(name: str) -> str:
    path = shutil.which(name)
    assert path is not None, f"{name} is missing: apt-get install -y prometheus (Debian) provides it"
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[tuple[AgentNode, Spawned]]:
    """A long-running ``podpin run`` over a fixture node with the product story pod admitted."""
    node = make_node(tmp_path / "node")
    trading = make_pod(
        "trading",
        containers=[
            container("database", cpu="4", memory="8Gi"),
            container("envoy", cpu_request="100m", cpu_limit="1500m", memory_request="256Mi", memory_limit="512Mi"),
        ],
        pod_resources=resources(cpu="6", memory="9Gi"),
        states={"database": "running", "envoy": "running"},
    )
    node.add_pod(trading)
    spawned = node.spawn("--metrics-bind-address", "127.0.0.1:0")
    try:
        wait_until(lambda: fetch(spawned.base_url + "/readyz")[0] == 200, 30.0, "the agent ready")
        yield node, spawned
    finally:
        spawned.process.terminate()
        assert 0 == spawned.finish(), spawned.other[-5:]


def test_promtool_checks_the_live_metrics(agent: tuple[AgentNode, Spawned]) -> None:
    """The running agent's exposition parses; the only lint is the kubelet-named ``_count`` gauge."""
    _, spawned = agent
    status, body = fetch(spawned.base_url + "/metrics")
    assert 200 == status
    result = subprocess.run(
        [_binary("promtool"), "check", "metrics"], input=body.encode(), capture_output=True, timeout=60, check=False
    )
    assert (3, KUBELET_NAME_LINT) == (result.returncode, (result.stdout + result.stderr).decode())


def test_prometheus_server_scrapes_the_agent(agent: tuple[AgentNode, Spawned], tmp_path: Path) -> None:
    """A real Prometheus scrapes the agent; its HTTP API answers a podpin query with the planned value."""
    _, spawned = agent
    target = spawned.base_url.removeprefix("http://")
    port = _free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"scrape_configs:\n  - job_name: podpin\n    static_configs:\n      - targets: ['{target}']\n"
    )
    server = subprocess.Popen(
        [
            _binary("prometheus"),
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    query = urllib.parse.urlencode({"query": 'podpin_exclusive_cpu_allocation_count{job="podpin"}'})
    url = f"http://127.0.0.1:{port}/api/v1/query?{query}"

    def answered() -> list[dict[str, object]]:
        try:
            status, body = fetch(url)
        except OSError:  # the server is not listening yet
            return []
        if status != 200:
            return []
        result: list[dict[str, object]] = json.loads(body)["data"]["result"]
        return result

    try:
        deadline = time.monotonic() + 90
        while not answered() and time.monotonic() < deadline and server.poll() is None:
            time.sleep(0.5)
        result = answered()
    finally:
        server.terminate()
        server.wait(20)
    assert 1 == len(result), server.stderr.read().decode()[-2000:] if server.stderr else ""
    value = result[0]["value"]
    assert isinstance(value, list)
    # The trading pod's exclusive slice: 4 CPUs of its 6-CPU bubble (the other 2 are its pod shared pool).
    assert "4" == value[1]
