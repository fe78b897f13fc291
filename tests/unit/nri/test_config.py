"""The ``nri`` configuration section: defaults and errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.nri import NRIConfig, NRIConfigError, nri_config_from_mapping


def test_defaults() -> None:
    """Without a section, NRI is on, the socket is containerd's and CRI-O's default, a pod is waited for 0.5 s."""
    expected = NRIConfig(enabled=True, socket_path=Path("/var/run/nri/nri.sock"), pod_wait=0.5)
    assert expected == nri_config_from_mapping(None)
    assert nri_config_from_mapping(None) == nri_config_from_mapping({})


def test_values_are_taken() -> None:
    """Every key is read."""
    expected = NRIConfig(enabled=False, socket_path=Path("/run/nri/other.sock"), pod_wait=0.25)
    assert expected == nri_config_from_mapping(
        {"enabled": False, "socketPath": "/run/nri/other.sock", "podWaitTimeout": "250ms"}
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([], "nri: [] is not a map with the keys enabled, socketPath, podWaitTimeout"),
        ({"socketpath": "/x"}, "nri.socketpath: unknown key (known keys: enabled, socketPath, podWaitTimeout)"),
        ({"enabled": "yes"}, "nri.enabled: 'yes' is not true or false"),
        ({"socketPath": 7}, "nri.socketPath: 7 is not a path"),
        ({"socketPath": "run/nri.sock"}, "nri.socketPath: 'run/nri.sock' is not an absolute path"),
        (
            {"podWaitTimeout": "2s"},
            "nri.podWaitTimeout: '2s' is not a duration between 0s and 800ms such as \"500ms\"",
        ),
        (
            {"podWaitTimeout": 1},
            'nri.podWaitTimeout: 1 is not a duration between 0s and 800ms such as "500ms"',
        ),
        (
            {"socketPath": "/" + "x" * 120},
            f"nri.socketPath: {'/' + 'x' * 120!r} is not usable as a unix socket path (at most 107 bytes)",
        ),
    ],
)
def test_bad_values_name_the_key(value: object, message: str) -> None:
    """A bad section stops the agent with the key named."""
    with pytest.raises(NRIConfigError) as raised:
        nri_config_from_mapping(value)  # type: ignore[arg-type]
    assert message == str(raised.value)
