"""``runtimePaths``: where the runtimes keep bundles on other installations (k3s, RKE2, the shim sandboxer, CRI-O's
own runroot and driver), and the settings refused with a message naming the key."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from agent.config import ConfigError, config_from_mapping
from agent.runtime import BundleReader, Found, NotYet, RuntimePaths, Unavailable
from agent.vocabulary import Runtime
from tests.support.bundles import bundle_path, containerd_annotations, crio_annotations, write_bundle

UID = "0c9e8a54-52d4-4c1e-8f61-3b7a9e2d4c11"
CID = "c254a5ed38a9380a3229bf5fe8303ff3d7a0090cddfbb022b97b254e6fde5780"
SANDBOX = "d" * 64


def _paths(**section: object) -> RuntimePaths:
    return config_from_mapping({"runtimePaths": section}, env={}).runtime_paths


@pytest.mark.parametrize("preset", ["k3s", "rke2"])
def test_k3s_and_rke2_read_containerd_under_run_k3s(tmp_path: Path, preset: str) -> None:
    """k3s and RKE2 embed containerd with the state directory /run/k3s/containerd: the preset finds its bundles."""
    write_bundle(tmp_path, CID, containerd_annotations(UID, "app"), runtime="k3s")
    outcome = BundleReader(tmp_path, paths=_paths(preset=preset)).read(CID, Runtime.CONTAINERD)
    default = BundleReader(tmp_path).read(CID, Runtime.CONTAINERD)
    assert isinstance(outcome, Found), outcome
    assert ("app", Unavailable) == (outcome.identity.name, type(default))


def test_shim_sandboxer_keeps_the_sandbox_bundle_apart(tmp_path: Path) -> None:
    """With containerd 2.x's shim sandboxer the sandbox's bundle is in the sandbox controller's state directory:
    found there once the task directory has no entry for it; a container's stays in the task directory."""
    write_bundle(tmp_path, CID, containerd_annotations(UID, "app"))
    write_bundle(tmp_path, SANDBOX, containerd_annotations(UID, None), runtime="shim-sandboxer")
    reader = BundleReader(tmp_path)
    sandbox, container = reader.read(SANDBOX, Runtime.CONTAINERD), reader.read(CID, Runtime.CONTAINERD)
    assert isinstance(sandbox, Found), sandbox
    assert isinstance(container, Found), container
    expected = (bundle_path(tmp_path, SANDBOX, "shim-sandboxer"), bundle_path(tmp_path, CID))
    assert expected == (sandbox.path, container.path)


def test_a_bundle_in_neither_directory_is_not_there_yet(tmp_path: Path) -> None:
    """Both containerd directories looked at and the id in neither: NotYet (the task directory's path)."""
    bundle_path(tmp_path, "0" * 64).parent.parent.mkdir(parents=True)
    outcome = BundleReader(tmp_path).read(CID, Runtime.CONTAINERD)
    assert isinstance(outcome, NotYet), outcome
    assert bundle_path(tmp_path, CID) == outcome.path


def test_crio_runroot_and_storage_driver(tmp_path: Path) -> None:
    """CRI-O with ``runroot = /var/lib/crio-run`` and the vfs driver: ``<runroot>/vfs-containers/<id>/userdata``."""
    write_bundle(tmp_path, CID, crio_annotations(UID, "envoy"), runtime="cri-o-vfs")
    paths = _paths(crioRunroot="/var/lib/crio-run", crioStorageDriver="vfs")
    outcome = BundleReader(tmp_path, paths=paths).read(CID, Runtime.CRIO)
    assert isinstance(outcome, Found), outcome
    assert "envoy" == outcome.identity.name


def test_keys_beside_a_preset_replace_its_values() -> None:
    """A key given with the preset wins; the rest are the preset's."""
    paths = _paths(preset="k3s", sandboxerDir="/run/sandboxes")
    expected = (PurePosixPath("/run/k3s/containerd"), PurePosixPath("/run/sandboxes/k8s.io"))
    assert expected == (paths.containerd_state, paths.containerd_sandboxes)


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"preset": "k8s"}, "runtimePaths.preset: 'k8s' is not one of default, k3s, rke2"),
        ({"containerdState": "run/containerd"}, "runtimePaths.containerdState: 'run/containerd' must be an absolute"),
        ({"crioRunroot": "/run/../etc"}, "runtimePaths.crioRunroot: '/run/../etc' must be an absolute path"),
        ({"crioStorageDriver": "Over lay"}, "runtimePaths.crioStorageDriver: 'Over lay' is not a storage driver"),
        ({"containerd": "/run"}, "runtimePaths.containerd: unknown key"),
    ],
)
def test_bad_settings_name_the_key(section: dict[str, str], message: str) -> None:
    """Each refused setting is a ConfigError naming ``runtimePaths.<key>``."""
    with pytest.raises(ConfigError) as err:
        config_from_mapping({"runtimePaths": section}, env={})
    assert str(err.value).startswith(message), str(err.value)
