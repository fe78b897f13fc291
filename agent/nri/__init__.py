"""podpin as an NRI plugin: the runtime asks podpin for a container's CPUs before the container exists.

Layers, bottom up (each its own module; ``pyproject.toml`` holds them to this order):

``frames``
    mux frames and ttrpc message headers (pure byte framing).
``proto``
    podpin's own subset of NRI's protobuf and the ttrpc envelopes.
``ttrpc``
    unary ttrpc client and server on one logical connection.
``conn``
    the socket: frames out under a lock, a reader thread routing frames in.
``convert``
    protobuf messages to and from ``model`` values.
``worker``
    handler calls on another thread (the plugin's own, or the agent's loop), waited for once, under a budget.
``service``
    the Plugin service: each runtime request becomes one handler call.
``session``
    one connection: register, Configure, Synchronize, the events.
``plugin``
    :class:`~agent.nri.plugin.NRIPlugin`: dial, reconnect with backoff, status and reports.

The integrator implements :class:`NRIHandler` (``handler``) with the values of
``model``, reads :class:`NRIStatus` and receives ``report`` values; those and
the ``nri`` configuration section (``config``) are re-exported here. They load
no protobuf, so the configuration file and ``podpin plan`` can import this
package for nothing. The plugin loads ``google.protobuf``: import
:class:`~agent.nri.plugin.NRIPlugin` from ``agent.nri.plugin`` where the agent
connects (as ``agent.topology`` re-exports only its model).
"""

from agent.nri.config import DEFAULT_SOCKET_PATH, NRIConfig, NRIConfigError, nri_config_from_mapping
from agent.nri.handler import NRIHandler
from agent.nri.model import (
    UNLIMITED_QUOTA,
    Container,
    ContainerAdjustment,
    ContainerState,
    ContainerUpdate,
    CPUResources,
    CreateResult,
    PodSandbox,
)
from agent.nri.report import (
    CallOutcome,
    CallResult,
    ConnectionEvent,
    ConnectionKind,
    NRIMethod,
    NRIStatus,
    PluginState,
    Report,
    SessionFacts,
)
from agent.nri.worker import Calls, Job, Later, WorkResult, WorkStatus, await_job

__all__ = [
    "DEFAULT_SOCKET_PATH",
    "Job",
    "Later",
    "WorkResult",
    "WorkStatus",
    "await_job",
    "UNLIMITED_QUOTA",
    "CPUResources",
    "CallOutcome",
    "CallResult",
    "Calls",
    "ConnectionEvent",
    "ConnectionKind",
    "SessionFacts",
    "Container",
    "ContainerAdjustment",
    "ContainerState",
    "ContainerUpdate",
    "CreateResult",
    "NRIConfig",
    "NRIConfigError",
    "NRIHandler",
    "NRIMethod",
    "NRIStatus",
    "PluginState",
    "PodSandbox",
    "Report",
    "nri_config_from_mapping",
]
