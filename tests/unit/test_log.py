"""Logging: one format for podpin's and the libraries' lines, JSON one object per line, decision fields."""

from __future__ import annotations

import io
import json
import logging
import re
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from agent.alloc import Planner, Pool
from agent.config import config_from_mapping
from agent.log import (
    DECISION_KEYS,
    EVENT_NAMES,
    configure_logging,
    decision_fields,
    json_for_format,
)
from agent.pods import ContainerKind
from agent.pods.model import pod_from_dict
from tests.support.machines import machine
from tests.support.podfactory import container, make_pod, resources

_ISO_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


class _Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def json_lines(stream: io.StringIO) -> list[dict[str, Any]]:
    """Every line parsed as one JSON object; the timestamp is checked for ISO UTC and removed."""
    records = []
    for line in stream.getvalue().splitlines():
        record = json.loads(line)
        assert isinstance(record, dict)
        assert _ISO_UTC.fullmatch(record.pop("timestamp")) is not None
        records.append(record)
    return records


class TestConfigureLogging:
    def test_json_one_object_per_line_for_structlog_and_stdlib(self) -> None:
        """podpin's lines and a library's stdlib line come out as one JSON object each, same keys."""
        out = io.StringIO()
        configure_logging(json=True, stream=out)
        structlog.get_logger("podpin.test").info("pod.admitted", pod="db", cpus="1-3")
        logging.getLogger("urllib3.connectionpool").warning("Retrying %s", "GET /api/v1/pods")
        structlog.get_logger("podpin.test").warning("watch.relisted", reason="410 Gone")
        expected = [
            {"event": "pod.admitted", "level": "info", "pod": "db", "cpus": "1-3"},
            {"event": "Retrying GET /api/v1/pods", "level": "warning", "logger": "urllib3.connectionpool"},
            {"event": "watch.relisted", "level": "warning", "reason": "410 Gone"},
        ]
        assert (expected, 3) == (json_lines(out), out.getvalue().count("\n"))

    def test_auto_is_json_when_not_a_terminal(self) -> None:
        """json=None and a non-TTY stream (a pod's log) gives JSON."""
        out = io.StringIO()
        configure_logging(stream=out)
        structlog.get_logger().info("agent.started", node="n1")
        assert [{"event": "agent.started", "level": "info", "node": "n1"}] == json_lines(out)

    def test_auto_is_colored_console_at_a_terminal(self) -> None:
        """json=None and a TTY stream gives console lines with colours, not JSON."""
        out = _Terminal()
        configure_logging(stream=out)
        structlog.get_logger().info("agent.started", node="n1")
        line = out.getvalue()
        actual = (line.startswith("{"), "\x1b[" in line, "agent.started" in line)
        assert (False, True, True) == actual

    def test_console_line(self) -> None:
        """json=False gives the aligned console line: time, level, event, sorted key=value pairs."""
        out = io.StringIO()
        configure_logging(json=False, stream=out)
        structlog.get_logger().info("pod.admitted", pod="db", cpus="1-3")
        logging.getLogger("kubernetes.client.rest").warning("response %d", 500)
        lines = [_ISO_UTC.sub("T", line) for line in out.getvalue().splitlines()]
        expected = [
            "T [info     ] pod.admitted                   cpus=1-3 pod=db",
            "T [warning  ] response 500                   [kubernetes.client.rest]",
        ]
        assert expected == lines

    def test_console_line_prints_vocabulary_words_not_enum_reprs(self) -> None:
        """Pools and other StrEnum words read as their value on a console line, at the top and nested in maps."""
        out = io.StringIO()
        configure_logging(json=False, stream=out)
        containers = {"db": {"pool": Pool.EXCLUSIVE, "kinds": [ContainerKind.APP]}}
        structlog.get_logger().info("pod.admitted", pool=Pool.POD_SHARED, containers=containers)
        line = _ISO_UTC.sub("T", out.getvalue().strip())
        expected = (
            "T [info     ] pod.admitted                   containers={'db': {'pool': 'exclusive', 'kinds': ['app']}} "
            "pool=pod_shared"
        )
        assert expected == line

    def test_level_filters_both_worlds(self) -> None:
        """At warning, info lines from structlog and from the stdlib are dropped."""
        out = io.StringIO()
        configure_logging(json=True, level="warning", stream=out)
        structlog.get_logger().info("pod.admitted")
        logging.getLogger("urllib3").info("connecting")
        structlog.get_logger().error("cgroup.error", file="cpuset.cpus")
        logging.getLogger("urllib3").warning("retry")
        expected = [
            {"event": "cgroup.error", "level": "error", "file": "cpuset.cpus"},
            {"event": "retry", "level": "warning", "logger": "urllib3"},
        ]
        assert expected == json_lines(out)

    def test_debug_level_passes_debug(self) -> None:
        """At debug, debug lines are written."""
        out = io.StringIO()
        configure_logging(json=True, level="debug", stream=out)
        structlog.get_logger().debug("http.request", path="/metrics")
        assert [{"event": "http.request", "level": "debug", "path": "/metrics"}] == json_lines(out)

    def test_unknown_level(self) -> None:
        """An unknown level names logLevel and the value."""
        with pytest.raises(ValueError) as err:
            configure_logging(level="verbose", stream=io.StringIO())
        assert "logLevel: 'verbose' is not one of debug, info, warning, error" == str(err.value)

    def test_context_variables_are_merged(self) -> None:
        """A node bound once with bind_contextvars is on every line."""
        out = io.StringIO()
        configure_logging(json=True, stream=out)
        structlog.contextvars.bind_contextvars(node="worker-3")
        structlog.get_logger().info("pod.released", pod="db")
        logging.getLogger("urllib3").warning("retry")
        expected = [
            {"event": "pod.released", "level": "info", "node": "worker-3", "pod": "db"},
            {"event": "retry", "level": "warning", "logger": "urllib3", "node": "worker-3"},
        ]
        assert expected == json_lines(out)

    def test_exception_as_dict_without_locals(self) -> None:
        """An exception becomes a structured ``exception`` list; frames carry no local variables (secrets)."""
        out = io.StringIO()
        configure_logging(json=True, stream=out)
        token = "Bearer secret"  # a local a traceback must not print
        try:
            raise PermissionError(13, "Permission denied", "/sys/fs/cgroup/kubepods.slice/cpuset.cpus")
        except PermissionError:
            structlog.get_logger().exception("cgroup.error")
        [record] = json_lines(out)
        [exc] = record["exception"]
        actual = (
            record["event"],
            exc["exc_type"],
            exc["exc_value"],
            any("locals" in frame for frame in exc["frames"]),
            token in out.getvalue(),
        )
        expected = (
            "cgroup.error",
            "PermissionError",
            "[Errno 13] Permission denied: '/sys/fs/cgroup/kubepods.slice/cpuset.cpus'",
            False,
            False,
        )
        assert expected == actual

    def test_reconfiguring_replaces_the_handler(self) -> None:
        """A second call writes to the new stream only; the first stream gets nothing more."""
        first, second = io.StringIO(), io.StringIO()
        configure_logging(json=True, stream=first)
        configure_logging(json=True, stream=second)
        logging.getLogger("urllib3").warning("retry")
        structlog.get_logger().info("agent.stopped")
        actual = (first.getvalue(), [r["event"] for r in json_lines(second)])
        assert ("", ["retry", "agent.stopped"]) == actual

    def test_cache_only_when_asked(self) -> None:
        """cache_logger_on_first_use is off by default (capture_logs keeps working) and on when podpin run asks."""
        configure_logging(stream=io.StringIO())
        default = structlog.get_config()["cache_logger_on_first_use"]
        configure_logging(stream=io.StringIO(), cache_logger_on_first_use=True)
        assert (False, True) == (default, structlog.get_config()["cache_logger_on_first_use"])

    def test_capture_logs_after_configuring(self) -> None:
        """Tests can still capture lines after configure_logging (no caching)."""
        configure_logging(json=True, stream=io.StringIO())
        with capture_logs() as logs:
            structlog.get_logger().info("pod.admitted", pod="db")
        assert [{"event": "pod.admitted", "log_level": "info", "pod": "db"}] == logs


