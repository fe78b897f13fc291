"""Where an unexpected exception stops: one pass, one pod, one bundle, one PodResources answer, one cgroup directory.

The agent's inputs are parsed with bounds and their documented errors are handled where they arise. Whatever is
left (a bug, or an input nobody thought of: issue 22 found a ``RecursionError``, a protobuf ``DecodeError``, a
grpclib ``AttributeError`` and a ``CgroupPathError``, each of which crash-looped the agent with no pod pinned
meanwhile) is caught at the boundary of the unit of work it belongs to, so everything else goes on:

* logged once, with the traceback, as ``agent.internal_error`` (the same failure of the same subject again is a
  debug line until that subject succeeds or fails differently: a pass repeats every ``reconcilePeriod``);
* counted each time in ``podpin_internal_errors_total{stage}``;
* posted on the pod as a Warning ``PodpinInternalError`` when it is the pod's.

Only the start-up checks may stop the agent, with one line and a documented exit code (``agent/runner.py``).
``BaseException``s that are not ``Exception``s (``KeyboardInterrupt``, ``SystemExit``) pass through; so does
``MemoryError``, after which nothing the agent holds can be trusted and a restart is the cure.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from enum import StrEnum
from typing import Any

__all__ = ["INTERNAL_ERROR_REASON", "FaultBoundary", "Stage"]

INTERNAL_ERROR_REASON = "PodpinInternalError"
"""The Event reason on a pod whose handling met an unexpected error."""

_REMEMBERED = 1024
"""Subjects whose last failure is remembered (the oldest is forgotten first; forgetting only costs a log line)."""


class Stage(StrEnum):
    """The unit of work an unexpected exception ended (the label of ``podpin_internal_errors_total``)."""

    PASS = "pass"
    """A reconcile pass, a sweep step or a queued event, as a whole."""
    POD = "pod"
    """One pod's admission."""
    BUNDLE = "bundle"
    """One container's OCI bundle."""
    PODRESOURCES = "podresources"
    """One PodResources answer."""
    CGROUP = "cgroup"
    """One pod or container cgroup directory."""


PodRef = tuple[str, str, str]
"""namespace, name, uid."""


class FaultBoundary:
    """Catches, logs once, counts and reports unexpected exceptions; see the module docstring."""

    def __init__(
        self,
        log: Any,
        count: Callable[[Stage], None],
        warn_pod: Callable[[PodRef, str, str], None] | None = None,
    ) -> None:
        """
        Args:
            log: a structlog logger.
            count: adds one to ``podpin_internal_errors_total{stage}``.
            warn_pod: posts a Warning Event on a pod (reason, message); None: no API server.
        """
        self.log = log
        self.count = count
        self.warn_pod = warn_pod
        self._last: OrderedDict[tuple[Stage, str], str] = OrderedDict()
        self._lock = threading.Lock()  # the loop and the cgroup watcher's thread both report here

    @contextlib.contextmanager
    def guard(self, stage: Stage, subject: str = "", pod: PodRef | None = None) -> Iterator[None]:
        """Run the block; an ``Exception`` escaping it is :meth:`caught` and goes no further."""
        try:
            yield
        except MemoryError:
            raise
        except Exception as err:
            self.caught(stage, err, subject, pod)
        else:
            self.succeeded(stage, subject, pod)

    def caught(self, stage: Stage, err: Exception, subject: str = "", pod: PodRef | None = None) -> None:
        """Count ``err``; log it (with its traceback) and report it on ``pod`` unless it repeats the last one."""
        self.count(stage)
        what = f"{type(err).__name__}: {err}"
        key = _key(stage, subject, pod)
        fields: dict[str, Any] = {"stage": str(stage), "error": what}
        if subject:
            fields["subject"] = subject
        if pod is not None:
            fields.update(namespace=pod[0], pod=pod[1], uid=pod[2])
        with self._lock:
            again = self._last.get(key) == what
            self._last[key] = what
            self._last.move_to_end(key)
            while len(self._last) > _REMEMBERED:
                self._last.popitem(last=False)
        if again:
            self.log.debug("agent.internal_error_again", **fields)
            return
        self.log.error("agent.internal_error", exc_info=err, continues="with everything else", **fields)
        if pod is not None and self.warn_pod is not None:
            self.warn_pod(
                pod,
                INTERNAL_ERROR_REASON,
                f"podpin met an unexpected error while handling this pod ({what}); it goes on with every other "
                "pod and tries this one again on its next pass",
            )

    def succeeded(self, stage: Stage, subject: str = "", pod: PodRef | None = None) -> None:
        """``subject`` went through: its next failure is logged again."""
        if self._last:
            with self._lock:
                self._last.pop(_key(stage, subject, pod), None)


def _key(stage: Stage, subject: str, pod: PodRef | None) -> tuple[Stage, str]:
    return (stage, subject or (pod[2] if pod is not None else ""))
