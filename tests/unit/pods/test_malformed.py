"""Malformed and impossible pods: each is refused with a PodSpecError naming the field and value."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.pods import PodSpecError, pod_from_dict
from tests.support.podfactory import container, make_pod, resources, sidecar

_MISSING = object()
_HP = {"hugepages-2Mi": "1Gi"}


def _set(pod: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """``pod`` with the field at dotted ``path`` (list indexes as numbers) replaced, or removed for _MISSING."""
    *parents, last = path.split(".")
    node: Any = pod
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    key: Any = int(last) if isinstance(node, list) else last
    if value is _MISSING:
        del node[key]
    else:
        node[key] = value
    return pod


def _gu(name: str = "app") -> dict[str, Any]:
    return container(name, cpu="1", memory="1Gi")


# (id, raw pod, expected field, expected value, expected message)
_CASES: list[Any] = [
    ("not-a-mapping", ["pod"], "", ["pod"], "pod: expected a mapping, got list ['pod']"),
    (
        "kind-deployment",
        _set(make_pod(), "kind", "Deployment"),
        "kind",
        "Deployment",
        "kind: expected 'Pod', got str 'Deployment'",
    ),
    (
        "metadata-missing",
        _set(make_pod(), "metadata", _MISSING),
        "metadata",
        None,
        "metadata: required field is missing",
    ),
    (
        "metadata-not-mapping",
        _set(make_pod(), "metadata", "web"),
        "metadata",
        "web",
        "metadata: expected a mapping, got str 'web'",
    ),
    (
        "uid-missing",
        _set(make_pod(), "metadata.uid", _MISSING),
        "metadata.uid",
        None,
        "metadata.uid: required field is missing",
    ),
    (
        "uid-not-string",
        _set(make_pod(), "metadata.uid", 42),
        "metadata.uid",
        42,
        "metadata.uid: expected a string, got int 42",
    ),
    (
        "name-missing",
        _set(make_pod(), "metadata.name", None),
        "metadata.name",
        None,
        "metadata.name: required field is missing",
    ),
    (
        "namespace-not-string",
        _set(make_pod(), "metadata.namespace", ["a"]),
        "metadata.namespace",
        ["a"],
        "metadata.namespace: expected a string, got list ['a']",
    ),
    (
        "timestamp-not-string",
        _set(make_pod(), "metadata.creationTimestamp", 1700000000),
        "metadata.creationTimestamp",
        1700000000,
        "metadata.creationTimestamp: expected a string, got int 1700000000",
    ),
    ("spec-missing", _set(make_pod(), "spec", _MISSING), "spec", None, "spec: required field is missing"),
    ("spec-not-mapping", _set(make_pod(), "spec", []), "spec", [], "spec: expected a mapping, got list []"),
    (
        "containers-missing",
        _set(make_pod(), "spec.containers", _MISSING),
        "spec.containers",
        None,
        "spec.containers: required field is missing",
    ),
    (
        "containers-empty",
        _set(make_pod(), "spec.containers", []),
        "spec.containers",
        [],
        "spec.containers: must list at least one container, got an empty list",
    ),
    (
        "containers-not-list",
        _set(make_pod(), "spec.containers", {"name": "app"}),
        "spec.containers",
        {"name": "app"},
        "spec.containers: expected a list, got dict {'name': 'app'}",
    ),
    (
        "container-not-mapping",
        _set(make_pod(containers=[container("a"), container("b")]), "spec.containers.1", "b"),
        "spec.containers[1]",
        "b",
        "spec.containers[1]: expected a mapping, got str 'b'",
    ),
    (
        "container-null",
        _set(make_pod(), "spec.initContainers", [None]),
        "spec.initContainers[0]",
        None,
        "spec.initContainers[0]: expected a mapping, got NoneType None",
    ),
    (
        "container-without-name",
        make_pod(containers=[{"image": "x"}]),
        "spec.containers[0].name",
        None,
        "spec.containers[0].name: required field is missing",
    ),
    (
        "container-name-not-string",
        make_pod(containers=[{"name": 7}]),
        "spec.containers[0].name",
        7,
        "spec.containers[0].name: expected a string, got int 7",
    ),
    (
        "duplicate-across-init-and-app",
        make_pod(containers=[container("app")], init_containers=[container("app")]),
        "spec.initContainers[0].name",
        "app",
        "spec.initContainers[0].name: duplicate container name 'app', also at spec.containers[0].name",
    ),
    (
        "duplicate-within-app",
        make_pod(containers=[container("a"), container("b"), container("a")]),
        "spec.containers[2].name",
        "a",
        "spec.containers[2].name: duplicate container name 'a', also at spec.containers[0].name",
    ),
    (
        "init-containers-not-list",
        _set(make_pod(), "spec.initContainers", "setup"),
        "spec.initContainers",
        "setup",
        "spec.initContainers: expected a list, got str 'setup'",
    ),
    (
        "restart-policy-not-string",
        make_pod(init_containers=[container("s", restart_policy=True)]),  # type: ignore[arg-type]
        "spec.initContainers[0].restartPolicy",
        True,
        "spec.initContainers[0].restartPolicy: expected a string, got bool True",
    ),
    (
        "resources-not-mapping",
        make_pod(containers=[{"name": "a", "resources": "1cpu"}]),
        "spec.containers[0].resources",
        "1cpu",
        "spec.containers[0].resources: expected a mapping, got str '1cpu'",
    ),
    (
        "requests-not-mapping",
        make_pod(containers=[{"name": "a", "resources": {"requests": ["cpu", "1"]}}]),
        "spec.containers[0].resources.requests",
        ["cpu", "1"],
        "spec.containers[0].resources.requests: expected a mapping of resource name to quantity, got list ['cpu', '1']",
    ),
    (
        "limits-not-mapping",
        make_pod(containers=[{"name": "a", "resources": {"limits": 2}}]),
        "spec.containers[0].resources.limits",
        2,
        "spec.containers[0].resources.limits: expected a mapping of resource name to quantity, got int 2",
    ),
    (
        "resource-name-not-string",
        make_pod(containers=[container("a", limits={1: "2"})]),  # type: ignore[dict-item]
        "spec.containers[0].resources.limits",
        1,
        "spec.containers[0].resources.limits: expected resource names to be non-empty strings, got int 1",
    ),
    (
        "bad-quantity",
        make_pod(containers=[container("a"), container("b", cpu_limit="1.5.0")]),
        "spec.containers[1].resources.limits.cpu",
        "1.5.0",
        "spec.containers[1].resources.limits.cpu: invalid quantity '1.5.0'",
    ),
    (
        "quantity-unknown-suffix",
        make_pod(containers=[container("a", memory_request="1GB")]),
        "spec.containers[0].resources.requests.memory",
        "1GB",
        "spec.containers[0].resources.requests.memory: invalid quantity '1GB'",
    ),
    (
        "quantity-boolean",
        make_pod(containers=[container("a", requests={"cpu": True})]),
        "spec.containers[0].resources.requests.cpu",
        True,
        "spec.containers[0].resources.requests.cpu: invalid quantity True: not a number or quantity string",
    ),
    (
        "negative-quantity",
        make_pod(containers=[container("a", memory_request="-1Gi")]),
        "spec.containers[0].resources.requests[memory]",
        "-1Gi",
        'spec.containers[0].resources.requests[memory]: Invalid value: "-1Gi": must be greater than or equal to 0',
    ),
    (
        "request-above-limit",
        make_pod(containers=[container("a", cpu_request="2", cpu_limit="1")]),
        "spec.containers[0].resources.requests",
        "2",
        'spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1',
    ),
    (
        "init-request-above-limit",
        make_pod(init_containers=[container("i", memory_request="2Gi", memory_limit="1536Mi")]),
        "spec.initContainers[0].resources.requests",
        "2Gi",
        (
            'spec.initContainers[0].resources.requests: Invalid value: "2Gi": must be less than or equal to memory '
            "limit"
            " of 1536Mi"
        ),
    ),
    (
        "hugepages-request-not-limit",
        make_pod(containers=[container("a", cpu="1", requests={"hugepages-2Mi": "512Mi"}, limits=_HP)]),
        "spec.containers[0].resources.requests",
        "512Mi",
        'spec.containers[0].resources.requests: Invalid value: "512Mi": must be equal to hugepages-2Mi limit of 1Gi',
    ),
    (
        "hugepages-request-without-limit",
        make_pod(containers=[container("a", cpu="1", requests=_HP)]),
        "spec.containers[0].resources.limits",
        None,
        "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources",
    ),
    (
        "hugepages-without-cpu-or-memory",
        make_pod(containers=[container("a", limits=_HP)]),
        "spec.containers[0].resources",
        None,
        "spec.containers[0].resources: Forbidden: HugePages require cpu or memory",
    ),
    (
        "not-a-standard-resource",
        make_pod(containers=[container("a", limits={"cpus": "2"})]),
        "spec.containers[0].resources.limits[cpus]",
        "cpus",
        'spec.containers[0].resources.limits[cpus]: Invalid value: "cpus": must be a standard resource for containers',
    ),
    (
        "fractional-device",
        make_pod(containers=[container("a", limits={"example.com/gpu": "0.5"})]),
        "spec.containers[0].resources.limits[example.com/gpu]",
        "500m",
        'spec.containers[0].resources.limits[example.com/gpu]: Invalid value: "500m": must be an integer',
    ),
    (
        "pod-level-unsupported-resource",
        make_pod(pod_resources={"limits": {"cpu": "1", "ephemeral-storage": "1Gi"}}),
        "spec.resources.limits",
        "ephemeral-storage",
        (
            'spec.resources.limits: Unsupported value: "ephemeral-storage": supported values: "cpu", "hugepages-", '
            '"memory"'
        ),
    ),
    (
        "pod-request-below-aggregate",
        make_pod(
            containers=[container("a", cpu_request="1"), container("b", cpu_request="500m")],
            pod_resources=resources(cpu_request="1", cpu_limit="2"),
        ),
        "spec.resources.requests[cpu]",
        "1",
        (
            'spec.resources.requests[cpu]: Invalid value: "1": must be greater than or equal to aggregate container'
            " requests of 1500m"
        ),
    ),
    (
        "pod-request-below-init-plus-sidecar",
        make_pod(
            containers=[container("a", memory_request="1Gi")],
            init_containers=[sidecar("s", memory_request="512Mi"), container("i", memory_request="1Gi")],
            pod_resources=resources(memory_request="1Gi", memory_limit="2Gi"),
        ),
        "spec.resources.requests[memory]",
        "1Gi",
        (
            'spec.resources.requests[memory]: Invalid value: "1Gi": must be greater than or equal to aggregate '
            "container"
            " requests of 1536Mi"
        ),
    ),
    (
        "container-limit-above-pod-limit",
        make_pod(containers=[container("a", cpu_request="1", cpu_limit="4")], pod_resources=resources(cpu="2")),
        "spec.containers[0].resources.limits[cpu]",
        "4",
        'spec.containers[0].resources.limits[cpu]: Invalid value: "4": must be less than or equal to pod limits of 2',
    ),
    (
        "init-limit-above-pod-limit",
        make_pod(
            init_containers=[container("i", memory_request="1Gi", memory_limit="3Gi")],
            pod_resources=resources(cpu="2", memory="2Gi"),
        ),
        "spec.initContainers[0].resources.limits[memory]",
        "3Gi",
        (
            'spec.initContainers[0].resources.limits[memory]: Invalid value: "3Gi": must be less than or equal to pod'
            " limits of 2Gi"
        ),
    ),
    (
        "defaulted-pod-request-above-limit",
        make_pod(containers=[container("a", cpu_request="6")], pod_resources=resources(cpu_limit="4")),
        "spec.resources.requests",
        "6",
        'spec.resources.requests: Invalid value: "6": must be less than or equal to cpu limit of 4',
    ),
    (
        "pod-level-on-windows",
        make_pod(pod_resources=resources(cpu="1", memory="1Gi"), os_name="windows"),
        "spec.resources",
        None,
        "spec.resources: Forbidden: may not be set for a windows pod",
    ),
    (
        "os-not-mapping",
        _set(make_pod(), "spec.os", "linux"),
        "spec.os",
        "linux",
        "spec.os: expected a mapping, got str 'linux'",
    ),
    (
        "node-name-not-string",
        _set(make_pod(), "spec.nodeName", ["n1"]),
        "spec.nodeName",
        ["n1"],
        "spec.nodeName: expected a string, got list ['n1']",
    ),
    (
        "negative-overhead",
        make_pod(overhead={"cpu": "-250m"}),
        "spec.overhead[cpu]",
        "-250m",
        'spec.overhead[cpu]: Invalid value: "-250m": must be greater than or equal to 0',
    ),
    (
        "status-not-mapping",
        _set(make_pod(), "status", "Running"),
        "status",
        "Running",
        "status: expected a mapping, got str 'Running'",
    ),
    (
        "phase-not-string",
        make_pod(phase=3),  # type: ignore[arg-type]
        "status.phase",
        3,
        "status.phase: expected a string, got int 3",
    ),
    (
        "qos-class-unknown",
        make_pod(qos_class="Gold"),
        "status.qosClass",
        "Gold",
        "status.qosClass: unknown QoS class 'Gold', expected one of 'BestEffort', 'Burstable', 'Guaranteed'",
    ),
    (
        "qos-class-not-string",
        make_pod(qos_class=1),  # type: ignore[arg-type]
        "status.qosClass",
        1,
        "status.qosClass: expected a string, got int 1",
    ),
    (
        "container-statuses-not-list",
        _set(make_pod(), "status.containerStatuses", {"app": {}}),
        "status.containerStatuses",
        {"app": {}},
        "status.containerStatuses: expected a list, got dict {'app': {}}",
    ),
    (
        "status-entry-without-name",
        _set(make_pod(), "status.containerStatuses", [{"containerID": "containerd://a"}]),
        "status.containerStatuses[0].name",
        None,
        "status.containerStatuses[0].name: required field is missing",
    ),
    (
        "container-id-not-string",
        _set(make_pod(), "status.initContainerStatuses", [{"name": "app", "containerID": 12345}]),
        "status.initContainerStatuses[0].containerID",
        12345,
        "status.initContainerStatuses[0].containerID: expected a string, got int 12345",
    ),
    (
        "state-not-mapping",
        _set(make_pod(), "status.containerStatuses", [{"name": "app", "state": "running"}]),
        "status.containerStatuses[0].state",
        "running",
        "status.containerStatuses[0].state: expected a mapping, got str 'running'",
    ),
]


@pytest.mark.parametrize(
    ("raw", "field", "value", "message"), [pytest.param(r, f, v, m, id=i) for i, r, f, v, m in _CASES]
)
def test_malformed_pod_is_refused(raw: Any, field: str, value: Any, message: str) -> None:
    """The pod is refused with a PodSpecError whose field, value and message name the problem."""
    with pytest.raises(PodSpecError) as caught:
        pod_from_dict(raw)
    assert (field, value, message) == (caught.value.field, caught.value.value, str(caught.value))


def test_table_is_large_and_ids_are_unique() -> None:
    """The table keeps at least 30 distinct malformed pods."""
    ids = [case[0] for case in _CASES]
    assert (True, len(ids)) == (len(ids) >= 30, len(set(ids)))


def test_guaranteed_reference_pod_is_accepted() -> None:
    """The pods the table breaks are valid before being broken (the refusals are not incidental)."""
    pod = pod_from_dict(
        make_pod(containers=[_gu()], pod_resources=resources(cpu="1", memory="1Gi"), overhead={"cpu": "1"})
    )
    assert ("Guaranteed", True) == (pod.qos, pod.has_pod_level_resources)


# -- fuzzing: anything JSON-ish in any field gives a PodView or a PodSpecError ------------------
_junk = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**12), 10**12) | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


def _mostly(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``valid`` nine times in ten, junk otherwise, so most examples reach the deeper fields."""
    return st.integers(0, 9).flatmap(lambda roll: _junk if roll == 0 else valid)


