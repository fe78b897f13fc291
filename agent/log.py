"""Structured logging: one configuration for podpin's own lines and for every library's.

``configure_logging`` is called once, by the CLI, before anything logs
(``docs/style.md``, "Logging and metrics"). podpin's modules log through
``structlog.get_logger("podpin.<module>")``; the kubernetes client and urllib3
log through the standard library. Both end in the same handler on the root
logger, whose ``ProcessorFormatter`` runs the same shared processors and the
same renderer, so an operator reads one format (JSON in a cluster, aligned
console lines at a terminal) whoever wrote the line.

Decisions are logged one line each, with the keys of :func:`decision_fields`
(``node`` is also bound once with ``structlog.contextvars.bind_contextvars``).
The event names the agent uses are fixed, so alerts and log queries can match
them:

``pod.admitted``
    a pod passed admission (one line per pod, then one per container).
``pod.rejected``
    admission failed; ``reason`` is the kubelet's reason, ``message`` its text.
    The pod keeps running in the node shared pool.
``pod.released``
    a gone pod's CPUs and memory returned to the pools.
``pod.malformed``
    a pod object that could not be read (the field and value are named).
``cgroup.applied``
    a cgroup's values were written and read back equal to the plan.
``cgroup.drift_repaired``
    a cgroup value changed behind the agent's back was rewritten.
``cgroup.error``
    a write, read-back or refused value (path, file, value, errno).
``watch.relisted``
    the pod source listed all pods again (start, 410 Gone, resync).
``agent.started`` / ``agent.stopped``
    the agent's lifetime, with the configuration it runs with.
``kubelet.pinning``
    the kubelet's CPU manager is ``static``: podpin writes nothing and says so.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from enum import Enum
from typing import Any, TextIO

import structlog
from structlog.typing import EventDict, Processor

from agent.alloc import ContainerPlan, PodPlan
from agent.cpuset import CPUSet

__all__ = [
    "configure_logging",
    "decision_fields",
    "json_for_format",
    "DECISION_KEYS",
    "EVENT_NAMES",
    "LEVELS",
    "POD_ADMITTED",
    "POD_REJECTED",
    "POD_RELEASED",
    "POD_MALFORMED",
    "CGROUP_APPLIED",
    "CGROUP_DRIFT_REPAIRED",
    "CGROUP_ERROR",
    "WATCH_RELISTED",
    "AGENT_STARTED",
    "AGENT_STOPPED",
    "KUBELET_PINNING",
]

POD_ADMITTED = "pod.admitted"
POD_REJECTED = "pod.rejected"
POD_RELEASED = "pod.released"
POD_MALFORMED = "pod.malformed"
CGROUP_APPLIED = "cgroup.applied"
CGROUP_DRIFT_REPAIRED = "cgroup.drift_repaired"
CGROUP_ERROR = "cgroup.error"
WATCH_RELISTED = "watch.relisted"
AGENT_STARTED = "agent.started"
AGENT_STOPPED = "agent.stopped"
KUBELET_PINNING = "kubelet.pinning"

#: Every event name the agent logs (the module docstring says when).
EVENT_NAMES = (
    POD_ADMITTED,
    POD_REJECTED,
    POD_RELEASED,
    POD_MALFORMED,
    CGROUP_APPLIED,
    CGROUP_DRIFT_REPAIRED,
    CGROUP_ERROR,
    WATCH_RELISTED,
    AGENT_STARTED,
    AGENT_STOPPED,
    KUBELET_PINNING,
)

#: The keys of every decision line, in this order.
DECISION_KEYS = ("node", "namespace", "pod", "uid", "container", "pool", "cpus", "numa", "cpu_max", "reason")

#: ``logLevel`` values and their stdlib numbers.
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}

_FORMATS = {"auto": None, "json": True, "console": False}

#: structlog's ``dict_tracebacks`` without the frames' local variables: a
#: kubernetes client frame holds the bearer token, and locals make one line huge.
_DICT_TRACEBACKS = structlog.processors.ExceptionRenderer(
    structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
)


class _PodpinHandler(logging.StreamHandler[TextIO]):
    """The one handler ``configure_logging`` installs; its class marks it for replacement."""


def _plain(value: Any) -> Any:
    """``value`` with every enum member replaced by its value, inside lists, tuples and maps too."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {_plain(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _plain_enums(_logger: Any, _name: str, event: EventDict) -> EventDict:
    """Console lines print values with ``repr``: a pool would read ``<Pool.EXCLUSIVE: 'exclusive'>``.

    The vocabulary is one word in every output (``docs/style.md``, "Functional core, imperative shell"); JSON lines
    already print the enums' values, console lines get them from here.
    """
    return {key: _plain(value) for key, value in event.items()}


