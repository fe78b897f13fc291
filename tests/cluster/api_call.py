"""One request to the control plane's API server as a bearer token's holder (or the admin), the answer kept whole.

kubectl folds an API error into a line of stderr; a least-privilege test must tell a 403 from RBAC from a 403 from
an admission policy and from a 422, so it reads the status code and the API server's ``Status`` object itself.
"""

from __future__ import annotations

import http.client
import json
import ssl
from dataclasses import dataclass
from typing import Any

from tests.cluster.controlplane import ControlPlane

__all__ = ["Answer", "call"]

STRATEGIC = "application/strategic-merge-patch+json"
"""What the agent sends its condition as (agent/kube/api.py); the tests' other patches use it too."""


@dataclass(frozen=True, slots=True)
class Answer:
    """The status code and the decoded body (an object, or the API server's ``Status`` on an error)."""

    status: int
    body: dict[str, Any]

    @property
    def message(self) -> str:
        """The ``Status`` message of an error (empty on success)."""
        return str(self.body.get("message", ""))

    def __str__(self) -> str:
        return f"{self.status} {self.message or json.dumps(self.body)[:400]}"


def call(
    plane: ControlPlane,
    method: str,
    path: str,
    *,
    token: str | None = None,
    body: Any = None,
    content_type: str = "application/json",
) -> Answer:
    """`method path` on the API server with `token` as a bearer token, or as the admin (client certificate) without."""
    context = ssl.create_default_context(cafile=str(plane.pki.ca.cert))
    headers = {"Accept": "application/json"}
    if token is None:
        context.load_cert_chain(str(plane.pki.admin.cert), str(plane.pki.admin.key))
    else:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    if data is not None:
        headers["Content-Type"] = content_type
    connection = http.client.HTTPSConnection("127.0.0.1", plane.api_port, context=context, timeout=30)
    try:
        connection.request(method, path, body=data, headers=headers)
        response = connection.getresponse()
        raw = response.read().decode(errors="replace")
    finally:
        connection.close()
    decoded = json.loads(raw) if raw.strip().startswith("{") else {"message": raw}
    return Answer(response.status, decoded)
