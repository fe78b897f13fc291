"""The NRT pod fingerprint equals what the ``podfingerprint`` Go module computes, on the same pod sets.

The reference is ``tests/gocheck/podfingerprint`` (the module at the version its go.mod pins, built here once per
session): it reads the pod sets as JSON and prints one signature per set.
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest

from agent.nrt.fingerprint import pod_fingerprint
from tests.support.gotool import build_go_program
from tests.support.paths import REPO

Pods = list[tuple[str, str]]


@pytest.fixture(scope="session")
def go_fingerprint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference program, built from ``tests/gocheck/podfingerprint``."""
    out = tmp_path_factory.mktemp("gocheck") / "podfingerprint"
    return build_go_program(REPO / "tests" / "gocheck" / "podfingerprint", out)


def _reference(program: Path, sets: list[Pods]) -> list[str]:
    result = subprocess.run(
        [str(program)], input=json.dumps(sets), capture_output=True, text=True, timeout=60, check=True
    )
    return result.stdout.split()


def _pod_sets() -> list[Pods]:
    """Edge cases, then random sets of Kubernetes-shaped names (a fixed seed: the same sets on every run)."""
    rng = random.Random(18)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-"

    def name() -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 63))).strip("-") or "x"

    sets: list[Pods] = [
        [],
        [("default", "web")],
        [("default", "web"), ("kube-system", "coredns-5d78c9869d-7xq2p")],
        [("kube-system", "coredns-5d78c9869d-7xq2p"), ("default", "web")],  # order does not matter
        [("ab", "c"), ("a", "bc")],  # namespace and name are hashed apart, not concatenated
        [("", "")],
        [("default", "ünïcode-näme")],
    ]
    sets.extend([(name(), name()) for _ in range(size)] for size in (3, 17, 110, 500))
    return sets


def test_signatures_equal_the_go_modules(go_fingerprint: Path) -> None:
    """Every pod set gets the Go module's signature, byte for byte."""
    sets = _pod_sets()
    expected = _reference(go_fingerprint, sets)
    assert expected == [pod_fingerprint(pods) for pods in sets]


def test_signature_shape() -> None:
    """``pfp0`` + ``v001`` + 16 hex digits; the empty set is XXH64 of nothing."""
    assert "pfp0v001ef46db3751d8e999" == pod_fingerprint([])
