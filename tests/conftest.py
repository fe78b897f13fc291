"""Fixtures every test gets: logging as it was before the test.

``podpin run`` configures logging for the process: a root handler on the stream of
the moment (a test's captured stderr, closed after the test), the root level from
the config, and structlog with ``cache_logger_on_first_use``. A test that runs the
command in-process would otherwise leave all three behind: later library lines
(matplotlib's debug lines, say) go to a closed stream and print "Logging error"
tracebacks, and podpin's module-level loggers stay bound to the old configuration
so ``capture_logs()`` sees nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.logstate import logging_restored


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """Every test leaves logging as it found it."""
    with logging_restored():
        yield
