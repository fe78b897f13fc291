"""``scripts/release``: one version, the image as an OCI archive, the chart pinned to its digest, notes, checksums.

The parts are checked here without building an image (a synthetic OCI archive stands for one); the whole release,
built with podman on the debootstrapped base by the builder the image test and the real cluster share
(``tests/support/agent_image.py``), is the ``image``-marked test at the end. The real-cluster tests install from
:func:`scripts.release.make_release`'s artifacts.
"""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from agent import __version__
from scripts.release import (
    ReleaseError,
    changelog_section,
    check_version,
    oci_manifest_digest,
    package_chart,
    write_checksums,
)
from tests.support.agent_image import build_release
from tests.support.k8s_tools import helm, rendered_objects, run_helm
from tests.support.paths import REPO

DIGEST = "sha256:" + "3f" * 32


def _oci_archive(path: Path, manifests: list[dict[str, str]]) -> Path:
    """A tar holding only an OCI ``index.json`` listing ``manifests``."""
    data = json.dumps({"schemaVersion": 2, "manifests": manifests}).encode()
    with tarfile.open(path, "w") as tar:
        info = tarfile.TarInfo("index.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return path


def test_the_version_has_one_source() -> None:
    """The package, the chart's version and appVersion are 0.2.0, and CHANGELOG has its section (finding 1: the chart
    was 0.1.0 and everything Unreleased)."""
    chart = yaml.safe_load((REPO / "deploy" / "helm" / "podpin" / "Chart.yaml").read_text())
    check_version(__version__)
    assert ("0.2.0", "0.2.0", "0.2.0") == (__version__, chart["version"], chart["appVersion"])


def test_another_version_is_refused_naming_each_source() -> None:
    """Releasing a version the sources do not say is refused before anything is built."""
    with pytest.raises(ReleaseError) as err:
        check_version("9.9.9")
    assert (
        f"cannot release 9.9.9: agent/__init__.py __version__ is {__version__}; deploy/helm/podpin/Chart.yaml "
        f"version is {__version__}; deploy/helm/podpin/Chart.yaml appVersion is {__version__}"
    ) == str(err.value)


def test_changelog_section() -> None:
    """The notes are the version's section, up to the next one; a missing or empty section is refused."""
    text = "# Changelog\n\n## [Unreleased]\n\n## [1.1.0]\n\n### Added\n\n- a\n\n## [1.0.0]\n\n- b\n"
    with pytest.raises(ReleaseError) as missing:
        changelog_section(text, "2.0.0")
    with pytest.raises(ReleaseError) as empty:
        changelog_section(text, "Unreleased")
    assert ("### Added\n\n- a\n", "- b\n") == (changelog_section(text, "1.1.0"), changelog_section(text, "1.0.0"))
    assert ("CHANGELOG.md has no section '## [2.0.0]'", "CHANGELOG.md's section [Unreleased] is empty") == (
        str(missing.value).split(":")[0],
        str(empty.value),
    )


def test_the_digest_is_the_archives_manifest(tmp_path: Path) -> None:
    """The digest comes from the OCI archive's index.json; an archive of several images or none is refused."""
    one = _oci_archive(
        tmp_path / "one.tar", [{"digest": DIGEST, "mediaType": "application/vnd.oci.image.manifest.v1+json"}]
    )
    two = _oci_archive(tmp_path / "two.tar", [{"digest": DIGEST}, {"digest": DIGEST}])
    with pytest.raises(ReleaseError) as err:
        oci_manifest_digest(two)
    assert (DIGEST, f"{two}: index.json lists 2 manifests, not one image") == (oci_manifest_digest(one), str(err.value))


def test_the_packaged_chart_runs_the_released_image(tmp_path: Path) -> None:
    """The packaged chart's agents, resets and uninstall Job run repository:VERSION@digest, and it lints."""
    chart = package_chart(__version__, DIGEST, "registry.local/platform/podpin", tmp_path, str(helm()))
    run = run_helm("template", "podpin", str(chart), "--namespace", "podpin-system")
    images = {
        c["image"]
        for o in rendered_objects(run.stdout)
        if o["kind"] in ("DaemonSet", "Job")
        for c in [
            *o["spec"]["template"]["spec"].get("initContainers", []),
            *o["spec"]["template"]["spec"]["containers"],
        ]
    }
    lint = run_helm("lint", "--strict", str(chart))
    assert (f"podpin-{__version__}.tgz", {f"registry.local/platform/podpin:{__version__}@{DIGEST}"}, 0) == (
        chart.name,
        images,
        lint.returncode,
    )


def test_checksums_verify_with_sha256sum(tmp_path: Path) -> None:
    """SHA256SUMS is in sha256sum's format, relative to the release directory."""
    files = [tmp_path / "a.tgz", tmp_path / "notes.md"]
    for index, path in enumerate(files):
        path.write_bytes(bytes([index]) * 1000)
    write_checksums(files, tmp_path)
    run = subprocess.run(
        ["sha256sum", "-c", "SHA256SUMS"], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
    )
    assert (0, "a.tgz: OK\nnotes.md: OK\n") == (run.returncode, run.stdout)


@pytest.mark.image
def test_a_whole_release(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The release built with podman: the archive's digest is the image's, the chart pins it, the checksums hold."""
    release = build_release(tmp_path_factory.mktemp("release") / "dist", repository="registry.local/podpin")
    run = subprocess.run(
        ["sha256sum", "-c", "SHA256SUMS"], cwd=release.directory, capture_output=True, text=True, check=False
    )
    values = yaml.safe_load(
        subprocess.run(
            [str(helm()), "show", "values", str(release.chart)], capture_output=True, text=True, check=True
        ).stdout
    )
    assert (0, release.image_digest, "registry.local/podpin") == (
        run.returncode,
        values["image"]["digest"],
        values["image"]["repository"],
    )
