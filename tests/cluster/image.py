"""The agent's image for the cluster: built from the Dockerfile with podman exactly as the image test builds it
(the debootstrapped base, the local wheel index), saved as an OCI archive for the guest's containerd to import.

The image is `localhost/podpin:<version>`; the manifests are applied with that reference and
`imagePullPolicy: Never`-free defaults work because the image is present on the node (IfNotPresent).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from agent import __version__
from tests.deploy.test_image import BASE_TAG, IMAGE_DIR, IMAGE_TAG, SETUP, Podman, _serve, _simple_index

__all__ = ["IMAGE_TAG", "build_agent_image", "missing_image_inputs"]


def missing_image_inputs() -> str | None:
    """Why the image cannot be built here (with the setup command), or None."""
    for path in (IMAGE_DIR / "base.tar", IMAGE_DIR / "wheelhouse"):
        if not path.exists():
            return f"{path} missing: {SETUP}"
    return None


def build_agent_image(workdir: Path) -> Path:
    """Build the image in a podman store under `workdir` and save it as `workdir/podpin-<version>.oci.tar`.

    Raises:
        AssertionError: a podman step failed (its stderr tail in the message).
    """
    store = Path(tempfile.mkdtemp(prefix="pp-", dir="/tmp"))  # podman's runroot path may hold 50 characters
    index = workdir / "index"
    index.mkdir(parents=True, exist_ok=True)
    _simple_index(IMAGE_DIR / "wheelhouse", index)
    tool = Podman(store=store)
    archive = workdir / f"podpin-{__version__}.oci.tar"
    try:
        tool("import", str(IMAGE_DIR / "base.tar"), BASE_TAG)
        with _serve(index) as url:
            tool(
                "build",
                "--isolation",
                "chroot",
                "--pull=never",
                "--build-arg",
                f"BASE={BASE_TAG}",
                "--build-arg",
                f"PIP_INDEX_URL={url}/simple/",
                "--tag",
                IMAGE_TAG,
                str(Path(__file__).resolve().parents[2]),
                timeout=1800,
            )
        tool("save", "--format", "oci-archive", "--output", str(archive), IMAGE_TAG)
    finally:
        subprocess.run(tool.command("rmi", "--all", "--force"), capture_output=True, timeout=300, check=False)
        shutil.rmtree(store, ignore_errors=True)
    return archive
