"""The runtime matrix of ``test_runtime_e2e.py``: which containerd (and runc) the VM suite runs against.

* ``containerd-1.7``: Debian 13's containerd 1.7.24 with Debian 12's runc 1.1.5 (``vm-setup.sh`` unpacks them);
  NRI v0.6.1, events as StateChange; NRI off by default (the suite switches it on for the NRI steps).
* ``containerd-2.2`` / ``-2.3`` / ``-2.4``: containerd 2.2.9, 2.3.7 and 2.4.2 with runc 1.5.3, built from their Go
  modules (``tests/runtime/<name>/go.mod``, ``tests/runtime/build.sh``) into ``$PODPIN_RUNTIMES_DIR``
  (``/tmp/podpin-runtimes``), which the guest sees through the read-only host root. NRI v0.11.0 (StateChange;
  Synchronize in ``more`` chunks when large), v0.12.0 and v0.12.3 (dedicated event calls). Their configuration is
  version 3 (2.3 and 2.4 migrate it to their version 4 themselves).

``PODPIN_RUNTIMES`` picks them: ``ci`` (the default: 1.7 and the newest 2.x), ``all``, or names separated by commas.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CI", "MATRIX", "RuntimeChoice", "build", "runtimes_dir", "selected"]

_REPO = Path(__file__).resolve().parents[2]


def runtimes_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where ``tests/runtime/build.sh`` puts the built runtimes."""
    return Path((env if env is not None else os.environ).get("PODPIN_RUNTIMES_DIR") or "/tmp/podpin-runtimes")


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeChoice:
    """One runtime of the matrix."""

    name: str
    version: str
    """The containerd version the CRI ``Version`` call reports (its prefix)."""
    nri: str
    """The NRI version it vendors (its go.mod)."""
    config_version: int
    built: bool
    """Built from its Go module (else Debian's, from ``vm-setup.sh``)."""

    def bin_dir(self, vm_dir: Path, built_root: Path) -> Path:
        """Its ``containerd``, ``containerd-shim-runc-v2`` and ``ctr``."""
        return built_root / self.name / "bin" if self.built else vm_dir / "runtime" / "bin"

    def runc(self, vm_dir: Path, built_root: Path) -> Path:
        """The runc it runs containers with."""
        return built_root / "runc" / "bin" / "runc" if self.built else vm_dir / "runtime" / "bin" / "runc"

    @property
    def splits_synchronize(self) -> bool:
        """NRI v0.11+ (read in its ``pkg/adaptation/plugin.go``): a Synchronize past ttrpc's 4 MiB message limit is
        sent again in ``more`` chunks; v0.6 (containerd 1.7) fails to synchronize the plugin instead."""
        return self._nri_at_least(0, 11)

    @property
    def tells_request_timeout(self) -> bool:
        """NRI v0.7+ (``ConfigureRequest`` fields 4 and 5): the runtime says its ``plugin_request_timeout`` at
        Configure; v0.6 (containerd 1.7) does not (podpin's connection then shows it as null, while each request's
        ttrpc deadline still carries the real timeout)."""
        return self._nri_at_least(0, 7)

    def _nri_at_least(self, major: int, minor: int) -> bool:
        own_major, own_minor = (int(part) for part in self.nri.removeprefix("v").split(".")[:2])
        return (own_major, own_minor) >= (major, minor)

    @property
    def dedicated_events(self) -> bool:
        """NRI v0.12+: RunPodSandbox and the others are their own calls (StateChange is deprecated)."""
        return self._nri_at_least(0, 12)


MATRIX: dict[str, RuntimeChoice] = {
    r.name: r
    for r in (
        RuntimeChoice(name="containerd-1.7", version="1.7.", nri="v0.6.1", config_version=2, built=False),
        RuntimeChoice(name="containerd-2.2", version="2.2.9", nri="v0.11.0", config_version=3, built=True),
        RuntimeChoice(name="containerd-2.3", version="2.3.7", nri="v0.12.0", config_version=3, built=True),
        RuntimeChoice(name="containerd-2.4", version="2.4.2", nri="v0.12.3", config_version=3, built=True),
    )
}
CI = ("containerd-1.7", "containerd-2.4")


def selected(env: Mapping[str, str] | None = None) -> tuple[RuntimeChoice, ...]:
    """The runtimes ``PODPIN_RUNTIMES`` asks for.

    Raises:
        ValueError: a name the matrix does not hold.
    """
    value = ((env if env is not None else os.environ).get("PODPIN_RUNTIMES") or "ci").strip()
    names = CI if value == "ci" else tuple(MATRIX) if value == "all" else tuple(v.strip() for v in value.split(","))
    unknown = [n for n in names if n not in MATRIX]
    if unknown:
        raise ValueError(f"PODPIN_RUNTIMES: {unknown} not in the matrix ({', '.join(MATRIX)}; or ci, all)")
    return tuple(MATRIX[n] for n in names)


def build(choices: tuple[RuntimeChoice, ...]) -> None:
    """Build the chosen runtimes that come from Go modules (and runc), skipping what is built already.

    Raises:
        RuntimeError: the build failed (its output's tail).
    """
    names = [c.name for c in choices if c.built]
    if not names:
        return
    proc = subprocess.run(
        ["bash", str(_REPO / "tests" / "runtime" / "build.sh"), "runc", *names],
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"tests/runtime/build.sh {' '.join(names)}: {proc.returncode}: {proc.stderr[-3000:]}")
