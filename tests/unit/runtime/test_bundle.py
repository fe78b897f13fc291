"""Reading a container's bundle under ``--runtime-root``: where each runtime keeps it, and every way it can fail."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent.runtime import BundleReader, ContainerType, Found, IdentityErrorReason, Invalid, NotYet, Unavailable
from agent.vocabulary import Runtime
from tests.support.bundles import (
    bundle_path,
    containerd_annotations,
    crio_annotations,
    write_bundle,
    write_raw_bundle,
)

UID = "0c9e8a54-52d4-4c1e-8f61-3b7a9e2d4c11"
CID = "c254a5ed38a9380a3229bf5fe8303ff3d7a0090cddfbb022b97b254e6fde5780"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A runtime root where containerd keeps bundles (its ``k8s.io`` task directory exists)."""
    bundle_path(tmp_path, "0" * 64).parent.parent.mkdir(parents=True)
    return tmp_path


def test_containerd_bundle(root: Path) -> None:
    """containerd: ``run/containerd/io.containerd.runtime.v2.task/k8s.io/<id>/config.json`` names the container."""
    path = write_bundle(root, CID, containerd_annotations(UID, "database"))
    outcome = BundleReader(root).read(CID, Runtime.CONTAINERD)
    assert isinstance(outcome, Found), outcome
    actual = (outcome.path, outcome.identity.pod_uid, outcome.identity.name, outcome.identity.kind)
    assert (path, UID, "database", ContainerType.CONTAINER) == actual


def test_crio_bundle(tmp_path: Path) -> None:
    """CRI-O: ``run/containers/storage/overlay-containers/<id>/userdata/config.json``."""
    path = write_bundle(tmp_path, CID, crio_annotations(UID, "envoy"), runtime="cri-o")
    outcome = BundleReader(tmp_path).read(CID, Runtime.CRIO)
    assert isinstance(outcome, Found), outcome
    expected = (tmp_path / f"run/containers/storage/overlay-containers/{CID}/userdata/config.json", "envoy")
    assert expected == (path, outcome.identity.name) == (outcome.path, outcome.identity.name)


def test_bare_id_is_read_as_containerd(root: Path) -> None:
    """A bare 64-hex cgroup name (cgroupfs driver) is containerd's or docker's; only containerd has a bundle."""
    write_bundle(root, CID, containerd_annotations(UID, None))
    outcome = BundleReader(root).read(CID, None)
    assert isinstance(outcome, Found), outcome
    assert (Runtime.CONTAINERD, ContainerType.SANDBOX) == (outcome.identity.runtime, outcome.identity.kind)


def test_runtime_directory_absent_is_unavailable(tmp_path: Path) -> None:
    """No containerd state under the root (another runtime, or not mounted): Unavailable, nothing to wait for."""
    outcome = BundleReader(tmp_path).read(CID, Runtime.CONTAINERD)
    expected = Unavailable(
        runtime=Runtime.CONTAINERD,
        directory=tmp_path / "run/containerd/io.containerd.runtime.v2.task/k8s.io",
        reason=f"{tmp_path}/run/containerd/io.containerd.runtime.v2.task/k8s.io does not exist",
    )
    assert expected == outcome


def test_docker_is_unavailable(tmp_path: Path) -> None:
    """docker keeps no CRI bundle annotations."""
    outcome = BundleReader(tmp_path).read(CID, Runtime.DOCKER)
    assert Unavailable(runtime=Runtime.DOCKER, directory=None, reason="docker keeps no CRI bundle annotations") == (
        outcome
    )


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "no config.json yet"),
        (b"", "config.json is empty"),
        (b'{"ociVersion": "1.1.0", "annotations": {"io.kube', "config.json is not complete JSON yet"),
        ('{"annotations": {"a": "é'.encode()[:-1], "config.json is not complete JSON yet"),
    ],
    ids=["missing", "empty", "half-written", "cut-in-a-character"],
)
def test_not_complete_yet(root: Path, content: bytes | None, reason: str) -> None:
    """A bundle the runtime is still writing (containerd writes config.json in place) is NotYet: read it again."""
    if content is not None:
        write_raw_bundle(root, CID, content)
    outcome = BundleReader(root).read(CID, Runtime.CONTAINERD)
    assert isinstance(outcome, NotYet), outcome
    assert (bundle_path(root, CID), True) == (outcome.path, outcome.reason.startswith(reason)), outcome.reason


