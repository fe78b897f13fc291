"""The bounded YAML and JSON loaders: aliases expanded within bounds, nesting, size and numbers bounded, one error type.

Each refused document here is one an attacker (or a bad day) can put into ``--pods-dir``, the configuration or the
checkpoint; on the code before ``agent/safeparse.py`` each of them was accepted and cost the agent later (a cycle
``json.dumps`` refuses, gigabytes of expansion, a ``RecursionError``).
"""

from __future__ import annotations

import json
import tracemalloc

import pytest

from agent.safeparse import (
    MAX_DEPTH,
    MAX_DOCUMENT_BYTES,
    MAX_NODES,
    DocumentError,
    check_depth,
    load_json,
    load_yaml,
    load_yaml_documents,
)


def billion_laughs(levels: int = 9) -> str:
    """The classic alias bomb: 9 levels of 9 aliases each, about 350 bytes, 9**9 strings once expanded."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels):
        refs = ",".join([f"*a{level - 1}"] * 9)
        lines.append(f"a{level}: &a{level} [{refs}]")
    return "\n".join(lines) + "\n"


@pytest.fixture(params=[False, True], ids=["libyaml", "pure-python"])
def pure_python(request: pytest.FixtureRequest) -> bool:
    """Both parsers: libyaml (used where PyYAML has it) and PyYAML's own (the fallback)."""
    value: bool = request.param
    return value


class TestYAMLRefusals:
    @pytest.mark.parametrize(
        ("text", "message"),
        [
            (
                "kind: Pod\nmetadata: &m\n  name: x\n  self: *m\n",
                "line 4, column 9: the alias *m is inside the value it names (a cycle)",
            ),
            (
                billion_laughs(),
                f"line 5, column 30: more than {MAX_NODES} values in one file once its aliases are expanded (*a3)",
            ),
            ("a: *undefined\n", "line 1, column 4: found undefined alias 'undefined'"),
            (
                "a: &x " + "[" * 40 + "]" * 40 + "\nb: " + "[" * 30 + "*x" + "]" * 30 + "\n",
                f"line 2, column 34: nested deeper than {MAX_DEPTH} levels once *x is expanded",
            ),
            (
                "a: 0x" + "f" * 100 + "\n",
                "line 1, column 4: a number of 102 characters (at most 64); quote it if it is text",
            ),
            (
                "a: " + "1:" * 40 + "1\n",
                "line 1, column 4: a number of 81 characters (at most 64); quote it if it is text",
            ),
            (
                "a: " + "9" * 4401 + "\n",
                "line 1, column 4: a number of 4401 characters (at most 64); quote it if it is text",
            ),
            ("a: " + "[" * 100 + "]" * 100 + "\n", "line 1, column 67: nested deeper than 64 levels"),
        ],
        ids=[
            "recursive-alias",
            "billion-laughs",
            "undefined-alias",
            "deep-by-alias",
            "hex-int",
            "sexagesimal-int",
            "4401-digits",
            "deep",
        ],
    )
    def test_refused_with_the_place(self, text: str, message: str, pure_python: bool) -> None:
        """Each hostile document is one DocumentError naming line, column and what is refused, from either parser."""
        with pytest.raises(DocumentError) as caught:
            load_yaml_documents(text, pure_python=pure_python)
        assert message == str(caught.value)

    def test_too_many_values(self, pure_python: bool) -> None:
        """More than MAX_NODES values in one file is refused before they are built."""
        text = "".join(f"- {i}\n" for i in range(MAX_NODES + 1))
        with pytest.raises(DocumentError) as caught:
            load_yaml_documents(text, pure_python=pure_python)
        assert f"line {MAX_NODES}, column 3: more than {MAX_NODES} values in one file" == str(caught.value)

    def test_too_large(self) -> None:
        """Text longer than MAX_DOCUMENT_BYTES is refused unparsed."""
        with pytest.raises(DocumentError) as caught:
            load_yaml_documents("#" * (MAX_DOCUMENT_BYTES + 1))
        assert f"larger than {MAX_DOCUMENT_BYTES} bytes" == str(caught.value)

    def test_syntax_error_is_the_same_error_type(self, pure_python: bool) -> None:
        """A plain syntax error is a DocumentError with the place, not a yaml.YAMLError."""
        with pytest.raises(DocumentError) as caught:
            load_yaml_documents("a: [1, 2\n", pure_python=pure_python)
        assert str(caught.value).startswith("line 2, column 1: ")

    def test_no_python_objects(self, pure_python: bool) -> None:
        """Python tags stay refused (the safe constructor underneath)."""
        with pytest.raises(DocumentError) as caught:
            load_yaml_documents("a: !!python/object/apply:os.system [true]\n", pure_python=pure_python)
        assert "could not determine a constructor for the tag 'tag:yaml.org,2002:python/object/apply:os.system'" in str(
            caught.value
        )


