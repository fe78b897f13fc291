"""Command line of gomod.py for tests/cluster/k8s-build.sh: `render VERSION GOMOD` or `check VERSION GOMOD OURS`.

GOMOD is the release's own go.mod (from `go mod download -json`), OURS the committed one. Exit status 1 with one
line per difference when `check` finds the committed module out of step with the pin.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.cluster.gomod import mismatches, parse_release, render_gomod


def main(argv: list[str]) -> int:
    """Run one command; see the module docstring."""
    if len(argv) >= 3 and argv[0] == "render":
        sys.stdout.write(render_gomod(parse_release(argv[1], Path(argv[2]).read_text())))
        return 0
    if len(argv) == 4 and argv[0] == "check":
        problems = mismatches(Path(argv[3]).read_text(), parse_release(argv[1], Path(argv[2]).read_text()))
        for problem in problems:
            sys.stderr.write(f"{argv[3]}: {problem}\n")
        return 1 if problems else 0
    sys.stderr.write(__doc__ or "")
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
