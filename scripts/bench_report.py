#!/usr/bin/env python3
"""Regenerate the figures in ``docs/benchmarks.md`` from the benches' JSON records in ``docs/bench/``.

Every ``scripts/bench_*.py`` run with ``--record`` writes to ``docs/bench/<bench>[-<variant>].json``
(``scripts/benchkit.py``). ``docs/benchmarks.md`` holds the prose; where a
section shows figures it holds a block

    <!-- bench-report: agent* -->
    ... generated ...
    <!-- /bench-report -->

whose body this script rewrites from the records the pattern names (a glob
over the file names without ``.json``): each record's provenance line (commit,
machine, date) and its figures as a table. So a figure in the document is
always one a bench produced, with the commit it was produced at, and
``--check`` (run by ``tests/unit/test_benches.py``) fails when the document
was not regenerated after a record changed.

Usage: ``scripts/bench_report.py [--check]``.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from scripts.benchkit import BENCH_DIR, provenance_line

DOC = REPO / "docs" / "benchmarks.md"
BLOCK = re.compile(r"(<!-- bench-report: (?P<pattern>[^ ]+) -->\n)(?P<body>.*?)(<!-- /bench-report -->)", re.DOTALL)


def _cell(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(_cell(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return "" if value is None else str(value)


def flatten(value: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings as dotted keys; lists of mappings are left out (they are tables of their own)."""
    flat: dict[str, Any] = {}
    for key, item in value.items():
        name = f"{prefix}{key}"
        if isinstance(item, dict):
            flat.update(flatten(item, name + "."))
        elif not (isinstance(item, list) and item and isinstance(item[0], dict)):
            flat[name] = item
    return flat


def table(rows: list[dict[str, Any]]) -> str:
    """A Markdown table of ``rows`` (columns: every key, in first-seen order)."""
    flat = [flatten(row) for row in rows]
    columns = list(dict.fromkeys(key for row in flat for key in row))
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(c)) for c in columns) + " |" for row in flat]
    return "\n".join(lines) + "\n"


def _name(record: dict[str, Any]) -> str:
    variant = f" ({record['variant']})" if record["variant"] else ""
    return f"{record['bench']}{variant}"


def figures(records: list[dict[str, Any]]) -> str:
    """Records whose result is one mapping: a figure per line, a column per record."""
    flat = [flatten(record["result"]) for record in records]
    keys = list(dict.fromkeys(key for row in flat for key in row))
    lines = ["| figure | " + " | ".join(_name(r) for r in records) + " |", "|" + "---|" * (len(records) + 1)]
    lines += ["| " + key + " | " + " | ".join(_cell(row.get(key)) for row in flat) + " |" for key in keys]
    return "\n".join(lines) + "\n"


def render_block(pattern: str, records: dict[str, dict[str, Any]]) -> str:
    """The generated body for one block: where each record comes from, then its figures."""
    chosen = [records[name] for name in sorted(records) if fnmatch.fnmatchcase(name, pattern)]
    if not chosen:
        return f"_No record matches `{pattern}` yet: run the bench with `--record`._\n"
    parts = ["".join(f"- {_name(r)}: {provenance_line(r)}\n" for r in chosen)]
    single = [r for r in chosen if isinstance(r["result"], dict)]
    if single:
        parts.append(figures(single))
    for record in chosen:
        result = record["result"]
        rows = result if isinstance(result, list) else []
        rows += [row for v in (result.values() if isinstance(result, dict) else ()) if isinstance(v, list) for row in v]
        if rows and isinstance(rows[0], dict):
            parts.append(f"{_name(record)}:\n\n" + table(rows))
    return "\n".join(parts)


def load(directory: Path) -> dict[str, dict[str, Any]]:
    """Every record in ``directory`` by file name (without ``.json``)."""
    return {path.stem: json.loads(path.read_text()) for path in sorted(directory.glob("*.json"))}


def regenerate(text: str, records: dict[str, dict[str, Any]]) -> str:
    """``text`` with every block's body rewritten."""
    return BLOCK.sub(lambda m: m.group(1) + render_block(m.group("pattern"), records) + m.group(4), text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/benchmarks.md is not current")
    args = parser.parse_args(argv)
    current = DOC.read_text()
    wanted = regenerate(current, load(BENCH_DIR))
    if args.check:
        if wanted != current:
            print("docs/benchmarks.md is not current: run scripts/bench_report.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(wanted)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
