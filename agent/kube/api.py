"""The core/v1 calls podpin makes, through the official client's ``Configuration`` and REST layer.

The generated ``CoreV1Api`` module costs about 22 MiB of resident memory to
import (pydantic annotations on ~400 methods), and the client's ``ApiClient``
under it about 10 MiB (pydantic, its model deserializer), for an agent whose
budget is 60 MiB and which calls a handful of endpoints with plain JSON both
ways. :class:`CoreCalls` sends them through the client's own
``RESTClientObject`` (urllib3 with the configuration's TLS, client
certificates, proxy, retries and keep-alive), authenticates as the
``ApiClient`` does (the configuration's ``auth_settings()``, which refreshes an
expiring token through the loaders' ``refresh_api_key_hook``), quotes path and
query parameters as it does, and raises the client's ``ApiException`` (by
status: ``NotFoundException``, ``ConflictException``...) on a non-2xx answer.
Bodies stay plain dicts: nothing is validated into a model, so a field newer
than the client survives (``docs/design.md``, "Data flow").

Event patches are sent as a strategic merge patch: the generated method's
default content type is JSON Patch, which a real API server rejects for the
object-shaped patch an Event count update is.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from agent import __version__

if TYPE_CHECKING:  # the client is loaded when CoreCalls is built (agent/kube/official.py), not by this face
    from kubernetes.client.configuration import Configuration

__all__ = ["CoreCalls"]

_JSON = "application/json"
_WATCH_ACCEPT = "application/json;stream=watch"
_USER_AGENT = f"podpin/{__version__}"


def _plain(value: Any) -> Any:
    """A request body made of JSON types, as the client's ``ApiClient`` sanitizes one: dates and times as ISO 8601."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, datetime.date):  # datetime.datetime included
        return value.isoformat()
    return value


def _query_value(value: Any) -> str:
    """A query parameter as the client's ``ApiClient`` writes it (booleans lower-case), URL-quoted."""
    return quote(str(value).lower() if isinstance(value, bool) else str(value))


class CoreCalls:
    """``list_pod_for_all_namespaces``, ``read_node``, ``patch_namespaced_pod_status``, and Event create and patch.

    Args:
        configuration: the client's ``Configuration`` (host, credentials, TLS), as
            :func:`agent.kube.client.load_api` loads it.
    """

    def __init__(self, configuration: Configuration) -> None:
        from agent.kube.official import RESTClientObject

        self.configuration = configuration
        self._rest = RESTClientObject(configuration)

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
        """One request: the decoded JSON answer, or with ``preload_content=False`` the open urllib3 response.

        Raises:
            ApiException: a non-2xx answer (the client's subclass for its status), or a TLS failure (status 0).
        """
        config = self.configuration
        for name, value in (path_params or {}).items():
            path = path.replace("{" + name + "}", quote(str(value), safe=config.safe_chars_for_path_param))
        query = list(query or [])
        headers: dict[str, str] = {"Accept": accept, "User-Agent": _USER_AGENT}
        if content_type is not None:
            headers["Content-Type"] = content_type
        auth_settings: Mapping[str, Mapping[str, Any]] = config.auth_settings()  # type: ignore[assignment]
        for auth in auth_settings.values():
            if auth["in"] == "header":
                headers[auth["key"]] = auth["value"]
            elif auth["in"] == "query":
                query.append((auth["key"], auth["value"]))
        url = config.host + path
        if query:
            url += "?" + "&".join(f"{name}={_query_value(value)}" for name, value in query)
        response = self._rest.request(method, url, headers=headers, body=_plain(body), _request_timeout=request_timeout)  # type: ignore[no-untyped-call]
        if not 200 <= response.status <= 299:
            from agent.kube.official import ApiException  # loaded with the REST layer in __init__

            data = response.read()
            raise ApiException.from_response(
                http_resp=response, body=data.decode("utf-8", errors="replace") if data else None, data=None
            )
        if not preload_content:
            return response.response
        data = response.read()
        return json.loads(data) if data else None

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
