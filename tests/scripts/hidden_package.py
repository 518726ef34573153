"""A Connect server's Python workers run under this: `python hidden_package.py -m MODULE ...`
runs MODULE with this checkout's package hidden (its editable-install finder and the
checkout's path removed), so the workers import neardup_spark only from what a client
shipped with addArtifacts, as on a cluster where the package is not installed."""

import runpy
import sys

HIDDEN = sys.argv[1]
sys.meta_path[:] = [f for f in sys.meta_path if not str(getattr(f, "__module__", "")).startswith("__editable__")]
sys.path[:] = [p for p in sys.path if p and p.rstrip("/") != HIDDEN.rstrip("/")]
if sys.argv[2] != "-m":
    sys.exit(f"hidden_package: expected -m MODULE, got {sys.argv[2:]}")
module = sys.argv[3]
sys.argv = [module, *sys.argv[4:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
