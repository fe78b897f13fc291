#!/usr/bin/env python3
"""The project's habits that no off-the-shelf linter checks (docs/style.md, "Enforcement").

1. **No import cycle between modules** of ``agent/``, counting the imports made only for type
   checking: the strongly connected components of the module graph (grimp builds it, as
   import-linter does) must all be single modules. Prints ``cycles: none``.
2. **No underscore name crosses a module**: nothing in ``agent/`` imports ``_private`` from another
   module.
3. **One ``__init__.py`` convention**: every package of ``agent/`` states ``__all__`` as a literal
   list and only imports and re-exports — no functions, classes or module ``__getattr__``.
4. **Every test has a docstring**: each ``test_*`` function and method under ``tests/``.
5. **Imports go through package faces**: outside a package of ``agent/``, a name its
   ``__init__.py`` exports is imported from the package (``from agent.cgroups import CgroupFS``),
   not from the module behind it (``agent.cgroups.fs``). Names a face does not export on purpose
   (a module that loads protobuf or the Kubernetes client, a command's helpers) are still imported
   from their module. Prints ``deep imports: N``.

Exit status 1 and one line per finding when a habit is broken.

Run: ``.venv/bin/python scripts/check_habits.py``
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parent.parent


def module_cycles(package: str) -> list[list[str]]:
    """Every set of modules of ``package`` that import each other in a loop (Tarjan's algorithm)."""
    graph = grimp.build_graph(package, cache_dir=None)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        # Iterative depth-first search: (module, its imports left to visit).
        work: list[tuple[str, Iterator[str]]] = []
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        work.append((root, iter(sorted(graph.find_modules_directly_imported_by(root)))))
        while work:
            module, imports = work[-1]
            child = next(imports, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[module] = min(low[module], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def _module_name(path: Path, base: Path = REPO) -> str:
    parts = list(path.relative_to(base).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def private_imports(root: Path) -> list[str]:
    """``from <other module> import _name`` anywhere under ``root``."""
    problems = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or node.module is None or node.level:
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    where = path.relative_to(REPO)
                    problems.append(f"{where}:{node.lineno}: imports private {alias.name} from {node.module}")
    return problems


def init_conventions(root: Path) -> list[str]:
    """Packages whose ``__init__.py`` does more than re-export, or states no literal ``__all__``."""
    problems = []
    for path in sorted(root.rglob("__init__.py")):
        where = path.relative_to(REPO)
        tree = ast.parse(path.read_text(), str(path))
        has_all = False
        for node in tree.body:
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # the docstring
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            value: ast.expr | None
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign):
                targets, value = [node.target], node.value
            else:
                targets, value = [], None
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if "__all__" in names and value is not None:
                try:
                    exported = ast.literal_eval(value)
                except ValueError:
                    problems.append(f"{where}:{node.lineno}: __all__ is not a literal list")
                    continue
                has_all = isinstance(exported, list) and all(isinstance(name, str) for name in exported)
                continue
            if names and all(name.startswith("__") for name in names):
                continue  # __version__ and the like
            problems.append(f"{where}:{node.lineno}: an __init__.py only imports and re-exports")
        if not has_all:
            problems.append(f"{where}: no literal __all__")
    return problems


def _faces(root: Path) -> dict[str, frozenset[str]]:
    """Every package of ``root``'s tree and the names its ``__init__.py`` lists in ``__all__``."""
    faces: dict[str, frozenset[str]] = {}
    for path in root.rglob("__init__.py"):
        exported: frozenset[str] = frozenset()
        for node in ast.parse(path.read_text(), str(path)).body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                try:
                    value = ast.literal_eval(node.value)
                except ValueError:
                    continue  # init_conventions reports an __all__ that is not a literal
                exported = frozenset(value) if isinstance(value, list) else frozenset()
        faces[_module_name(path, root.parent)] = exported
    return faces


def deep_imports(root: Path) -> list[str]:
    """``from agent.<package>.<module> import name`` outside that package, for names its face exports.

    The package is the outermost one the importing module is not part of: inside ``agent.alloc``,
    ``agent.alloc.cpumanager.policy_static`` is judged against ``agent.alloc.cpumanager``'s face.
    """
    faces = _faces(root)
    problems = []
    for path in sorted(root.rglob("*.py")):
        here = _module_name(path, root.parent)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom) or node.module is None or node.level:
                continue
            parts = node.module.split(".")
            for depth in range(2, len(parts)):
                package = ".".join(parts[:depth])
                if package not in faces or here == package or here.startswith(package + "."):
                    continue
                names = sorted(alias.name for alias in node.names)
                if set(names) <= faces[package]:
                    where = path.relative_to(root.parent)
                    problems.append(
                        f"{where}:{node.lineno}: imports {', '.join(names)} from {node.module}, "
                        f"not from the face {package}"
                    )
                break
    return problems


def undocumented_tests(root: Path) -> list[str]:
    """``test_*`` functions and methods without a docstring."""
    problems = []
    for path in sorted(root.rglob("test_*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or not node.name.startswith("test_"):
                continue
            if ast.get_docstring(node) is None:
                problems.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.name} has no docstring")
    return problems


def main() -> int:
    """Run every check; print the findings and the cycle summary."""
    sys.path.insert(0, str(REPO))
    cycles = module_cycles("agent")
    problems = [f"import cycle: {' -> '.join(cycle)}" for cycle in cycles]
    problems += private_imports(REPO / "agent")
    problems += init_conventions(REPO / "agent")
    problems += undocumented_tests(REPO / "tests")
    deep = deep_imports(REPO / "agent")
    problems += deep
    for problem in problems:
        print(problem)
    print(f"cycles: {'none' if not cycles else len(cycles)}")
    print(f"deep imports: {len(deep)}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
