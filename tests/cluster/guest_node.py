"""Guest side: a Kubernetes node in the QEMU guest — network, containerd with NRI, the real kubelet — and a
command channel through the shared directory so the host's tests can look at the guest's kernel files.

Run by the host (node.py) as `python -m tests.cluster.guest_node <shared>/node.json` inside run-in-vm.sh. The
guest's `/` is the host's, read-only; the kubelet's fixed paths (`/var/lib/kubelet`, `/var/log/pods`,
`/var/lib/cni`) are made writable by overlays whose upper layers live on the guest's `/run` tmpfs, so nothing is
written to the host. Network: the NIC of QEMU's user network (restrict=on) gets `NODE_IP`, the CNI bridge gives
pods their addresses, and proxy ARP on the NIC lets QEMU's network answer them (the API server's address is a
QEMU guestfwd). The channel: the host writes `cmd/<n>.json` ({"argv": [...], "timeout": s}, or {"op": name, "args":
{...}} for the node's lifecycle operations of guest_ops.py: restart the kubelet or containerd, start and stop named
processes); the guest runs it and writes `cmd/<n>.out.json` ({"rc", "stdout", "stderr"}); a `stop` file ends the node
(the named processes, the kubelet, containerd). From its first step the guest rewrites `heartbeat` every 5 s, so the
host can tell a guest frozen whole (a TCG livelock that prints nothing) from a slow one.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.cluster.guest_ops import NodeControls
from tests.vm.background import Background
from tests.vm.containerd import Containerd, ContainerdConfig
from tests.vm.kubetree import hold_cfs_bandwidth
from tests.vm.matrix import MATRIX
from tests.vm.scenario import HEARTBEAT_FILE, Heartbeat

__all__ = ["main"]

CNI_BIN = Path("/usr/lib/cni")
POD_SUBNET = "10.88.0.0/16"
_SYS_INIT_MODULE = 175
"""init_module(2) on x86_64."""
WRITABLE = (Path("/var/lib"), Path("/var/log"), Path("/etc/cni"))
INIT_NEW_ROOT = "/newroot"
"""Where the VM's init (tests/vm/vm-setup.sh) mounts the host's root before it chroots into it."""
CONTAINERD_BASE = Path("/run/ctrd")
"""containerd's images and snapshots on the guest's plain tmpfs ``/run`` (``/tmp`` is an overlay, which overlayfs
refuses as an upper layer)."""
SNAPSHOTTER = "overlayfs"
"""Not ``native``: it copies the whole image for each container, which took 15-95 s per podpin container under TCG
and filled the guest's tmpfs (``no space left on device`` on the uninstall hook's containers, which then stayed in
ContainerCreating while the kubelet retried)."""


def _run(*argv: str, timeout: float = 120.0) -> str:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {proc.returncode}: {proc.stdout}{proc.stderr}")
    return proc.stdout


def make_writable(path: Path) -> None:
    """Overlay `path` with an upper layer on the guest's /run tmpfs (the host's files stay untouched)."""
    base = Path("/run/podpin-ovl") / path.as_posix().strip("/").replace("/", "-")
    (base / "u").mkdir(parents=True, exist_ok=True)
    (base / "w").mkdir(parents=True, exist_ok=True)
    if not path.exists():
        raise RuntimeError(f"{path} does not exist on the host's root: cannot overlay it")
    _run("mount", "-t", "overlay", "overlay", "-o", f"lowerdir={path},upperdir={base}/u,workdir={base}/w", str(path))


def root_over_rootfs() -> None:
    """Move the guest's root (the host's ``/`` over 9p, chroot'ed into by the VM's init from its initramfs) on top of
    the initramfs's own root, as ``switch_root`` does.

    Why: the kernel puts a process that joins a mount namespace (``setns``, as ``runc exec`` does for ``kubectl
    exec``) at the topmost mount on that namespace's very first root. Under the init's plain ``chroot`` that is the
    initramfs, and ``runc``'s ``pivot_root`` attaches a container's root where the chroot's root was mounted
    (``/newroot``), not there: every exec'd process landed in the initramfs (its ``/proc`` the init's, ``/proc/1``
    the VM's init) instead of its container. Moved onto ``/``, a container's root ends up on top of the initramfs's
    root, where ``setns`` finds it. PID 1 keeps the initramfs as its own root (it only powers off). Done before
    containerd starts: the kernel refuses to move a tree holding network namespace mounts (``/run/netns``). The move
    runs chroot'ed into the init's root (``/proc/1/root``) with the initramfs's busybox, as ``switch_root`` would:
    moving ``/`` from inside the chroot fails with ELOOP."""
    if not Path(f"/proc/1/root{INIT_NEW_ROOT}").is_dir():
        raise RuntimeError(f"the VM's init has no {INIT_NEW_ROOT}: tests/vm/vm-setup.sh's init changed")
    _run("chroot", "/proc/1/root", "/bin/mount", "-o", "move", INIT_NEW_ROOT, "/")


def insmod(module: Path) -> None:
    """Load one uncompressed module with init_module(2) (the host, whose root the guest uses, may lack kmod)."""
    image = module.read_bytes()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(_SYS_INIT_MODULE, image, ctypes.c_ulong(len(image)), b"") != 0:
        errno = ctypes.get_errno()
        if errno != 17:  # EEXIST: already loaded
            raise OSError(errno, f"init_module({module}): {os.strerror(errno)}")


def network(modules: Path, node_ip: str, gateway: str) -> None:
    """Load the NIC and bridge modules, address the NIC, route through QEMU's gateway, forward for the pods."""
    for name in (modules / "order").read_text().split():
        if not Path(f"/sys/module/{name}").exists():
            insmod(modules / f"{name}.ko")
    deadline = time.monotonic() + 30
    while not Path("/sys/class/net/eth0").exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"no eth0 after loading {modules}; links: {os.listdir('/sys/class/net')}")
        time.sleep(0.2)
    _run("ip", "link", "set", "eth0", "up")
    _run("ip", "addr", "add", f"{node_ip}/24", "dev", "eth0")
    _run("ip", "route", "add", "default", "via", gateway)
    Path("/proc/sys/net/ipv4/ip_forward").write_text("1")
    Path("/proc/sys/net/ipv4/conf/eth0/proxy_arp").write_text("1")