class TestYAMLAccepted:
    def test_a_pod_manifest_stream(self, pure_python: bool) -> None:
        """Ordinary documents load as before: mappings, lists, numbers, quoted long numbers, several documents."""
        text = (
            "kind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - name: app\n"
            "    resources: {limits: {cpu: 2, memory: 1Gi}}\n---\n---\nlong: '" + "9" * 100 + "'\n"
        )
        expected = [
            {
                "kind": "Pod",
                "metadata": {"name": "web"},
                "spec": {"containers": [{"name": "app", "resources": {"limits": {"cpu": 2, "memory": "1Gi"}}}]},
            },
            None,
            {"long": "9" * 100},
        ]
        assert expected == load_yaml_documents(text, pure_python=pure_python)

    def test_anchors_and_aliases_are_expanded(self, pure_python: bool) -> None:
        """What kubectl accepts and PyYAML writes: an anchor, its aliases and a merge key, each a value of its own."""
        text = (
            "defaults: &limits {cpu: 2, memory: 1Gi}\n"
            "containers:\n- {name: a, resources: {limits: *limits, requests: *limits}}\n"
            "- {name: b, resources: {limits: {<<: *limits, cpu: 4}}}\n"
        )
        value = load_yaml_documents(text, pure_python=pure_python)[0]
        a, b = value["containers"]
        expected_a = {
            "name": "a",
            "resources": {"limits": {"cpu": 2, "memory": "1Gi"}, "requests": {"cpu": 2, "memory": "1Gi"}},
        }
        assert (expected_a, {"cpu": 4, "memory": "1Gi"}) == (a, b["resources"]["limits"])
        assert (False, False) == (
            a["resources"]["limits"] is a["resources"]["requests"],
            value["defaults"] is a["resources"]["limits"],
        )

    def test_aliases_up_to_the_bound(self, pure_python: bool) -> None:
        """Aliases that expand to exactly MAX_NODES values are fine: the bound counts the expanded document."""
        # The root list, an anchored list of 1000 values, 48 aliases of it and 999 numbers: 50000 values.
        text = "- &l [" + ",".join(["1"] * 999) + "]\n" + "- *l\n" * 48 + "- 1\n" * 999
        value = load_yaml_documents(text, pure_python=pure_python)[0]
        assert (1048, 999) == (len(value), len(value[48]))
        with pytest.raises(DocumentError) as caught:
            load_yaml_documents(text + "- 1\n", pure_python=pure_python)
        assert f"line 1049, column 3: more than {MAX_NODES} values in one file" == str(caught.value)

    def test_nesting_up_to_the_bound(self, pure_python: bool) -> None:
        """Exactly MAX_DEPTH nested lists are fine."""
        text = "[" * MAX_DEPTH + "]" * MAX_DEPTH
        value = load_yaml_documents(text, pure_python=pure_python)[0]
        depth = 0
        while isinstance(value, list) and value:
            value, depth = value[0], depth + 1
        assert MAX_DEPTH - 1 == depth

    def test_load_yaml_wants_one_document(self) -> None:
        """load_yaml gives the one document, None for none, and refuses two."""
        with pytest.raises(DocumentError) as caught:
            load_yaml("a: 1\n---\nb: 2\n")
        assert (None, {"a": 1}, "2 YAML documents; expected one") == (
            load_yaml(""),
            load_yaml("a: 1"),
            str(caught.value),
        )


