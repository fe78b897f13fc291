"""podpin as an NRI plugin: the runtime asks podpin for a container's CPUs before the container exists.

Layers, bottom up (each its own module):

``frames``
    mux frames and ttrpc message headers (pure byte framing).
``ttrpc``
    unary ttrpc client and server on one logical connection.
``conn``
    the socket: frames out under a lock, a reader thread routing frames in.
``proto``
    podpin's own subset of NRI's protobuf and the ttrpc envelopes.
``convert``
    protobuf messages to and from ``model`` values.
``worker``
    handler calls on one thread, waited for at most a budget.
``session``
    one connection: register, Configure, Synchronize, the events.
``plugin``
    :class:`NRIPlugin`: dial, reconnect with backoff, status and reports.

The integrator implements :class:`NRIHandler` (``handler``) with the values of
``model``, reads :class:`NRIStatus` and receives ``report`` values. Names are
resolved on first use: ``model``, ``handler``, ``report`` and ``config`` import
no protobuf, so importing them (or this package) costs ``podpin plan`` nothing;
``NRIPlugin`` loads ``google.protobuf``.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "DEFAULT_SOCKET_PATH": "agent.nri.config",
    "NRIConfig": "agent.nri.config",
    "nri_config_from_mapping": "agent.nri.config",
    "NRIHandler": "agent.nri.handler",
    "CPUResources": "agent.nri.model",
    "Container": "agent.nri.model",
    "ContainerAdjustment": "agent.nri.model",
    "ContainerState": "agent.nri.model",
    "ContainerUpdate": "agent.nri.model",
    "CreateResult": "agent.nri.model",
    "PodSandbox": "agent.nri.model",
    "UNLIMITED_QUOTA": "agent.nri.model",
    "quota_from_cpu_max": "agent.nri.model",
    "NRINotConnected": "agent.nri.plugin",
    "NRIPlugin": "agent.nri.plugin",
    "CallOutcome": "agent.nri.report",
    "ConnectionEvent": "agent.nri.report",
    "NRIStatus": "agent.nri.report",
    "Report": "agent.nri.report",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