def test_complete_json_without_annotations_is_invalid(root: Path) -> None:
    """Complete JSON that says nothing about Kubernetes will not improve: Invalid, with the key named."""
    write_bundle(root, CID, {"io.kubernetes.cri.container-type": "container"})
    outcome = BundleReader(root).read(CID, Runtime.CONTAINERD)
    expected = Invalid(
        path=bundle_path(root, CID),
        reason=IdentityErrorReason.MISSING_ANNOTATION,
        message=f"{bundle_path(root, CID)}: annotation io.kubernetes.cri.sandbox-uid is missing",
    )
    assert expected == outcome


def test_json_array_is_malformed(root: Path) -> None:
    """A JSON document that is not an object: malformed."""
    write_raw_bundle(root, CID, b"[]")
    outcome = BundleReader(root).read(CID, Runtime.CONTAINERD)
    assert isinstance(outcome, Invalid), outcome
    assert IdentityErrorReason.MALFORMED == outcome.reason


@pytest.mark.parametrize("depth", [100_000, 65])
def test_deeply_nested_bundle_is_malformed(root: Path, depth: int) -> None:
    """A complete config.json nested deeper than the manifests' bound is malformed, never a RecursionError.

    Issue 22, finding 2: ``{"a":[[[...]]]}`` 100,000 deep crash-looped the agent; 65 deep is one past the bound.
    """
    write_raw_bundle(root, CID, b'{"a":' + b"[" * depth + b"]" * depth + b"}")
    outcome = BundleReader(root).read(CID, Runtime.CONTAINERD)
    assert isinstance(outcome, Invalid), outcome
    assert (IdentityErrorReason.MALFORMED, f"{bundle_path(root, CID)}: nested deeper than 64 levels") == (
        outcome.reason,
        outcome.message,
    )


def test_oversize_bundle_is_refused(root: Path) -> None:
    """A config.json larger than ``max_bytes`` is refused before it is parsed."""
    write_bundle(root, CID, {**containerd_annotations(UID, "app"), "padding": "x" * 5000})
    outcome = BundleReader(root, max_bytes=4096).read(CID, Runtime.CONTAINERD)
    assert isinstance(outcome, Invalid), outcome
    size = bundle_path(root, CID).stat().st_size
    assert (
        IdentityErrorReason.OVERSIZE,
        f"{bundle_path(root, CID)}: {size} bytes, more than the 4096 podpin reads",
    ) == (
        outcome.reason,
        outcome.message,
    )


def test_symlinked_config_is_refused(root: Path, tmp_path: Path) -> None:
    """config.json as a symlink (say, to a file outside the runtime's state) is not followed."""
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps({"annotations": containerd_annotations(UID, "app")}))
    path = bundle_path(root, CID)
    path.parent.mkdir(parents=True)
    path.symlink_to(target)
    outcome = BundleReader(root).read(CID, Runtime.CONTAINERD)
    assert (
        Invalid(path=path, reason=IdentityErrorReason.NOT_REGULAR, message=f"{path}: a symlink or not a file")
        == outcome
    )


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_config_that_is_not_a_regular_file_is_refused(root: Path, kind: str) -> None:
    """A FIFO (opened without blocking) or a directory in config.json's place is not read."""
    path = bundle_path(root, CID)
    path.parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    outcome = BundleReader(root).read(CID, Runtime.CONTAINERD)
    assert Invalid(path=path, reason=IdentityErrorReason.NOT_REGULAR, message=f"{path}: not a regular file") == outcome


@pytest.mark.parametrize(
    "container_id",
    ["../../../etc/passwd", "..", CID.upper(), CID[:-1], CID + "0", f"{CID[:32]}/{CID[32:]}", ""],
    ids=["traversal", "dotdot", "upper-case", "short", "long", "slash", "empty"],
)
def test_ids_that_are_not_64_hex_never_become_paths(root: Path, container_id: str) -> None:
    """Only a 64 lower-case hex id is looked up; anything else is refused before any path is built."""
    outcome = BundleReader(root).read(container_id, Runtime.CONTAINERD)
    expected = Invalid(
        path=None,
        reason=IdentityErrorReason.INVALID_ID,
        message=f"container id {container_id!r} is not 64 lower-case hex digits",
    )
    assert expected == outcome