_DIGITS = (
    "Exceeds the limit (4300 digits) for integer string conversion: value has 5000 digits; use "
    "sys.set_int_max_str_digits() to increase the limit"
)


class TestJSON:
    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("[" * 100_000, f"nested deeper than {MAX_DEPTH} levels"),
            ("[" * 65 + "]" * 65, f"nested deeper than {MAX_DEPTH} levels"),
            ('{"a": ' * 70 + "1" + "}" * 70, f"nested deeper than {MAX_DEPTH} levels"),
            ("9" * 5000, _DIGITS),
            ('{"kind": ', "Expecting value: line 1 column 10 (char 9)"),
        ],
        ids=["100k-brackets", "65-brackets", "70-objects", "5000-digits", "truncated"],
    )
    def test_refused(self, text: str, message: str) -> None:
        """Deep nesting, digits beyond Python's limit and syntax errors are one DocumentError (never RecursionError)."""
        with pytest.raises(DocumentError) as caught:
            load_json(text)
        assert message == str(caught.value)

    def test_own_bounds(self) -> None:
        """A caller's depth and size bounds apply (the checkpoint reader's are 16 deep and 1 MiB)."""
        with pytest.raises(DocumentError) as deep:
            load_json("[[[1]]]", max_depth=2)
        with pytest.raises(DocumentError) as large:
            load_json("[1, 2]", max_bytes=5)
        assert ("nested deeper than 2 levels", "larger than 5 bytes", [[[1]]]) == (
            str(deep.value),
            str(large.value),
            load_json("[[[1]]]", max_depth=3),
        )

    def test_check_depth_does_not_recurse(self) -> None:
        """check_depth walks a value nested far beyond the recursion limit without recursing."""
        value: list[object] = []
        for _ in range(50_000):
            value = [value]
        with pytest.raises(DocumentError) as caught:
            check_depth(value, 10)
        assert "nested deeper than 10 levels" == str(caught.value)


class TestMemory:
    @pytest.mark.parametrize(
        "text",
        [
            billion_laughs(),
            "a: " + "[" * (MAX_DOCUMENT_BYTES // 2) + "]" * (MAX_DOCUMENT_BYTES // 2 - 8),
            "".join(f"- {i}\n" for i in range(MAX_NODES + 10)),
        ],
        ids=["billion-laughs", "1MiB-of-brackets", "too-many-values"],
    )
    def test_worst_inputs_stay_small(self, text: str) -> None:
        """The worst documents of at most 1 MiB are refused with a traced peak under 64 MiB (main: 2.9 GB)."""
        tracemalloc.start()
        try:
            with pytest.raises(DocumentError):
                load_yaml_documents(text)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 64 << 20, f"peak {peak >> 20} MiB"

    def test_largest_json_document_stays_small(self) -> None:
        """A 1 MiB JSON document of nested brackets costs no more than a few times its size."""
        text = "[" * (MAX_DOCUMENT_BYTES // 2) + "]" * (MAX_DOCUMENT_BYTES // 2)
        tracemalloc.start()
        try:
            with pytest.raises(DocumentError):
                load_json(text)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 16 << 20, f"peak {peak >> 20} MiB"


def test_round_trip_of_plain_json_values() -> None:
    """A value json.dumps writes is read back equal."""
    value = {"version": 1, "data": {"cpus": {"entries": {"u": {"c": "1-3"}}}, "memory": None}, "n": [1.5, True]}
    assert value == load_json(json.dumps(value))
