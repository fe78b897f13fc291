"""pod_from_dict: fields, container kinds and statuses, defaulting, effective requests, quantities."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.pods import PodView, ResourceSpec, effective_requests, pod_from_dict
from agent.pods.resources import Amount
from tests.support.podfactory import container, container_id, make_pod, pod_uid, resources, sidecar

GI = 2**30
MI = 2**20


def _requests(pod: PodView, name: str) -> dict[str, int]:
    return dict(pod.container(name).resources.requests)


class TestFields:
    def test_metadata_and_spec_fields_are_read(self) -> None:
        """uid, namespace, name, node, timestamps, phase, os and overhead come from the raw dict."""
        raw = make_pod(
            "web",
            uid="1234",
            namespace="prod",
            node_name="n7",
            phase="Running",
            os_name="linux",
            overhead={"cpu": "250m", "memory": "120Mi"},
            creation_timestamp="2026-01-02T03:04:05Z",
            deletion_timestamp="2026-01-02T04:00:00Z",
        )
        pod = pod_from_dict(raw)
        expected = (
            "1234",
            "prod",
            "web",
            "n7",
            "2026-01-02T03:04:05Z",
            "2026-01-02T04:00:00Z",
            "Running",
            "linux",
            {"cpu": 250, "memory": 120 * MI},
        )
        actual = (
            pod.uid,
            pod.namespace,
            pod.name,
            pod.node_name,
            pod.creation_timestamp,
            pod.deletion_timestamp,
            pod.phase,
            pod.os_name,
            dict(pod.overhead),
        )
        assert expected == actual

    def test_missing_namespace_is_default(self) -> None:
        """A manifest without metadata.namespace lands in "default", as kubectl would put it."""
        raw = make_pod("web")
        del raw["metadata"]["namespace"]
        assert "default" == pod_from_dict(raw).namespace

    def test_null_and_empty_fields_count_as_missing(self) -> None:
        """JSON null and "" read as absent, as Go decodes them (initContainers, resources, status)."""
        raw: dict[str, Any] = {
            "metadata": {"uid": "u", "name": "p", "namespace": "", "creationTimestamp": None},
            "spec": {"containers": [{"name": "a", "resources": None}], "initContainers": None, "nodeName": ""},
            "status": None,
        }
        pod = pod_from_dict(raw)
        expected = ("default", None, None, (), ResourceSpec(), "BestEffort")
        actual = (
            pod.namespace,
            pod.node_name,
            pod.creation_timestamp,
            pod.init_containers,
            pod.container("a").resources,
            pod.qos,
        )
        assert expected == actual

    def test_full_name_is_namespace_slash_name(self) -> None:
        """full_name names the pod as logs and Events do."""
        assert "prod/web" == pod_from_dict(make_pod("web", namespace="prod")).full_name

    def test_default_uid_is_stable(self) -> None:
        """podfactory derives the uid from namespace and name."""
        assert pod_uid("default", "web") == pod_from_dict(make_pod("web")).uid

    @pytest.mark.parametrize(
        ("phase", "expected"),
        [("Succeeded", True), ("Failed", True), ("Running", False), ("Pending", False), (None, False)],
    )
    def test_is_terminal(self, phase: str | None, expected: bool) -> None:
        """Only Succeeded and Failed pods are terminal."""
        assert expected == pod_from_dict(make_pod(phase=phase)).is_terminal


class TestContainers:
    def test_kinds_and_indexes(self) -> None:
        """restartPolicy Always makes an init container a sidecar; indexes count within each list."""
        raw = make_pod(
            containers=[container("app1"), container("app2")],
            init_containers=[container("setup"), sidecar("proxy"), container("migrate", restart_policy="Never")],
        )
        pod = pod_from_dict(raw)
        expected = [
            ("setup", "init", 0),
            ("proxy", "sidecar", 1),
            ("migrate", "init", 2),
            ("app1", "app", 0),
            ("app2", "app", 1),
        ]
        assert expected == [(c.name, c.kind, c.index) for c in pod.all_containers]

    def test_restart_policy_on_app_container_does_not_change_kind(self) -> None:
        """An app container with a restartPolicy (container restart rules) stays an app container."""
        pod = pod_from_dict(make_pod(containers=[container("app", restart_policy="Always")]))
        assert "app" == pod.container("app").kind

    def test_statuses_give_container_id_and_state(self) -> None:
        """containerStatuses and initContainerStatuses are matched by name; no status is "unknown"."""
        raw = make_pod(
            "web",
            containers=[container("app"), container("log"), container("idle")],
            init_containers=[container("setup"), sidecar("proxy")],
            states={"app": "running", "log": "waiting", "setup": "terminated", "proxy": "running"},
        )
        pod = pod_from_dict(raw)
        uid = pod.uid
        expected = [
            ("setup", container_id(uid, "setup"), "terminated"),
            ("proxy", container_id(uid, "proxy"), "running"),
            ("app", container_id(uid, "app"), "running"),
            ("log", None, "waiting"),
            ("idle", None, "unknown"),
        ]
        assert expected == [(c.name, c.container_id, c.state) for c in pod.all_containers]

    def test_status_of_unknown_container_is_ignored(self) -> None:
        """A status entry naming no spec container (stale status) is skipped."""
        raw = make_pod(containers=[container("app")])
        stale = {"name": "gone", "containerID": "containerd://ab", "state": {"running": {}}}
        raw["status"] = {"containerStatuses": [stale]}
        app = pod_from_dict(raw).container("app")
        assert (None, "unknown") == (app.container_id, app.state)

    def test_container_lookup_of_missing_name_raises(self) -> None:
        """container(name) names the pod and the container it could not find."""
        pod = pod_from_dict(make_pod("web"))
        with pytest.raises(KeyError) as caught:
            pod.container("nope")
        assert "\"pod default/web has no container 'nope'\"" == str(caught.value)

    def test_spec_resources_without_entries_is_no_pod_level(self) -> None:
        """spec.resources with no requests or limits is treated as absent (IsPodLevelResourcesSet)."""
        pod = pod_from_dict(
            make_pod(containers=[container("a", cpu="1", memory="1Gi")], pod_resources={"requests": {}})
        )
        assert (None, False, "Guaranteed") == (pod.pod_resources, pod.has_pod_level_resources, pod.qos)


class TestQuantities:
    @pytest.mark.parametrize(
        ("raw", "expected"),
        [
            ({"cpu": "1500m", "memory": "1Gi"}, {"cpu": 1500, "memory": GI}),
            ({"cpu": "0.5m", "memory": "1.5"}, {"cpu": 1, "memory": 2}),
            ({"cpu": 2, "memory": "1G"}, {"cpu": 2000, "memory": 10**9}),
            ({"cpu": "1e3", "hugepages-2Mi": "1Gi"}, {"cpu": 10**6, "hugepages-2Mi": GI}),
            (
                {"cpu": "977m", "example.com/gpu": "2", "ephemeral-storage": "10Gi"},
                {"cpu": 977, "example.com/gpu": 2, "ephemeral-storage": 10 * GI},
            ),
        ],
    )
    def test_planner_integers(self, raw: dict[str, Any], expected: dict[str, int]) -> None:
        """cpu becomes millicores, everything else Value(), both rounded up."""
        pod = pod_from_dict(make_pod(containers=[container("a", limits=raw)]))
        assert expected == dict(pod.container("a").resources.limits)

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("1500m", "1500m"),
            ("1000m", "1"),
            ("0.1", "100m"),
            ("2000", "2k"),
            ("1500", "1500"),
            ("2048Mi", "2Gi"),
            ("1.5Gi", "1536Mi"),
            ("0.5Ki", "512"),
            ("1G", "1G"),
            ("1e3", "1e3"),
            ("1000Ki", "1000Ki"),
            ("0", "0"),
            ("1e-10", "1e-9"),
            ("0.0000000001", "1n"),
            ("-1Gi", "-1Gi"),
        ],
    )
    def test_canonical_form(self, text: str, expected: str) -> None:
        """Amounts print as Quantity.String() does, which is what API messages quote."""
        assert expected == str(Amount.parse(text))

    def test_sum_keeps_the_first_format(self) -> None:
        """Adding keeps the left operand's format unless it is zero (Quantity.Add)."""
        expected = ("2073741824", "2Gi")
        actual = (str(Amount.parse("1Gi") + Amount.parse("1G")), str(Amount.parse("0") + Amount.parse("2Gi")))
        assert expected == actual


