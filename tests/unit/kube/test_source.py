"""KubeSource over loopback with the real official client, and load_api's configuration order."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from agent.kube import KubeConfigError, KubeSource, PodEvent, load_api
from tests.support.apiserver_emulator import ApiServerEmulator
from tests.support.pod_events import Collector, running

NODE = "node-1"


def pod(name: str, node: str | None = NODE, **spec: Any) -> dict[str, Any]:
    """A minimal valid pod manifest (bound to ``node``)."""
    body: dict[str, Any] = {"containers": [{"name": "app", "image": "busybox"}], **spec}
    if node is not None:
        body["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "default"}, "spec": body}


@pytest.fixture
def emulator() -> Iterator[ApiServerEmulator]:
    with ApiServerEmulator() as em:
        yield em


def source(em: ApiServerEmulator, **kwargs: Any) -> KubeSource:
    kwargs.setdefault("watch_timeout", 5)
    kwargs.setdefault("backoff", (0.01, 0.05))
    return KubeSource(NODE, em.api(), **kwargs)


def watches(em: ApiServerEmulator) -> list[dict[str, str]]:
    return [dict(r.query) for r in em.requests if r.query.get("watch") == "true"]


def lists(em: ApiServerEmulator) -> int:
    return sum(1 for r in em.requests if r.method == "GET" and "watch" not in r.query)


class TestListThenWatch:
    def test_sync_then_watch_from_the_list_version(self, emulator: ApiServerEmulator) -> None:
        """The first list is one SYNC; the watch resumes from its version with bookmarks and a timeout."""
        emulator.add_pod(pod("a"))
        emulator.add_pod(pod("b"))
        with running(source(emulator)) as got:
            got.wait_count(1)
            emulator.wait_for(lambda em: em.active_watches == 1)
        expected_watch = {
            "allowWatchBookmarks": "true",
            "fieldSelector": f"spec.nodeName={NODE}",
            "resourceVersion": "3",
            "timeoutSeconds": "5",
            "watch": "true",
        }
        assert ([("SYNC", ["a", "b"])], expected_watch) == (got.summary(), watches(emulator)[0])

    def test_event_mapping_with_raw_dicts(self, emulator: ApiServerEmulator) -> None:
        """ADDED and MODIFIED become UPSERT, DELETED becomes DELETE, each carrying the API's raw dict."""
        with running(source(emulator)) as got:
            got.wait_count(1)
            added = emulator.add_pod(pod("a"))
            modified = emulator.update_pod({**pod("a"), "status": {"phase": "Running"}})
            deleted = emulator.delete_pod("default", "a")
            got.wait_count(4)
        expected = [
            PodEvent("SYNC", ()),
            PodEvent("UPSERT", (added,)),
            PodEvent("UPSERT", (modified,)),
            PodEvent("DELETE", (deleted,)),
        ]
        assert expected == got.events

    def test_fields_unknown_to_the_client_models_survive(self, emulator: ApiServerEmulator) -> None:
        """A pod the client's models would reject (no containers, a future field) arrives untouched."""
        odd = {"metadata": {"name": "odd", "namespace": "default"}, "spec": {"nodeName": NODE, "futureField": {"x": 1}}}
        emulator.add_pod(odd)
        with running(source(emulator)) as got:
            got.wait_count(1)
            late = emulator.add_pod({**odd, "metadata": {"name": "late", "namespace": "default"}})
            got.wait_count(2)
        assert ({"x": 1}, late) == (got.events[0].pods[0]["spec"]["futureField"], got.events[1].pods[0])

    def test_pods_of_other_nodes_never_arrive(self, emulator: ApiServerEmulator) -> None:
        """The nodeName field selector is honoured in list and watch."""
        emulator.add_pod(pod("other-1", "node-2"))
        emulator.add_pod(pod("mine-1"))
        with running(source(emulator)) as got:
            got.wait_count(1)
            emulator.add_pod(pod("other-2", "node-2"))
            emulator.add_pod(pod("unscheduled", None))
            emulator.add_pod(pod("mine-2"))
            got.wait_count(2)
            time.sleep(0.05)
        assert [("SYNC", ["mine-1"]), ("UPSERT", ["mine-2"])] == got.summary()

    def test_non_object_watch_event_is_logged_and_skipped(self, emulator: ApiServerEmulator) -> None:
        """A watch event whose object is not a JSON object is logged; the stream goes on."""
        with capture_logs() as logs, running(source(emulator)) as got:
            got.wait_count(1)
            emulator.wait_for(lambda em: em.active_watches == 1)
            emulator.inject_watch_event({"type": "ADDED", "object": "garbage"})
            emulator.add_pod(pod("a"))
            got.wait_count(2)
        bad = [entry for entry in logs if entry["event"] == "watch.bad_event"]
        assert ([("SYNC", []), ("UPSERT", ["a"])], [("ADDED", "str")]) == (
            got.summary(),
            [(entry["type"], entry["object_type"]) for entry in bad],
        )


