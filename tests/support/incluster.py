"""A service account as the kubelet mounts it, and the TLS identity of an API server emulator that trusts it.

``podpin run`` in a DaemonSet reads its credentials with the official client's in-cluster loader: a token
and a CA bundle in the service account directory, the server's address in ``KUBERNETES_SERVICE_HOST`` /
``_PORT``, always HTTPS. Tests and benchmarks that want that path (not a kubeconfig file, which loads the
client's kubeconfig loader as well) serve the emulator with :attr:`InCluster.tls` and give the agent
:meth:`InCluster.environ` and :attr:`InCluster.service_account_dir`
(``tests/support/emulated_agent.py``: ``PODPIN_TEST_SERVICE_ACCOUNT_DIR``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.cluster.certs import make_pki

__all__ = ["InCluster", "TOKEN", "in_cluster"]

TOKEN = "service-account-token"
"""The token in the service account directory (the emulator records it in each request's Authorization)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InCluster:
    """The files of one in-cluster setup.

    Attributes:
        tls: the emulator's serving certificate and key (for 127.0.0.1), signed by the CA in the service account.
        service_account_dir: holds ``token`` and ``ca.crt``.
    """

    tls: tuple[Path, Path]
    service_account_dir: Path

    def environ(self, port: int) -> dict[str, str]:
        """The variables the kubelet sets in a pod for the API server at 127.0.0.1:``port``."""
        return {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(port)}


def in_cluster(directory: Path) -> InCluster:
    """Make a CA, the emulator's serving identity and a service account directory under ``directory``."""
    pki = make_pki(directory / "pki", node_name="node-1", node_ip="127.0.0.1", apiserver_ips=("127.0.0.1",))
    account = directory / "serviceaccount"
    account.mkdir(parents=True, exist_ok=True)
    (account / "token").write_text(TOKEN)
    (account / "ca.crt").write_bytes(pki.ca.cert.read_bytes())
    return InCluster(tls=(pki.apiserver.cert, pki.apiserver.key), service_account_dir=account)