class TestJsonForFormat:
    @pytest.mark.parametrize(("fmt", "expected"), [("auto", None), ("json", True), ("console", False)])
    def test_formats(self, fmt: str, expected: bool | None) -> None:
        """logFormat auto/json/console map to None/True/False."""
        assert expected == json_for_format(fmt)

    def test_unknown_format(self) -> None:
        """An unknown logFormat is named with its value."""
        with pytest.raises(ValueError) as err:
            json_for_format("yaml")
        assert "logFormat: 'yaml' is not one of auto, json, console" == str(err.value)


def planned_pods() -> Any:
    """A KEP pod (bubble {1-5}: c1 exclusive {1-3}, c2 shared {4,5}) and a rejected one, planned on 2 x 8 CPUs."""
    planner = Planner(
        machine(threads=1),
        config_from_mapping({"reservedSystemCPUs": "0", "topologyManagerPolicy": "single-numa-node"}, env={}).planner,
    )
    kep = pod_from_dict(
        make_pod(
            "kep",
            containers=[container("c1", cpu="3", memory="1Gi"), container("c2")],
            pod_resources=resources(cpu="5", memory="5Gi"),
        )
    )
    full = pod_from_dict(
        make_pod(
            "full",
            containers=[
                container("c1", cpu="3", memory="1Gi"),
                container("c2", cpu="2", memory="1Gi"),
                container("c3"),
            ],
            pod_resources=resources(cpu="5", memory="5Gi"),
        )
    )
    decisions = {pod.uid: planner.admit(pod) for pod in (kep, full)}
    return planner.plan([kep, full], decisions).pods


