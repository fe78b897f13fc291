"""Fixtures shared by the agent-level tests: an API server emulator on loopback and a fixture node.

A test module that needs another node (a different config, an NRI socket) defines its own ``node`` fixture, which
takes precedence over this one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.agentfixture import AgentNode, make_node
from tests.support.apiserver_emulator import ApiServerEmulator


@pytest.fixture
def api() -> Iterator[ApiServerEmulator]:
    """The Kubernetes API server emulator, serving on 127.0.0.1 for the test."""
    with ApiServerEmulator() as em:
        yield em


@pytest.fixture
def node(tmp_path: Path) -> AgentNode:
    """A fixture node (sysfs and cgroup trees under ``tmp_path``) whose agent reconciles every 300 ms."""
    node = make_node(tmp_path)
    node.write_config(reconcilePeriod="300ms")
    return node