class TestContainerDefaulting:
    def test_missing_request_defaults_to_limit_per_resource(self) -> None:
        """Each limit without a request becomes the request; an explicit request stays."""
        pod = pod_from_dict(
            make_pod(containers=[container("a", cpu_request="500m", cpu_limit="2", memory_limit="1Gi")])
        )
        expected = ResourceSpec(requests={"cpu": 500, "memory": GI}, limits={"cpu": 2000, "memory": GI})
        assert expected == pod.container("a").resources

    def test_init_containers_are_defaulted_too(self) -> None:
        """Init containers and sidecars get the same request-from-limit defaulting."""
        pod = pod_from_dict(
            make_pod(init_containers=[container("i", cpu_limit="1"), sidecar("s", memory_limit="64Mi")])
        )
        assert ({"cpu": 1000}, {"memory": 64 * MI}) == (_requests(pod, "i"), _requests(pod, "s"))

    def test_request_without_limit_stays_without_limit(self) -> None:
        """A request alone is not copied into limits."""
        pod = pod_from_dict(make_pod(containers=[container("a", cpu_request="1")]))
        assert ResourceSpec(requests={"cpu": 1000}, limits={}) == pod.container("a").resources


class TestPodLevelDefaulting:
    def test_pitfall_defaults_to_container_aggregate_and_is_burstable(self) -> None:
        """The defaulting pitfall: pod limits 4/4Gi, container requests 2/2Gi -> pod requests 2/2Gi, Burstable."""
        pod = pod_from_dict(
            make_pod(
                containers=[container("a", cpu_request="2", memory_request="2Gi")],
                pod_resources=resources(cpu_limit="4", memory_limit="4Gi"),
            )
        )
        expected = (
            ResourceSpec(requests={"cpu": 2000, "memory": 2 * GI}, limits={"cpu": 4000, "memory": 4 * GI}),
            "Burstable",
        )
        assert expected == (pod.pod_resources, pod.qos)

    def test_limits_without_container_requests_default_to_limits(self) -> None:
        """With no container requesting a resource, the pod request is the pod limit: Guaranteed."""
        pod = pod_from_dict(
            make_pod(containers=[container("a")], pod_resources=resources(cpu_limit="4", memory_limit="4Gi"))
        )
        expected = ResourceSpec(requests={"cpu": 4000, "memory": 4 * GI}, limits={"cpu": 4000, "memory": 4 * GI})
        assert (expected, "Guaranteed") == (pod.pod_resources, pod.qos)

    def test_aggregate_uses_sidecars_and_init_containers(self) -> None:
        """The defaulted pod request is the KEP-753 aggregate: max(app + sidecars, init + earlier sidecars)."""
        raw = make_pod(
            containers=[container("app", cpu_request="1")],
            init_containers=[sidecar("proxy", cpu_request="500m"), container("setup", cpu_request="3")],
            pod_resources=resources(cpu_limit="8"),
        )
        assert {"cpu": 3500} == dict(pod_from_dict(raw).pod_resources.requests)  # type: ignore[union-attr]

    def test_only_resources_with_pod_limits_are_defaulted(self) -> None:
        """A container memory request does not create a pod memory request when the pod limits only cpu."""
        raw = make_pod(
            containers=[container("a", cpu_request="1", memory_request="1Gi")], pod_resources=resources(cpu_limit="2")
        )
        assert {"cpu": 1000} == dict(pod_from_dict(raw).pod_resources.requests)  # type: ignore[union-attr]

    def test_requests_only_are_not_defaulted(self) -> None:
        """Without pod-level limits nothing is defaulted: requests stay as written, limits empty."""
        raw = make_pod(
            containers=[container("a", cpu_request="1")], pod_resources=resources(cpu_request="2", memory_request="1Gi")
        )
        pod = pod_from_dict(raw)
        expected = ResourceSpec(requests={"cpu": 2000, "memory": GI}, limits={})
        assert (expected, "Burstable") == (pod.pod_resources, pod.qos)

    def test_explicit_pod_requests_are_kept(self) -> None:
        """An explicit pod request is never replaced by the default."""
        raw = make_pod(
            containers=[container("a", cpu_request="1")],
            pod_resources=resources(cpu_request="3", cpu_limit="4", memory_request="1Gi", memory_limit="2Gi"),
        )
        pod_resources = pod_from_dict(raw).pod_resources
        assert pod_resources is not None
        assert {"cpu": 3000, "memory": GI} == dict(pod_resources.requests)

    def test_hugepages_limit_defaults_from_containers_and_request_from_limit(self) -> None:
        """Container hugepages limits fill a missing pod hugepages limit; the pod request equals it."""
        hp = {"hugepages-2Mi": "512Mi"}
        raw = make_pod(
            containers=[container("a", cpu="1", memory="1Gi", requests=hp, limits=hp)],
            pod_resources=resources(cpu="2", memory="2Gi"),
        )
        pod_resources = pod_from_dict(raw).pod_resources
        assert pod_resources is not None
        assert (512 * MI, 512 * MI) == (pod_resources.requests["hugepages-2Mi"], pod_resources.limits["hugepages-2Mi"])

    def test_hugepages_request_defaults_to_pod_limit_not_aggregate(self) -> None:
        """Hugepages cannot be overcommitted, so the pod request is the pod limit even below it."""
        hp = {"hugepages-2Mi": "512Mi"}
        raw = make_pod(
            containers=[container("a", cpu="1", memory="1Gi", requests=hp, limits=hp)],
            pod_resources={"limits": {"cpu": "2", "memory": "2Gi", "hugepages-2Mi": "1Gi"}},
        )
        assert GI == pod_from_dict(raw).pod_resources.requests["hugepages-2Mi"]  # type: ignore[union-attr]

    def test_defaulting_is_idempotent(self) -> None:
        """Writing the defaulted pod requests explicitly gives the same PodView."""
        implicit = pod_from_dict(
            make_pod(
                containers=[container("a", cpu_request="2", memory_request="2Gi")],
                pod_resources=resources(cpu_limit="4", memory_limit="4Gi"),
            )
        )
        explicit = pod_from_dict(
            make_pod(
                containers=[container("a", cpu_request="2", memory_request="2Gi")],
                pod_resources=resources(cpu_request="2", cpu_limit="4", memory_request="2Gi", memory_limit="4Gi"),
            )
        )
        assert implicit == explicit


