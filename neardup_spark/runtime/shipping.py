"""This package shipped to a Spark Connect server, whose Python workers run its UDFs."""

from __future__ import annotations

from pathlib import Path

from neardup_spark.runtime.tempdirs import process_temp_dir


def package_zip() -> str:
    """This package zipped (once per process) for a Spark Connect server's Python workers."""
    import zipfile

    global _PACKAGE_ZIP
    if _PACKAGE_ZIP is None:
        root = Path(__file__).parents[1]
        path = Path(process_temp_dir("neardup-artifact-")) / "neardup_spark.zip"
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            for file in sorted(root.rglob("*.py")):
                zf.write(file, Path("neardup_spark") / file.relative_to(root))
        _PACKAGE_ZIP = str(path)
    return _PACKAGE_ZIP


_PACKAGE_ZIP: str | None = None
