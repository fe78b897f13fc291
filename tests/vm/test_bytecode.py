"""The checkout's bytecode, written before a guest imports the checkout (``tests/vm/bytecode.py``), without a guest."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tests.support.paths import REPO
from tests.vm.bytecode import GUEST_CODE, precompile, precompile_checkout


def test_precompile_writes_the_bytecode_an_import_looks_for(tmp_path: Path) -> None:
    """Every module of the parts named, in a package or alone, gets the cache file Python's import reads."""
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    modules = [tmp_path / "pkg" / "__init__.py", tmp_path / "pkg" / "sub" / "mod.py", tmp_path / "alone.py"]
    for module in modules:
        module.write_text("VALUE = 1\n")
    assert precompile(tmp_path, ("pkg", "alone.py"))
    assert [] == [m for m in modules if not Path(importlib.util.cache_from_source(str(m))).is_file()]


def test_precompile_says_when_a_module_does_not_compile(tmp_path: Path) -> None:
    """A syntax error is reported (the guest would compile that module itself), the other modules still compiled."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "bad.py").write_text("def (:\n")
    (tmp_path / "pkg" / "good.py").write_text("VALUE = 1\n")
    assert not precompile(tmp_path, ("pkg",))
    assert Path(importlib.util.cache_from_source(str(tmp_path / "pkg" / "good.py"))).is_file()


def test_the_guest_code_is_in_the_checkout() -> None:
    """Each part the guest imports exists where the harness looks for it."""
    assert [] == [part for part in GUEST_CODE if not (REPO / part).exists()]


def test_the_checkout_compiles_for_the_guest() -> None:
    """The guest's code compiles whole, and podpin's entry point then has the cache file the guest's import reads."""
    assert precompile_checkout()
    assert Path(importlib.util.cache_from_source(str(REPO / "agent" / "cli.py"))).is_file()