def cni_config() -> dict[str, Any]:
    """The node's CNI network: a bridge with host-local addresses (no masquerade: QEMU's network does the NAT)."""
    return {
        "cniVersion": "1.0.0",
        "name": "podpin-test",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_SUBNET}]], "routes": [{"dst": "0.0.0.0/0"}]},
            },
        ],
    }


def _run_request(spec: dict[str, Any], controls: NodeControls) -> dict[str, Any]:
    """One channel request: an operation of `controls`, or an argv run to its end."""
    if "op" in spec:
        args = spec.get("args", {})
        if not isinstance(args, dict):
            return {"rc": 1, "stdout": "", "stderr": f"{spec['op']}: args must be a mapping, not {args!r}"}
        return controls.handle(str(spec["op"]), args)
    try:
        proc = subprocess.run(
            spec["argv"], capture_output=True, text=True, timeout=spec.get("timeout", 120), check=False
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return {"rc": -1, "stdout": "", "stderr": str(err)}
    return {"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}


def serve(shared: Path, stop: Path, controls: NodeControls) -> None:
    """Run the host's commands and operations until `stop` exists."""
    commands = shared / "cmd"
    commands.mkdir(exist_ok=True)
    while not stop.exists():
        for request in sorted(commands.glob("*.json")):
            if request.name.endswith(".out.json") or request.with_suffix(".out.json").exists():
                continue
            try:
                spec = json.loads(request.read_text())
            except ValueError:
                continue  # the host is still writing it
            result = _run_request(spec, controls)
            partial = request.with_suffix(".tmp")
            partial.write_text(json.dumps(result))
            partial.rename(request.with_suffix(".out.json"))
        time.sleep(0.2)


def main(config_path: str) -> int:
    """Bring the node up, serve commands, tear it down; see the module docstring."""
    config = json.loads(Path(config_path).read_text())
    shared = Path(config["shared"])
    Heartbeat(shared / HEARTBEAT_FILE)  # until the guest powers off: the host's watchdog reads its age (node.py)
    vm_dir = Path(config["vm_dir"])
    root_over_rootfs()
    for path in WRITABLE:
        make_writable(path)
    hold_cfs_bandwidth()  # TCG: no kernel text patching per container quota (tests/vm/kubetree.py)
    network(Path(config["modules"]), config["node_ip"], config["gateway"])
    runtime = MATRIX[config.get("runtime", "containerd-1.7")]
    built_root = Path(config.get("runtimes_dir", "/tmp/podpin-runtimes"))
    containerd = Containerd(
        ContainerdConfig(
            runtime_bin=runtime.bin_dir(vm_dir, built_root),
            runc=runtime.runc(vm_dir, built_root),
            version=runtime.config_version,
            nri=config.get("nri", True),
            base=CONTAINERD_BASE,
            snapshotter=SNAPSHOTTER,
        ),
        log_path=shared / "containerd.log",
        start_timeout=300.0,
    )
    base = containerd.config.base
    (base / "cni-conf").mkdir(parents=True, exist_ok=True)
    (base / "cni-conf" / "10-podpin-test.conflist").write_text(json.dumps(cni_config()))
    (base / "cni-bin").mkdir(parents=True, exist_ok=True)
    for plugin in CNI_BIN.iterdir():
        target = base / "cni-bin" / plugin.name
        if not target.exists():
            target.symlink_to(plugin)
    containerd.start()
    containerd.import_images(vm_dir / "runtime" / "busybox")
    for tarball in config.get("images", []):
        containerd.ctr("images", "import", "--snapshotter", SNAPSHOTTER, tarball, timeout=900)
    (shared / "images.txt").write_text(containerd.ctr("images", "list", "--quiet"))
    kubelet_config = shared / "kubelet-config.json"
    kubelet = Background(
        [
            config["kubelet"],
            f"--config={kubelet_config}",
            f"--kubeconfig={config['kubeconfig']}",
            f"--hostname-override={config['node_name']}",
            f"--node-ip={config['node_ip']}",
            "--v=2",
        ],
        log_path=shared / "kubelet.log",
        env={"PATH": f"{containerd.config.runtime_bin}:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root"},
    )
    kubelet.start()
    (shared / "node-up").write_text(str(time.time()))
    controls = NodeControls(kubelet=kubelet, containerd=containerd, logs=shared)
    try:
        serve(shared, shared / "stop", controls)
    finally:
        controls.close()
        if kubelet.running:
            kubelet.stop(timeout=30)
        containerd.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
