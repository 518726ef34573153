"""`python -m neardup_spark ...` is the `neardup` command; this file is also the entry file
for spark-submit (`neardup job-file` prints its path), so it imports absolutely."""

import sys

from neardup_spark.cli import main

if __name__ == "__main__":
    sys.exit(main())