class TestEffectiveRequests:
    @pytest.mark.parametrize(
        ("app", "init", "expected"),
        [
            ([container("a", cpu_request="1"), container("b", cpu_request="2")], [], {"cpu": 3000}),
            ([container("a", cpu_request="1")], [container("i", cpu_request="4")], {"cpu": 4000}),
            # sidecar before the init container: the init container runs next to it
            (
                [container("a", cpu_request="1")],
                [sidecar("s", cpu_request="1"), container("i", cpu_request="3")],
                {"cpu": 4000},
            ),
            # sidecar after the init container: the init container runs alone
            (
                [container("a", cpu_request="1")],
                [container("i", cpu_request="3"), sidecar("s", cpu_request="1")],
                {"cpu": 3000},
            ),
            # sidecars always add to the app sum
            (
                [container("a", cpu_request="2")],
                [container("i", cpu_request="1"), sidecar("s", cpu_request="500m")],
                {"cpu": 2500},
            ),
            # resources are maximised independently
            (
                [container("a", cpu_request="1", memory_request="4Gi")],
                [container("i", cpu_request="3", memory_request="1Gi")],
                {"cpu": 3000, "memory": 4 * GI},
            ),
            ([container("a")], [], {}),
        ],
    )
    def test_aggregate_formula(self, app: list[Any], init: list[Any], expected: dict[str, int]) -> None:
        """max(sum(app) + sum(sidecars), max_i(init_i + sidecars declared before i)), per resource."""
        assert expected == dict(effective_requests(pod_from_dict(make_pod(containers=app, init_containers=init))))

    @settings(max_examples=150, deadline=None)
    @given(
        app=st.lists(st.tuples(st.integers(0, 8000), st.integers(0, 4096)), min_size=1, max_size=4),
        init=st.lists(st.tuples(st.booleans(), st.integers(0, 8000), st.integers(0, 4096)), max_size=4),
    )
    def test_effective_requests_cover_every_container(
        self, app: list[tuple[int, int]], init: list[tuple[bool, int, int]]
    ) -> None:
        """No single container requests more of any resource than the pod's effective request."""
        apps = [
            container(f"a{i}", cpu_request=f"{cpu}m", memory_request=f"{mem}Mi") for i, (cpu, mem) in enumerate(app)
        ]
        inits = [
            (sidecar if side else container)(f"i{i}", cpu_request=f"{cpu}m", memory_request=f"{mem}Mi")
            for i, (side, cpu, mem) in enumerate(init)
        ]
        pod = pod_from_dict(make_pod(containers=apps, init_containers=inits))
        total = effective_requests(pod)
        short = [
            (c.name, name)
            for c in pod.all_containers
            for name, value in c.resources.requests.items()
            if value > total.get(name, 0)
        ]
        assert [] == short


