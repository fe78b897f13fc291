"""Guest side: a real containerd 1.7 with runc in the VM, configured like a kubelet node's, started and restarted.

``vm-setup.sh`` unpacks containerd (Debian 13), ``containerd-shim-runc-v2``, ``ctr`` and runc (Debian 12) into
``$VM_DIR/runtime/bin``; the guest sees that directory through the read-only host root. The guest's ``/`` is
read-only, so :class:`ContainerdConfig` moves everything containerd writes to ``/tmp`` (tmpfs overlay) and
``/run`` (tmpfs): ``root`` (images, snapshots), ``state`` (bundles, sockets: the CRI bundles land in
``<state>/io.containerd.runtime.v2.task/k8s.io/<id>/``, where podpin's ``--runtime-root /`` reads them), and the
CNI directories (without them the CRI plugin tries to create ``/etc/cni`` and fails). Sandboxes run in the host
network, so no CNI plugin is needed; ``snapshotter = "native"`` avoids overlayfs on tmpfs; ``SystemdCgroup =
false`` (no systemd in the guest) makes containerd use the ``cgroup_parent`` it is given, the kubelet's cgroupfs
layout. The NRI section is a switch (:attr:`ContainerdConfig.nri`): off for the bundle and API-only modes,
on for an NRI plugin to connect to ``nri_socket``.

:class:`Containerd` runs the daemon (its log in the scenario's work dir), waits until the CRI service answers,
imports the test images (``ociimage.py``) and can be stopped, killed (SIGKILL: shims and containers keep
running, as on a node whose containerd crashes) and started again.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.vm import ociimage
from tests.vm.background import Background
from tests.vm.criclient import CRIClient, CRIError

__all__ = ["Containerd", "ContainerdConfig", "ContainerdError", "runtime_bin"]

CRI_NAMESPACE = "k8s.io"
"""The containerd namespace the CRI plugin keeps its containers and images in."""
_DISABLED_PLUGINS = (
    "io.containerd.snapshotter.v1.btrfs",
    "io.containerd.snapshotter.v1.zfs",
    "io.containerd.snapshotter.v1.aufs",
    "io.containerd.snapshotter.v1.devmapper",
    "io.containerd.tracing.processor.v1.otlp",
    "io.containerd.internal.v1.tracing",
)
"""Snapshotters and tracing the tests never use: less to initialise under TCG."""


class ContainerdError(RuntimeError):
    """containerd did not start, did not answer, or an image could not be imported; carries its log tail."""


def runtime_bin(vm_dir: Path) -> Path:
    """Where ``vm-setup.sh`` put containerd, its shim, ``ctr`` and runc."""
    return vm_dir / "runtime" / "bin"


def _toml_string(value: str | Path) -> str:
    text = str(value)
    if any(c in text for c in '"\\\n'):
        raise ValueError(f"containerd config: {text!r} needs TOML escaping, which this generator does not do")
    return f'"{text}"'


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerdConfig:
    """The daemon's configuration file (``version = 2``), generated; see the module docstring."""

    runtime_bin: Path
    base: Path = Path("/tmp/ctrd")
    """Root for images, snapshots, CNI directories and logs (guest tmpfs)."""
    state: Path = Path("/run/containerd")
    """containerd's state: bundles and sockets. podpin reads ``<state>/io.containerd.runtime.v2.task/k8s.io``."""
    nri: bool = False
    nri_socket: Path = Path("/var/run/nri/nri.sock")
    sandbox_image: str = ociimage.PAUSE_IMAGE.ref
    runc: Path | None = None
    """The runc binary (None: ``runtime_bin/runc``)."""
    version: int = 2
    """The configuration's version: 2 (containerd 1.7) or 3 (2.x: the CRI plugin split into images and runtime)."""
    nri_request_timeout: str | None = None
    """NRI's ``plugin_request_timeout`` (None: the runtime's default, 2 s)."""
    snapshotter: str = "native"
    """The CRI's (and the imports') snapshotter. ``native`` works on the guest's ``/tmp`` (itself an overlay, which
    overlayfs cannot use as an upper layer) but copies the whole image for every container; ``overlayfs`` needs
    ``base`` on a plain tmpfs (the guest's ``/run``) and shares the image's layers."""

    @property
    def address(self) -> Path:
        """The gRPC socket (CRI and containerd's own API)."""
        return self.state / "containerd.sock"

    @property
    def root(self) -> Path:
        return self.base / "root"

    @property
    def bundles(self) -> Path:
        """Where the CRI containers' OCI bundles (``<id>/config.json``) are."""
        return self.state / "io.containerd.runtime.v2.task" / CRI_NAMESPACE

    @property
    def runc_path(self) -> Path:
        return self.runc if self.runc is not None else self.runtime_bin / "runc"

    def toml(self) -> str:
        """The configuration file's text."""
        q = _toml_string
        head = [
            f"version = {self.version}",
            f"root = {q(self.root)}",
            f"state = {q(self.state)}",
            f"disabled_plugins = [{', '.join(q(name) for name in _DISABLED_PLUGINS)}]",
            "[grpc]",
            f"  address = {q(self.address)}",
            '[plugins."io.containerd.nri.v1.nri"]',
            f"  disable = {'false' if self.nri else 'true'}",
            f"  socket_path = {q(self.nri_socket)}",
            f"  plugin_path = {q(self.base / 'nri-plugins')}",
            f"  plugin_config_path = {q(self.base / 'nri-conf')}",
        ]
        if self.nri_request_timeout is not None:
            head.append(f"  plugin_request_timeout = {q(self.nri_request_timeout)}")
        return "\n".join(head + (self._cri_v2() if self.version == 2 else self._cri_v3()))

    def _cri_v3(self) -> list[str]:
        """containerd 2.x: images (snapshotter, the pinned sandbox image) and runtime (runc, CNI) are two plugins;
        the transfer service unpacks imports into the configured snapshotter."""
        q = _toml_string
        images, runtime = 'plugins."io.containerd.cri.v1.images"', 'plugins."io.containerd.cri.v1.runtime"'
        transfer = 'plugins."io.containerd.transfer.v1.local"'
        return [
            # A restarted containerd 2.x reconnects to each running shim within io.containerd.timeout.shim.load
            # (5 s), else it kills the shim and its container: under TCG six shims took longer.
            "[timeouts]",
            '  "io.containerd.timeout.shim.load" = "60s"',
            '  "io.containerd.timeout.shim.cleanup" = "30s"',
            # ``ctr images import`` goes through the transfer service, which unpacks only for the platforms listed
            # (by default those of the default snapshotter, overlayfs, which does not load on the guest's tmpfs).
            f"[{transfer}]",
            f"  [[{transfer}.unpack_config]]",
            '    platform = "linux/amd64"',
            f"    snapshotter = {q(self.snapshotter)}",
            f"[{images}]",
            f"  snapshotter = {q(self.snapshotter)}",
            f"  [{images}.pinned_images]",
            f"    sandbox = {q(self.sandbox_image)}",
            f"[{runtime}]",
            f"  [{runtime}.containerd]",
            '    default_runtime_name = "runc"',
            f"    [{runtime}.containerd.runtimes.runc]",
            '      runtime_type = "io.containerd.runc.v2"',
            f"      [{runtime}.containerd.runtimes.runc.options]",
            "        SystemdCgroup = false",
            f"        BinaryName = {q(self.runc_path)}",
            f"  [{runtime}.cni]",
            f"    bin_dirs = [{q(self.base / 'cni-bin')}]",
            f"    conf_dir = {q(self.base / 'cni-conf')}",
            "",
        ]

    def _cri_v2(self) -> list[str]:
        """containerd 1.7: one CRI plugin."""
        q = _toml_string
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        return [
            f"[{cri}]",
            f"  sandbox_image = {q(self.sandbox_image)}",
            f"  [{cri}.containerd]",
            f"    snapshotter = {q(self.snapshotter)}",
            '    default_runtime_name = "runc"',
            f"    [{cri}.containerd.runtimes.runc]",
            '      runtime_type = "io.containerd.runc.v2"',
            f"      [{cri}.containerd.runtimes.runc.options]",
            "        SystemdCgroup = false",
            f"        BinaryName = {q(self.runc_path)}",
            f"  [{cri}.cni]",
            f"    bin_dir = {q(self.base / 'cni-bin')}",
            f"    conf_dir = {q(self.base / 'cni-conf')}",
            "",
        ]


