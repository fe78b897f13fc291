"""tests/deploy: the ``image`` marker on the image build, and its build time and size in the run's summary.

``PODPIN_SKIP_IMAGE=1`` turns the image tests' failure for a missing podman or base into a skip with the same
reason, as ``PODPIN_SKIP_VM`` does for the VM tests; ``-m "not image"`` deselects them.
"""

from __future__ import annotations

import os

import pytest

from tests.deploy import test_image


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests of test_image.py carry the ``image`` marker (and are skipped under PODPIN_SKIP_IMAGE=1)."""
    for item in items:
        if item.nodeid.startswith("tests/deploy/test_image.py") or item.nodeid.startswith("deploy/test_image.py"):
            item.add_marker(pytest.mark.image)
            if os.environ.get("PODPIN_SKIP_IMAGE") == "1":
                item.add_marker(pytest.mark.skip(reason="PODPIN_SKIP_IMAGE=1: the image is not built"))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the image's build time and size, if it was built in this run."""
    measured = test_image.MEASURED
    if not measured:
        return
    terminalreporter.section("podpin image")
    terminalreporter.write_line(
        f"built in {measured['build_seconds']:.1f} s; image {measured['image_bytes'] / 1e6:.0f} MB "
        f"(base {measured['base_bytes'] / 1e6:.0f} MB)"
    )
