"""Both sides: container images without a registry, as one OCI image-layout tarball built from a static busybox.

No registry is reachable from the tests, so the images containerd runs are made here: an OCI image layout
(``oci-layout``, ``index.json``, ``blobs/sha256/``) whose single uncompressed layer holds ``bin/busybox`` and a
few applet symlinks, and one manifest + config per image. ``ctr -n k8s.io images import`` reads the tarball and
names each image after its ``io.containerd.image.name`` annotation in the index. Everything is deterministic
(mtime 0, uid 0, sorted JSON), so the same busybox always gives the same digests.

The images:

- :data:`PAUSE_IMAGE`: the sandbox (``sandbox_image`` in the containerd config); sleeps.
- :data:`SLEEP_IMAGE`: a container that sleeps.
- :data:`PROBE_IMAGE`: a container whose first action prints its own ``Cpus_allowed_list`` (read by the shell
  from ``/proc/self/status`` with builtins, no fork, so it is the affinity the entrypoint started with), then
  the guest's uptime, then sleeps: the log line :data:`FIRST_VIEW_PREFIX` ``<cpulist>`` is what the container
  saw first.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "FIRST_VIEW_PREFIX",
    "IMAGES",
    "PAUSE_IMAGE",
    "PROBE_IMAGE",
    "SLEEP_IMAGE",
    "UPTIME_PREFIX",
    "ImageSpec",
    "build_layout",
    "write_image_tarball",
]

FIRST_VIEW_PREFIX = "podpin-probe first-view"
"""The probe's first log line: this prefix, a space, and its ``Cpus_allowed_list``."""
UPTIME_PREFIX = "podpin-probe uptime"
"""The probe's second line: this prefix and ``/proc/uptime``'s first field when it looked."""

_SLEEP = "/bin/sleep 2147483647"
_PROBE_SCRIPT = (
    'while read -r k v; do [ "$k" = Cpus_allowed_list: ] && echo "' + FIRST_VIEW_PREFIX + ' $v"; '
    'done < /proc/self/status; read -r u _ < /proc/uptime; echo "' + UPTIME_PREFIX + ' $u"; exec ' + _SLEEP
)
_APPLETS = ("sh", "sleep", "cat", "echo", "grep", "true")
_LAYER = "application/vnd.oci.image.layer.v1.tar"
_CONFIG = "application/vnd.oci.image.config.v1+json"
_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageSpec:
    """One image: its reference (the name containerd gives it) and its entrypoint."""

    ref: str
    entrypoint: tuple[str, ...]


PAUSE_IMAGE = ImageSpec(ref="podpin.local/pause:1", entrypoint=tuple(_SLEEP.split()))
SLEEP_IMAGE = ImageSpec(ref="podpin.local/busybox:1", entrypoint=tuple(_SLEEP.split()))
PROBE_IMAGE = ImageSpec(ref="podpin.local/probe:1", entrypoint=("/bin/sh", "-c", _PROBE_SCRIPT))
IMAGES = (PAUSE_IMAGE, SLEEP_IMAGE, PROBE_IMAGE)
"""Every image the tarball holds."""


def _json(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def _digest(blob: bytes) -> str:
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def _add(
    tar: tarfile.TarFile,
    name: str,
    *,
    data: bytes | None = None,
    kind: bytes = tarfile.REGTYPE,
    mode: int = 0o644,
    link: str = "",
) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime, info.uid, info.gid = kind, mode, 0, 0, 0
    info.uname = info.gname = "root"
    info.linkname = link
    info.size = len(data) if data is not None else 0
    tar.addfile(info, io.BytesIO(data) if data is not None else None)


def _layer(busybox: bytes) -> bytes:
    """The root filesystem: ``bin/busybox``, applet symlinks, and the mount points runc expects."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for directory in ("bin", "dev", "etc", "proc", "sys", "tmp", "var", "var/log"):
            _add(tar, directory, kind=tarfile.DIRTYPE, mode=0o1777 if directory == "tmp" else 0o755)
        _add(tar, "bin/busybox", data=busybox, mode=0o755)
        for applet in _APPLETS:
            _add(tar, f"bin/{applet}", kind=tarfile.SYMTYPE, mode=0o777, link="busybox")
        _add(tar, "etc/passwd", data=b"root:x:0:0:root:/:/bin/sh\n")
        _add(tar, "etc/group", data=b"root:x:0:\n")
    return buffer.getvalue()


def build_layout(busybox: bytes, images: Sequence[ImageSpec] = IMAGES) -> dict[str, bytes]:
    """The files of the OCI image layout (path inside the tarball -> content), one shared layer."""
    layer = _layer(busybox)
    layer_digest = _digest(layer)
    blobs: dict[str, bytes] = {layer_digest: layer}
    entries = []
    for image in images:
        config = _json(
            {
                "architecture": "amd64",
                "os": "linux",
                "config": {"Entrypoint": list(image.entrypoint), "Env": ["PATH=/bin"], "WorkingDir": "/"},
                "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
            }
        )
        blobs[_digest(config)] = config
        manifest = _json(
            {
                "schemaVersion": 2,
                "mediaType": _MANIFEST,
                "config": {"mediaType": _CONFIG, "digest": _digest(config), "size": len(config)},
                "layers": [{"mediaType": _LAYER, "digest": layer_digest, "size": len(layer)}],
            }
        )
        blobs[_digest(manifest)] = manifest
        entries.append(
            {
                "mediaType": _MANIFEST,
                "digest": _digest(manifest),
                "size": len(manifest),
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {
                    "io.containerd.image.name": image.ref,
                    "org.opencontainers.image.ref.name": image.ref.rpartition(":")[2],
                },
            }
        )
    files = {
        "oci-layout": _json({"imageLayoutVersion": "1.0.0"}),
        "index.json": _json(
            {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": entries}
        ),
    }
    files.update({f"blobs/sha256/{digest.removeprefix('sha256:')}": blob for digest, blob in sorted(blobs.items())})
    return files


def write_image_tarball(busybox: Path, out: Path, images: Sequence[ImageSpec] = IMAGES) -> Path:
    """Write the image-layout tarball of ``images`` built from the ``busybox`` binary to ``out``; returns ``out``."""
    files = build_layout(busybox.read_bytes(), images)
    with tarfile.open(out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _add(tar, "blobs", kind=tarfile.DIRTYPE, mode=0o755)
        _add(tar, "blobs/sha256", kind=tarfile.DIRTYPE, mode=0o755)
        for name, data in files.items():
            _add(tar, name, data=data)
    return out
