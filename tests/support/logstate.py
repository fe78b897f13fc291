"""Putting logging back as it was: what ``tests/conftest.py`` does after every test.

``podpin run`` configures logging for the whole process (a root handler, the root
level, structlog with ``cache_logger_on_first_use``); a test that runs it in-process
must not leave that to the tests after it.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import structlog

_LAZY_PROXY = type(structlog.get_logger())


def forget_cached_loggers() -> None:
    """Make podpin's module-level structlog proxies look the configuration up again.

    A proxy that was used while ``cache_logger_on_first_use`` was on keeps its
    finished logger as an instance attribute ``bind``; removing it restores the
    class's lazy ``bind``, which reads the configuration of the moment.
    """
    for name, module in list(sys.modules.items()):
        if name != "agent" and not name.startswith("agent."):
            continue
        for value in list(vars(module).values()):
            if isinstance(value, _LAZY_PROXY) and "bind" in vars(value):
                del value.bind


@contextmanager
def logging_restored() -> Iterator[None]:
    """On exit: the root logger's handlers and level, and structlog's configuration, as on entry."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
            handler.close()
        root.setLevel(level)
        structlog.reset_defaults()
        structlog.contextvars.clear_contextvars()
        forget_cached_loggers()
