#!/usr/bin/env python3
"""Make a podpin release: the image as an OCI archive, the chart pinned to that image's digest, notes, checksums.

    scripts/release 0.2.0                                   # into dist/0.2.0/
    scripts/release 0.2.0 --repository registry.example.com/platform/podpin
    scripts/release 0.2.0 --base localhost/podpin-base:bookworm --index-url http://127.0.0.1:8080/simple/

The version has one source, ``agent/__init__.py``'s ``__version__``: the chart's ``version`` and ``appVersion`` must
equal it and CHANGELOG.md must have its section, or nothing is made (the message names what disagrees). Then, in
the output directory:

* ``podpin-image-VERSION.oci.tar``: the Dockerfile built with podman (``localhost/podpin:VERSION``) and saved as an
  OCI archive; its manifest digest is what the chart pins;
* ``podpin-VERSION.tgz``: the chart packaged by helm, its ``image.repository`` the ``--repository`` and its
  ``image.digest`` the archive's, so ``helm install`` runs exactly this image (``repository:VERSION@sha256:...``);
* ``RELEASE-NOTES.md``: the CHANGELOG section of the version;
* ``SHA256SUMS``: the three files, for ``sha256sum -c``.

Publishing is the operator's (README, "Install a release"): copy the archive to a registry keeping its digest
(``skopeo copy --preserve-digests oci-archive:... docker://REPOSITORY:VERSION``, or ``podman load`` and ``podman
push``), push the chart (``helm push podpin-VERSION.tgz oci://REGISTRY/charts``) and ``helm install`` it.

:func:`make_release` is what the command runs; the tests and the real-cluster tests call it with their own podman
(a store of their own, a chroot build) and helm.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
CHART = REPO / "deploy" / "helm" / "podpin"
CHANGELOG = REPO / "CHANGELOG.md"
DEFAULT_REPOSITORY = "ghcr.io/podpin/podpin"
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


class ReleaseError(RuntimeError):
    """The release cannot be made; the message says what to fix."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Release:
    """What a release made, all in ``directory``."""

    version: str
    directory: Path
    image_archive: Path
    image_digest: str
    repository: str
    chart: Path
    notes: Path
    checksums: Path

    @property
    def image(self) -> str:
        """The image reference the packaged chart runs."""
        return f"{self.repository}:{self.version}@{self.image_digest}"


def package_version() -> str:
    """``agent/__init__.py``'s ``__version__``, read from the file (the one source)."""
    found = re.search(r'^__version__ = "([^"]+)"$', (REPO / "agent" / "__init__.py").read_text(), re.MULTILINE)
    if found is None:
        raise ReleaseError("agent/__init__.py has no __version__")
    return found.group(1)


def changelog_section(text: str, version: str) -> str:
    """The body of CHANGELOG's ``## [VERSION]`` section (up to the next ``## [``), without its heading.

    Raises:
        ReleaseError: there is no such section, or it is empty.
    """
    heading = re.search(rf"^## \[{re.escape(version)}\][^\n]*\n", text, re.MULTILINE)
    if heading is None:
        raise ReleaseError(f"CHANGELOG.md has no section '## [{version}]': write the release's changes there first")
    rest = text[heading.end() :]
    following = re.search(r"^## \[", rest, re.MULTILINE)
    body = (rest[: following.start()] if following else rest).strip()
    if not body:
        raise ReleaseError(f"CHANGELOG.md's section [{version}] is empty")
    return body + "\n"


def check_version(version: str) -> None:
    """``version`` must be the package's, the chart's ``version`` and ``appVersion``, and have a CHANGELOG section.

    Raises:
        ReleaseError: naming each source that says otherwise.
    """
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    sources = {
        "agent/__init__.py __version__": package_version(),
        "deploy/helm/podpin/Chart.yaml version": str(chart["version"]),
        "deploy/helm/podpin/Chart.yaml appVersion": str(chart["appVersion"]),
    }
    wrong = [f"{where} is {found}" for where, found in sources.items() if found != version]
    if wrong:
        raise ReleaseError(f"cannot release {version}: " + "; ".join(wrong))
    changelog_section(CHANGELOG.read_text(), version)


def oci_manifest_digest(archive: Path) -> str:
    """The digest of the (one) image manifest an OCI archive's ``index.json`` lists.

    Raises:
        ReleaseError: not an OCI archive of one image.
    """
    try:
        with tarfile.open(archive) as tar:
            member = tar.extractfile("index.json")
            if member is None:
                raise KeyError("index.json")
            index = json.loads(member.read())
    except (OSError, KeyError, tarfile.TarError, ValueError) as err:
        raise ReleaseError(f"{archive}: not an OCI archive ({err})") from err
    manifests = index.get("manifests") or []
    if len(manifests) != 1 or not _DIGEST.match(str(manifests[0].get("digest"))):
        raise ReleaseError(f"{archive}: index.json lists {len(manifests)} manifests, not one image")
    return str(manifests[0]["digest"])


def _set_value(text: str, key: str, value: str) -> str:
    """``values.yaml`` with the ``image`` section's ``key`` set to ``value`` (comments kept)."""
    pattern = re.compile(rf"^(image:\n(?:(?:  #[^\n]*|  [a-zA-Z]+:[^\n]*)\n)*?  {key}: )[^\n]*$", re.MULTILINE)
    changed, count = pattern.subn(lambda m: m.group(1) + json.dumps(value), text, count=1)
    if count != 1:
        raise ReleaseError(f"deploy/helm/podpin/values.yaml: no image.{key} to set")
    return changed


