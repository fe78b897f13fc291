"""The real cluster's PKI: one CA, the serving and client certificates, the service-account keys, kubeconfigs.

Made with `cryptography` in a directory of the test's own (never a machine-wide path). Identities follow what
the API server's Node and RBAC authorizers expect: the admin in `system:masters`, the controller manager and the
scheduler by their `system:kube-*` user names, the kubelet as `system:node:<name>` in `system:nodes` (the Node
authorizer and NodeRestriction key on exactly that), the API server's kubelet client in `system:masters`.
EC P-256 keys keep the generation fast on a loaded machine.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Identity", "Pki", "make_pki", "write_kubeconfig"]

_VALID = datetime.timedelta(days=2)


@dataclass(frozen=True, slots=True, kw_only=True)
class Identity:
    """A certificate and its key on disk."""

    cert: Path
    key: Path


@dataclass(frozen=True, slots=True, kw_only=True)
class Pki:
    """Every file the control plane and the kubelet are started with."""

    ca: Identity
    apiserver: Identity
    apiserver_kubelet_client: Identity
    admin: Identity
    controller_manager: Identity
    scheduler: Identity
    kubelet_client: Identity
    kubelet_serving: Identity
    service_account_key: Path
    service_account_pub: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    parts = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in orgs]
    return x509.Name([*parts, x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _write(directory: Path, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> Identity:
    identity = Identity(cert=directory / f"{stem}.crt", key=directory / f"{stem}.key")
    identity.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    identity.key.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    identity.key.chmod(0o600)
    return identity


def _issue(
    *,
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None,
    usage: tuple[x509.ObjectIdentifier, ...] = (),
    dns: tuple[str, ...] = (),
    ips: tuple[str, ...] = (),
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    issuer_name, issuer_key = issuer or (subject, key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALID)
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if issuer is None:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    else:
        builder = builder.add_extension(x509.ExtendedKeyUsage(list(usage)), critical=False)
    names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key if issuer else key, hashes.SHA256())


def make_pki(directory: Path, *, node_name: str, node_ip: str, apiserver_ips: tuple[str, ...]) -> Pki:
    """Create the CA and every identity in `directory`.

    Args:
        directory: where the files go (created).
        node_name: the kubelet's node name (its client certificate's `system:node:<name>`).
        node_ip: the node's address, in the kubelet's serving certificate (the API server checks it).
        apiserver_ips: the addresses clients reach the API server at (127.0.0.1, the guest's forward, the
            `kubernetes` Service's cluster IP).
    """
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca_name = _name("podpin-test-ca")
    ca_cert = _issue(subject=ca_name, key=ca_key, issuer=None)
    ca = _write(directory, "ca", ca_cert, ca_key)
    signer = (ca_name, ca_key)
    server, client = (ExtendedKeyUsageOID.SERVER_AUTH,), (ExtendedKeyUsageOID.CLIENT_AUTH,)

    def leaf(
        stem: str, subject: x509.Name, usage: tuple[x509.ObjectIdentifier, ...], **sans: tuple[str, ...]
    ) -> Identity:
        key = _key()
        return _write(directory, stem, _issue(subject=subject, key=key, issuer=signer, usage=usage, **sans), key)

    service_dns = (
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    )
    sa_key = _key()
    sa_private, sa_public = directory / "sa.key", directory / "sa.pub"
    sa_private.write_bytes(
        sa_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    sa_private.chmod(0o600)
    sa_public.write_bytes(
        sa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return Pki(
        ca=ca,
        apiserver=leaf("apiserver", _name("kube-apiserver"), server, dns=service_dns, ips=apiserver_ips),
        apiserver_kubelet_client=leaf(
            "apiserver-kubelet-client", _name("kube-apiserver-kubelet-client", ("system:masters",)), client
        ),
        admin=leaf("admin", _name("kubernetes-admin", ("system:masters",)), client),
        controller_manager=leaf("controller-manager", _name("system:kube-controller-manager"), client),
        scheduler=leaf("scheduler", _name("system:kube-scheduler"), client),
        kubelet_client=leaf("kubelet-client", _name(f"system:node:{node_name}", ("system:nodes",)), client),
        kubelet_serving=leaf("kubelet-serving", _name(node_name), server, dns=(node_name,), ips=(node_ip,)),
        service_account_key=sa_private,
        service_account_pub=sa_public,
    )


def write_kubeconfig(path: Path, *, server: str, ca: Path, user: Identity, name: str = "podpin-test") -> Path:
    """A kubeconfig for `user` at `server`, naming the files (so the guest reads them over its 9p view)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": name, "user": {"client-certificate": str(user.cert), "client-key": str(user.key)}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path
