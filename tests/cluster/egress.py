"""The API server's way to the kubelet: an HTTP CONNECT proxy on a Unix socket, named by its egress selector.

The guest's address is QEMU's private one, not routable from the host, so `kubectl logs` and `exec` (the API
server dialling <node address>:10250) go through the API server's `cluster` egress (`HTTPConnect` over `uds`) to
this proxy, which maps each allowed `host:port` to a port on 127.0.0.1 (the QEMU hostfwd). Anything else is
refused with 403 and counted, so traffic never leaves loopback. TLS stays end to end: the proxy only relays bytes.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
from collections.abc import Mapping
from pathlib import Path

__all__ = ["ConnectProxy", "egress_config"]

_HEADER_LIMIT = 8192


def egress_config(socket_path: Path) -> str:
    """The EgressSelectorConfiguration sending the `cluster` egress through the proxy at `socket_path`."""
    return (
        "apiVersion: apiserver.k8s.io/v1beta1\n"
        "kind: EgressSelectorConfiguration\n"
        "egressSelections:\n"
        "- name: cluster\n"
        "  connection:\n"
        "    proxyProtocol: HTTPConnect\n"
        "    transport:\n"
        "      uds:\n"
        f"        udsName: {socket_path}\n"
    )


def _relay(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


class ConnectProxy:
    """A CONNECT proxy on `socket_path` forwarding `routes` ({"10.0.0.15:10250": 40123}) to 127.0.0.1 ports."""

    def __init__(self, socket_path: Path, routes: Mapping[str, int]) -> None:
        self.socket_path = socket_path
        self.routes = dict(routes)
        self.refused: list[str] = []
        self.connects = 0
        proxy = self

        class _Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy._serve(self.request)

        self._server = socketserver.ThreadingUnixStreamServer(str(socket_path), _Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="egress-proxy", daemon=True)

    def start(self) -> ConnectProxy:
        """Listen in a daemon thread."""
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop listening and remove the socket."""
        self._server.shutdown()
        self._server.server_close()
        self.socket_path.unlink(missing_ok=True)

    def _serve(self, client: socket.socket) -> None:
        header = b""
        while b"\r\n\r\n" not in header and len(header) < _HEADER_LIMIT:
            chunk = client.recv(1024)
            if not chunk:
                return
            header += chunk
        request, _, rest = header.partition(b"\r\n\r\n")
        words = request.split(b"\r\n", 1)[0].decode(errors="replace").split()
        target = words[1] if len(words) == 3 and words[0] == "CONNECT" else ""
        port = self.routes.get(target)
        if port is None:
            self.refused.append(target or repr(words))
            client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            return
        try:
            upstream = socket.create_connection(("127.0.0.1", port), timeout=30)
        except OSError:
            client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            return
        self.connects += 1
        upstream.settimeout(None)
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        if rest:
            upstream.sendall(rest)
        back = threading.Thread(target=_relay, args=(upstream, client), daemon=True)
        back.start()
        _relay(client, upstream)
        back.join()
        upstream.close()