def test_mirror_pod_cgroup_uid() -> None:
    """A static pod's mirror names the kubelet's uid (the config hash) in an annotation; plain pods use their uid."""
    from agent.pods.model import pod_from_dict
    from tests.support.podfactory import make_pod

    raw = make_pod("etcd", containers=[container("etcd")])
    plain = pod_from_dict(raw)
    raw["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "0123456789abcdef0123456789abcdef"}
    raw["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": "node-1", "uid": "n-1"}]
    mirror = pod_from_dict(raw)
    assert (plain.uid, "0123456789abcdef0123456789abcdef") == (plain.cgroup_uid, mirror.cgroup_uid)


_OWNERS: dict[str, object] = {
    "none": None,
    "a ReplicaSet": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "node-1", "uid": "r"}],
    "another Node": [{"apiVersion": "v1", "kind": "Node", "name": "node-2", "uid": "n-2"}],
    "a Node of another API group": [{"apiVersion": "x.example/v1", "kind": "Node", "name": "node-1", "uid": "n"}],
    "not a list": {"kind": "Node"},
}


@pytest.mark.parametrize("owners", sorted(_OWNERS))
def test_mirror_annotation_without_a_node_owner_is_refused(owners: str) -> None:
    """Only a pod its own Node owns is a mirror pod: elsewhere the annotation is kept aside, the cgroup is the pod's."""
    from agent.pods.model import pod_from_dict
    from tests.support.podfactory import make_pod

    raw = make_pod("tenant", containers=[container("app")])
    raw["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "0123456789abcdef0123456789abcdef"}
    if _OWNERS[owners] is not None:
        raw["metadata"]["ownerReferences"] = _OWNERS[owners]
    view = pod_from_dict(raw)
    assert (raw["metadata"]["uid"], None, "0123456789abcdef0123456789abcdef") == (
        view.cgroup_uid,
        view.mirror_of,
        view.mirror_refused,
    )
