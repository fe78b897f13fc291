"""One connection of the plugin to the runtime: register, get configured, serve until it ends.

The handshake is the one of containerd/nri ``pkg/stub/stub.go`` (``Start``,
``register``) as the runtime expects it (``pkg/adaptation/plugin.go``:
``connect``, ``start``, ``RegisterPlugin``; ``adaptation.go``:
``acceptPluginConnections``): the plugin dials the socket, serves its Plugin
service (``agent.nri.service``) on mux connection 1 and calls
``Runtime/RegisterPlugin`` (name, two-digit index) on connection 2; the runtime
answers, then calls Configure within its registration timeout, then
Synchronize. A refused registration, no Configure in time or the connection
closing first ends the session as *refused*; anything later ending it (runtime
restart, Shutdown, a socket error, a malformed frame) as *disconnected*.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from agent.nri.conn import MuxConnection
from agent.nri.convert import ConvertError, update_from_pb, updates_to_pb
from agent.nri.frames import PLUGIN_SERVICE_CONN, RUNTIME_SERVICE_CONN
from agent.nri.handler import NRIHandler
from agent.nri.model import ContainerUpdate
from agent.nri.proto import nri_pb2 as pb
from agent.nri.report import PluginState, SessionFacts
from agent.nri.service import PLUGIN_SERVICE, RUNTIME_SERVICE, OutcomeSink, PluginService
from agent.nri.ttrpc import CallTimeoutError, Client, ConnectionClosedError, RPCError, Server, StatusCode
from agent.nri.worker import Calls

__all__ = ["Session", "SessionEnd"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionEnd:
    """How a connection ended.

    ``refused``: the runtime did not take the plugin (``reason`` says how);
    ``synchronized``: events were flowing before it ended.
    """

    reason: str
    configured: bool
    synchronized: bool
    refused: bool
    runtime_name: str = ""
    runtime_version: str = ""
    seconds: float = 0.0


class Session:
    """One plugin connection, from RegisterPlugin to its end.

    Args:
        sock: the connected socket (owned from now on).
        handler: the decisions.
        worker: runs handler calls.
        plugin_name, plugin_index: the registration.
        handler_timeout: the longest podpin waits for the handler (capped at
            75 % of the runtime's request timeout).
        registration_timeout: how long to wait for Configure after registering.
        report: receives one :class:`CallOutcome` per request.
        on_state: called with :attr:`PluginState.CONFIGURED` or :attr:`PluginState.SYNCHRONIZED` and what
            the session knows then (:class:`SessionFacts`), as each happens.
    """

    def __init__(
        self,
        sock: socket.socket,
        *,
        handler: NRIHandler,
        worker: Calls,
        plugin_name: str,
        plugin_index: str,
        handler_timeout: float,
        registration_timeout: float,
        report: OutcomeSink,
        on_state: Callable[[PluginState, SessionFacts], None],
    ) -> None:
        self._name = plugin_name
        self._index = plugin_index
        self._registration_timeout = registration_timeout
        self._ended = threading.Event()
        self._service = PluginService(
            handler=handler,
            worker=worker,
            handler_timeout=handler_timeout,
            report=report,
            on_state=on_state,
            cancel=self._ended,
        )
        self._conn = MuxConnection(
            sock,
            {PLUGIN_SERVICE_CONN: self._feed_server, RUNTIME_SERVICE_CONN: self._feed_client},
            on_close=self._closed,
            name="nri",
        )
        self._client = Client(lambda data: self._conn.send(RUNTIME_SERVICE_CONN, data), name="NRI runtime service")
        self._server = Server(
            lambda data: self._conn.send(PLUGIN_SERVICE_CONN, data),
            {PLUGIN_SERVICE: self._service.methods()},
            name="NRI plugin service",
        )

    # -- lifecycle ------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> SessionEnd:
        """Register, wait for Configure, serve until the connection ends or ``stop`` is set."""
        started = time.monotonic()
        self._conn.start()
        dispatcher = threading.Thread(
            target=self._server.serve, args=(self._ended,), name="podpin-nri-dispatcher", daemon=True
        )
        dispatcher.start()
        refused: str | None = None
        try:
            refused = self._register(stop)
            if refused is None:
                while not stop.is_set() and not self._conn.wait_closed(0.05):
                    pass
        finally:
            self._conn.close("plugin stopped" if stop.is_set() else (refused or "session ended"))
            self._ended.set()
            self._server.close()
            dispatcher.join(1.0)
            self._conn.join(1.0)
        return SessionEnd(
            reason=refused or self._conn.close_reason or "",
            configured=self._service.configured.is_set(),
            synchronized=self._service.synchronized.is_set(),
            refused=refused is not None,
            runtime_name=self._service.runtime_name,
            runtime_version=self._service.runtime_version,
            seconds=time.monotonic() - started,
        )

    def _register(self, stop: threading.Event) -> str | None:
        """RegisterPlugin, then wait for Configure; the refusal reason, or None when configured."""
        request = pb.RegisterPluginRequest(plugin_name=self._name, plugin_idx=self._index)
        try:
            self._client.call(
                RUNTIME_SERVICE, "RegisterPlugin", request.SerializeToString(), self._registration_timeout
            )
        except RPCError as err:
            try:
                code = StatusCode(err.code).name
            except ValueError:
                code = str(err.code)
            return f"registration refused: {err.status_message} ({code})"
        except CallTimeoutError:
            return f"no answer to RegisterPlugin within {self._registration_timeout:g}s"
        except ConnectionClosedError as err:
            return f"connection closed during registration ({err})"
        deadline = time.monotonic() + self._registration_timeout
        while not self._service.configured.is_set() and not stop.is_set():
            if self._conn.wait_closed(0.02):
                if self._service.configured.is_set():
                    break
                return f"connection closed before Configure ({self._conn.close_reason})"
            if time.monotonic() >= deadline:
                return f"registered, but no Configure within {self._registration_timeout:g}s"
        return None

    def update_containers(self, updates: Sequence[ContainerUpdate], timeout: float) -> tuple[ContainerUpdate, ...]:
        """Unsolicited updates (``Runtime/UpdateContainers``); returns those the runtime could not apply.

        Raises:
            ConnectionClosedError, CallTimeoutError, RPCError: the call failed.
            ConvertError: the runtime's list of failed updates could not be read.
        """
        request = pb.UpdateContainersRequest(update=updates_to_pb(updates))
        payload = self._client.call(RUNTIME_SERVICE, "UpdateContainers", request.SerializeToString(), timeout)
        try:
            response = pb.UpdateContainersResponse.FromString(payload)
        except DecodeError as err:
            raise ConvertError(f"UpdateContainersResponse: {err}") from err
        return tuple(update_from_pb(failed) for failed in response.failed)

    @property
    def synchronized(self) -> bool:
        """True once the first Synchronize was answered."""
        return self._service.synchronized.is_set()

    def close(self, reason: str) -> None:
        """End the connection (``run`` returns)."""
        self._conn.close(reason)

    def _closed(self, reason: str) -> None:
        self._ended.set()
        self._client.close(reason)
        self._server.close()

    def _feed_server(self, data: bytes) -> None:
        self._server.feed(data)

    def _feed_client(self, data: bytes) -> None:
        self._client.feed(data)
