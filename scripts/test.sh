#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh"
"$ROOT/scripts/browser.sh"
VENV="${NEARDUP_VENV:-$ROOT/.venv}"
export PYSPARK_PYTHON="$VENV/bin/python" PYSPARK_DRIVER_PYTHON="$VENV/bin/python"
cd "$ROOT"
exec "$VENV/bin/python" -m pytest "$@"