@dataclass(slots=True)
class Containerd:
    """One containerd daemon in the guest; its output goes to ``log_path`` (all runs, one header each)."""

    config: ContainerdConfig
    log_path: Path
    start_timeout: float = 120.0
    _daemon: Background | None = None
    _client: CRIClient | None = None
    start_seconds: list[float] = field(default_factory=list)
    """How long each start took until the CRI service answered (TCG: a few seconds)."""

    @property
    def config_path(self) -> Path:
        return self.config.base / "config.toml"

    def _env(self) -> dict[str, str]:
        # The runtime's own bin first: the shim looks runc up on PATH too, and Debian 13's containerd
        # package would otherwise find nothing (or a runc built for a newer glibc).
        system = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        path = f"{self.config.runtime_bin}:{self.config.runc_path.parent}:{system}"
        return {"PATH": path, "HOME": "/root", "LANG": "C.UTF-8"}

    def start(self) -> CRIClient:
        """Write the configuration, start the daemon, wait for the CRI ``Version`` to answer; returns the client.

        Raises:
            ContainerdError: the daemon exited or did not answer within ``start_timeout`` s (with its log tail).
        """
        for directory in (
            self.config.base,
            self.config.base / "cni-bin",
            self.config.base / "cni-conf",
            self.config.base / "nri-plugins",
            self.config.base / "nri-conf",
        ):
            directory.mkdir(parents=True, exist_ok=True)
        if self.config.nri:
            self.config.nri_socket.parent.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(self.config.toml())
        argv = [str(self.config.runtime_bin / "containerd"), "--config", str(self.config_path), "--log-level", "info"]
        if self._daemon is None:
            self._daemon = Background(argv, log_path=self.log_path, env=self._env())
        started = time.monotonic()
        self._daemon.start()
        client = self._client or CRIClient(self.config.address)
        self._client = client
        deadline = started + self.start_timeout
        last = "not tried"
        while time.monotonic() < deadline:
            if not self._daemon.running:
                raise ContainerdError(f"containerd exited during start-up:\n{self._daemon.log_tail()}")
            if self.config.address.exists():
                try:
                    client.version(timeout=5.0)
                except CRIError as err:
                    last = str(err)
                else:
                    self.start_seconds.append(round(time.monotonic() - started, 3))
                    return client
            time.sleep(0.1)
        raise ContainerdError(
            f"containerd's CRI service did not answer within {self.start_timeout} s (last: {last}):\n"
            f"{self._daemon.log_tail()}"
        )

    @property
    def client(self) -> CRIClient:
        """The CRI client of the running daemon.

        Raises:
            ContainerdError: not started.
        """
        if self._client is None:
            raise ContainerdError("containerd is not started")
        return self._client

    @property
    def pid(self) -> int:
        if self._daemon is None:
            raise ContainerdError("containerd is not started")
        return self._daemon.pid

    def ctr(self, *args: str, timeout: float = 120.0) -> str:
        """Run ``ctr -n k8s.io ARGS`` against the daemon; returns its stdout.

        Raises:
            ContainerdError: non-zero exit (with its output).
        """
        argv = [str(self.config.runtime_bin / "ctr"), "--address", str(self.config.address), "-n", CRI_NAMESPACE, *args]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=self._env(), check=False)
        if proc.returncode != 0:
            raise ContainerdError(f"{' '.join(argv)}: exit {proc.returncode}: {proc.stdout}{proc.stderr}")
        return proc.stdout

    def import_images(self, busybox: Path) -> list[str]:
        """Build the test images from ``busybox`` and import them; returns the references now known."""
        tarball = ociimage.write_image_tarball(busybox, self.config.base / "images.tar")
        self.ctr("images", "import", "--snapshotter", self.config.snapshotter, str(tarball))
        listed = self.ctr("images", "list", "--quiet").split()
        missing = [image.ref for image in ociimage.IMAGES if image.ref not in listed]
        if missing:
            raise ContainerdError(f"images not imported: {missing} (ctr lists {listed})")
        return sorted(listed)

    def kill(self) -> None:
        """SIGKILL the daemon (its shims and the containers keep running)."""
        if self._daemon is not None and self._daemon.running:
            self._daemon.kill()

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM the daemon and wait for it (SIGKILL after ``timeout`` s)."""
        if self._daemon is not None and self._daemon.running:
            self._daemon.stop(timeout=timeout)

    def restart(self) -> CRIClient:
        """SIGKILL the running daemon and start a new one over the same state (a containerd crash)."""
        self.kill()
        return self.start()

    def log_tail(self, lines: int = 40) -> str:
        return self._daemon.log_tail(lines) if self._daemon is not None else ""

    def close(self) -> None:
        """Stop the daemon and kill every shim and container process it left (end of scenario)."""
        if self._client is not None:
            self._client.close()
            self._client = None
        self.stop()
        _kill_leftovers(self.config.runtime_bin)


def _kill_leftovers(runtime_bin: Path) -> None:
    """SIGKILL the shims started from ``runtime_bin`` (their containers die with their init)."""
    shim = str(runtime_bin / "containerd-shim-runc-v2")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            exe = os.readlink(entry / "exe")
        except OSError:
            continue
        if exe == shim:
            try:
                os.kill(int(entry.name), 9)
            except ProcessLookupError:
                continue
    shutil.rmtree("/run/containerd/runc", ignore_errors=True)
