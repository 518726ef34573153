#!/usr/bin/env bash
# Print the jars an Iceberg Hadoop catalog needs on pyspark 3.5 (Scala 2.12), comma-separated,
# making them on first use:
# - Apache Iceberg's Spark runtime jar. Maven Central is not always reachable; the jar
#   ships inside the PyPI wheel snowpark-connect-deps-iceberg==1.0.3, so pip fetches it.
# - That copy lacks the Jackson classes Iceberg relocates under org.apache.iceberg.shaded
#   (NoClassDefFoundError ...shaded/com/fasterxml/jackson/core/JsonGenerator on the first
#   write), so pyspark's own Jackson jars are relocated there (scripts/relocate_jar.py).
#   usage: PYTHON=<a python with pyspark 3.5> scripts/iceberg-jar.sh [DEST_DIR]   (default: .ci/jars)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${1:-$ROOT/.ci/jars}"
JAR="iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
WHEEL="snowpark-connect-deps-iceberg==1.0.3"
PYTHON="${PYTHON:-python3}"
mkdir -p "$DEST"
if [ ! -s "$DEST/$JAR" ]; then
  "$PYTHON" "$ROOT/scripts/jar_from_wheel.py" "$WHEEL" "snowpark_connect_deps_iceberg/jars/$JAR" "$DEST/$JAR"
fi
JARS_DIR="$("$PYTHON" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
CORE="$(ls "$JARS_DIR"/jackson-core-2.*.jar | head -1)"
VERSION="$(basename "$CORE" .jar)"; VERSION="${VERSION#jackson-core-}"
JACKSON="iceberg-shaded-jackson-$VERSION.jar"
if [ ! -s "$DEST/$JACKSON" ]; then
  "$PYTHON" "$ROOT/scripts/relocate_jar.py" "$DEST/$JACKSON.part" com/fasterxml/jackson \
      org/apache/iceberg/shaded/com/fasterxml/jackson "$CORE" "$JARS_DIR"/jackson-databind-2.*.jar \
      "$JARS_DIR"/jackson-annotations-2.*.jar
  mv "$DEST/$JACKSON.part" "$DEST/$JACKSON"
fi
echo "$DEST/$JAR,$DEST/$JACKSON"
