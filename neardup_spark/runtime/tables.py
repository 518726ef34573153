"""Catalog tables as a run's outputs: `<prefix>_clusters`, `<prefix>_pairs`,
`<prefix>_deduplicated` (and `<prefix>_boilerplate`).

With `output.table = "catalog.schema.prefix"` the tables a run would write under
`output.path` are saved to the session's catalog instead, each with one
`saveAsTable`, in `output.table_format` or, left empty, the catalog's own default
(Delta on Databricks, `spark.sql.sources.default` with Spark's built-in catalog,
Iceberg in an Iceberg catalog). `output.path` keeps what is not a table:
report.json, plots, and scratch.

Everything that can be checked is checked before the work: the name, the
namespace, the format's data source, tables already there, and (for a job whose
session ends with it) a catalog that would forget its tables. After writing,
each table's row count is read back and compared with the run's own counts.

There is no transaction across tables: each table is replaced whole (by its
catalog's own semantics), one after the other, and the report, written last,
says the output is complete.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from neardup_spark.config import table_name_parts as name_parts
from neardup_spark.errors import NeardupError

if TYPE_CHECKING:  # pragma: no cover - the CLI names tables before it imports pyspark
    from pyspark.sql import DataFrame, SparkSession

# The data sources whose classes come from outside Spark, and where users get them.
_WHERE_FROM = {
    "delta": "Delta Lake (the delta-spark package, io.delta:delta-spark_<scala>; Databricks has it built in)",
    "iceberg": "Apache Iceberg (iceberg-spark-runtime-<spark>_<scala>.jar, and an Iceberg catalog)",
}


def table_name(prefix: str, name: str) -> str:
    """`prefix_name` as a (possibly qualified) table name."""
    parts = name_parts(prefix)
    last = parts[-1]
    parts[-1] = f"{last[:-1]}_{name}`" if last.startswith("`") else f"{last}_{name}"
    return ".".join(parts)


def table_names(prefix: str, names) -> dict[str, str]:
    return {name: table_name(prefix, name) for name in names}


def check_format(spark: SparkSession, fmt: str) -> None:
    """`fmt` names a data source this session can load, or a one-line NeardupError.
    Under Spark Connect (no JVM at hand) the write itself reports it."""
    if not fmt:
        return
    try:
        jvm, jspark = spark.sparkContext._jvm, spark._jsparkSession
    except Exception:  # noqa: BLE001 - Spark Connect
        return
    try:
        jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
            fmt, jspark.sessionState().conf())
    except Exception as exc:  # noqa: BLE001 - py4j wraps the JVM's ClassNotFoundException
        source = _WHERE_FROM.get(fmt.lower(), f"the package that provides the {fmt!r} data source")
        raise NeardupError(f"output.table_format {fmt!r} is not on this session's classpath: add {source}, "
                           "or leave the format to the catalog's default") from _short(exc)


def _short(exc: Exception) -> Exception | None:
    return None if "Py4J" in type(exc).__name__ else exc


def _catalog_of(spark: SparkSession, parts: list[str]) -> str:
    """The catalog a table name resolves in: its first part when that names a configured
    catalog (and the name has more than two parts, or a catalog of that name exists), else the current one."""
    first = parts[0].strip("`")
    if len(parts) >= 3 or (len(parts) == 2 and _configured(spark, first)):
        return first
    return spark.catalog.currentCatalog()


def _configured(spark: SparkSession, catalog: str) -> bool:
    return catalog == "spark_catalog" or bool(spark.conf.get(f"spark.sql.catalog.{catalog}", None))


def forgets_tables(spark: SparkSession, prefix: str) -> bool:
    """Tables named by `prefix` land in Spark's in-memory session catalog: they are gone
    (their files orphaned) when the session ends."""
    catalog = _catalog_of(spark, name_parts(prefix))
    if catalog != "spark_catalog" or spark.conf.get("spark.sql.catalog.spark_catalog", None):
        return False
    return spark.conf.get("spark.sql.catalogImplementation", "in-memory") == "in-memory"


def require_kept(spark: SparkSession, prefix: str) -> None:
    """A job whose session ends with it (the CLI, spark-submit) refuses an in-memory catalog."""
    if forgets_tables(spark, prefix):
        raise NeardupError(
            f"output.table {prefix!r} is in Spark's in-memory catalog, which forgets its tables when this job "
            "ends: give a catalog that keeps them (--conf spark.sql.catalogImplementation=hive, an Iceberg or "
            "Unity catalog), or write files with --output alone")


# Spark's session catalog (spark_catalog: Hive or in-memory) takes schema and table names of
# ASCII letters, digits and _ only (SessionCatalog.validateName), and checks them only once a
# table's files are written; its tables are folders, whose names a filesystem caps at 255 bytes.
_SESSION_PART = re.compile(r"[A-Za-z0-9_]+")
_NAME_BYTES = 255


def check_name(spark: SparkSession, full: str) -> None:
    """`full` is a table name Spark's parser reads and its catalog takes, or a one-line
    NeardupError, before anything is written (a name refused by saveAsTable leaves its
    files behind)."""
    from neardup_spark.errors import one_line

    try:
        spark.catalog.tableExists(full)  # parsed by Spark itself (on the server under Connect)
    except Exception as exc:  # noqa: BLE001 - ParseException, or the catalog's own refusal
        raise NeardupError(f"output.table: {full} is not a table name Spark takes: {one_line(exc)}") from None
    parts = name_parts(full)
    if _catalog_of(spark, parts) != "spark_catalog":
        return
    names = parts[1:] if len(parts) == 3 else parts
    for part in names:
        plain = part[1:-1].replace("``", "`") if part.startswith("`") else part
        if not _SESSION_PART.fullmatch(plain):
            raise NeardupError(f"output.table: {full} is not a name Spark's session catalog takes: {part} may hold "
                               "only ASCII letters, digits and _")
        if len(plain.encode()) > _NAME_BYTES:
            raise NeardupError(f"output.table: {full} is too long: a table's folder name takes at most "
                               f"{_NAME_BYTES} bytes")


def check_tables(spark: SparkSession, prefix: str, fmt: str, names, mode: str, may_exist: bool = False) -> None:
    """Before any work: the tables `prefix`_name can be written as `mode` says (see module doc)."""
    parts = name_parts(prefix)
    for full in table_names(prefix, names).values():
        check_name(spark, full)
    check_format(spark, fmt)
    if len(parts) > 1:
        namespace = ".".join(parts[:-1])
        if not _namespace_exists(spark, namespace):
            raise NeardupError(f"output.table {prefix!r}: the namespace {namespace!r} does not exist "
                               f"(CREATE SCHEMA {namespace} makes it)")
    if mode == "overwrite" or may_exist:
        return
    there = [full for full in table_names(prefix, names).values() if spark.catalog.tableExists(full)]
    if there:
        what = f"tables {', '.join(there)} already exist" if len(there) > 1 else f"table {there[0]} already exists"
        raise NeardupError(f"output {what}; pass --overwrite (output.mode = 'overwrite') to replace "
                           f"{'them' if len(there) > 1 else 'it'}")


def _namespace_exists(spark: SparkSession, namespace: str) -> bool:
    try:
        return spark.catalog.databaseExists(namespace)
    except Exception:  # noqa: BLE001 - an unknown catalog
        return False


def save_tables(spark: SparkSession, frames: dict[str, DataFrame], prefix: str, fmt: str, mode: str,
                expected: dict[str, int] | None = None) -> dict[str, str]:
    """Each frame saved as the table `prefix`_name (`mode`: error or overwrite), then, with
    `expected`, its rows counted back from the catalog. Returns {name: table name}."""
    from neardup_spark.runtime.storage import StorageError, writer_mode  # pyspark: see TYPE_CHECKING

    full = table_names(prefix, frames)
    for name, df in frames.items():  # one at a time: catalogs commit table creations one by one
        writer = df.write.mode(writer_mode(mode))
        if fmt:
            writer = writer.format(fmt)
        writer.saveAsTable(full[name])
    if expected:
        short = []
        for name, rows in expected.items():
            got = spark.table(full[name]).count()
            if got != rows:
                short.append(f"{full[name]} has {got} rows, the run made {rows}")
        if short:
            raise StorageError(f"the output tables did not come out whole: {'; '.join(short)}")
    return full


__all__ = ["check_format", "check_name", "check_tables", "forgets_tables", "require_kept", "name_parts", "save_tables", "table_name",
           "table_names"]