def _shared_processors() -> list[Processor]:
    """What every line gets, podpin's and the libraries' alike."""
    return [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]


def json_for_format(log_format: str) -> bool | None:
    """The ``json`` argument of :func:`configure_logging` for a ``logFormat`` value.

    Raises:
        ValueError: naming ``logFormat`` and the value when it is not auto, json or console.
    """
    try:
        return _FORMATS[log_format]
    except KeyError:
        raise ValueError(f"logFormat: {log_format!r} is not one of auto, json, console") from None


def configure_logging(
    *,
    json: bool | None = None,
    level: str = "info",
    stream: TextIO | None = None,
    cache_logger_on_first_use: bool = False,
) -> None:
    """Configure structlog and the standard library to write one format to one stream.

    Calling it again replaces the previous configuration (tests do), never adds a
    second handler.

    Args:
        json: True for JSON lines, False for console lines, None to choose JSON
            exactly when ``stream`` is not a terminal (a pod's log is not).
        level: ``debug``, ``info``, ``warning`` or ``error``; lower lines are dropped,
            for podpin's loggers and the libraries' alike.
        stream: where lines go; default ``sys.stderr`` (looked up at call time),
            keeping stdout for command output such as ``podpin plan --json``.
        cache_logger_on_first_use: freeze each logger's configuration on first use;
            faster, but ``capture_logs()`` stops working, so only ``podpin run`` asks.

    Raises:
        ValueError: naming ``logLevel`` and the value when the level is unknown.
    """
    if level not in LEVELS:
        raise ValueError(f"logLevel: {level!r} is not one of {', '.join(LEVELS)}")
    level_no = LEVELS[level]
    out = stream if stream is not None else sys.stderr
    use_json = json if json is not None else not _is_tty(out)
    shared = _shared_processors()
    renderer: Sequence[Processor]
    if use_json:
        renderer = [_DICT_TRACEBACKS, structlog.processors.JSONRenderer()]
    else:
        renderer = [_plain_enums, structlog.dev.ConsoleRenderer(colors=_is_tty(out))]
    formatter = structlog.stdlib.ProcessorFormatter(
        # A library's line would not say where it came from without its logger's name.
        foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *renderer],
    )
    handler = _PodpinHandler(out)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _PodpinHandler)]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(level_no)
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        wrapper_class=structlog.make_filtering_bound_logger(level_no),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=cache_logger_on_first_use,
    )


def _is_tty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty()) if callable(isatty) else False


def decision_fields(pod: PodPlan, container: ContainerPlan | None = None, *, node: str | None) -> dict[str, Any]:
    """The standard fields of one decision line, every key of :data:`DECISION_KEYS` always present.

    A container line names the container's pool, CPUs, their NUMA nodes and its
    ``cpu.max``. A pod line (``container=None``) names the CPUs of the pod cgroup
    (the union of its containers'), their NUMA nodes and the pod's ``cpu.max``;
    its ``pool`` is ``"bubble"`` when the pod has one, else None. ``cpu_max`` is
    None where the plan leaves ``cpu.max`` alone; ``reason`` is the kubelet
    reason of a rejected pod, else None. Values are JSON-ready (cpulist strings,
    lists of NUMA ids).

    Args:
        pod: the pod's plan.
        container: one of its containers' plans, or None for the pod's own line.
        node: the node name (None when the agent does not know it).
    """
    if container is not None:
        name: str | None = container.name
        pool: str | None = container.pool
        cpus = str(container.cpus)
        numa = list(container.numa)
        cpu_max = container.desired.cpu_max
    else:
        union = CPUSet()
        nodes: set[int] = set()
        for each in pod.containers:
            union = union | each.cpus
            nodes.update(each.numa)
        name = None
        pool = "bubble" if pod.bubble is not None else None
        cpus = str(union)
        numa = sorted(nodes)
        cpu_max = pod.desired.cpu_max
    return {
        "node": node,
        "namespace": pod.namespace,
        "pod": pod.name,
        "uid": pod.uid,
        "container": name,
        "pool": pool,
        "cpus": cpus,
        "numa": numa,
        "cpu_max": str(cpu_max) if cpu_max is not None else None,
        "reason": pod.reason,
    }
