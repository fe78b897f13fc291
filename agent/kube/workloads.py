"""The calls ``podpin uninstall`` makes: a DaemonSet read and deleted, the pods of one listed by label.

Like the NodeResourceTopology calls, an extension of :class:`agent.kube.api.CoreCalls`: the same request path
through the official client's ``ApiClient``, without importing the generated ``AppsV1Api`` module. Errors are the
client's ``ApiException`` with the HTTP status.
"""

from __future__ import annotations

from typing import Any

from agent.kube.api import CoreCalls

__all__ = ["WorkloadCalls"]

_DAEMONSET = "/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}"


class WorkloadCalls(CoreCalls):
    """``read_daemonset``, ``delete_daemonset``, ``list_namespaced_pods``."""

    def read_daemonset(self, namespace: str, name: str, _request_timeout: Any = 10) -> Any:
        """``GET`` of one DaemonSet (apps/v1)."""
        return self._call(
            "GET", _DAEMONSET, path_params={"namespace": namespace, "name": name}, request_timeout=_request_timeout
        )

    def delete_daemonset(self, namespace: str, name: str, _request_timeout: Any = 10) -> Any:
        """``DELETE`` of one DaemonSet; its pods go in the background, as ``kubectl delete`` does."""
        return self._call(
            "DELETE",
            _DAEMONSET,
            path_params={"namespace": namespace, "name": name},
            body={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"},
            content_type="application/json",
            request_timeout=_request_timeout,
        )

    def list_namespaced_pods(self, namespace: str, label_selector: str, _request_timeout: Any = 10) -> Any:
        """``GET /api/v1/namespaces/{namespace}/pods?labelSelector=...``."""
        return self._call(
            "GET",
            "/api/v1/namespaces/{namespace}/pods",
            path_params={"namespace": namespace},
            query=[("labelSelector", label_selector)],
            request_timeout=_request_timeout,
        )
