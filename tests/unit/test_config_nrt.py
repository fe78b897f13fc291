"""The configuration keys of issue 11: ``nrt`` (enabled, minInterval) and ``podResourcesSocket``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.config import CONFIG_KEYS, ConfigError, config_from_mapping

BASE = {"systemReserved": {"cpu": "1"}}


def test_defaults() -> None:
    """NRT export is off, at most every 5 s when on; the kubelet's default socket."""
    config = config_from_mapping(BASE, env={})
    assert (False, 5.0, Path("/var/lib/kubelet/pod-resources/kubelet.sock")) == (
        config.nrt_enabled,
        config.nrt_min_interval,
        config.pod_resources_socket,
    )
    assert {"nrt", "podResourcesSocket"} <= set(CONFIG_KEYS)


def test_values() -> None:
    """Both keys are read."""
    config = config_from_mapping(
        {**BASE, "nrt": {"enabled": True, "minInterval": "1m"}, "podResourcesSocket": "/k.sock"}, env={}
    )
    assert (True, 60.0, Path("/k.sock")) == (config.nrt_enabled, config.nrt_min_interval, config.pod_resources_socket)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"nrt": True}, "nrt: True is not a map of enabled and minInterval"),
        ({"nrt": {"enable": True}}, "nrt.enable: unknown key (known: enabled, minInterval)"),
        ({"nrt": {"enabled": "yes"}}, "nrt.enabled: 'yes' is not true or false"),
        ({"nrt": {"minInterval": "soon"}}, "nrt.minInterval: 'soon' is not a duration such as \"10s\""),
        ({"podResourcesSocket": 5}, "podResourcesSocket: 5 is not a string"),
    ],
)
def test_bad_values_name_the_key(value: dict[str, Any], message: str) -> None:
    """A bad value stops the agent with the key named."""
    with pytest.raises(ConfigError) as caught:
        config_from_mapping({**BASE, **value}, env={})
    assert str(caught.value).startswith(message)