def package_chart(version: str, digest: str, repository: str, out: Path, helm: str) -> Path:
    """The chart packaged into ``out`` with ``image.repository`` and ``image.digest`` set; returns the ``.tgz``."""
    if not _DIGEST.match(digest):
        raise ReleaseError(f"{digest!r} is not an image digest (sha256:<64 hex>)")
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "podpin"
        shutil.copytree(CHART, copy)
        values = copy / "values.yaml"
        values.write_text(_set_value(_set_value(values.read_text(), "repository", repository), "digest", digest))
        subprocess.run(
            [helm, "package", str(copy), "--destination", str(out)], capture_output=True, text=True, check=True
        )
    chart = out / f"podpin-{version}.tgz"
    if not chart.is_file():
        raise ReleaseError(f"helm package made no {chart.name}")
    return chart


def write_checksums(paths: Sequence[Path], out: Path) -> Path:
    """``SHA256SUMS`` in ``out`` for ``paths`` (in ``sha256sum``'s format, names relative to ``out``)."""
    lines = []
    for path in paths:
        digest = hashlib.sha256()
        with path.open("rb") as file:
            while block := file.read(1 << 20):
                digest.update(block)
        lines.append(f"{digest.hexdigest()}  {path.relative_to(out)}\n")
    checksums = out / "SHA256SUMS"
    checksums.write_text("".join(lines))
    return checksums


def helm_binary() -> str:
    """helm: the project's copy, else PATH's."""
    local = REPO / ".venv" / "tools" / "k8s" / "bin" / "helm"
    found = str(local) if local.is_file() else shutil.which("helm")
    if found is None:
        raise ReleaseError("helm not found (scripts/test installs it in .venv/tools/k8s/bin)")
    return found


def make_release(
    version: str,
    out: Path,
    *,
    repository: str = DEFAULT_REPOSITORY,
    podman: Sequence[str] = ("podman",),
    build_flags: Sequence[str] = (),
    build_args: Mapping[str, str] | None = None,
    helm: str | None = None,
) -> Release:
    """Build and package release ``version`` into ``out`` (module docstring).

    Args:
        version: must equal the package's version (:func:`check_version`).
        out: the output directory (made if missing; the release's files are replaced).
        repository: where the image will be pushed; the packaged chart pulls it from there.
        podman: the podman argv prefix (a test passes its own store and flags).
        build_flags: more ``podman build`` flags (``--isolation chroot``, ``--pull=never``).
        build_args: the Dockerfile's build arguments (``BASE``, ``PIP_INDEX_URL``).
        helm: the helm binary (default :func:`helm_binary`).

    Raises:
        ReleaseError: a version that disagrees, or a step that failed (its output named).
    """
    check_version(version)
    out.mkdir(parents=True, exist_ok=True)
    tag = f"localhost/podpin:{version}"
    archive = out / f"podpin-image-{version}.oci.tar"
    archive.unlink(missing_ok=True)
    args = [arg for key, value in (build_args or {}).items() for arg in ("--build-arg", f"{key}={value}")]
    for step in (
        [*podman, "build", *build_flags, *args, "--tag", tag, str(REPO)],
        [*podman, "save", "--format", "oci-archive", "--output", str(archive), tag],
    ):
        run = subprocess.run(step, capture_output=True, text=True, check=False)
        if run.returncode != 0:
            raise ReleaseError(f"{' '.join(step[len(podman) : len(podman) + 2])} failed: {run.stderr[-2000:]}")
    digest = oci_manifest_digest(archive)
    chart = package_chart(version, digest, repository, out, helm or helm_binary())
    notes = out / "RELEASE-NOTES.md"
    notes.write_text(
        f"# podpin {version}\n\nImage: `{repository}:{version}@{digest}`\n\n"
        + changelog_section(CHANGELOG.read_text(), version)
    )
    checksums = write_checksums([archive, chart, notes], out)
    return Release(
        version=version,
        directory=out,
        image_archive=archive,
        image_digest=digest,
        repository=repository,
        chart=chart,
        notes=notes,
        checksums=checksums,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("version", help="the version to release (agent/__init__.py's __version__)")
    parser.add_argument("--out", type=Path, help="output directory (default: dist/VERSION)")
    parser.add_argument("--repository", default=DEFAULT_REPOSITORY, help="where the image will be pushed")
    parser.add_argument("--base", help="the Dockerfile's BASE image (default: its pinned public one)")
    parser.add_argument("--index-url", help="a package index to build from (the Dockerfile's PIP_INDEX_URL)")
    args = parser.parse_args(argv)
    build_args = {key: value for key, value in (("BASE", args.base), ("PIP_INDEX_URL", args.index_url)) if value}
    try:
        release = make_release(
            args.version,
            args.out or REPO / "dist" / args.version,
            repository=args.repository,
            build_args=build_args,
        )
    except ReleaseError as err:
        print(f"release: {err}", file=sys.stderr)
        return 1
    for path in (release.image_archive, release.chart, release.notes, release.checksums):
        print(path)
    print(f"image {release.image}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
