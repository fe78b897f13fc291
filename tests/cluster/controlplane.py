"""The real cluster's control plane on the host, on 127.0.0.1 only: kine, kube-apiserver, kube-controller-manager
and kube-scheduler, with a real cluster's security (client certificates, Node and RBAC authorization,
NodeRestriction, ServiceAccount tokens) rather than AlwaysAllow.

Addresses. QEMU's user network is given the 10.0.0.0/24 network (`NETWORK`), the same range as the Services
(`--service-cluster-ip-range`), so the `kubernetes` Service's cluster IP 10.0.0.1 is an address the guest
reaches through a QEMU guestfwd to the API server's port on 127.0.0.1: pods and the kubelet use the in-cluster
address without a kube-proxy. The kubelet is at `NODE_IP`:10250, which only the egress proxy (egress.py) maps to
the QEMU hostfwd port.
"""

from __future__ import annotations

import http.client
import json
import ssl
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.cluster import build
from tests.cluster.certs import Identity, Pki, make_pki, write_kubeconfig
from tests.cluster.egress import ConnectProxy, egress_config
from tests.cluster.procs import ClusterError, Proc, free_port, wait_for

__all__ = ["API_SERVICE_IP", "NETWORK", "NODE_IP", "NODE_NAME", "ControlPlane", "Kubectl"]

NETWORK = "10.0.0.0/24"
"""QEMU's user network and the Services' range (see the module docstring)."""
API_SERVICE_IP = "10.0.0.1"
"""The `kubernetes` Service's cluster IP, forwarded by QEMU to the API server."""
NODE_IP = "10.0.0.15"
"""The guest's address on QEMU's user network."""
NODE_NAME = "podpin-node"
KUBECTL = Path(__file__).resolve().parents[2] / ".venv/tools/k8s/bin/kubectl"
START_TIMEOUT = 240.0


