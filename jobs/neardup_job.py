"""spark-submit entry point: the same commands and options as the `neardup` CLI.

    spark-submit --master yarn --py-files neardup_spark.zip \
        jobs/neardup_job.py run --input s3://bucket/articles/ --format parquet \
        --id-col id --text-col text --output s3://bucket/dedup/2026-11-30 --config conf/cluster.toml

The master comes from spark-submit unless --master or [spark] master names one.
"""

import sys

from neardup_spark.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
