#!/usr/bin/env bash
# The second supported runtime: the whole suite on pyspark 3.5 with the
# GraphFrames backend enabled (GraphFrames 0.8.2 jar, graphframes==0.6 wrapper)
# and Iceberg table outputs (Iceberg 1.10.2 runtime jar),
# in its own venv (.venv-spark35) so the main .venv keeps pyspark 4.x.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export NEARDUP_VENV="$ROOT/.venv-spark35"
export NEARDUP_PYSPARK="pyspark==3.5.9"
export NEARDUP_EXTRA="graphframes==0.6"
"$ROOT/scripts/setup.sh"
"$ROOT/scripts/browser.sh"
NEARDUP_GRAPHFRAMES_JAR="$("$ROOT/scripts/graphframes-jar.sh")"
export NEARDUP_GRAPHFRAMES_JAR
# Table outputs are tested in an Iceberg Hadoop catalog on this leg.
NEARDUP_ICEBERG_JAR="$(PYTHON="$NEARDUP_VENV/bin/python" "$ROOT/scripts/iceberg-jar.sh")"
export NEARDUP_ICEBERG_JAR
export PYSPARK_PYTHON="$NEARDUP_VENV/bin/python" PYSPARK_DRIVER_PYTHON="$NEARDUP_VENV/bin/python"
cd "$ROOT"
exec "$NEARDUP_VENV/bin/python" -m pytest -p no:cacheprovider "$@"
