"""The package as it ships: one version everywhere, every imported library declared, the licence in the tree.

The ``durationpy`` crash (imported by the agent, declared by nobody, absent with kubernetes 30.x) is the kind of
fault the import scan catches: every third-party module that ``agent/`` imports must come from a distribution in
pyproject's runtime dependencies, read from the installed distributions' own metadata.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import sys
import tomllib

from agent import __version__
from tests.support.paths import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def _names(requirements: list[str]) -> set[str]:
    """Normalised distribution names of requirement strings."""
    names = {re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0] for req in requirements}
    return {re.sub(r"[-_.]+", "-", name).lower() for name in names}


def _declared() -> set[str]:
    """Normalised names of pyproject's runtime dependencies."""
    return _names(PYPROJECT["project"]["dependencies"])


def _optional() -> set[str]:
    """Normalised names of pyproject's optional features (extras) other than the test extra."""
    extras = PYPROJECT["project"]["optional-dependencies"]
    return _names([req for name, reqs in extras.items() if name != "test" for req in reqs])


def _imported_top_level_modules() -> set[str]:
    """Top-level names of every module imported anywhere in agent/ (absolute imports)."""
    modules: set[str] = set()
    for path in (REPO / "agent").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    return modules


def test_version_is_one_source() -> None:
    """The installed package's version and `podpin --version` are agent.__version__; pyproject has no literal one."""
    run = subprocess.run(
        [sys.executable, "-m", "agent", "--version"], capture_output=True, text=True, timeout=60, check=True
    )
    expected = (__version__, f"podpin {__version__}\n", ["version"], {"attr": "agent.__version__"})
    actual = (
        importlib.metadata.version("podpin"),
        run.stdout,
        PYPROJECT["project"]["dynamic"],
        PYPROJECT["tool"]["setuptools"]["dynamic"]["version"],
    )
    assert expected == actual


def test_every_imported_library_is_declared() -> None:
    """Each third-party module agent/ imports belongs to a declared runtime dependency (durationpy, urllib3), or to
    an optional feature's extra (matplotlib, imported only when `podpin simulate` draws a PNG)."""
    third_party = _imported_top_level_modules() - set(sys.stdlib_module_names) - {"agent"}
    owners = importlib.metadata.packages_distributions()
    undeclared = {
        module: owners.get(module, ["<not installed>"])
        for module in sorted(third_party)
        if not {re.sub(r"[-_.]+", "-", d).lower() for d in owners.get(module, [])} & (_declared() | _optional())
    }
    assert {} == undeclared


def test_durationpy_is_declared() -> None:
    """durationpy, which agent/config.py imports and kubernetes < 31 does not bring, is a runtime dependency."""
    assert ("durationpy" in _imported_top_level_modules(), "durationpy" in _declared()) == (True, True)


def test_licence() -> None:
    """LICENSE holds the Apache License 2.0 text that pyproject names."""
    text = (REPO / "LICENSE").read_text()
    expected = ("Apache-2.0", True, True)
    actual = (
        PYPROJECT["project"]["license"]["text"],
        "Apache License\n                           Version 2.0, January 2004" in text,
        "END OF TERMS AND CONDITIONS" in text,
    )
    assert expected == actual
