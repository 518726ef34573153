"""Small files of the archive index (its versions) on any filesystem, and one atomic step.

The index's tables are Parquet that Spark reads and writes by URI; what Spark
does not do is the commit: "create version N, unless it exists", atomically,
whole. A Store offers that step and the few reads around it, on:

- `LocalStore`: a local or mounted directory (plain path). The version is
  written whole under a temporary name and hard-linked to its final name:
  link(2) fails when the name exists, atomically.
- `HadoopStore`: any URI the session's Hadoop FileSystem reaches (hdfs://,
  s3a://, abfss://, gs://, dbfs:/, file://). The atomic step is the one the
  filesystem guarantees:
  - HDFS (hdfs, viewfs, webhdfs): write a temporary file, then rename it,
    which the NameNode refuses when the target exists;
  - file://: the local link, done by the JVM;
  - object stores (s3a, gs, abfs, wasb, ...): create without overwrite,
    which GCS and ABFS make conditional on the object being absent and which
    shows the object only whole. S3A does so only where conditional writes
    are on (`fs.s3a.create.conditional.enabled`, Hadoop 3.4.2+); without them
    two appends that start within the same moment can both land, so run one
    nightly job per index at a time there.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from dataclasses import dataclass
from typing import Protocol

from pyspark.sql import SparkSession

from neardup_spark.errors import NeardupError
from neardup_spark.runtime import paths

SPARK_ROW_METADATA = "org.apache.spark.sql.parquet.row.metadata"
_RENAME_ATOMIC = ("hdfs", "viewfs", "webhdfs", "swebhdfs")


class Store(Protocol):
    uri: str  # the root as Spark reads it

    def read_text(self, rel: str) -> str | None: ...
    def list(self, rel: str) -> list[str]: ...
    def exists(self, rel: str) -> bool: ...
    def mkdirs(self, rel: str) -> None: ...
    def put_if_absent(self, rel: str, text: str) -> bool: ...
    def put(self, rel: str, text: str) -> None: ...
    def spark_schema(self, rel: str) -> str | None: ...
    def newest_mtime(self, rel: str) -> float | None: ...
    def delete(self, rel: str) -> None: ...
    def rename(self, src: str, dst: str) -> None: ...


def _is_data(name: str) -> bool:
    return not name.startswith(("_", "."))


@dataclass(frozen=True)
class LocalStore:
    root: str

    @property
    def uri(self) -> str:
        return self.root

    def _p(self, rel: str) -> str:
        return os.path.join(self.root, rel) if rel else self.root

    def read_text(self, rel: str) -> str | None:
        try:
            with open(self._p(rel), encoding="utf-8") as fh:
                return fh.read()
        except FileNotFoundError:
            return None

    def list(self, rel: str) -> list[str]:
        try:
            return sorted(os.listdir(self._p(rel)))
        except FileNotFoundError:
            return []

    def exists(self, rel: str) -> bool:
        return os.path.exists(self._p(rel))

    def mkdirs(self, rel: str) -> None:
        os.makedirs(self._p(rel), exist_ok=True)

    def put_if_absent(self, rel: str, text: str) -> bool:
        folder = os.path.dirname(self._p(rel))
        os.makedirs(folder, exist_ok=True)
        tmp = _synced_temp(folder, text)
        try:
            os.link(tmp, self._p(rel))
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)
        _fsync_dir(folder)
        return True

    def put(self, rel: str, text: str) -> None:
        folder = os.path.dirname(self._p(rel))
        os.makedirs(folder, exist_ok=True)
        os.replace(_synced_temp(folder, text), self._p(rel))

    def newest_mtime(self, rel: str) -> float | None:
        """The newest modification time (epoch seconds) of rel or anything under it; None if absent."""
        path = self._p(rel)
        if not os.path.exists(path):
            return None
        newest = os.path.getmtime(path)
        for top, _, files in os.walk(path):
            for name in files:
                try:
                    newest = max(newest, os.path.getmtime(os.path.join(top, name)))
                except FileNotFoundError:  # removed meanwhile
                    pass
        return newest

    def delete(self, rel: str) -> None:
        """Remove rel and everything under it (absent: nothing to do)."""
        path = self._p(rel)
        try:
            if os.path.isdir(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        except FileNotFoundError:
            pass

    def rename(self, src: str, dst: str) -> None:
        """Move src to dst (which must not exist), atomically: one rename(2)."""
        os.rename(self._p(src), self._p(dst))
        _fsync_dir(os.path.dirname(self._p(dst)))

    def _first_data_file(self, rel: str) -> str | None:
        for top, dirs, files in os.walk(self._p(rel)):
            dirs[:] = sorted(d for d in dirs if _is_data(d))
            for name in sorted(files):
                if _is_data(name) and name.endswith(".parquet"):
                    return os.path.join(top, name)
        return None

    def spark_schema(self, rel: str) -> str | None:
        first = self._first_data_file(rel)
        if first is None:
            return None
        import pyarrow.parquet as pq

        meta = pq.read_schema(first).metadata or {}
        row = meta.get(SPARK_ROW_METADATA.encode())
        return row.decode() if row is not None else ""


def _synced_temp(folder: str, text: str) -> str:
    tmp = os.path.join(folder, f".tmp-{uuid.uuid4().hex}")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    return tmp


def _fsync_dir(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some mounts refuse it; the link itself is done
        pass
    finally:
        os.close(fd)


class HadoopStore:
    """A Store through a JVM's Hadoop FileSystem (`jvm`, a Hadoop Configuration `conf`)."""

    def __init__(self, jvm, conf, uri: str):
        self.jvm, self.conf = jvm, conf
        self.uri = uri.rstrip("/")
        root = jvm.org.apache.hadoop.fs.Path(self.uri)
        self.fs = root.getFileSystem(conf)
        self.scheme = str(self.fs.getScheme())

    def _p(self, rel: str):
        return self.jvm.org.apache.hadoop.fs.Path(f"{self.uri}/{rel}" if rel else self.uri)

    def read_text(self, rel: str) -> str | None:
        path = self._p(rel)
        if not self.fs.exists(path):
            return None
        stream = self.fs.open(path)
        try:
            return str(self.jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
        finally:
            stream.close()

    def list(self, rel: str) -> list[str]:
        path = self._p(rel)
        if not self.fs.exists(path):
            return []
        return sorted(str(s.getPath().getName()) for s in self.fs.listStatus(path))

    def exists(self, rel: str) -> bool:
        return bool(self.fs.exists(self._p(rel)))

    def mkdirs(self, rel: str) -> None:
        self.fs.mkdirs(self._p(rel))

    def _write(self, path, text: str, overwrite: bool) -> None:
        out = self.fs.create(path, overwrite)
        try:
            out.write(bytearray(text.encode("utf-8")))
            out.hflush()
        finally:
            out.close()

    def put_if_absent(self, rel: str, text: str) -> bool:
        target = self._p(rel)
        folder = target.getParent()
        self.fs.mkdirs(folder)
        if self.scheme == "file":
            return self._local_link(target, folder, text)
        if self.scheme in _RENAME_ATOMIC:
            tmp = self.jvm.org.apache.hadoop.fs.Path(folder, f".tmp-{uuid.uuid4().hex}")
            self._write(tmp, text, False)
            try:
                return bool(self.fs.rename(tmp, target))  # false when the target exists
            finally:
                if self.fs.exists(tmp):
                    self.fs.delete(tmp, False)
        try:
            self._write(target, text, False)
        except Exception as exc:  # FileAlreadyExistsException, or a failed precondition
            if "AlreadyExists" in paths.reason(exc) or "PreconditionFailed" in paths.reason(exc) or \
                    "412" in paths.reason(exc):
                return False
            raise
        return True

    def _local_link(self, target, folder, text: str) -> bool:
        """file://: write a temporary file, then link it to the target (java.nio: link(2))."""
        nio = self.jvm.java.nio.file
        local = self.fs.pathToFile(target).toPath()
        tmp = self.fs.pathToFile(self.jvm.org.apache.hadoop.fs.Path(folder, f".tmp-{uuid.uuid4().hex}")).toPath()
        no_options = self.jvm.java.lang.reflect.Array.newInstance(
            self.jvm.java.lang.Class.forName("java.nio.file.OpenOption"), 0)
        nio.Files.write(tmp, bytearray(text.encode("utf-8")), no_options)
        try:
            nio.Files.createLink(local, tmp)
            return True
        except Exception as exc:
            if "FileAlreadyExists" in paths.reason(exc):
                return False
            raise
        finally:
            nio.Files.deleteIfExists(tmp)

    def put(self, rel: str, text: str) -> None:
        self._write(self._p(rel), text, True)

    def newest_mtime(self, rel: str) -> float | None:
        """As LocalStore's; a file that vanishes while it is listed means someone is writing
        there now, so the answer is now."""
        path = self._p(rel)
        try:
            if not self.fs.exists(path):
                return None
            newest = self.fs.getFileStatus(path).getModificationTime()
            files = self.fs.listFiles(path, True)
            while files.hasNext():
                newest = max(newest, files.next().getModificationTime())
        except Exception as exc:  # noqa: BLE001 - py4j wraps the JVM's exception
            if "FileNotFoundException" not in str(exc):
                raise
            return time.time()
        return newest / 1000.0

    def delete(self, rel: str) -> None:
        self.fs.delete(self._p(rel), True)

    def rename(self, src: str, dst: str) -> None:
        """Move src to dst (which must not exist): one rename on HDFS and local disks, a copy
        and delete on object stores."""
        if not self.fs.rename(self._p(src), self._p(dst)):
            raise NeardupError(f"could not move {self.uri}/{src} to {self.uri}/{dst}")

    def _first_data_file(self, rel: str):
        path = self._p(rel)
        if not self.fs.exists(path):
            return None
        files = self.fs.listFiles(path, True)
        while files.hasNext():
            status = files.next()
            name = str(status.getPath().getName())
            inside = str(status.getPath().toUri().getPath())[len(str(path.toUri().getPath())):]
            if name.endswith(".parquet") and all(_is_data(part) for part in inside.split("/") if part):
                return status.getPath()
        return None

    def spark_schema(self, rel: str) -> str | None:
        first = self._first_data_file(rel)
        if first is None:
            return None
        parquet = self.jvm.org.apache.parquet.hadoop
        reader = parquet.ParquetFileReader.open(parquet.util.HadoopInputFile.fromPath(first, self.conf))
        try:
            row = reader.getFooter().getFileMetaData().getKeyValueMetaData().get(SPARK_ROW_METADATA)
        finally:
            reader.close()
        return str(row) if row is not None else ""


def store_for(spark: SparkSession | None, path: str) -> Store:
    """The Store of `path`: a plain local path (and any path without a JVM at hand) is a
    LocalStore; a URI, or a path the session's fs.defaultFS puts elsewhere, a HadoopStore."""
    jvm = paths.hadoop(spark)
    if jvm is None:
        if not paths.is_local_path(path) or path.startswith("file:"):
            if path.startswith("file:"):
                return LocalStore(paths.local_path(path).rstrip("/"))
            raise NeardupError(
                f"the index {path!r} needs the session's Hadoop filesystem, which Spark Connect does not give: "
                "use a local or mounted path (/dbfs/..., /Volumes/...) for the index"
            )
        return LocalStore(path.rstrip("/"))
    if paths.is_local_path(path) and not path.startswith("file:"):
        where = paths.qualified(spark, path)
        if where is None or where.scheme == "file":
            return LocalStore(path.rstrip("/"))
        return HadoopStore(*jvm, str(where))
    return HadoopStore(*jvm, path)