_quantity = st.sampled_from(["1", "0", "-1", "1.5", "100m", "977m", "1Gi", "1e3", "1E", ".5", "1.5.0", "", "1e101"])
_name = st.sampled_from(["cpu", "memory", "hugepages-2Mi", "ephemeral-storage", "example.com/gpu", "cpus", ""])
_list = _mostly(st.dictionaries(_name, _mostly(_quantity | st.integers(-5, 5)), max_size=4))
_resources = _mostly(st.fixed_dictionaries({}, optional={"requests": _list, "limits": _list}))
_container = _mostly(
    st.fixed_dictionaries(
        {"name": _mostly(st.sampled_from(["a", "b", "c"]))},
        optional={"resources": _resources, "restartPolicy": _mostly(st.sampled_from(["Always", "Never"]))},
    )
)
_status_entry = _mostly(
    st.fixed_dictionaries(
        {"name": _mostly(st.sampled_from(["a", "b"]))},
        optional={
            "containerID": _mostly(st.just("containerd://ab")),
            "state": _mostly(st.sampled_from([{"running": {}}, {"waiting": {}}, {}])),
        },
    )
)
_status = st.fixed_dictionaries(
    {},
    optional={
        "phase": _mostly(st.sampled_from(["Running", "Failed"])),
        "qosClass": _mostly(st.sampled_from(["Guaranteed", "Gold", ""])),
        "containerStatuses": _mostly(st.lists(_status_entry, max_size=2)),
        "initContainerStatuses": _mostly(st.lists(_status_entry, max_size=2)),
    },
)
_spec = st.fixed_dictionaries(
    {"containers": _mostly(st.lists(_container, max_size=3))},
    optional={
        "initContainers": _mostly(st.lists(_container, max_size=3)),
        "resources": _resources,
        "overhead": _list,
        "os": _mostly(st.sampled_from([{"name": "windows"}, {"name": "linux"}])),
        "nodeName": _mostly(st.just("n1")),
    },
)
_metadata = st.fixed_dictionaries(
    {"uid": _mostly(st.just("u")), "name": _mostly(st.just("p"))},
    optional={"namespace": _mostly(st.just("ns")), "creationTimestamp": _mostly(st.just("2026-01-01T00:00:00Z"))},
)
_pod = _mostly(
    st.fixed_dictionaries(
        {"metadata": _mostly(_metadata), "spec": _mostly(_spec)},
        optional={"status": _mostly(_status), "kind": _mostly(st.just("Pod"))},
    )
)


@settings(max_examples=250, deadline=None)
@given(raw=_pod)
def test_random_input_gives_a_pod_or_a_pod_spec_error(raw: Any) -> None:
    """pod_from_dict never raises anything but PodSpecError, and its message starts with the field."""
    error: PodSpecError | None = None
    try:
        pod_from_dict(raw)
    except PodSpecError as raised:
        error = raised
    assert error is None or str(error).startswith(error.field or "pod")
