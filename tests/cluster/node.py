"""Host side: the cluster's node, a QEMU guest running containerd and the real kubelet (guest_node.py).

The guest's topology (sockets, cores, threads, NUMA nodes, memory) and the kubelet's configuration are
parameters (:class:`NodeSpec`), so other harnesses (issue 17's differential runs) build on the same node.
Network: QEMU's user network with `restrict=on` on 10.0.0.0/24; the only ways out of the guest are a guestfwd of
the `kubernetes` Service's address (10.0.0.1:443) to the API server on 127.0.0.1 (relay.py per connection) and
a hostfwd from 127.0.0.1:<port> to the kubelet's 10250, which only the API server's egress proxy dials.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.cluster import build
from tests.cluster.certs import write_kubeconfig
from tests.cluster.controlplane import API_SERVICE_IP, NETWORK, NODE_IP, NODE_NAME, ControlPlane
from tests.cluster.procs import ClusterError, free_port, liveness_checks, tail, wait_for
from tests.vm import matrix
from tests.vm.bytecode import precompile_checkout
from tests.vm.harness import heartbeat_stall_seconds, kill_session
from tests.vm.scenario import HEARTBEAT_FILE

__all__ = ["GATEWAY", "GuestNode", "NodeFrozenError", "NodeSpec", "guest_modules", "kubelet_configuration", "vm_dir"]

REPO = Path(__file__).resolve().parents[2]
RUN_IN_VM = REPO / "tests" / "vm" / "run-in-vm.sh"
GATEWAY = "10.0.0.2"
"""QEMU's own address on its user network (the guest's default route)."""
READY_TIMEOUT = 900.0
WATCHDOG_POLL_SECONDS = 5.0
"""How often the host looks at the age of the guest's heartbeat."""
BOOT_ATTEMPTS = 2
"""A guest that freezes before its Node is Ready is booted once more (a fresh shared directory); one that
freezes later ends the tests that use it, each at once (:class:`NodeFrozenError`)."""


class NodeFrozenError(ClusterError):
    """The guest's heartbeat stood still for ``VM_HEARTBEAT_STALL`` seconds (240 by default): the guest froze whole
    (a TCG livelock: vCPUs busy, nothing on its console) and its QEMU was killed."""


def vm_dir() -> Path:
    """The VM's kernel, runtime and images (tests/vm/vm-setup.sh; ``PODPIN_VM_DIR``)."""
    return Path(os.environ.get("PODPIN_VM_DIR", "/tmp/podpin-vm"))


def cluster_runtime(env: dict[str, str] | None = None) -> matrix.RuntimeChoice:
    """The node's container runtime, from the runtime matrix (``tests/vm/matrix.py``): ``PODPIN_CLUSTER_RUNTIME``,
    default ``containerd-1.7`` (Debian's); ``containerd-2.2``/``-2.3``/``-2.4`` are built from their Go modules.

    Raises:
        ValueError: a name the matrix does not hold.
    """
    name = (env if env is not None else os.environ).get("PODPIN_CLUSTER_RUNTIME") or "containerd-1.7"
    if name not in matrix.MATRIX:
        raise ValueError(f"PODPIN_CLUSTER_RUNTIME={name!r} is not in the runtime matrix: {sorted(matrix.MATRIX)}")
    return matrix.MATRIX[name]


def modules_dir() -> Path:
    """Where tests/cluster/guest-modules.sh put the guest's NIC and bridge modules for the VM's kernel."""
    kver = (vm_dir() / "kver").read_text().strip()
    return build.build_dir().parent / "guest-modules" / kver


def guest_modules() -> str | None:
    """Why the guest's extra kernel modules are missing (with the command to run), or None when present."""
    try:
        present = (modules_dir() / "order").is_file()
    except FileNotFoundError:
        return "no VM kernel: run tests/vm/vm-setup.sh"
    return None if present else f"no guest network modules in {modules_dir()}: run tests/cluster/guest-modules.sh"


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeSpec:
    """The guest's shape and the kubelet's configuration (merged over :func:`kubelet_configuration`)."""

    cpus: int = 4
    numa_nodes: int = 1
    sockets: int | None = None
    threads: int = 1
    memory_mb: int = 4096
    kubelet: dict[str, Any] = field(default_factory=dict)
    nri: bool = True
    images: tuple[Path, ...] = ()
    """OCI archives imported into the guest's containerd (k8s.io namespace) before the kubelet starts."""
    runtime: matrix.RuntimeChoice = field(default_factory=cluster_runtime)
    """containerd and runc of the node (:func:`cluster_runtime`)."""


