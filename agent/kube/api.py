"""The core/v1 calls podpin makes, through the official client's ``ApiClient``.

The generated ``CoreV1Api`` module costs about 22 MiB of resident memory to
import (pydantic annotations on ~400 methods) for an agent whose budget is
60 MiB, and podpin calls a handful of its methods. :class:`CoreCalls` builds the
same requests with the same ``ApiClient`` machinery the generated methods use
(``param_serialize``, ``call_api``, ``response_deserialize``, the legacy
``ApiException`` on a non-2xx status), so authentication, urllib3, retries and
errors are the official client's, and ``kubernetes.watch.Watch`` streams
:meth:`CoreCalls.list_pod_for_all_namespaces` exactly as it streams the
generated method.

Event patches are sent as a strategic merge patch: the generated method's
default content type is JSON Patch, which a real API server rejects for the
object-shaped patch an Event count update is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the client is loaded by whoever builds one (agent/kube/client.py), not by this face
    from kubernetes.client.api_client import ApiClient

__all__ = ["CoreCalls"]

_JSON = "application/json"
_WATCH_ACCEPT = "application/json;stream=watch"
_AUTH = ["BearerToken"]


class CoreCalls:
    """``list_pod_for_all_namespaces``, ``read_node``, ``patch_namespaced_pod_status``, and Event create and patch."""

    def __init__(self, api_client: ApiClient) -> None:
        self.api_client = api_client

    def _call(
        self,
        method: str,
        path: str,
        *,
        path_params: Mapping[str, str] | None = None,
        query: list[tuple[str, Any]] | None = None,
        body: Any = None,
        content_type: str | None = None,
        accept: str = _JSON,
        preload_content: bool = True,
        request_timeout: Any = None,
    ) -> Any:
        headers: dict[str, str | None] = {"Accept": accept}
        if content_type is not None:
            headers["Content-Type"] = content_type
        request = self.api_client.param_serialize(
            method=method,
            resource_path=path,
            path_params=dict(path_params or {}),
            query_params=list(query or []),
            header_params=headers,
            body=body,
            post_params=[],
            files={},
            auth_settings=_AUTH,
            collection_formats={},
        )
        # The generated methods' own path; the client offers no public call taking a prepared request.
        return self.api_client._call_with_legacy_options(  # noqa: SLF001
            request, {"200": "object", "201": "object"}, None, preload_content, request_timeout, True
        )

    def list_pod_for_all_namespaces(
        self,
        *,
        field_selector: str | None = None,
        resource_version: str | None = None,
        allow_watch_bookmarks: bool | None = None,
        timeout_seconds: int | None = None,
        watch: bool | None = None,
        _preload_content: bool = True,
        _request_timeout: Any = None,
    ) -> Any:
        """``GET /api/v1/pods``: the raw response with ``_preload_content=False`` (as lists and watches use it).

        :return: object
        """
        query: list[tuple[str, Any]] = []
        for name, value in (
            ("allowWatchBookmarks", allow_watch_bookmarks),
            ("fieldSelector", field_selector),
            ("resourceVersion", resource_version),
            ("timeoutSeconds", timeout_seconds),
            ("watch", watch),
        ):
            if value is not None:
                query.append((name, value))
        return self._call(
            "GET",
            "/api/v1/pods",
            query=query,
            accept=_WATCH_ACCEPT if watch else _JSON,
            preload_content=_preload_content,
            request_timeout=_request_timeout,
        )

    def read_node(self, name: str, _request_timeout: Any = None) -> Any:
        """``GET /api/v1/nodes/{name}`` (its labels choose the configuration's group section; NRT's owner uid)."""
        return self._call("GET", "/api/v1/nodes/{name}", path_params={"name": name}, request_timeout=_request_timeout)

    def patch_namespaced_pod_status(
        self, name: str, namespace: str, body: Mapping[str, Any], _request_timeout: Any = None
    ) -> Any:
        """``PATCH /api/v1/namespaces/{namespace}/pods/{name}/status`` (strategic merge patch: a condition is merged
        into ``status.conditions`` by its ``type``, the others stay)."""
        return self._merge_patch(
            "/api/v1/namespaces/{namespace}/pods/{name}/status", namespace, name, body, _request_timeout
        )

    def create_namespaced_event(self, namespace: str, body: Mapping[str, Any], _request_timeout: Any = None) -> Any:
        """``POST /api/v1/namespaces/{namespace}/events``."""
        return self._call(
            "POST",
            "/api/v1/namespaces/{namespace}/events",
            path_params={"namespace": namespace},
            body=dict(body),
            content_type=_JSON,
            request_timeout=_request_timeout,
        )

    def patch_namespaced_event(
        self, name: str, namespace: str, body: Mapping[str, Any], _request_timeout: Any = None
    ) -> Any:
        """``PATCH /api/v1/namespaces/{namespace}/events/{name}`` (strategic merge patch)."""
        return self._merge_patch(
            "/api/v1/namespaces/{namespace}/events/{name}", namespace, name, body, _request_timeout
        )

    def _merge_patch(self, path: str, namespace: str, name: str, body: Mapping[str, Any], request_timeout: Any) -> Any:
        """A strategic merge patch of one namespaced object (the generated methods' default is JSON Patch)."""
        return self._call(
            "PATCH",
            path,
            path_params={"namespace": namespace, "name": name},
            body=dict(body),
            content_type="application/strategic-merge-patch+json",
            request_timeout=request_timeout,
        )
