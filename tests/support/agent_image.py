"""The agent's image and its release, built with podman on the debootstrapped base: one builder for the image test
(tests/deploy/test_image.py), the release test (tests/deploy/test_release.py) and the real cluster
(tests/cluster/test_deploy.py), so the cluster runs exactly the image the other tests check.

No container registry is reachable here: ``scripts/image-setup`` (run by ``scripts/test``) debootstraps a bookworm
minbase with python3 into ``$PODPIN_IMAGE_DIR/base.tar`` (default ``/tmp/podpin-image``) and downloads podpin's
dependencies as wheels into ``wheelhouse/``. :func:`base_store` imports that base into a podman store of the
caller's own and serves the wheelhouse on 127.0.0.1 as a PEP 503 index, the Dockerfile's ``PIP_INDEX_URL``.
Why each podman flag is needed in this sandbox is said in tests/deploy/test_image.py's docstring.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from agent import __version__
from scripts.release import Release, make_release
from tests.support.k8s_tools import helm
from tests.support.paths import REPO

__all__ = [
    "BASE_TAG",
    "BUILD_FLAGS",
    "EXAMPLES",
    "IMAGE_DIR",
    "IMAGE_TAG",
    "SETUP",
    "Podman",
    "base_store",
    "build_release",
    "missing_image_inputs",
]

IMAGE_DIR = Path(os.environ.get("PODPIN_IMAGE_DIR", "/tmp/podpin-image"))
BASE_TAG = "localhost/podpin-base:bookworm"
IMAGE_TAG = f"localhost/podpin:{__version__}"
SETUP = "run scripts/image-setup (scripts/test does)"
EXAMPLES = REPO / "deploy" / "examples"
BUILD_FLAGS = ("--isolation", "chroot", "--pull=never")
"""``podman build`` flags: RUN steps in a chroot (no OCI runtime, no cgroups), the base from the store only."""


def missing_image_inputs() -> str | None:
    """Why the image cannot be built here (with the setup command), or None."""
    for path in (IMAGE_DIR / "base.tar", IMAGE_DIR / "wheelhouse"):
        if not path.exists():
            return f"{path} missing: {SETUP}"
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Podman:
    """podman with a store of its own in a temporary directory."""

    store: Path

    def command(self, *args: str) -> list[str]:
        """The podman argv for ``args`` with this store and the sandbox's storage and cgroup flags."""
        podman = shutil.which("podman")
        assert podman is not None, f"podman missing: {SETUP}"
        return [
            podman,
            "--root",
            str(self.store / "root"),
            "--runroot",
            str(self.store / "run"),
            "--storage-driver",
            "overlay",
            "--cgroup-manager",
            "cgroupfs",
            *args,
        ]

    def __call__(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        run = subprocess.run(self.command(*args), capture_output=True, text=True, timeout=timeout, check=False)
        assert 0 == run.returncode, f"podman {' '.join(args[:2])}: {run.stderr[-3000:]}"
        return run

    def run(self, *args: str, user: str = "0:0") -> subprocess.CompletedProcess[str]:
        """``podman run`` of the image with a read-only root as ``user``, the examples mounted read-only at /examples.

        The caller checks the status (some runs are meant to fail).
        """
        podman_run = self.command(
            "run",
            "--rm",
            "--network",
            "none",
            "--cgroups",
            "disabled",
            "--ulimit",
            "nofile=1024:1024",
            "--ulimit",
            "nproc=1024:1024",
            "--read-only",
            "--user",
            user,
            "--volume",
            f"{EXAMPLES}:/examples:ro",
            *args,
        )
        hide_cgroups = 'mount -t tmpfs -o size=1M podpin-no-cgroups /sys/fs/cgroup && exec "$@"'
        command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", hide_cgroups, "sh", *podman_run]
        return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)

    def remove_all(self) -> None:
        """Remove every image of the store (its layers live under the caller's temporary directory)."""
        subprocess.run(self.command("rmi", "--all", "--force"), capture_output=True, timeout=300, check=False)


def _simple_index(wheelhouse: Path, root: Path) -> None:
    """Write a PEP 503 "simple" index of the wheels in ``wheelhouse`` under ``root/simple`` (it links to
    ``root/wheels``)."""
    (root / "wheels").symlink_to(wheelhouse)
    projects: dict[str, list[str]] = {}
    for wheel in sorted(wheelhouse.glob("*.whl")):
        name = re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()
        projects.setdefault(name, []).append(wheel.name)
    for name, files in projects.items():
        page = root / "simple" / name
        page.mkdir(parents=True)
        links = "".join(f'<a href="../../wheels/{file}">{file}</a>\n' for file in files)
        (page / "index.html").write_text(f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n")


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the build log names what pip fetched."""


@contextmanager
def _serve(root: Path) -> Iterator[str]:
    """Serve ``root`` over HTTP on 127.0.0.1 (a free port); yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="wheel-index", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@contextmanager
def base_store(store: Path, index: Path) -> Iterator[tuple[Podman, dict[str, str]]]:
    """A podman store at ``store`` holding the base image, and the wheelhouse served as an index written under
    ``index``: yields the podman and the Dockerfile's build arguments (``BASE``, ``PIP_INDEX_URL``). The store's
    images are removed on the way out.

    Raises:
        AssertionError: the base or the wheelhouse is missing (naming the setup command), or a podman step failed.
    """
    missing = missing_image_inputs()
    assert missing is None, missing
    index.mkdir(parents=True, exist_ok=True)
    _simple_index(IMAGE_DIR / "wheelhouse", index)
    tool = Podman(store=store)
    try:
        tool("import", str(IMAGE_DIR / "base.tar"), BASE_TAG)
        with _serve(index) as url:
            yield tool, {"BASE": BASE_TAG, "PIP_INDEX_URL": f"{url}/simple/"}
    finally:
        tool.remove_all()


def build_release(out: Path, *, repository: str) -> Release:
    """``scripts/release``'s artifacts of this version in ``out``: the image built on the debootstrapped base and
    saved as an OCI archive, the chart pinned to that archive's digest under ``repository``, notes, checksums.

    Raises:
        AssertionError: inputs missing or a podman step failed; ReleaseError: the release itself failed.
    """
    store = Path(tempfile.mkdtemp(prefix="pp-", dir="/tmp"))  # podman's runroot path may hold 50 characters
    try:
        with base_store(store, out.parent / f"{out.name}-index") as (tool, build_args):
            return make_release(
                __version__,
                out,
                repository=repository,
                podman=tool.command(),
                build_flags=BUILD_FLAGS,
                build_args=build_args,
                helm=str(helm()),
            )
    finally:
        shutil.rmtree(store, ignore_errors=True)
