#!/usr/bin/env bash
# Every check of docs/style.md ("Enforcement") that is not a test: lint, format, types, import contracts, habits.
# Usage: scripts/lint.sh   (from anywhere; uses the checkout's .venv unless PODPIN_PYTHON names another interpreter)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PODPIN_PYTHON:-.venv/bin/python}
bin=$(dirname "$python")

step() { printf '== %s\n' "$*"; "$@"; }

step "$bin/ruff" check agent tests scripts
step "$bin/ruff" format --check agent tests scripts
step "$bin/mypy"
step "$bin/lint-imports" --no-cache
step "$python" scripts/check_habits.py
