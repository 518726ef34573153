#!/usr/bin/env bash
# Set up neardup-spark on a fresh machine: Java 17+, a virtual environment at
# .venv/ with the package and its test tools installed. Safe to re-run.
#   NEARDUP_VENV     where the venv goes (default: .venv in the repo root)
#   NEARDUP_PYSPARK  a pip requirement to pin pyspark (e.g. "pyspark==3.5.9")
#   NEARDUP_EXTRA    extra pip requirements (space-separated)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${NEARDUP_VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"

java_major() {
  java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == "1") ? v[2] : v[1]; exit}'
}

if ! command -v java >/dev/null 2>&1 || [ "$(java_major)" -lt 17 ] 2>/dev/null; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "setup: installing openjdk-17-jre-headless (no Java 17+ found)" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  else
    echo "setup: Java 17 or newer is required: install a JDK/JRE 17+ (e.g. openjdk-17-jre-headless) and re-run" >&2
    exit 1
  fi
fi

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
  echo "setup: Python 3.10+ is required as \$PYTHON (found: $("$PYTHON" --version 2>&1 || echo none))" >&2
  exit 1
fi

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1
# Re-install only when the project's requirements changed: re-runs stay quick.
STAMP="$VENV/.neardup-installed"
WANT="$(cat "$ROOT/pyproject.toml"; echo "${NEARDUP_PYSPARK:-} ${NEARDUP_EXTRA:-}")"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  echo "setup: installing neardup-spark and its dependencies into $VENV" >&2
  { "$VENV/bin/python" -m pip install -q --upgrade pip
    # shellcheck disable=SC2086
    "$VENV/bin/python" -m pip install -q -e "$ROOT[test]" ${NEARDUP_PYSPARK:+"$NEARDUP_PYSPARK"} ${NEARDUP_EXTRA:-}
  } 2>&1 | grep -v "is ignored" >&2 || true
  printf '%s' "$WANT" > "$STAMP.tmp"
fi
"$VENV/bin/python" -c "import neardup_spark, pyspark, pandas, pyarrow" || {
  rm -f "$STAMP.tmp"; echo "setup: the package did not install into $VENV" >&2; exit 1; }
[ -f "$STAMP.tmp" ] && mv "$STAMP.tmp" "$STAMP"

# Spark's Python workers must use this interpreter, or Pandas UDFs cannot import
# pandas. The CLI sets it itself; this covers spark-submit and pyspark shells.
if ! grep -q "PYSPARK_PYTHON" "$VENV/bin/activate"; then
  printf '\nexport PYSPARK_PYTHON="%s"\nexport PYSPARK_DRIVER_PYTHON="%s"\n' \
    "$VENV/bin/python" "$VENV/bin/python" >> "$VENV/bin/activate"
fi
echo "setup: ready: $VENV (pyspark $("$VENV/bin/python" -c 'import pyspark; print(pyspark.__version__)'), $(java -version 2>&1 | head -1))" >&2
