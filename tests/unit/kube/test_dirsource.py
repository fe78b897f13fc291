"""DirSource and manifest parsing: files in a temp directory become SYNCs of this node's pods."""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from agent.kube import DirSource
from agent.pods import ManifestError, parse_manifest, stable_uid
from tests.support.pod_events import Collector, names, running

NODE = "node-1"


def pod_yaml(name: str, *, node: str | None = None, namespace: str | None = None, image: str = "busybox") -> str:
    lines = ["apiVersion: v1", "kind: Pod", "metadata:", f"  name: {name}"]
    if namespace:
        lines.append(f"  namespace: {namespace}")
    lines += ["spec:", f"  containers: [{{name: app, image: {image}}}]"]
    if node is not None:
        lines.append(f"  nodeName: '{node}'")
    return "\n".join(lines) + "\n"


def write(path: Path, text: str) -> None:
    """Replace a file atomically, as editors and ConfigMap updates do."""
    tmp = path.with_name("." + path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class TestScan:
    def test_reads_yaml_yml_json_in_name_order(self, tmp_path: Path) -> None:
        """Every .yaml/.yml/.json file counts, in file-name order; other and hidden files are ignored."""
        (tmp_path / "b.yml").write_text(pod_yaml("b"))
        (tmp_path / "a.yaml").write_text(pod_yaml("a"))
        (tmp_path / "c.json").write_text(json.dumps({"kind": "Pod", "metadata": {"name": "c"}, "spec": {}}))
        (tmp_path / "d.txt").write_text(pod_yaml("d"))
        (tmp_path / ".e.yaml").write_text(pod_yaml("e"))
        (tmp_path / "f.yaml").mkdir()
        assert ["a", "b", "c"] == names(DirSource(tmp_path, NODE).scan())

    def test_multi_document_and_lists(self, tmp_path: Path) -> None:
        """Multi-document YAML, kind List and PodList all yield their Pods; other kinds are skipped."""
        (tmp_path / "multi.yaml").write_text(
            pod_yaml("m1") + "---\n---\nkind: ConfigMap\nmetadata: {name: cfg}\n---\n" + pod_yaml("m2")
        )
        (tmp_path / "list.yaml").write_text(
            "kind: List\nitems:\n- {kind: Pod, metadata: {name: l1}}\n- {kind: Service, metadata: {name: svc}}\n"
        )
        (tmp_path / "podlist.json").write_text(json.dumps({"kind": "PodList", "items": [{"metadata": {"name": "p1"}}]}))
        assert ["l1", "m1", "m2", "p1"] == names(DirSource(tmp_path, NODE).scan())

    def test_node_filter(self, tmp_path: Path) -> None:
        """Pods with nodeName unset, empty or this node count; pods of other nodes do not."""
        (tmp_path / "a.yaml").write_text(
            pod_yaml("unset")
            + "---\n"
            + pod_yaml("empty", node="")
            + "---\n"
            + pod_yaml("mine", node=NODE)
            + "---\n"
            + pod_yaml("other", node="node-2")
        )
        assert ["unset", "empty", "mine"] == names(DirSource(tmp_path, NODE).scan())

    def test_stable_uid_from_namespace_and_name(self, tmp_path: Path) -> None:
        """A pod without uid gets uuid5(namespace/name), the same on every rescan; a given uid is kept."""
        path = tmp_path / "a.yaml"
        path.write_text(pod_yaml("a") + "---\nkind: Pod\nmetadata: {name: b, uid: given}\n")
        source = DirSource(tmp_path, NODE)
        first = [p["metadata"]["uid"] for p in source.scan()]
        write(
            path,
            pod_yaml("a", namespace="default", image="nginx") + "---\nkind: Pod\nmetadata: {name: b, uid: given}\n",
        )
        again = [p["metadata"]["uid"] for p in source.scan()]
        expected = [str(uuid.uuid5(uuid.UUID("6f0c3f2e-7a43-5d1e-9b8a-5e0d1c2b3a41"), "default/a")), "given"]
        assert (expected, expected, expected[0]) == (first, again, stable_uid("default", "a"))

    def test_bad_file_is_reported_once_and_others_count(self, tmp_path: Path) -> None:
        """A file that fails to parse is logged, counted and passed to on_error once; other files still count."""
        (tmp_path / "bad.yaml").write_text("kind: Pod\n  bad: indent\n")
        (tmp_path / "good.yaml").write_text(pod_yaml("good"))
        seen: list[ManifestError] = []
        source = DirSource(tmp_path, NODE, on_error=seen.append)
        with capture_logs() as logs:
            first, second = source.scan(), source.scan()
        problem = "cannot parse: line 2, column 6: mapping values are not allowed in this context"
        expected_log = {
            "event": "source.manifest_error",
            "log_level": "warning",
            "node": NODE,
            "file": str(tmp_path / "bad.yaml"),
            "error": problem,
        }
        assert (["good"], ["good"], [expected_log], [f"{tmp_path / 'bad.yaml'}: {problem}"], 1) == (
            names(first),
            names(second),
            logs,
            [str(e) for e in seen],
            source.source_errors,
        )

    def test_duplicate_pod_in_two_files(self, tmp_path: Path) -> None:
        """The same namespace/name in two files: the first file's pod counts, the second is reported."""
        (tmp_path / "a.yaml").write_text(pod_yaml("dup", image="one"))
        (tmp_path / "b.yaml").write_text(pod_yaml("dup", image="two"))
        seen: list[ManifestError] = []
        pods = DirSource(tmp_path, NODE, on_error=seen.append).scan()
        uid = stable_uid("default", "dup")
        assert (
            ["one"],
            [f"{tmp_path / 'b.yaml'}: pod uid {uid} is already defined in {tmp_path / 'a.yaml'}; ignored"],
        ) == (
            [p["spec"]["containers"][0]["image"] for p in pods],
            [str(e) for e in seen],
        )

    def test_missing_directory_is_reported_once(self, tmp_path: Path) -> None:
        """A missing directory is one error and no pods, until it appears."""
        seen: list[ManifestError] = []
        source = DirSource(tmp_path / "pods", NODE, on_error=seen.append)
        before = (source.scan(), source.scan())
        (tmp_path / "pods").mkdir()
        (tmp_path / "pods" / "a.yaml").write_text(pod_yaml("a"))
        assert (((), ()), [f"{tmp_path / 'pods'}: cannot list the directory: No such file or directory"], ["a"]) == (
            before,
            [str(e) for e in seen],
            names(source.scan()),
        )

    def test_unlistable_directory_keeps_the_last_pods(self, tmp_path: Path) -> None:
        """A directory that vanishes after a good scan keeps its last pods instead of reporting none."""
        pods = tmp_path / "pods"
        pods.mkdir()
        (pods / "a.yaml").write_text(pod_yaml("a"))
        source = DirSource(pods, NODE, on_error=lambda _: None)
        first = names(source.scan())
        pods.rename(tmp_path / "moved")
        assert (["a"], ["a"]) == (first, names(source.scan()))


class TestRun:
    def test_no_sync_while_the_directory_cannot_be_listed(self, tmp_path: Path) -> None:
        """No SYNC is emitted for a directory that cannot be listed: an empty one would release every pod."""
        with running(DirSource(tmp_path / "absent", NODE, poll_interval=0.02, use_inotify=False)) as got:
            time.sleep(0.2)
            staging = tmp_path / "staging"  # the directory appears with its file (a poll between would list it empty)
            staging.mkdir()
            (staging / "a.yaml").write_text(pod_yaml("a"))
            staging.rename(tmp_path / "absent")
            got.wait_for_names(lambda n: n == ["a"])
        assert [["a"]] == [names(e.pods) for e in got.events]

    @pytest.mark.parametrize("use_inotify", [True, False], ids=["inotify", "poll"])
    def test_add_modify_delete(self, tmp_path: Path, use_inotify: bool) -> None:
        """Adding, modifying and deleting files each produce a SYNC of the new set."""
        (tmp_path / "a.yaml").write_text(pod_yaml("a"))
        interval = 30.0 if use_inotify else 0.02  # inotify must not need the poll
        with running(DirSource(tmp_path, NODE, poll_interval=interval, use_inotify=use_inotify)) as got:
            got.wait_for_names(lambda n: n == ["a"])
            (tmp_path / "b.yaml").write_text(pod_yaml("b"))
            got.wait_for_names(lambda n: n == ["a", "b"])
            write(tmp_path / "b.yaml", pod_yaml("b2"))
            got.wait_for_names(lambda n: n == ["a", "b2"])
            (tmp_path / "a.yaml").unlink()
            got.wait_for_names(lambda n: n == ["b2"])
        assert [["a"], ["a", "b"], ["a", "b2"], ["b2"]] == [names(e.pods) for e in got.events]

    def test_no_sync_when_pods_are_unchanged(self, tmp_path: Path) -> None:
        """A file edit that leaves the pods as they were (a comment) emits nothing."""
        (tmp_path / "a.yaml").write_text(pod_yaml("a"))
        with running(DirSource(tmp_path, NODE, poll_interval=0.02, use_inotify=False)) as got:
            got.wait_for_names(lambda n: n == ["a"])
            write(tmp_path / "a.yaml", "# a comment\n" + pod_yaml("a"))
            (tmp_path / "b.yaml").write_text(pod_yaml("b"))
            got.wait_for_names(lambda n: n == ["a", "b"])
        assert [["a"], ["a", "b"]] == [names(e.pods) for e in got.events]

    def test_fixing_a_bad_file_adds_its_pods(self, tmp_path: Path) -> None:
        """A bad file contributes nothing until it is fixed, then its pods arrive."""
        (tmp_path / "a.yaml").write_text("kind: [\n")
        with running(DirSource(tmp_path, NODE, poll_interval=0.02)) as got:
            got.wait_for_names(lambda n: n == [])
            write(tmp_path / "a.yaml", pod_yaml("fixed"))
            got.wait_for_names(lambda n: n == ["fixed"])
        assert [[], ["fixed"]] == [names(e.pods) for e in got.events]

    def test_stop_is_prompt_with_a_long_poll(self, tmp_path: Path) -> None:
        """run() returns soon after stop even with a 30 s poll interval."""
        for use_inotify in (True, False):
            source = DirSource(tmp_path, NODE, poll_interval=30.0, use_inotify=use_inotify)
            stop = threading.Event()
            got = Collector()
            thread = threading.Thread(target=source.run, args=(got, stop), daemon=True)
            thread.start()
            got.wait_for_names(lambda n: n == [])
            start = time.monotonic()
            stop.set()
            thread.join(1.0)
            assert (False, True) == (thread.is_alive(), time.monotonic() - start < 0.5)

    def test_bad_poll_interval(self, tmp_path: Path) -> None:
        """A non-positive poll interval is refused, naming the argument."""
        with pytest.raises(ValueError) as caught:
            DirSource(tmp_path, NODE, poll_interval=0)
        assert "DirSource poll_interval: must be > 0, got 0" == str(caught.value)


class TestParseManifest:
    @pytest.mark.parametrize(
        ("name", "data", "message"),
        [
            (
                "a.yaml",
                b"kind: Pod\nmetadata: {name: [x\n",
                (
                    "a.yaml: cannot parse: line 3, column 1: did not find expected ',' or ']' "
                    "(while parsing a flow sequence)"
                ),
            ),
            ("b.json", b'{"kind": ', "b.json: cannot parse: Expecting value: line 1 column 10 (char 9)"),
            ("c.yaml", b"\xff\xfe", "c.yaml: not UTF-8 text (invalid start byte at byte 0)"),
            ("d.yaml", b"- 1\n", "d.yaml: document 1 is a list, not an object"),
            ("e.yaml", b"kind: Pod\n---\nmetadata: {}\n", "e.yaml: document 2 has no kind"),
            ("f.yaml", b"kind: List\nitems: [{metadata: {}}]\n", "f.yaml: document 1: items[0] has no kind"),
            ("g.yaml", b"kind: List\nitems: {a: 1}\n", "g.yaml: document 1: items is a dict, not a list"),
            ("h.yaml", b"kind: List\nitems: [3]\n", "h.yaml: document 1: items[0] is a int, not an object"),
        ],
    )
    def test_errors_name_file_and_document(self, name: str, data: bytes, message: str) -> None:
        """Each kind of broken manifest is refused with a message naming the file and the place."""
        with pytest.raises(ManifestError) as caught:
            parse_manifest(name, data)
        assert message == str(caught.value)

    def test_empty_files_hold_no_pods(self) -> None:
        """Empty YAML and JSON files are valid and hold no pods."""
        assert ((), ()) == (parse_manifest("a.yaml", b""), parse_manifest("b.json", b"  \n"))

    def test_odd_pods_are_kept(self) -> None:
        """A Pod with odd fields is passed on (the consumer judges it), only a uid is added."""
        (only,) = parse_manifest("a.yaml", b"kind: Pod\nmetadata: {name: x}\nspec: {containers: 7}\n")
        assert {
            "kind": "Pod",
            "metadata": {"name": "x", "uid": stable_uid("default", "x")},
            "spec": {"containers": 7},
        } == only
