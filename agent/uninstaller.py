"""``podpin uninstall``: the agents stop, every node they served is reset, and only then does podpin go.

Run by the chart's ``pre-delete`` hook Job (``deploy/helm/podpin/templates/uninstall-hook.yaml``; the plain
manifests' ``deploy/uninstall/``), next to the reset DaemonSet the same hook created: one pod per opted-in node
whose init container waits for the node's agent to stop (``podpin reset --wait-for-agent``), gives the node back
what podpin changed, and whose container then holds the node's lock (``--hold``) so no agent starts there again.
This command makes that happen in order and waits for it:

1. the reset DaemonSet must exist (else nothing would restore the nodes: exit 2, nothing deleted);
2. the agents' DaemonSet is deleted (already gone is fine: a second ``helm uninstall``);
3. the reset DaemonSet's status is read every few seconds until every node's reset pod is ready (its reset
   succeeded) and the controller has seen the current spec;
4. then exit 0, and Helm deletes the hooks (the holds end: the agents are gone) and the rest of the release.

A node whose reset does not finish within ``--timeout`` is named with what its pod shows (exit 1); Helm then
stops the uninstall, the reset pods stay and say why in their ``reset`` logs, and ``helm uninstall`` can be run
again once the node is fixed. The decisions are plain functions of the DaemonSet and pod objects; the shell
only calls the API server (``agent/kube/workloads.py``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

__all__ = ["CANNOT_START", "DONE", "NOT_RESTORED", "Progress", "progress_of", "uninstall", "waiting_pods"]

#: Exit statuses.
DONE, NOT_RESTORED, CANNOT_START = 0, 1, 2


@dataclass(frozen=True, slots=True, kw_only=True)
class Progress:
    """Where the resets stand: nodes to reset, resets done, and whether the controller has caught up."""

    desired: int
    ready: int
    current: bool

    @property
    def done(self) -> bool:
        """Every node's reset succeeded (none to do counts)."""
        return self.current and self.ready >= self.desired


def progress_of(daemonset: Mapping[str, Any]) -> Progress:
    """The resets' progress from their DaemonSet's status."""
    status = daemonset.get("status") or {}
    generation = (daemonset.get("metadata") or {}).get("generation") or 0
    desired = int(status.get("desiredNumberScheduled") or 0)
    current = (
        int(status.get("observedGeneration") or -1) >= int(generation)
        and int(status.get("updatedNumberScheduled") or 0) >= desired
    )
    return Progress(desired=desired, ready=int(status.get("numberReady") or 0), current=current)


def waiting_pods(pods: Iterable[Mapping[str, Any]]) -> list[str]:
    """One line per reset pod not ready yet: its node and what it shows (waiting reason, last exit)."""
    found = []
    for pod in pods:
        status = pod.get("status") or {}
        conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        if conditions.get("Ready") == "True":
            continue
        node = (pod.get("spec") or {}).get("nodeName") or "(not scheduled)"
        states = []
        for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
            state = container.get("state") or {}
            waiting = (state.get("waiting") or {}).get("reason")
            last = (container.get("lastState") or {}).get("terminated") or {}
            if waiting or last:
                exit_code = f", last exit {last.get('exitCode')}" if last else ""
                states.append(f"{container.get('name')}: {waiting or 'running'}{exit_code}")
        name = (pod.get("metadata") or {}).get("name")
        what = "; ".join(states) or status.get("phase") or "pending"
        found.append(f"node {node}: pod {name} not ready ({what}); see kubectl logs {name} -c reset")
    return sorted(found)


def _status(err: Exception) -> int | None:
    status = getattr(err, "status", None)
    return status if isinstance(status, int) else None


def uninstall(
    calls: Any,
    *,
    namespace: str,
    agents: str,
    resets: str,
    timeout: float,
    poll: float = 5.0,
    out: TextIO | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Stop the agents and wait for every node's reset (module docstring); returns the exit status."""
    out = out if out is not None else sys.stdout
    try:
        reset_set = calls.read_daemonset(namespace, resets)
    except Exception as err:  # the client's ApiException, or no connection
        print(f"podpin uninstall: cannot read the reset DaemonSet {namespace}/{resets}: {_one_line(err)}", file=out)
        return CANNOT_START
    try:
        calls.delete_daemonset(namespace, agents)
        print(
            f"deleted the agents' DaemonSet {namespace}/{agents}: each node's reset runs once its agent stopped",
            file=out,
        )
    except Exception as err:
        if _status(err) != 404:
            print(
                f"podpin uninstall: cannot delete the agents' DaemonSet {namespace}/{agents}: {_one_line(err)}",
                file=out,
            )
            return CANNOT_START
        print(f"the agents' DaemonSet {namespace}/{agents} is gone already", file=out)
    deadline = clock() + timeout
    said: Progress | None = None
    while True:
        progress = progress_of(reset_set)
        if progress != said:
            print(f"nodes reset: {progress.ready} of {progress.desired}", file=out, flush=True)
            said = progress
        if progress.done:
            print(f"every node podpin served is restored ({progress.desired})", file=out)
            return DONE
        if clock() >= deadline:
            break
        sleep(poll)
        try:
            reset_set = calls.read_daemonset(namespace, resets)
        except Exception as err:
            print(f"note: cannot read {namespace}/{resets} ({_one_line(err)}); trying again", file=out)
    selector = ",".join(
        f"{k}={v}"
        for k, v in sorted(((reset_set.get("spec") or {}).get("selector") or {}).get("matchLabels", {}).items())
    )
    try:
        pods = (calls.list_namespaced_pods(namespace, selector) or {}).get("items") or []
    except Exception as err:
        pods = []
        print(f"note: cannot list the reset pods ({_one_line(err)})", file=out)
    print(f"podpin uninstall: not every node was restored within {timeout:g}s:", file=out)
    for line in waiting_pods(pods):
        print(f"  {line}", file=out)
    return NOT_RESTORED


def _one_line(err: Exception) -> str:
    return " ".join(str(err).split())[:300] or type(err).__name__
