"""YAML and JSON text from people and disks to plain values, with bounds that keep one bad file harmless.

Pod manifests (``--pods-dir``), the configuration file and the checkpoint are
text that podpin did not write or cannot trust (``docs/design.md``, "Parsers
and their errors"). PyYAML's safe loader constructs no objects, but it still
expands aliases: a one-kilobyte "billion laughs" document becomes a structure
whose JSON form is gigabytes, and an alias to its own parent becomes a cycle
that ``json.dumps`` refuses. Python's JSON decoder recurses once per bracket.
So every document goes through one of the two loaders here:

* :func:`load_yaml_documents`: the safe loader's constructor (plain values
  only) behind a composer that expands aliases within bounds, as kubectl's
  parser does (PyYAML itself writes an anchor whenever one object appears
  twice): it stops at :data:`MAX_DEPTH` nested collections and
  :data:`MAX_NODES` values, counting each alias as every value it repeats,
  refuses an alias inside the value it names (a cycle), gives every alias a
  copy of its own, and refuses integer and float scalars longer than
  :data:`MAX_NUMBER_CHARS` characters (PyYAML turns ``0x...`` and ``1:2:3...``
  into unbounded integers). libyaml parses when PyYAML has it (four times
  faster than the pure-Python parser, which is the fallback);
* :func:`load_json`: ``json.loads`` with the same depth bound, checked without
  recursion, and the decoder's own ``RecursionError`` turned into a clean error.

Both take text of at most :data:`MAX_DOCUMENT_BYTES` and raise only
:class:`DocumentError`, whose message is one line (``line L, column C: problem``
where a position is known). Reading the bytes with the size limit is the
caller's job (this module is pure: no file access).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent, CollectionStartEvent, NodeEvent
from yaml.nodes import Node, ScalarNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

__all__ = [
    "MAX_DEPTH",
    "MAX_DOCUMENT_BYTES",
    "MAX_NODES",
    "MAX_NUMBER_CHARS",
    "DocumentError",
    "check_depth",
    "load_json",
    "load_yaml",
    "load_yaml_documents",
]

#: Largest document accepted (1 MiB, the API server's own limit for one object is 1.5 MiB of JSON; a pod
#: manifest or configuration is a few kilobytes). Callers read at most this many bytes plus one.
MAX_DOCUMENT_BYTES = 1 << 20
#: Deepest nesting of mappings and lists accepted. A pod nests about 12 deep
#: (``spec.affinity.nodeAffinity...matchExpressions[].values[]``), a checkpoint 7.
MAX_DEPTH = 64
#: Most values (scalars, lists and mappings) in one YAML file: a pod is a few hundred, and parsing 50,000
#: takes about half a second.
MAX_NODES = 50_000
#: Longest integer or float scalar accepted in YAML (int64 has 19 digits).
MAX_NUMBER_CHARS = 64


class DocumentError(ValueError):
    """Text that is not an acceptable YAML or JSON document; the message is one line."""


def _where(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""


class _BoundedComposer(Composer):
    """The composer of :class:`_BoundedLoader`: aliases expanded within bounds; nesting and node count bounded.

    Each value counts once, and each alias counts as every value of the node it repeats, so
    :data:`MAX_NODES` bounds the document as a reader sees it once the aliases are expanded (what a billion-laughs
    document multiplies), and an alias may not reach deeper than :data:`MAX_DEPTH` either. An alias inside the
    node it names (a cycle) is refused. kubectl's YAML parser bounds aliases the same way instead of refusing them,
    and PyYAML writes anchors whenever one object appears twice, so manifests and configurations may use them.
    """

    def __init__(self) -> None:
        super().__init__()
        self._depth = 0
        self._nodes = 0
        self.aliases_used = False
        # Per collection being composed: [values in it, height of its tallest child].
        self._frames: list[list[int]] = []
        # id(anchored node) -> (the node, its values, its height), once it is complete; the node is kept so the id
        # cannot be reused by another node while the document is composed.
        self._sizes: dict[int, tuple[Node, int, int]] = {}

    def compose_document(self) -> Node | None:
        self._sizes = {}
        return super().compose_document()

    def _count(self, where: Any, added: int, what: str = "") -> None:
        self._nodes += added
        if self._nodes > MAX_NODES:
            raise DocumentError(f"{_where(where)}more than {MAX_NODES} values in one file{what}")

    def _add_to_parent(self, values: int, height: int) -> None:
        if self._frames:
            frame = self._frames[-1]
            frame[0] += values
            frame[1] = max(frame[1], height)

    def _alias(self, event: AliasEvent, parent: Node | None, index: int) -> Node | None:
        target = self.anchors.get(event.anchor)
        if target is None:  # PyYAML's own "found undefined alias" error
            return super().compose_node(parent, index)
        size = self._sizes.get(id(target))
        if size is None or size[0] is not target:
            raise DocumentError(
                f"{_where(event.start_mark)}the alias *{event.anchor} is inside the value it names (a cycle)"
            )
        _, values, height = size
        self._count(event.start_mark, values, f" once its aliases are expanded (*{event.anchor})")
        if self._depth + height > MAX_DEPTH:
            raise DocumentError(
                f"{_where(event.start_mark)}nested deeper than {MAX_DEPTH} levels once *{event.anchor} is expanded"
            )
        self._add_to_parent(values, height)
        self.aliases_used = True
        return super().compose_node(parent, index)

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        event = self.peek_event()  # type: ignore[attr-defined]
        if isinstance(event, AliasEvent):
            return self._alias(event, parent, index)
        self._count(event.start_mark, 1)
        if not isinstance(event, CollectionStartEvent):
            node = super().compose_node(parent, index)
            values, height = 1, 0
        else:
            if self._depth >= MAX_DEPTH:
                raise DocumentError(f"{_where(event.start_mark)}nested deeper than {MAX_DEPTH} levels")
            self._depth += 1
            self._frames.append([1, 0])
            try:
                node = super().compose_node(parent, index)
            finally:
                self._depth -= 1
                values, tallest = self._frames.pop()
            height = tallest + 1
        if isinstance(event, NodeEvent) and event.anchor is not None and node is not None:
            self._sizes[id(node)] = (node, values, height)
        self._add_to_parent(values, height)
        return node


class _BoundedConstructor(SafeConstructor):
    """``SafeConstructor`` refusing number scalars longer than :data:`MAX_NUMBER_CHARS`."""

    @staticmethod
    def _short_number(node: Node) -> None:
        if isinstance(node, ScalarNode) and len(node.value) > MAX_NUMBER_CHARS:
            raise DocumentError(
                f"{_where(node.start_mark)}a number of {len(node.value)} characters "
                f"(at most {MAX_NUMBER_CHARS}); quote it if it is text"
            )

    def construct_yaml_int(self, node: ScalarNode) -> int:
        self._short_number(node)
        return super().construct_yaml_int(node)

    def construct_yaml_float(self, node: ScalarNode) -> float:
        self._short_number(node)
        return super().construct_yaml_float(node)


# The stubs bind constructors to PyYAML's own loader classes; these are plain (self, node) methods all the same.
_BoundedConstructor.add_constructor("tag:yaml.org,2002:int", _BoundedConstructor.construct_yaml_int)  # type: ignore[type-var]
_BoundedConstructor.add_constructor("tag:yaml.org,2002:float", _BoundedConstructor.construct_yaml_float)  # type: ignore[type-var]


class _PurePythonLoader(Reader, Scanner, Parser, _BoundedComposer, _BoundedConstructor, Resolver):
    """PyYAML's own parser under the bounded composer (where PyYAML was built without libyaml)."""

    def __init__(self, stream: str) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        _BoundedComposer.__init__(self)
        _BoundedConstructor.__init__(self)
        Resolver.__init__(self)


