"""Following configuration changes while the agent runs: live where nothing moves, a restart named where needed.

The ConfigMap is mounted as a volume, so an edit reaches the file within a minute or so, and a node relabelled
into another group changes its sections. :class:`ConfigFollower` looks again at most once per ``reconcilePeriod``
(the file: size, time and content; the node's labels: once per ``podResyncPeriod``, and only when the file has
group sections), makes the node's configuration again as at start (``agent/node_config.py``) and compares it key
by key with the one the agent runs with:

* a key of :data:`agent.config.LIVE_KEYS` (``reconcilePeriod``, ``deviceWaitTimeout``) is applied at once: the
  runner sets it where it is used, and no running pod's CPUs move;
* any other key (a policy, a reservation, a path, an address, the log level ...) is reported once per change as
  ``config.restart_needed`` naming the keys, and ``podpin_config_restart_needed`` is 1 until the agent restarts
  (the chart rolls the agents itself when such a key changes in its values);
* a file that no longer loads (or a kubelet refusal) changes nothing: ``config.invalid`` says why, and the agent
  goes on with what it has.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agent.config import CONFIG_KEYS, LIVE_KEYS, AgentConfig, ConfigError, ConfigKey
from agent.kubelet_config import KubeletConfig, read_kubelet_config
from agent.node_config import LabelReader, NodeConfig, node_config

__all__ = ["ConfigChange", "ConfigFollower", "changed_keys"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigChange:
    """What a new look at the configuration found.

    Attributes:
        made: the node's new configuration (None when it does not load: see ``error``).
        live: the changed keys applied at once.
        restart: the keys newly waiting for a restart (:attr:`ConfigFollower.pending_restart` has them all).
        error: why the new configuration was not taken.
    """

    made: NodeConfig | None
    live: tuple[str, ...] = ()
    restart: tuple[str, ...] = ()
    error: str | None = None


def _value(config: AgentConfig, entry: ConfigKey) -> Any:
    section, _, name = entry.field.rpartition(".")
    return getattr(config.planner if section == "planner" else config, name)


def changed_keys(old: AgentConfig, new: AgentConfig) -> tuple[str, ...]:
    """The configuration keys whose values differ (the node's group counts as a key, ``groups``)."""
    changed = [entry.key for entry in CONFIG_KEYS if _value(old, entry) != _value(new, entry)]
    if old.group != new.group:
        changed.append("groups")
    return tuple(changed)


def _signature(path: Path | None) -> tuple[int, int, int, int] | None:
    """What tells a changed file without reading it: device, inode, size and modification time."""
    if path is None:
        return None
    try:
        status = os.stat(path)
    except OSError:
        return None
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)


class ConfigFollower:
    """Looks at the configuration again when asked, at most as often as its periods allow (module docstring).

    Args:
        path: the configuration file (None: the built-in defaults; only the kubelet's file can change then).
        current: the configuration the agent started with.
        env: the environment for ``NODE_NAME``.
        labels_of: reads the node's labels, or None without an API server.
        read_kubelet: reads the kubelet's configuration file.
        adjust: what the agent does to a configuration it loads (the ``podpin run`` flags that override keys).
        clock: monotonic seconds.
    """

    def __init__(
        self,
        path: Path | None,
        current: NodeConfig,
        *,
        env: Mapping[str, str] | None = None,
        labels_of: LabelReader | None = None,
        read_kubelet: Callable[[Path], KubeletConfig | None] = read_kubelet_config,
        adjust: Callable[[AgentConfig], AgentConfig] = lambda config: config,
        clock: Callable[[], float],
    ) -> None:
        self.path = path
        self._adjust = adjust
        self.current = current
        self._env = env
        self._labels_of = labels_of
        self._read_kubelet = read_kubelet
        self._clock = clock
        self._signature = _signature(path)
        self._last_look = clock()
        self._last_labels = clock()
        self._error: str | None = None
        self.pending_restart: tuple[str, ...] = ()

    def _labels_due(self, now: float) -> bool:
        return self._labels_of is not None and now - self._last_labels >= self.current.config.pod_resync_period

    def look(self) -> ConfigChange | None:
        """A change worth reporting since the last look, or None (nothing changed, not due yet, said already)."""
        now = self._clock()
        if now - self._last_look < self.current.config.reconcile_period:
            return None
        self._last_look = now
        signature = _signature(self.path)
        labels_due = self._labels_due(now)
        if signature == self._signature and not labels_due:
            return None
        self._signature = signature
        if labels_due:
            self._last_labels = now
        try:
            made = node_config(self.path, env=self._env, labels_of=self._labels_of, read_kubelet=self._read_kubelet)
        except (ConfigError, OSError) as err:
            if str(err) == self._error:  # said already
                return None
            self._error = str(err)
            return ConfigChange(made=None, error=self._error)
        self._error = None
        made = replace(made, config=self._adjust(made.config))
        changed = changed_keys(self.current.config, made.config)
        live = tuple(key for key in changed if key in LIVE_KEYS)
        # The running configuration keeps every other key as it started, so these are all that wait for a restart
        # (a key changed back drops out).
        pending = tuple(key for key in changed if key not in LIVE_KEYS)
        restart = tuple(key for key in pending if key not in self.pending_restart)
        self.current = NodeConfig(
            config=_with_live(self.current.config, made.config, live), events=made.events, raw=made.raw
        )
        if not live and pending == self.pending_restart:
            return None
        self.pending_restart = pending
        return ConfigChange(made=made, live=live, restart=restart)


def _with_live(running: AgentConfig, new: AgentConfig, live: tuple[str, ...]) -> AgentConfig:
    """``running`` with the live keys' values of ``new`` (the rest stays as the agent started)."""
    changes = {}
    for entry in CONFIG_KEYS:
        if entry.key in live and not entry.field.startswith("planner."):
            changes[entry.field] = getattr(new, entry.field)
    return replace(running, **changes)