@dataclass(frozen=True, slots=True)
class Kubectl:
    """kubectl (from .venv/tools/k8s/bin) with one kubeconfig."""

    kubeconfig: Path

    def run(
        self, *args: str, check: bool = True, timeout: float = 120.0, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl; with `check`, a failure raises ClusterError with its stderr."""
        result = subprocess.run(
            [str(KUBECTL), "--kubeconfig", str(self.kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            input=stdin,
            check=False,
        )
        if check and result.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
        return result

    def json(self, *args: str) -> Any:
        """`kubectl ARGS -o json`, parsed."""
        return json.loads(self.run(*args, "-o", "json").stdout)


@dataclass(slots=True)
class ControlPlane:
    """The control plane's processes, files and ports; `start()` returns when the API server is ready."""

    workdir: Path
    version: str = field(default_factory=build.version)
    kubelet_port: int = 0
    """The 127.0.0.1 port (QEMU hostfwd) that NODE_IP:10250 is mapped to; 0 until a guest exists."""
    api_port: int = field(default_factory=free_port)
    etcd_port: int = field(default_factory=free_port)
    pki: Pki = field(init=False)
    procs: list[Proc] = field(default_factory=list)
    proxy: ConnectProxy | None = None

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.pki = make_pki(
            self.workdir / "pki", node_name=NODE_NAME, node_ip=NODE_IP, apiserver_ips=("127.0.0.1", API_SERVICE_IP)
        )

    @property
    def server(self) -> str:
        """The API server's URL on the host."""
        return f"https://127.0.0.1:{self.api_port}"

    def kubeconfig(self, name: str, user: Identity, server: str | None = None) -> Path:
        """A kubeconfig file for `user` (written once per name)."""
        return write_kubeconfig(
            self.workdir / f"{name}.kubeconfig", server=server or self.server, ca=self.pki.ca.cert, user=user
        )

    @property
    def admin(self) -> Kubectl:
        """kubectl as the cluster's administrator (system:masters)."""
        return Kubectl(self.kubeconfig("admin", self.pki.admin))

    def logs(self) -> list[Path]:
        """The components' logs (for failure messages)."""
        return [proc.log for proc in self.procs]

    def _proc(self, name: str, *argv: str) -> Proc:
        proc = Proc(
            name=name,
            argv=[str(build.binary(name, self.version)), *argv],
            log=self.workdir / f"{name}.log",
            cwd=self.workdir,
        )
        self.procs.append(proc.start())
        return proc

    def start(self) -> ControlPlane:
        """Start kine, the egress proxy, the API server, the controller manager and the scheduler; wait until ready."""
        pki, w = self.pki, self.workdir
        self._proc(
            "kine",
            f"--listen-address=127.0.0.1:{self.etcd_port}",
            "--metrics-bind-address=0",
            f"--endpoint=sqlite://{w}/kine.db?_journal=WAL&cache=shared&_busy_timeout=30000",
        )
        self.proxy = ConnectProxy(
            w / "egress.sock", {f"{NODE_IP}:10250": self.kubelet_port} if self.kubelet_port else {}
        ).start()
        (w / "egress.yaml").write_text(egress_config(w / "egress.sock"))
        self._proc(
            "kube-apiserver",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.api_port}",
            f"--advertise-address={API_SERVICE_IP}",
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            f"--tls-cert-file={pki.apiserver.cert}",
            f"--tls-private-key-file={pki.apiserver.key}",
            f"--client-ca-file={pki.ca.cert}",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki.service_account_pub}",
            f"--service-account-signing-key-file={pki.service_account_key}",
            f"--service-cluster-ip-range={NETWORK}",
            "--endpoint-reconciler-type=none",
            f"--kubelet-client-certificate={pki.apiserver_kubelet_client.cert}",
            f"--kubelet-client-key={pki.apiserver_kubelet_client.key}",
            f"--kubelet-certificate-authority={pki.ca.cert}",
            "--kubelet-preferred-address-types=InternalIP",
            f"--egress-selector-config-file={w / 'egress.yaml'}",
            "--allow-privileged=true",
            "--profiling=false",
            "--event-ttl=1h",
        )
        wait_for("kube-apiserver /readyz", self._ready, timeout=START_TIMEOUT, logs=self.logs(), every=2.0)
        self._proc(
            "kube-controller-manager",
            f"--kubeconfig={self.kubeconfig('controller-manager', pki.controller_manager)}",
            "--bind-address=127.0.0.1",
            "--secure-port=0",
            "--leader-elect=false",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki.service_account_key}",
            f"--root-ca-file={pki.ca.cert}",
            f"--cluster-signing-cert-file={pki.ca.cert}",
            f"--cluster-signing-key-file={pki.ca.key}",
            "--profiling=false",
        )
        self._proc(
            "kube-scheduler",
            f"--kubeconfig={self.kubeconfig('scheduler', pki.scheduler)}",
            "--bind-address=127.0.0.1",
            "--secure-port=0",
            "--leader-elect=false",
            "--profiling=false",
        )
        return self

    def _ready(self) -> bool:
        return self.get("/readyz")[0] == 200

    def get(self, path: str, user: Identity | None = None) -> tuple[int, str]:
        """GET `path` on the API server as `user` (the admin by default): status and body."""
        ident = user or self.pki.admin
        context = ssl.create_default_context(cafile=str(self.pki.ca.cert))
        context.load_cert_chain(str(ident.cert), str(ident.key))
        connection = http.client.HTTPSConnection("127.0.0.1", self.api_port, context=context, timeout=10)
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            return response.status, response.read().decode(errors="replace")
        finally:
            connection.close()

    def stop(self) -> None:
        """Stop every process (reverse order) and the proxy."""
        for proc in reversed(self.procs):
            proc.stop()
        if self.proxy is not None:
            self.proxy.close()
            self.proxy = None

    def __enter__(self) -> ControlPlane:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
