"""Runner for ``static_policy_pod_level.json``: more ``AllocatePod`` cases, in ``static_policy.json``'s format.

A case with ``podpin_refuses_pod`` holds a pod no API server accepts: podpin refuses to read it, with that message,
where the kubelet's policy (which never validates) allocates nothing; both leave it unpinned.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent.pods.errors import PodSpecError
from tests.support.vector_runners import static_policy


def run(case: dict[str, Any], group: str | None) -> None:
    """Run one case as ``static_policy.json``'s runner does, or check podpin refuses its pod."""
    refused = case.get("podpin_refuses_pod")
    if refused is None:
        static_policy.run(case, group)
        return
    assert case["expect_assignments"] == {}
    with pytest.raises(PodSpecError) as err:
        static_policy.pod_of(case["pod"])
    assert refused == str(err.value)
