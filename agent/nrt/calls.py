"""The API calls the NodeResourceTopology publisher makes, through the official client's ``ApiClient``.

Like :class:`agent.kube.api.CoreCalls` (which this extends, sharing its
request path and its memory reasons — the generated ``CoreV1Api`` and
``CustomObjectsApi`` modules are not imported): ``GET`` of the Node (for the
ownerReference's uid), and ``GET`` / ``POST`` / ``PUT`` of the cluster-scoped
``noderesourcetopologies.topology.node.k8s.io`` object. ``PUT`` carries the
``resourceVersion`` read before, so a concurrent writer makes it fail with 409
instead of being overwritten blindly. Errors are the client's
``ApiException`` with the HTTP status.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent.kube.api import CoreCalls
from agent.nrt.compute import GROUP, PLURAL, VERSION

__all__ = ["TopologyCalls"]

_JSON = "application/json"
_COLLECTION = f"/apis/{GROUP}/{VERSION}/{PLURAL}"


class TopologyCalls(CoreCalls):
    """``read_topology``, ``create_topology``, ``replace_topology`` (and ``read_node``, :class:`CoreCalls`')."""

    def read_topology(self, name: str, _request_timeout: Any = None) -> Any:
        """``GET .../noderesourcetopologies/{name}``."""
        return self._call("GET", _COLLECTION + "/{name}", path_params={"name": name}, request_timeout=_request_timeout)

    def create_topology(self, body: Mapping[str, Any], _request_timeout: Any = None) -> Any:
        """``POST .../noderesourcetopologies``."""
        return self._call("POST", _COLLECTION, body=dict(body), content_type=_JSON, request_timeout=_request_timeout)

    def replace_topology(self, name: str, body: Mapping[str, Any], _request_timeout: Any = None) -> Any:
        """``PUT .../noderesourcetopologies/{name}`` (the body carries the resourceVersion it replaces)."""
        return self._call(
            "PUT",
            _COLLECTION + "/{name}",
            path_params={"name": name},
            body=dict(body),
            content_type=_JSON,
            request_timeout=_request_timeout,
        )
