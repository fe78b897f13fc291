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

import json
from collections.abc import Mapping
from typing import Any

from agent.kube import CoreCalls
from agent.nrt.compute import GROUP, PLURAL, VERSION

__all__ = ["TopologyCalls"]

_JSON = "application/json"
_APPLY = "application/apply-patch+yaml"
_COLLECTION = f"/apis/{GROUP}/{VERSION}/{PLURAL}"


class TopologyCalls(CoreCalls):
    """``read_topology``, ``apply_topology`` (``create_topology`` and ``replace_topology`` for tests playing another
    writer), and ``read_node`` (:class:`CoreCalls`')."""

    def read_topology(self, name: str, _request_timeout: Any = None) -> Any:
        """``GET .../noderesourcetopologies/{name}``."""
        return self._call("GET", _COLLECTION + "/{name}", path_params={"name": name}, request_timeout=_request_timeout)

    def apply_topology(
        self, name: str, body: Mapping[str, Any], *, field_manager: str, force: bool, _request_timeout: Any = None
    ) -> Any:
        """Server-side apply of ``.../noderesourcetopologies/{name}`` (creates it when missing)."""
        return self._call(
            "PATCH",
            _COLLECTION + "/{name}",
            path_params={"name": name},
            query=[("fieldManager", field_manager), ("force", "true" if force else "false")],
            body=json.dumps(dict(body)),
            content_type=_APPLY,
            request_timeout=_request_timeout,
        )

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