class TestDecisionFields:
    def test_exclusive_container_line(self) -> None:
        """An exclusive container names its slice, its NUMA node and cpu.max lifted."""
        kep = planned_pods()[0]
        expected = {
            "node": "worker-1",
            "namespace": "default",
            "pod": "kep",
            "uid": kep.uid,
            "container": "c1",
            "pool": "exclusive",
            "cpus": "1-3",
            "numa": [0],
            "cpu_max": "max 100000",
            "reason": None,
        }
        assert expected == decision_fields(kep, kep.container("c1"), node="worker-1")

    def test_pod_shared_container_line(self) -> None:
        """A pod shared container names the pod pool and leaves cpu.max alone (None)."""
        kep = planned_pods()[0]
        actual = decision_fields(kep, kep.container("c2"), node="worker-1")
        assert ("pod_shared", "4-5", [0], None) == (actual["pool"], actual["cpus"], actual["numa"], actual["cpu_max"])

    def test_pod_line(self) -> None:
        """The pod's own line: no container, pool "bubble", the pod cgroup's CPUs and cpu.max."""
        kep = planned_pods()[0]
        actual = decision_fields(kep, node=None)
        expected = {
            "node": None,
            "namespace": "default",
            "pod": "kep",
            "uid": kep.uid,
            "container": None,
            "pool": "bubble",
            "cpus": "1-5",
            "numa": [0],
            "cpu_max": "max 100000",
            "reason": None,
        }
        assert expected == actual

    def test_rejected_pod_line_names_the_reason(self) -> None:
        """A rejected pod's lines carry the kubelet reason; its containers are in the node shared pool."""
        full = planned_pods()[1]
        pod_line = decision_fields(full, node="worker-1")
        container_line = decision_fields(full, full.container("c1"), node="worker-1")
        actual = (
            pod_line["reason"],
            pod_line["pool"],
            pod_line["cpus"],
            container_line["pool"],
            container_line["cpus"],
            container_line["numa"],
        )
        assert ("TopologyAffinityError", None, "0,6-15", "node_shared", "0,6-15", [0, 1]) == actual

    def test_every_line_has_the_same_keys(self) -> None:
        """Pod and container lines name exactly DECISION_KEYS, in that order."""
        kep, full = planned_pods()
        lines = [
            decision_fields(kep, node="n"),
            decision_fields(kep, kep.container("c2"), node="n"),
            decision_fields(full, node="n"),
        ]
        assert [list(DECISION_KEYS)] * 3 == [list(line) for line in lines]

    def test_decision_line_through_capture_logs(self) -> None:
        """A decision logged with the fields is one event with every key, as a test sees it."""
        kep = planned_pods()[0]
        with capture_logs() as logs:
            structlog.get_logger("podpin.reconciler").info(
                "pod.admitted", **decision_fields(kep, kep.container("c1"), node="n")
            )
        [entry] = logs
        assert ("pod.admitted", "info", "1-3", "c1") == (
            entry["event"],
            entry["log_level"],
            entry["cpus"],
            entry["container"],
        )

    def test_decision_line_as_json(self) -> None:
        """Rendered as JSON, the decision line keeps lists and nulls as JSON values."""
        out = io.StringIO()
        configure_logging(json=True, stream=out)
        kep = planned_pods()[0]
        structlog.get_logger().info("pod.admitted", **decision_fields(kep, kep.container("c2"), node="n"))
        [record] = json_lines(out)
        assert ([0], None, "pod_shared") == (record["numa"], record["cpu_max"], record["pool"])


def test_event_names() -> None:
    """The documented event names, in the documented order."""
    expected = (
        "pod.admitted",
        "pod.rejected",
        "pod.released",
        "pod.malformed",
        "cgroup.applied",
        "cgroup.drift_repaired",
        "cgroup.error",
        "watch.relisted",
        "agent.started",
        "agent.stopped",
        "kubelet.pinning",
    )
    assert expected == EVENT_NAMES
