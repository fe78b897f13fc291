"""The official client's ``watch.Watch`` behind typed methods, for tests that read watch streams.

The ``kubernetes`` package leaves ``Watch`` untyped; keeping the three
``type: ignore`` comments here means every test calls typed code.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from kubernetes import watch

__all__ = ["Event", "TypedWatch"]

Event = dict[str, Any]
"""One watch event as the client yields it with ``return_type=object``: ``type`` and ``raw_object``."""


class TypedWatch:
    """A ``Watch(return_type=object)``: events as plain dicts, the pod in ``raw_object``."""

    def __init__(self) -> None:
        self._watch = watch.Watch(return_type=object)  # type: ignore[no-untyped-call]

    def stream(self, func: Callable[..., Any], **kwargs: Any) -> Generator[Event, None, None]:
        """The events of a list call made as a watch (``func`` is the client's list method)."""
        events: Generator[Event, None, None] = self._watch.stream(func, **kwargs)  # type: ignore[no-untyped-call]
        return events

    def stop(self) -> None:
        """End the stream after the current event."""
        self._watch.stop()  # type: ignore[no-untyped-call]
