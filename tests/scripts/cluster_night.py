"""An index built and a night appended in one spark-submit application (test_deploy):

    spark-submit --master spark://... cluster_night.py ARCHIVE NIGHT INDEX OUTPUT

ARCHIVE and NIGHT are JSON Lines files, INDEX a URI; the night's tables go to OUTPUT."""

import sys

from neardup_spark import Config, build_index, run, session

archive, night, index, output = sys.argv[1:5]
spark = session()  # spark-submit's
cfg = Config().with_overrides({"input.format": "jsonl", "index.path": index})
build_index(spark, cfg.with_overrides({"input.path": archive}))
run(spark, cfg.with_overrides({"input.path": night, "index.append": True, "output.path": output}))
spark.stop()