_Loader: type[_PurePythonLoader] | type[_LibyamlLoader]

if yaml.__with_libyaml__:
    from yaml._yaml import CParser

    class _LibyamlLoader(_BoundedComposer, CParser, _BoundedConstructor, Resolver):
        """libyaml's parser (about four times faster than PyYAML's) under the bounded composer."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            _BoundedConstructor.__init__(self)
            Resolver.__init__(self)
            _BoundedComposer.__init__(self)

    _Loader = _LibyamlLoader
else:  # pragma: no cover - PyYAML's wheels ship libyaml; a source build may not
    _Loader = _PurePythonLoader


def _describe(err: yaml.YAMLError) -> str:
    """One line: ``line L, column C: problem (context)``."""
    if isinstance(err, yaml.MarkedYAMLError) and err.problem_mark is not None:
        context = f" ({err.context})" if err.context else ""
        return f"{_where(err.problem_mark)}{err.problem}{context}"
    return " ".join(str(err).split())


def _check_size(text: str, limit: int = MAX_DOCUMENT_BYTES) -> None:
    if len(text) > limit:
        raise DocumentError(f"larger than {limit} bytes")


def _unshared(value: Any) -> Any:
    """A copy in which no list or mapping appears twice: an alias's value becomes a value of its own.

    The constructor hands an alias the very object of its anchor; a caller that changes one (defaulting a pod's
    fields) must not change the other. The composer bounded the expanded size, so the copy is bounded too.
    """
    if isinstance(value, dict):
        return {key: _unshared(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_unshared(item) for item in value]
    return value


def _documents(text: str, pure_python: bool) -> Iterator[Any]:
    loader = _PurePythonLoader(text) if pure_python else _Loader(text)
    try:
        while loader.check_data():  # type: ignore[no-untyped-call]
            data = loader.get_data()
            yield _unshared(data) if loader.aliases_used else data
    finally:
        loader.dispose()


def load_yaml_documents(text: str, *, pure_python: bool = False) -> list[Any]:
    """Every document of a YAML stream (``---`` separated), as plain values (``None`` for an empty one).

    ``pure_python`` uses PyYAML's own parser even where libyaml is there (the
    fallback must refuse the same documents; tests compare the two).

    Raises:
        DocumentError: a syntax error, an undefined or cyclic alias, more than
            :data:`MAX_NODES` values or nesting deeper than :data:`MAX_DEPTH` (aliases
            expanded), a number longer than :data:`MAX_NUMBER_CHARS`, or text longer
            than :data:`MAX_DOCUMENT_BYTES`.
    """
    _check_size(text)
    try:
        return list(_documents(text, pure_python))
    except yaml.YAMLError as err:
        raise DocumentError(_describe(err)) from None
    except RecursionError:  # the depth bound keeps the composer shallow; this is the backstop
        raise DocumentError(f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as err:  # a constructor's int() or float() on a scalar PyYAML resolved as a number
        if isinstance(err, DocumentError):
            raise
        raise DocumentError(f"bad scalar: {err}") from None


def load_yaml(text: str) -> Any:
    """The one document of a YAML text (``None`` when empty).

    Raises:
        DocumentError: as :func:`load_yaml_documents`, or more than one document.
    """
    documents = load_yaml_documents(text)
    if len(documents) > 1:
        raise DocumentError(f"{len(documents)} YAML documents; expected one")
    return documents[0] if documents else None


def check_depth(value: Any, limit: int = MAX_DEPTH) -> None:
    """Refuse a decoded value whose lists and mappings nest deeper than ``limit`` (checked without recursion).

    Raises:
        DocumentError: naming the limit.
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth >= limit:
            raise DocumentError(f"nested deeper than {limit} levels")
        stack.extend((child, depth + 1) for child in children)


def load_json(text: str, *, max_depth: int = MAX_DEPTH, max_bytes: int = MAX_DOCUMENT_BYTES) -> Any:
    """One JSON value, nested at most ``max_depth`` deep.

    Raises:
        DocumentError: not JSON (with the decoder's position), too deep, or
            longer than ``max_bytes`` characters.
    """
    _check_size(text, max_bytes)
    try:
        value = json.loads(text)
    except RecursionError:
        raise DocumentError(f"nested deeper than {max_depth} levels") from None
    except ValueError as err:  # JSONDecodeError, and int() beyond Python's digit limit
        raise DocumentError(" ".join(str(err).split())) from None
    check_depth(value, max_depth)
    return value
