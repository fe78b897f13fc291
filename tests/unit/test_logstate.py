"""The logging restore every test relies on: ``podpin run``'s process-wide logging does not outlive a test."""

from __future__ import annotations

import io
import logging

import structlog
from structlog.testing import capture_logs

from agent import httpserve
from agent.log import configure_logging
from tests.support.logstate import logging_restored


def test_cached_module_logger_is_captured_again_after_restore() -> None:
    """A module logger cached under ``cache_logger_on_first_use`` reaches ``capture_logs`` after the restore.

    Without the restore the proxy keeps the processor list of the configuration it
    was cached under, which ``reset_defaults`` replaces: ``capture_logs`` then
    edits a list that logger no longer reads, and captures nothing.
    """
    module_log = httpserve._log  # noqa: SLF001 - the very module-level logger the restore must reach
    stream = io.StringIO()
    with logging_restored():
        configure_logging(stream=stream, json=True, level="debug", cache_logger_on_first_use=True)
        module_log.debug("logstate.cached")
    with capture_logs() as after:
        module_log.debug("logstate.seen")
    assert (["logstate.seen"], False) == ([e["event"] for e in after], "logstate.seen" in stream.getvalue())
    assert "logstate.cached" in stream.getvalue()


def test_root_handler_and_level_are_put_back() -> None:
    """The handler ``podpin run`` adds is removed and closed; the root level is the one before."""
    root = logging.getLogger()
    before = (list(root.handlers), root.level)
    with logging_restored():
        configure_logging(stream=io.StringIO(), level="debug")
        added = [h for h in root.handlers if h not in before[0]]
        assert (1, logging.DEBUG) == (len(added), root.level)
    assert before == (list(root.handlers), root.level)
    assert structlog.get_config()["cache_logger_on_first_use"] is False
