"""Where the real cluster's programs are: the version picked by K8S_VERSION (else the pin) and its build directory.

tests/cluster/k8s-build.sh builds them (scripts/test runs it in the background); tests that need them skip with
the command to run when they are missing, so `pytest tests/unit` never waits for a Go build.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["PINS", "PROGRAMS", "binary", "build_dir", "built", "pins", "version"]

PINS = Path(__file__).resolve().parent / "k8s" / "pins.env"
PROGRAMS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kine")


def pins(text: str | None = None) -> dict[str, str]:
    """The NAME=value lines of k8s/pins.env (quotes removed)."""
    found = re.findall(r"^([A-Z0-9_]+)=\"?([^\"\n]*)\"?$", PINS.read_text() if text is None else text, re.MULTILINE)
    return dict(found)


def version() -> str:
    """K8S_VERSION from the environment, else the pinned default.

    Raises:
        ValueError: K8S_VERSION is not one of the pinned versions.
    """
    pinned = pins()
    chosen = os.environ.get("K8S_VERSION") or pinned["K8S_DEFAULT"]
    if chosen not in pinned["K8S_VERSIONS"].split():
        raise ValueError(f"K8S_VERSION={chosen} is not one of: {pinned['K8S_VERSIONS']}")
    return chosen


def build_dir(chosen: str | None = None) -> Path:
    """The build directory of a version ($PODPIN_K8S_DIR, else /tmp/podpin-k8s, then the version)."""
    return Path(os.environ.get("PODPIN_K8S_DIR", "/tmp/podpin-k8s")) / (chosen or version())


def binary(name: str, chosen: str | None = None) -> Path:
    """One built program of a version."""
    return build_dir(chosen) / name


def built(chosen: str | None = None) -> bool:
    """Whether every program of the version is built (its build-id written last)."""
    directory = build_dir(chosen)
    return (directory / "build-id").is_file() and all((directory / name).is_file() for name in PROGRAMS)