class TestResume:
    def test_bookmark_advances_the_resume_version(self, emulator: ApiServerEmulator) -> None:
        """After a BOOKMARK the next watch resumes from the bookmark's version, not the last pod's."""
        with running(source(emulator)) as got:
            got.wait_count(1)
            emulator.wait_for(lambda em: em.active_watches == 1)
            emulator.add_pod(pod("elsewhere", "node-2"))
            emulator.send_bookmarks()
            bookmark = str(emulator.resource_version)
            emulator.wait_for(lambda em: em.active_watches == 1)
            time.sleep(0.05)
            emulator.drop_watches(abrupt=False)
            emulator.wait_for(lambda em: len(watches(em)) == 2)
        assert (["1", bookmark], 1) == ([w["resourceVersion"] for w in watches(emulator)], lists(emulator))

    def test_clean_stream_end_rewatches_from_the_last_event(self, emulator: ApiServerEmulator) -> None:
        """When the server ends the stream the source re-watches from the newest version, without a relist."""
        with running(source(emulator)) as got:
            got.wait_count(1)
            emulator.add_pod(pod("a"))
            got.wait_count(2)
            emulator.drop_watches(abrupt=False)
            emulator.wait_for(lambda em: len(watches(em)) == 2)
        assert (["1", "2"], 1) == ([w["resourceVersion"] for w in watches(emulator)], lists(emulator))

    def test_gone_relists_and_logs(self, emulator: ApiServerEmulator) -> None:
        """410 Gone on re-watch leads to a relist, a new SYNC and a ``watch.relisted`` log line."""
        emulator.add_pod(pod("a"))
        with capture_logs() as logs, running(source(emulator)) as got:
            got.wait_count(1)
            emulator.add_pod(pod("elsewhere", "node-2"))
            emulator.compact_history()
            emulator.add_pod(pod("b"))
            emulator.drop_watches()
            got.wait(lambda events: len(events) >= 2 and events[-1].kind == "SYNC")
        relisted = [e for e in logs if e["event"] == "watch.relisted"]
        assert ([("SYNC", ["a"]), ("SYNC", ["a", "b"])], [("gone", 2)]) == (
            got.summary(),
            [(e["reason"], e["pods"]) for e in relisted],
        )

    def test_errors_back_off_with_full_jitter_then_recover(self, emulator: ApiServerEmulator) -> None:
        """A dropped stream and two 500s wait base*2**(n-1) (jitter 1.0) before each retry, then recover."""
        delays: list[float] = []

        def sleep(stop: threading.Event, seconds: float) -> None:
            delays.append(seconds)
            stop.wait(seconds)

        with running(source(emulator, backoff=(0.01, 0.03), sleep=sleep, jitter=lambda: 1.0)) as got:
            got.wait_count(1)
            emulator.wait_for(lambda em: em.active_watches == 1)
            emulator.fail_next(3, 500)
            emulator.drop_watches()
            emulator.add_pod(pod("a"))
            got.wait_count(2)
        assert ([0.01, 0.02, 0.03, 0.03], ["SYNC", "UPSERT"]) == (delays, [e.kind for e in got.events])

    def test_jitter_scales_the_delay(self, emulator: ApiServerEmulator) -> None:
        """Full jitter: the delay is the jitter draw times the capped exponential."""
        delays: list[float] = []
        emulator.fail_next(1, 503)

        def sleep(_stop: threading.Event, seconds: float) -> None:
            delays.append(seconds)

        with running(source(emulator, backoff=(0.4, 10.0), sleep=sleep, jitter=lambda: 0.25)) as got:
            got.wait_count(1)
        assert [0.1] == delays

    def test_failed_list_is_retried(self, emulator: ApiServerEmulator) -> None:
        """A failing first list is logged and retried; the SYNC comes from the retry."""
        emulator.add_pod(pod("a"))
        emulator.fail_next(1, 500)
        with capture_logs() as logs, running(source(emulator)) as got:
            got.wait_count(1)
        failed = [e for e in logs if e["event"] == "watch.list_failed"]
        assert ([("SYNC", ["a"])], ["HTTP 500 Internal Server Error"]) == (
            got.summary(),
            [e["error"] for e in failed],
        )


