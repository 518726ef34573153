#!/usr/bin/env bash
# A separate virtual environment for the peer benchmarks (benchmarks/peers.py):
# text-dedup's Spark MinHash script runs from it, never from the project's
# .venv. It holds pyspark at the same version as .venv (so the JVM side is the
# same Spark) plus what that script imports: numpy and scipy, pinned as
# text-dedup's pyproject.toml at commit 6bb8e89 pins them (numpy ^1.23.2,
# scipy 1.10.1), and datasketch for benchmarks/signatures.py.
# text-dedup itself is not installed: peers.py runs its script
# from a checkout outside this repository (see `python -m benchmarks.peers -h`).
#   NEARDUP_PEERS_VENV     where the venv goes (default: .venv-peers in the repo root)
#   NEARDUP_PEERS_PYSPARK  pip requirement for pyspark (default: the version in .venv)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${NEARDUP_PEERS_VENV:-$ROOT/.venv-peers}"
PYTHON="${PYTHON:-python3}"

if [ -z "${NEARDUP_PEERS_PYSPARK:-}" ]; then
  if [ -x "$ROOT/.venv/bin/python" ]; then
    NEARDUP_PEERS_PYSPARK="pyspark==$("$ROOT/.venv/bin/python" -c 'import pyspark; print(pyspark.__version__)')"
  else
    echo "setup-peers: run ./scripts/setup.sh first, or set NEARDUP_PEERS_PYSPARK (e.g. pyspark==4.3.0)" >&2
    exit 1
  fi
fi
if ! "$PYTHON" -c 'import sys; sys.exit(not ((3, 10) <= sys.version_info[:2] < (3, 12)))' 2>/dev/null; then
  echo "setup-peers: text-dedup 6bb8e89 supports Python 3.10-3.11; set \$PYTHON to one (found: $("$PYTHON" --version 2>&1 || echo none))" >&2
  exit 1
fi
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
export PIP_DISABLE_PIP_VERSION_CHECK=1
"$VENV/bin/python" -m pip install -q "$NEARDUP_PEERS_PYSPARK" "numpy>=1.23.2,<2" "scipy==1.10.1" \
  "datasketch==2.0.0" 2>&1 \
  | grep -v "is ignored" >&2 || true
"$VENV/bin/python" -c "import pyspark, numpy, scipy.integrate, datasketch" || {
  echo "setup-peers: the packages did not install into $VENV" >&2; exit 1; }
echo "setup-peers: ready: $VENV ($("$VENV/bin/python" -c 'import pyspark, numpy, scipy; print(f"pyspark {pyspark.__version__}, numpy {numpy.__version__}, scipy {scipy.__version__}")'))" >&2