def kubelet_configuration(ca: Path, cert: Path, key: Path, overrides: dict[str, Any]) -> dict[str, Any]:
    """The KubeletConfiguration of the test node: a real node's security, cgroupfs, generous timeouts for TCG.

    `cpuManagerPolicy: none` unless overridden; eviction thresholds low (the guest's disks are tmpfs); swap
    tolerated (the guest has none, the check is for hosts).
    """
    config: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "cgroupDriver": "cgroupfs",
        "cpuManagerPolicy": "none",
        "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca)},
        },
        "authorization": {"mode": "Webhook"},
        "tlsCertFile": str(cert),
        "tlsPrivateKeyFile": str(key),
        "failSwapOn": False,
        "runtimeRequestTimeout": "10m",
        "nodeStatusUpdateFrequency": "10s",
        "nodeLeaseDurationSeconds": 120,
        "evictionHard": {"memory.available": "50Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "resolvConf": "",
        "serializeImagePulls": False,
        "maxPods": 30,
    }
    config.update(overrides)
    return config


@dataclass(slots=True)
class GuestNode:
    """The booted guest; `start()` returns once the Node is Ready in the API."""

    plane: ControlPlane
    workdir: Path
    spec: NodeSpec = field(default_factory=NodeSpec)
    kubelet_port: int = field(default_factory=free_port)
    qemu: subprocess.Popen[bytes] | None = None
    frozen_for: float | None = None
    """Seconds the heartbeat had stood still when the watchdog killed the guest; None while it lives."""
    watchdog_poll: float = WATCHDOG_POLL_SECONDS
    _serial: int = 0
    _watch_stop: threading.Event = field(default_factory=threading.Event)

    @property
    def shared(self) -> Path:
        """The directory the guest writes (VM_RW): logs, the command channel."""
        return self.workdir / "shared"

    def logs(self) -> list[Path]:
        """The node's logs for failure messages."""
        return [self.shared / "kubelet.log", self.shared / "containerd.log", self.workdir / "vm.log"]

    def _write_config(self) -> Path:
        shared, pki = self.shared, self.plane.pki
        shared.mkdir(parents=True, exist_ok=True)
        certs = shared / "pki"
        certs.mkdir(exist_ok=True)
        for identity in (pki.ca, pki.kubelet_client, pki.kubelet_serving):
            shutil.copy(identity.cert, certs / identity.cert.name)
            shutil.copy(identity.key, certs / identity.key.name)
        kubeconfig = write_kubeconfig(
            shared / "kubelet.kubeconfig",
            server=f"https://{API_SERVICE_IP}:443",
            ca=certs / "ca.crt",
            user=type(pki.kubelet_client)(cert=certs / "kubelet-client.crt", key=certs / "kubelet-client.key"),
        )
        self.write_kubelet_config(self.spec.kubelet)
        relay = shared / "relay-api"
        relay.write_text(f"#!/bin/sh\ncd {REPO}\nexec {sys.executable} -m tests.cluster.relay {self.plane.api_port}\n")
        relay.chmod(0o755)
        config = {
            "shared": str(shared),
            "vm_dir": str(vm_dir()),
            "modules": str(modules_dir()),
            "node_ip": NODE_IP,
            "gateway": GATEWAY,
            "node_name": NODE_NAME,
            "kubelet": str(build.binary("kubelet", self.plane.version)),
            "kubeconfig": str(kubeconfig),
            "nri": self.spec.nri,
            "images": [str(image) for image in self.spec.images],
            "runtime": self.spec.runtime.name,
            "runtimes_dir": str(matrix.runtimes_dir()),
        }
        path = shared / "node.json"
        path.write_text(json.dumps(config, indent=1))
        return path

    def write_kubelet_config(self, overrides: dict[str, Any]) -> dict[str, Any]:
        """Write the kubelet's configuration file: :func:`kubelet_configuration` with `overrides` (replacing the
        NodeSpec's); the kubelet reads it when it next starts (:meth:`restart_kubelet`). Returns what was written."""
        certs = self.shared / "pki"
        config = kubelet_configuration(
            certs / "ca.crt", certs / "kubelet-serving.crt", certs / "kubelet-serving.key", overrides
        )
        partial = self.shared / "kubelet-config.json.part"
        partial.write_text(json.dumps(config, indent=1))
        partial.rename(self.shared / "kubelet-config.json")
        return config

    def _qemu_env(self) -> dict[str, str]:
        spec = self.spec
        net = (
            f"user,id=n0,restrict=on,net={NETWORK},host={GATEWAY},dns=10.0.0.3,"
            f"hostfwd=tcp:127.0.0.1:{self.kubelet_port}-{NODE_IP}:10250,"
            f"guestfwd=tcp:{API_SERVICE_IP}:443-cmd:{self.shared / 'relay-api'}"
        )
        env = dict(os.environ)
        env.update(
            VM_CPUS=str(spec.cpus),
            VM_NODES=str(spec.numa_nodes),
            VM_SOCKETS=str(spec.sockets or spec.numa_nodes),
            VM_THREADS=str(spec.threads),
            VM_MEM_MB=str(spec.memory_mb),
            VM_RW=str(self.shared),
            VM_TIMEOUT="7200",
            VM_BOOT_TIMEOUT="120",
            VM_CGROUP_ENABLE="+cpu,+cpuset,+memory,+pids,+io,+hugetlb",
            VM_QEMU_OPTS=f"-netdev {net} -device virtio-net-pci,netdev=n0",
            VM_CONSOLE_LOG=str(self.workdir / "console.log"),
        )
        return env

    @property
    def runtime_bin(self) -> Path:
        """The directory of the node's ``containerd``, ``ctr`` and shim (as the guest sees it: the host's root)."""
        return self.spec.runtime.bin_dir(vm_dir(), matrix.runtimes_dir())

    def start(self) -> GuestNode:
        """Boot the guest, wait for the kubelet to register and the Node to be Ready; a guest that froze on the way
        is booted once more (:data:`BOOT_ATTEMPTS`), its first shared directory kept as ``shared-frozen-<n>``.

        Raises:
            NodeFrozenError: every boot froze.
            ClusterError: the guest exited, or the node was not Ready in time.
        """
        matrix.build((self.spec.runtime,))  # a containerd 2.x from its Go module, if not built yet
        precompile_checkout()  # the guest's node and observer import the checkout (tests/vm/bytecode.py)
        for attempt in range(1, BOOT_ATTEMPTS + 1):
            try:
                self._boot()
                return self
            except NodeFrozenError:
                self.stop()
                if attempt == BOOT_ATTEMPTS:
                    raise
                self.shared.rename(self.workdir / f"shared-frozen-{attempt}")
                self.frozen_for = None
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _boot(self) -> None:
        config = self._write_config()
        if self.plane.proxy is not None:
            self.plane.proxy.routes[f"{NODE_IP}:10250"] = self.kubelet_port
        with (self.workdir / "vm.log").open("ab") as log:
            self.qemu = subprocess.Popen(
                [str(RUN_IN_VM), sys.executable, "-m", "tests.cluster.guest_node", str(config)],
                cwd=REPO,
                env=self._qemu_env(),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._watch_stop = threading.Event()
        threading.Thread(
            target=self.watch, args=(self.qemu, self._watch_stop), name="guest-watchdog", daemon=True
        ).start()
        liveness_checks.append(self.check_alive)
        logs = self.logs()
        wait_for(
            "the guest node's containerd and kubelet to start (shared/node-up)",
            self._up,
            timeout=READY_TIMEOUT,
            logs=logs,
            every=2.0,
        )
        wait_for(f"Node {NODE_NAME} to be Ready", self.ready, timeout=READY_TIMEOUT, logs=logs, every=3.0)

    def watch(self, qemu: subprocess.Popen[bytes], stop: threading.Event) -> None:
        """Kill the guest (QEMU's whole session) once its heartbeat has stood still for the stall limit."""
        heartbeat, stall = self.shared / HEARTBEAT_FILE, heartbeat_stall_seconds()
        while not stop.wait(self.watchdog_poll) and qemu.poll() is None:
            try:
                still = time.time() - heartbeat.stat().st_mtime  # the 9p share stamps host time
            except OSError:
                continue  # not booted yet: run-in-vm.sh's boot guard holds
            if still >= stall:
                self.frozen_for = still
                kill_session(qemu.pid)
                return

    def check_alive(self) -> None:
        """Raise :class:`NodeFrozenError` if the watchdog found the guest frozen (every wait calls it).

        Raises:
            NodeFrozenError: with the seconds the heartbeat stood still and where the guest's logs are.
        """
        if self.frozen_for is not None:
            raise NodeFrozenError(
                f"the guest node froze: its heartbeat ({self.shared / HEARTBEAT_FILE}) stood still for "
                f"{self.frozen_for:.0f} s and QEMU was killed (a TCG guest frozen whole; its console: "
                f"{self.workdir / 'console.log'}, its kubelet and containerd: {self.shared})"
            )

    def _up(self) -> bool:
        if self.qemu is not None and self.qemu.poll() is not None:
            raise ClusterError(
                f"the VM exited ({self.qemu.returncode}) before the node was up:\n{tail(self.workdir / 'vm.log')}"
            )
        return (self.shared / "node-up").exists()

    def ready(self) -> bool:
        """Whether the Node's Ready condition is True."""
        result = self.plane.admin.run("get", "node", NODE_NAME, "-o", "json", check=False)
        if result.returncode != 0:
            return False
        conditions = json.loads(result.stdout)["status"].get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def sh(self, *argv: str, timeout: float = 120.0, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run `argv` in the guest (as root, outside any container) through the command channel."""
        self._serial += 1
        commands = self.shared / "cmd"
        commands.mkdir(exist_ok=True)
        request = commands / f"{self._serial:06d}.json"
        partial = request.with_suffix(".part")
        partial.write_text(json.dumps({"argv": list(argv), "timeout": timeout}))
        partial.rename(request)
        answer = request.with_suffix(".out.json")
        wait_for(f"the guest to run {' '.join(argv)}", answer.exists, timeout=timeout + 60, logs=self.logs(), every=0.2)
        result = json.loads(answer.read_text())
        done = subprocess.CompletedProcess(list(argv), result["rc"], result["stdout"], result["stderr"])
        if check and done.returncode != 0:
            raise ClusterError(f"guest: {' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
        return done

    def op(self, operation: str, args: dict[str, Any], *, timeout: float = 120.0) -> dict[str, Any]:
        """Do one of the guest's lifecycle operations (guest_ops.py); returns its JSON answer.

        Raises:
            ClusterError: the guest refused or failed it (its words), or did not answer in time.
        """
        self._serial += 1
        commands = self.shared / "cmd"
        commands.mkdir(exist_ok=True)
        request = commands / f"{self._serial:06d}.json"
        partial = request.with_suffix(".part")
        partial.write_text(json.dumps({"op": operation, "args": args}))
        partial.rename(request)
        answer = request.with_suffix(".out.json")
        wait_for(f"the guest to do {operation}", answer.exists, timeout=timeout + 60, logs=self.logs(), every=0.2)
        result = json.loads(answer.read_text())
        if result["rc"] != 0:
            raise ClusterError(f"guest: {result['stderr'].strip()}")
        answered: dict[str, Any] = json.loads(result["stdout"])
        return answered

    def restart_kubelet(
        self, config: dict[str, Any] | None = None, *, clear_state: bool = False, timeout: float = 300.0
    ) -> dict[str, Any]:
        """Restart the kubelet (its pods keep running), with a new configuration (overrides, as
        :meth:`write_kubelet_config` takes them) if given and its decision checkpoints deleted with `clear_state`
        (guest_ops.KUBELET_STATE_FILES); returns once its healthz answers ``ok``: ``{"pid", "cleared"}``."""
        if config is not None:
            self.write_kubelet_config(config)
        return self.op("restart_kubelet", {"clear_state": clear_state, "timeout_s": timeout}, timeout=timeout)

    def restart_containerd(self) -> int:
        """Restart containerd as a crash does (SIGKILL, then start over the same state); returns its new pid."""
        pid: int = self.op("restart_containerd", {}, timeout=360.0)["pid"]
        return pid

    def start_process(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> int:
        """Start `argv` in the guest as the named process (log: ``shared/<name>.log``); returns its pid."""
        pid: int = self.op("start_process", {"name": name, "argv": argv, "env": env})["pid"]
        return pid

    def stop_process(self, name: str, *, kill: bool = False, timeout: float = 30.0) -> int:
        """SIGTERM the named process (SIGKILL after `timeout` s; at once with `kill`); returns its exit status."""
        code: int = self.op("stop_process", {"name": name, "kill": kill, "timeout_s": timeout}, timeout=timeout + 30)[
            "returncode"
        ]
        return code

    def process_status(self, name: str) -> dict[str, Any]:
        """``{"running", "pid", "runs"}`` of the named process."""
        return self.op("process_status", {"name": name})

    def stop(self) -> None:
        """Ask the guest to stop its kubelet and containerd and power off; kill QEMU if it does not."""
        self._watch_stop.set()
        if self.check_alive in liveness_checks:
            liveness_checks.remove(self.check_alive)
        if self.qemu is None:
            return
        (self.shared / "stop").touch()
        try:
            self.qemu.wait(120)
        except subprocess.TimeoutExpired:
            kill_session(self.qemu.pid)
            self.qemu.wait(30)
        self.qemu = None