class TestResync:
    def test_periodic_resync_on_real_time(self, emulator: ApiServerEmulator) -> None:
        """With resync_period=0.5 the watch times out at 1 s and a second SYNC follows."""
        emulator.add_pod(pod("a"))
        start = time.monotonic()
        with running(source(emulator, resync_period=0.5)) as got:
            got.wait_count(2, timeout=3.0)
        elapsed = time.monotonic() - start
        assert (["SYNC", "SYNC"], "1", True) == (
            [e.kind for e in got.events],
            watches(emulator)[0]["timeoutSeconds"],
            elapsed < 2.0,
        )

    def test_resync_when_the_clock_says_so(self, emulator: ApiServerEmulator) -> None:
        """After resync_period (on the injected clock) the next loop relists and logs ``watch.resynced``."""
        now = [1000.0]
        with capture_logs() as logs, running(source(emulator, resync_period=300.0, clock=lambda: now[0])) as got:
            got.wait_count(1)
            emulator.wait_for(lambda em: em.active_watches == 1)
            emulator.add_pod(pod("a"))
            got.wait_count(2)
            now[0] += 301.0
            emulator.drop_watches(abrupt=False)
            got.wait_count(3)
        resynced = [e for e in logs if e["event"] == "watch.resynced"]
        assert (["SYNC", "UPSERT", "SYNC"], 1) == ([e.kind for e in got.events], len(resynced))


class TestStop:
    @pytest.mark.parametrize("delay", [0.0, 0.001, 0.005, 0.02, 0.05] * 4)
    def test_stop_within_a_second_mid_watch(self, emulator: ApiServerEmulator, delay: float) -> None:
        """Stop right after the first SYNC (or a few ms later) returns within 1 s with a 60 s watch timeout."""
        src = KubeSource(NODE, emulator.api(), watch_timeout=60)
        got = Collector()
        stop = threading.Event()
        thread = threading.Thread(target=src.run, args=(got, stop), daemon=True)
        thread.start()
        got.wait_count(1)
        time.sleep(delay)
        start = time.monotonic()
        stop.set()
        thread.join(1.0)
        assert (False, True) == (thread.is_alive(), time.monotonic() - start < 1.0)

    def test_stop_during_backoff(self, emulator: ApiServerEmulator) -> None:
        """A stop while waiting out a long backoff returns promptly."""
        emulator.fail_next(100, 500)
        src = source(emulator, backoff=(30.0, 30.0), jitter=lambda: 1.0)
        stop = threading.Event()
        thread = threading.Thread(target=src.run, args=(Collector(), stop), daemon=True)
        thread.start()
        emulator.wait_for(lambda em: len(em.requests) >= 1)
        time.sleep(0.05)
        start = time.monotonic()
        stop.set()
        thread.join(1.0)
        assert (False, True, 1) == (thread.is_alive(), time.monotonic() - start < 1.0, len(emulator.requests))

    def test_emit_errors_propagate(self, emulator: ApiServerEmulator) -> None:
        """An exception from the consumer's emit ends run() instead of being retried as a watch failure."""

        def emit(_event: PodEvent) -> None:
            raise RuntimeError("consumer bug")

        with pytest.raises(RuntimeError, match=r"^consumer bug$"):
            source(emulator).run(emit, threading.Event())


class TestValidation:
    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"resync_period": 0}, "KubeSource resync_period: must be > 0, got 0"),
            ({"watch_timeout": 0}, "KubeSource watch_timeout: must be a whole number of seconds >= 1, got 0"),
            ({"backoff": (2.0, 1.0)}, "KubeSource backoff: want (base, cap) with 0 < base <= cap, got (2.0, 1.0)"),
        ],
    )
    def test_bad_arguments(self, emulator: ApiServerEmulator, kwargs: dict[str, Any], message: str) -> None:
        """Bad constructor arguments are refused with a message naming the argument and value."""
        with pytest.raises(ValueError) as caught:
            KubeSource(NODE, emulator.api(), **kwargs)
        assert message == str(caught.value)


