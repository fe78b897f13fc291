"""Who a cgroup belongs to, in the words the cgroup layout, the runtime readers and NRI share.

A container runtime (:class:`Runtime`, named by its ``containerID`` scheme) and
a pod's uid (:data:`PodUID`, checked by :func:`is_pod_uid`). They live below
``cgroups``, ``runtime`` and ``nri`` so that none of those imports another for a
word.
"""

from __future__ import annotations

import re
from enum import StrEnum

__all__ = ["POD_UID_FORMS", "PodUID", "Runtime", "is_pod_uid"]

PodUID = str
"""A pod's ``metadata.uid``: an RFC 4122 UUID in lower-case hex, ``-`` separated."""

POD_UID_FORMS = "an RFC 4122 UUID in lower-case hex (8-4-4-4-12) or a static pod's 32-hex config hash"
"""What a pod uid may look like, as error messages say it."""

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
#: A static pod's uid in the kubelet: the 32-hex hash of its manifest (cgroups are named after it).
_CONFIG_HASH = re.compile(r"[0-9a-f]{32}")


class Runtime(StrEnum):
    """A container runtime, named by its ``containerID`` scheme."""

    CONTAINERD = "containerd"
    CRIO = "cri-o"
    DOCKER = "docker"


def is_pod_uid(text: object) -> bool:
    """Whether ``text`` can name a pod cgroup: a lower-case RFC 4122 UUID, or a static pod's 32-hex config hash."""
    return isinstance(text, str) and bool(_UUID.fullmatch(text) or _CONFIG_HASH.fullmatch(text))
