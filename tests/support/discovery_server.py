"""An API server that answers only discovery, for ``kubectl apply --dry-run=client`` on 127.0.0.1.

kubectl maps every object's apiVersion and kind to a REST resource through the server's discovery documents
(``/api``, ``/api/v1``, ``/apis``, ``/apis/<group>/<version>``), even in client dry-run, and ``apply`` then GETs
each object to compute its patch. This server lists the resources of the kinds podpin ships (with their real
resource names and scopes, as the kube-apiserver and the Prometheus Operator's CRDs publish them) and answers every
object GET with 404 NotFound, so kubectl reports each object as "created (dry run)". A kind it does not list fails
as it would on a real cluster: "no matches for kind". It stores nothing and accepts no write.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["RESOURCES", "discovery_server", "kubeconfig_for"]

_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]

#: group/version -> (resource name, kind, namespaced) of every kind this server knows.
RESOURCES: dict[str, tuple[tuple[str, str, bool], ...]] = {
    "v1": (
        ("namespaces", "Namespace", False),
        ("serviceaccounts", "ServiceAccount", True),
        ("configmaps", "ConfigMap", True),
        ("secrets", "Secret", True),
        ("services", "Service", True),
        ("resourcequotas", "ResourceQuota", True),
        ("pods", "Pod", True),
    ),
    "apps/v1": (("daemonsets", "DaemonSet", True),),
    "batch/v1": (("jobs", "Job", True),),
    "rbac.authorization.k8s.io/v1": (
        ("clusterroles", "ClusterRole", False),
        ("clusterrolebindings", "ClusterRoleBinding", False),
        ("roles", "Role", True),
        ("rolebindings", "RoleBinding", True),
    ),
    "networking.k8s.io/v1": (("networkpolicies", "NetworkPolicy", True),),
    "admissionregistration.k8s.io/v1": (
        ("validatingadmissionpolicies", "ValidatingAdmissionPolicy", False),
        ("validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding", False),
    ),
    "apiextensions.k8s.io/v1": (("customresourcedefinitions", "CustomResourceDefinition", False),),
    "monitoring.coreos.com/v1": (
        ("servicemonitors", "ServiceMonitor", True),
        ("podmonitors", "PodMonitor", True),
        ("prometheusrules", "PrometheusRule", True),
    ),
}


def _resource_list(group_version: str) -> dict[str, Any]:
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": [
            {"name": name, "singularName": kind.lower(), "namespaced": namespaced, "kind": kind, "verbs": _VERBS}
            for name, kind, namespaced in RESOURCES[group_version]
        ],
    }


def _group_list() -> dict[str, Any]:
    groups = []
    for group_version in RESOURCES:
        if "/" not in group_version:
            continue
        name, version = group_version.split("/")
        entry = {"groupVersion": group_version, "version": version}
        groups.append({"name": name, "versions": [entry], "preferredVersion": entry})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


class _Handler(BaseHTTPRequestHandler):
    server: ThreadingHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: pytest shows failures, not every request."""

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        port = self.server.server_address[1]
        body: dict[str, Any]
        if path == "/api":
            address = {"clientCIDR": "0.0.0.0/0", "serverAddress": f"127.0.0.1:{port}"}
            body = {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [address]}
        elif path == "/api/v1":
            body = _resource_list("v1")
        elif path == "/apis":
            body = _group_list()
        elif path.startswith("/apis/") and path.removeprefix("/apis/") in RESOURCES:
            body = _resource_list(path.removeprefix("/apis/"))
        elif path == "/version":
            body = {"major": "1", "minor": "36", "gitVersion": "v1.36.0", "platform": "linux/amd64"}
        else:
            self._send(
                404,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "reason": "NotFound",
                    "message": f"{path} not found",
                    "code": 404,
                },
            )
            return
        self._send(200, body)

    def _send(self, status: int, body: dict[str, Any]) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


@contextmanager
def discovery_server() -> Iterator[str]:
    """Serve discovery on 127.0.0.1 (a free port); yields the server's URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, name="discovery-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def kubeconfig_for(url: str, path: Path) -> Path:
    """Write a kubeconfig whose current context is the server at ``url`` (no credentials); returns its path."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "discovery", "cluster": {"server": url}}],
        "users": [{"name": "nobody", "user": {}}],
        "contexts": [{"name": "discovery", "context": {"cluster": "discovery", "user": "nobody"}}],
        "current-context": "discovery",
    }
    path.write_text(json.dumps(config))
    return path
