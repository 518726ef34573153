"""Run text-dedup's Spark MinHash script unchanged and record its clusters.

    spark-submit [spark options] benchmarks/peer_textdedup.py --script PATH/minhash_spark.py \
        --components OUT.csv -- [the script's own arguments]

A peer for benchmarks/peers.py, run with the separate benchmark venv
(.venv-peers, see benchmarks/setup-peers.sh); it imports nothing from the
project. text-dedup's script is not part of this repository: it is executed
from the path given, as `__main__`, with its own command line.

Runtime patch (the only one): the script writes the *kept* documents but not
which documents it merged, so nothing could be scored. It builds its
clusters as `spark.createDataFrame(all_edges, schema=["__id__",
"__component__"])`, on an RDD it has just cached. This wrapper wraps
`SparkSession.createDataFrame` so that on that one call it also collects the
(document, component) rows to the driver and writes them to --components as
CSV, then hands the call on unchanged. The collect materialises the cache the
script's next join reads, so the added work is one collect and a small file.
Nothing else in the script's behaviour changes. If the script finds no
duplicates it exits before that call; the file is then written empty.
"""

from __future__ import annotations

import argparse
import csv
import runpy
import sys

from pyspark.sql import SparkSession

COMPONENT_SCHEMA = ["__id__", "__component__"]


def main() -> None:
    argv = sys.argv[1:]
    if "--" not in argv:
        raise SystemExit("usage: peer_textdedup.py --script PATH --components OUT.csv -- SCRIPT ARGS...")
    split = argv.index("--")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--script", required=True)
    ap.add_argument("--components", required=True)
    args = ap.parse_args(argv[:split])
    script_args = argv[split + 1:]

    written = {"rows": None}
    original = SparkSession.createDataFrame

    def create_data_frame(self, data, schema=None, *a, **kw):
        if schema == COMPONENT_SCHEMA and written["rows"] is None:
            rows = data.collect()  # the script's cached all_edges RDD: (doc id, component id)
            with open(args.components, "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["doc_id", "component"])
                w.writerows(rows)
            written["rows"] = len(rows)
        return original(self, data, schema, *a, **kw)

    SparkSession.createDataFrame = create_data_frame
    sys.argv = [args.script, *script_args]
    try:
        runpy.run_path(args.script, run_name="__main__")
    except SystemExit as e:  # the script's sys.exit(0) when it finds no duplicates
        if e.code not in (0, None):
            raise
    finally:
        if written["rows"] is None:
            with open(args.components, "w", newline="") as f:
                csv.writer(f).writerow(["doc_id", "component"])
            written["rows"] = 0
    print(f"peer_textdedup: wrote {written['rows']} (document, component) rows to {args.components}")


if __name__ == "__main__":
    main()
