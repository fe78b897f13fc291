"""The Go toolchain for tests that build a small reference program from a Go module (``tests/gocheck/``).

``scripts/test`` installs Debian's ``golang-go`` when no ``go`` is found; the project's machines also keep one in
``/usr/local/go/bin``. Modules come from the Go module proxy as configured (``GOPROXY``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["build_go_program", "go_binary"]

_FALLBACK = Path("/usr/local/go/bin/go")


def go_binary() -> str:
    """The ``go`` command: from PATH, else ``/usr/local/go/bin/go``.

    Raises:
        RuntimeError: neither exists (``scripts/test`` installs ``golang-go``).
    """
    found = shutil.which("go") or (str(_FALLBACK) if _FALLBACK.exists() else None)
    if found is None:
        raise RuntimeError("no `go` in PATH or /usr/local/go/bin: scripts/test installs golang-go")
    return found


def build_go_program(source: Path, output: Path) -> Path:
    """``go build`` the main package in ``source`` (a folder with its own go.mod and go.sum) into ``output``."""
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod -buildvcs=false"}
    result = subprocess.run(
        ["nice", "-n", "10", go_binary(), "build", "-o", str(output), "."],
        cwd=source,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"go build in {source} failed ({result.returncode}): {result.stderr.strip()[-2000:]}")
    return output
