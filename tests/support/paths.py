"""Where things are in the checkout, for tests and helpers that read files of the repository.

One definition, so moving a test file never changes which directory it reads.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["DATA", "REPO", "TESTS"]

#: The repository root (the directory holding ``pyproject.toml``).
REPO = Path(__file__).resolve().parents[2]
#: ``tests/``.
TESTS = REPO / "tests"
#: ``tests/data/``: the kubelet vectors and the captured sysfs trees.
DATA = TESTS / "data"