def kubeconfig(path: Path, server: str, token: str) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: k, cluster: {{server: '{server}'}}}}]\n"
        f"users: [{{name: u, user: {{token: {token}}}}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    return path


class TestLoadApi:
    def test_in_cluster_first(self, tmp_path: Path) -> None:
        """Without --kubeconfig, in-cluster config wins over $KUBECONFIG."""
        (tmp_path / "token").write_text("sa-token")
        (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
        cfg = kubeconfig(tmp_path / "kc", "http://127.0.0.1:1", "t")
        env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": "6443", "KUBECONFIG": str(cfg)}
        api = load_api(None, environ=env, service_account_dir=tmp_path, home=tmp_path)
        configuration = api.configuration
        assert ("https://127.0.0.1:6443", "bearer sa-token") == (
            configuration.host,
            configuration.api_key["BearerToken"],
        )

    def test_explicit_kubeconfig_wins_over_in_cluster(self, tmp_path: Path) -> None:
        """A file named with --kubeconfig is used even inside a cluster."""
        (tmp_path / "token").write_text("sa-token")
        (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
        env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": "6443"}
        cfg = kubeconfig(tmp_path / "kc", "http://127.0.0.1:1", "t")
        api = load_api(str(cfg), environ=env, service_account_dir=tmp_path, home=tmp_path)
        assert "http://127.0.0.1:1" == api.configuration.host

    def test_kubeconfig_file_reaches_the_server_with_its_token(
        self, tmp_path: Path, emulator: ApiServerEmulator
    ) -> None:
        """The --kubeconfig file is used when not in a cluster; requests carry its token."""
        cfg = kubeconfig(tmp_path / "kc", emulator.url, "t0k")
        api = load_api(str(cfg), environ={}, service_account_dir=tmp_path, home=tmp_path)
        api.list_pod_for_all_namespaces(_preload_content=False)
        assert ["Bearer t0k"] == [r.authorization for r in emulator.requests]

    def test_env_kubeconfig_then_home(self, tmp_path: Path, emulator: ApiServerEmulator) -> None:
        """$KUBECONFIG is used when no file is given, ~/.kube/config when neither is."""
        env_cfg = kubeconfig(tmp_path / "env-kc", emulator.url, "from-env")
        (tmp_path / ".kube").mkdir()
        kubeconfig(tmp_path / ".kube" / "config", emulator.url, "from-home")
        api_env = load_api(None, environ={"KUBECONFIG": str(env_cfg)}, service_account_dir=tmp_path, home=tmp_path)
        api_home = load_api(None, environ={}, service_account_dir=tmp_path, home=tmp_path)
        api_env.list_pod_for_all_namespaces(_preload_content=False)
        api_home.list_pod_for_all_namespaces(_preload_content=False)
        assert ["Bearer from-env", "Bearer from-home"] == [r.authorization for r in emulator.requests]

    def test_nothing_works(self, tmp_path: Path) -> None:
        """With no configuration anywhere the error names each attempt and why it failed."""
        with pytest.raises(KubeConfigError) as caught:
            load_api(None, environ={}, service_account_dir=tmp_path / "sa", home=tmp_path)
        expected = (
            "no Kubernetes API configuration found; tried "
            f"in-cluster ({tmp_path}/sa): Service host/port is not set.; "
            "$KUBECONFIG: not set; "
            f"~/.kube/config ({tmp_path}/.kube/config): no such file"
        )
        assert expected == str(caught.value)

    def test_missing_explicit_file(self, tmp_path: Path) -> None:
        """A --kubeconfig that does not exist is the error; nothing else is tried."""
        with pytest.raises(KubeConfigError) as caught:
            load_api(str(tmp_path / "missing"), environ={}, service_account_dir=tmp_path / "sa", home=tmp_path)
        assert f"--kubeconfig {tmp_path}/missing: no such file" == str(caught.value)

    def test_broken_file_is_named(self, tmp_path: Path) -> None:
        """A kubeconfig that does not load is reported with the loader's reason."""
        broken = tmp_path / "kc"
        broken.write_text("")
        with pytest.raises(KubeConfigError) as caught:
            load_api(str(broken), environ={}, service_account_dir=tmp_path / "sa", home=tmp_path)
        assert f"--kubeconfig {broken}: Invalid kube-config. {broken} file is empty" == str(caught.value)
