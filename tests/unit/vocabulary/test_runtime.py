"""A pod uid as every layer checks it: the cgroup layout, the runtime's annotations, NRI."""

from __future__ import annotations

import pytest

from agent.vocabulary import is_pod_uid


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0f8c3e5a-1b2d-4c6e-8f90-123456789abc", True),
        ("6b86b273ff34fce19d6b804eff5a3f57", True),
        ("0F8C3E5A-1B2D-4C6E-8F90-123456789ABC", False),
        ("0f8c3e5a_1b2d_4c6e_8f90_123456789abc", False),
        ("../../etc", False),
        ("", False),
        (None, False),
    ],
    ids=["uuid", "static-pod-hash", "upper-case", "underscores", "path", "empty", "not-a-string"],
)
def test_pod_uid_forms(text: object, expected: bool) -> None:
    """A lower-case RFC 4122 UUID or a static pod's 32-hex config hash; nothing else names a pod cgroup."""
    assert expected == is_pod_uid(text)
