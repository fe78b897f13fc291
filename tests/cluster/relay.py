"""One guest connection to a port on 127.0.0.1, over stdin/stdout: the command of QEMU's `guestfwd=...-cmd:`.

QEMU's guestfwd to a TCP chardev carries a single connection; with `cmd:` QEMU starts this program for each
connection the guest opens, so the kubelet and the pods get as many connections to the API server as they open.
`python -m tests.cluster.relay PORT` (the node writes a wrapper script, as QEMU splits the command at spaces).
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading

__all__ = ["main"]


def _pump_in(sock: socket.socket) -> None:
    try:
        while chunk := os.read(0, 65536):
            sock.sendall(chunk)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)


def main(port: int) -> int:
    """Relay stdin to 127.0.0.1:`port` and the answers to stdout until both sides close."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.settimeout(None)
    threading.Thread(target=_pump_in, args=(sock,), daemon=True).start()
    try:
        while chunk := sock.recv(65536):
            view = memoryview(chunk)
            while view:
                view = view[os.write(1, view) :]
    except OSError:
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(int(sys.argv[1])))
