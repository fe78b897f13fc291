"""``podpin run`` under a crowd of idle and slow HTTP clients and a low descriptor limit: probes answer, threads
and descriptors stay bounded, and a new pod is still pinned.

The real process (its threads and descriptors are counted from ``/proc/<pid>``), with ``RLIMIT_NOFILE`` at 128,
a pods directory and a fixture cgroup tree. Failed before the bounded server: every idle connection held a thread
and a descriptor (threads 15 -> 495, fds 22 -> 501 in the issue), and under a low descriptor limit ``/healthz``
timed out and a new pod was never pinned.
"""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.agentfixture import AgentNode, Spawned, make_node, wait_until
from tests.support.podfactory import container, make_pod

NOFILE = 128
PROBE_TIMEOUT = 1.0  # the kubelet's default timeoutSeconds
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def gu(name: str, *, ts: int) -> dict[str, Any]:
    """A Guaranteed pod with one running two-CPU container ``app``."""
    return make_pod(
        name,
        containers=[container("app", cpu="2", memory="1Gi")],
        states={"app": "running"},
        creation_timestamp=f"2026-01-01T00:00:{ts:02d}Z",
    )


def _low_nofile() -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, hard))


def _probe(url: str) -> int | str:
    """The status of one probe as the kubelet makes it, or what went wrong (``timed out``, ``reset``, ...): a
    failure says whether the server dropped the connection or did not answer within the probe's second."""
    try:
        with _OPENER.open(url, timeout=PROBE_TIMEOUT) as response:
            return int(response.status)
    except urllib.error.HTTPError as err:
        return err.code
    except urllib.error.URLError as err:
        return f"{type(err.reason).__name__}: {err.reason}"
    except OSError as err:
        return f"{type(err).__name__}: {err}"


def _drip(clients: list[socket.socket], byte: bytes) -> None:
    """One more byte from each slow client (the server may have closed some already: it closes the oldest)."""
    for client in clients:
        with contextlib.suppress(OSError):
            client.send(byte)


def _count(pid: int, what: str) -> int:
    return len(os.listdir(f"/proc/{pid}/{what}"))


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[tuple[AgentNode, Spawned]]:
    node = make_node(tmp_path)
    node.add_pod(gu("first", ts=1))
    process = subprocess.Popen(
        node.cli_args(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_low_nofile,  # noqa: PLW1509 (one setrlimit call in the child, no threads there yet)
        env={k: v for k, v in os.environ.items() if k not in ("NODE_NAME", "KUBECONFIG")},
    )
    spawned = Spawned(process)
    try:
        yield node, spawned
    finally:
        spawned.kill()


def test_probes_and_pinning_hold_under_500_idle_and_20_slow_clients(agent: tuple[AgentNode, Spawned]) -> None:
    """With 500 idle sockets and 20 one-byte-a-while clients on the metrics port: /healthz answers each probe
    within a second, the process gains no thread and at most 16 descriptors (128 / 8), and a pod added meanwhile
    is pinned."""
    node, spawned = agent
    base = spawned.base_url
    wait_until(lambda: _probe(base + "/readyz") == 200, 20.0, "ready")
    pid = spawned.process.pid
    threads, fds = _count(pid, "task"), _count(pid, "fd")
    host, port = base.removeprefix("http://").rsplit(":", 1)
    crowd = []
    for _ in range(500):
        try:
            crowd.append(socket.create_connection((host, int(port)), timeout=5))
        except OSError:
            break
    drips = [socket.create_connection((host, int(port)), timeout=5) for _ in range(20)]
    try:
        _drip(drips, b"G")
        probes = [_probe(base + "/healthz") for _ in range(3)]
        second = gu("second", ts=2)
        node.add_pod(second)
        wait_until(lambda: node.cpus(second, "app") == "2,18", 20.0, "second pinned")
        _drip(drips, b"E")
        time.sleep(0.2)
        during = (_count(pid, "task") - threads, _count(pid, "fd") - fds)
        probes.append(_probe(base + "/healthz"))
    finally:
        for sock in crowd + drips:
            sock.close()
    assert (500, [200] * 4, True, True, None) == (
        len(crowd),
        probes,
        during[0] <= 0,
        during[1] <= NOFILE // 8,
        spawned.process.poll(),
    ), f"threads +{during[0]}, fds +{during[1]}"


def _flood(host: str, port: int, stop: threading.Event, held: list[socket.socket]) -> None:
    """Finding 7's flood: connections opened as fast as they are taken, each holding on and never reading; half
    send a /metrics request (its answer is never read), half send nothing. At most 400 are kept open."""
    request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
    n = 0
    while not stop.is_set():
        try:
            sock = socket.create_connection((host, port), timeout=1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
            if n % 2:
                sock.send(request)
        except OSError:
            time.sleep(0.01)
            continue
        n += 1
        held.append(sock)
        if len(held) > 400:
            with contextlib.suppress(OSError):
                held.pop(0).close()


def test_probes_always_answer_under_a_connection_flood(agent: tuple[AgentNode, Spawned]) -> None:
    """Issue 22, finding 7: while two clients open connections without pause and never read (12-43 % of probes
    were reset before), every one of 60 ``/healthz`` and ``/readyz`` probes is answered 200: the probe slots
    (``agent/httpserve.py``) keep a connection for them, and a connection whose request has arrived is never the
    one closed to make room."""
    _node, spawned = agent
    base = spawned.base_url
    wait_until(lambda: _probe(base + "/readyz") == 200, 20.0, "ready")
    host, port = base.removeprefix("http://").rsplit(":", 1)
    stop = threading.Event()
    held: list[list[socket.socket]] = [[], [], [], []]
    flooders = [threading.Thread(target=_flood, args=(host, int(port), stop, h), daemon=True) for h in held]
    for flooder in flooders:
        flooder.start()
    try:
        time.sleep(0.5)
        probes = [_probe(base + ("/healthz" if n % 2 else "/readyz")) for n in range(60)]
    finally:
        stop.set()
        for flooder in flooders:
            flooder.join(5)
        for sock in [s for h in held for s in h]:
            sock.close()
    failed = [(n, probe) for n, probe in enumerate(probes) if probe != 200]
    assert ([], None) == (failed, spawned.process.poll()), f"{sum(len(h) for h in held)} connections held"
