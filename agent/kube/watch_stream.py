"""One watch request's events, read from the raw response with the official client's line splitter.

The client's ``kubernetes.watch.Watch`` builds an ``ApiClient`` (pydantic, about
10 MiB resident) only to turn each event's object into a model, which podpin
never wants (raw dicts survive fields newer than the client). A watch answer is
one JSON event per line; :class:`WatchStream` splits it with the client's own
``iter_resp_lines`` and keeps ``Watch``'s rules for a request that has
``timeoutSeconds`` (podpin's always has): an ``ERROR`` event raises the
client's ``ApiException`` with the status it carries (410 Gone included: the
caller relists), a non-2xx answer raises before any event, and ``stop()`` shuts
the socket down so a read blocked in another thread returns at once.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Callable, Generator
from typing import Any

from agent.kube.official import ApiException, iter_resp_lines

__all__ = ["WatchStream"]


class WatchStream:
    """The events of one watch request opened by ``open_watch`` (a call taking ``watch=True, _preload_content=False``).

    Args:
        open_watch: sends the request and returns the open urllib3 response
            (raising the client's ``ApiException`` on a non-2xx status).
    """

    def __init__(self, open_watch: Callable[[], Any]) -> None:
        self._open = open_watch
        self._response: Any = None
        self._stopped = False

    def events(self) -> Generator[dict[str, Any], None, None]:
        """Each event as ``{"type", "object", "raw_object"}`` (the object a plain dict); ends with the stream.

        Raises:
            ApiException: an ``ERROR`` event (its ``code`` as the status), or the request's own failure.
        """
        if self._stopped:
            return
        self._response = response = self._open()
        try:
            for line in iter_resp_lines(response):  # type: ignore[no-untyped-call]
                if self._stopped:
                    return
                event = _parse(line)
                if event is None:
                    continue
                if event["type"] == "ERROR":
                    status = event["object"] if isinstance(event["object"], dict) else {}
                    reason = f"{status.get('reason')}: {status.get('message')}"
                    raise ApiException(status=status.get("code"), reason=reason)
                yield event
        finally:
            self._response = None
            with contextlib.suppress(Exception):  # a socket shut down by stop() may fail to close cleanly
                response.close()
                response.release_conn()

    def stop(self) -> None:
        """End the stream: no more events, and a read blocked on the socket returns (callable from any thread)."""
        self._stopped = True
        response = self._response
        connection = getattr(response, "connection", None) if response is not None else None
        sock = getattr(connection, "sock", None) if connection is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed
                sock.shutdown(socket.SHUT_RDWR)


def _parse(line: str) -> dict[str, Any] | None:
    """One event line; None for a blank or undecodable line (skipped, as the client's ``Watch`` skips them)."""
    if not line or line.isspace():
        return None
    try:
        event = json.loads(line)
    except json.JSONDecodeError:
        return None
    if not isinstance(event, dict) or "type" not in event:
        return None
    event["raw_object"] = event.get("object")
    return event
