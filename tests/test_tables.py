"""Catalog tables as outputs (output.table): the same rows as the Parquet outputs, in
Spark's built-in catalog and (pyspark 3.5 leg, NEARDUP_ICEBERG_JAR) in an Iceberg
catalog; refusals before any work; nightly builds, appends, replays and exports."""

from pathlib import Path

import pandas as pd
import pytest

from neardup_spark import Config, api, cli
from neardup_spark.config import ConfigError
from neardup_spark.errors import NeardupError
from neardup_spark.runtime.tables import forgets_tables, name_parts, table_name

from . import frames, oracles
from .conftest import ICEBERG_CATALOG, ICEBERG_JAR

SPARK = ["--master", "local[2]", "--shuffle-partitions", "2"]
KEYS = {"clusters": ["doc_id"], "pairs": ["doc_a", "doc_b"], "deduplicated": ["id"]}


def _cfg(**more) -> Config:
    return Config().with_overrides({"input.format": "jsonl", "input.path": str(api.SAMPLE), **more})


def _same(spark, table: str, parquet: Path, key: list[str]) -> None:
    got = spark.table(table).toPandas()
    want = pd.read_parquet(parquet)
    assert list(got.columns) == list(want.columns)
    assert len(got) == len(want) > 0
    pd.testing.assert_frame_equal(frames.in_order(got, key), frames.in_order(want, key), check_dtype=False)


@pytest.fixture(scope="module")
def files_run(spark, tmp_path_factory):
    """The bundled sample's run written as Parquet files: what every table must hold."""
    out = tmp_path_factory.mktemp("files") / "out"
    api.run(spark, _cfg(**{"output.path": str(out)}))
    return out


# -- names and config, no JVM ---------------------------------------------------------------------------------


def test_names_take_catalog_schema_and_backquoted_parts():
    assert name_parts("cat.db.dedup") == ["cat", "db", "dedup"]
    assert table_name("cat.db.dedup", "clusters") == "cat.db.dedup_clusters"
    assert table_name("`my.cat`.db.`a b`", "pairs") == "`my.cat`.db.`a b_pairs`"
    for bad in ("", "db.", "a..b", "db.na-me", "db.`open"):
        with pytest.raises(NeardupError, match="not a table name"):
            name_parts(bad)


def test_config_refuses_a_bad_name_and_a_format_without_a_table():
    with pytest.raises(ConfigError, match="not a table name"):
        Config().with_overrides({"output.table": "db.na-me"})
    with pytest.raises(ConfigError, match="output.table_format"):
        Config().with_overrides({"output.table_format": "delta"})


# -- Spark's built-in catalog ---------------------------------------------------------------------------------


@pytest.mark.compat
def test_a_run_writes_the_parquet_outputs_rows_as_tables(spark, files_run, tmp_path):
    out = tmp_path / "run"
    report = api.run(spark, _cfg(**{"output.path": str(out), "output.table": "default.nd_run"}))
    assert report["tables"] == {name: f"default.nd_run_{name}" for name in ("clusters", "pairs", "deduplicated")}
    for name, key in KEYS.items():
        _same(spark, f"default.nd_run_{name}", files_run / name, key)
    # The directory keeps the report only; the tables are not written twice.
    assert sorted(p.name for p in out.iterdir()) == ["report.json"]
    assert '"tables"' in (out / "report.json").read_text()
    assert "tables    default.nd_run_clusters" in report.summary()
    # inspect and the review page read the tables the report names
    dup = spark.table("default.nd_run_clusters").where("status = 'duplicate'").orderBy("doc_id").first()
    shown = api.inspect(spark, str(out), doc=dup.doc_id)
    assert set(shown.doc_id) >= {dup.doc_id, dup.keeper_id}
    assert "<html" in api.review_page(spark, str(out)).lower()


def test_a_run_stopped_between_tables_leaves_no_report_over_them(spark, files_run, tmp_path, monkeypatch):
    """No catalog replaces several tables at once: the old report is withdrawn before the first
    table, a stop between tables leaves the marker (readers say so), the next run replaces all."""
    from neardup_spark.runtime import tables
    from neardup_spark.stages import write

    out = tmp_path / "run"
    cfg = _cfg(**{"output.path": str(out), "output.table": "default.nd_stop", "output.mode": "overwrite"})
    api.run(spark, cfg)
    saved = tables.save_tables

    def first_table_only(spark, frames, *args, **kwargs):
        saved(spark, dict(list(frames.items())[:1]), *args[:3])
        raise KeyboardInterrupt("stopped after the first table")

    monkeypatch.setattr(write, "save_tables", first_table_only)
    with pytest.raises(KeyboardInterrupt):
        api.run(spark, cfg.with_overrides({"verify.threshold": 0.9}))
    assert not (out / "report.json").exists() and (out / "_neardup_publishing.json").exists()
    with pytest.raises(NeardupError, match="stopped while saving its catalog tables .*default.nd_stop_clusters"):
        api.inspect(spark, str(out), doc=1)
    monkeypatch.setattr(write, "save_tables", saved)
    report = api.run(spark, cfg)
    assert report["tables"]["clusters"] == "default.nd_stop_clusters" and (out / "report.json").exists()
    assert sorted(p.name for p in out.iterdir()) == ["report.json"]
    for name, key in KEYS.items():
        _same(spark, f"default.nd_stop_{name}", files_run / name, key)


@pytest.mark.compat
def test_existing_tables_are_refused_before_any_work_unless_overwrite(spark, files_run, tmp_path):
    spark.range(3).write.saveAsTable("default.nd_taken_pairs")
    cfg = _cfg(**{"output.path": str(tmp_path / "a"), "output.table": "nd_taken"})
    with pytest.raises(NeardupError, match="table nd_taken_pairs already exists"):
        api.run(spark, cfg)
    assert not (tmp_path / "a").exists()
    assert not spark.catalog.tableExists("nd_taken_clusters")
    api.run(spark, cfg.with_overrides({"output.mode": "overwrite"}))
    _same(spark, "nd_taken_pairs", files_run / "pairs", KEYS["pairs"])


@pytest.mark.compat
def test_a_missing_namespace_and_an_absent_format_are_one_line_errors(spark, tmp_path):
    with pytest.raises(NeardupError, match="namespace 'no_such_db' does not exist"):
        api.run(spark, _cfg(**{"output.path": str(tmp_path / "a"), "output.table": "no_such_db.nd"}))
    with pytest.raises(NeardupError, match="'delta' is not on this session's classpath: add Delta Lake"):
        api.run(spark, _cfg(**{"output.path": str(tmp_path / "b"), "output.table": "nd_delta",
                               "output.table_format": "delta"}))
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


@pytest.mark.compat
@pytest.mark.parametrize("name,message", [
    ("spark_catalog.default.`x; DROP TABLE y`", "may hold only ASCII letters, digits and _"),
    ("`a.b`", "may hold only ASCII letters, digits and _"),
    ("`caf\u00e9`", "may hold only ASCII letters, digits and _"),
    ("`" + "a" * 250 + "`", "is too long"),
])
def test_a_name_the_catalog_would_refuse_is_refused_before_any_work(spark, tmp_path, name, message):
    """saveAsTable checks a session-catalog name only after writing the table's files."""
    warehouse = Path(spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:"))
    before = set(warehouse.iterdir()) if warehouse.exists() else set()
    with pytest.raises(NeardupError, match=message):
        api.run(spark, _cfg(**{"output.path": str(tmp_path / "o"), "output.table": name}))
    assert not (tmp_path / "o").exists()
    assert (set(warehouse.iterdir()) if warehouse.exists() else set()) == before


@pytest.mark.compat
def test_an_explicit_format_is_the_tables_format(spark, files_run, tmp_path):
    api.run(spark, _cfg(**{"output.path": str(tmp_path / "o"), "output.table": "nd_orc", "output.table_format": "orc"}))
    detail = {r.col_name: r.data_type for r in spark.sql("DESCRIBE TABLE EXTENDED nd_orc_clusters").collect()}
    assert detail["Provider"].lower() == "orc"
    _same(spark, "nd_orc_clusters", files_run / "clusters", KEYS["clusters"])


@pytest.mark.compat
def test_the_cli_refuses_a_catalog_that_forgets_its_tables(spark, tmp_path, capsys):
    assert forgets_tables(spark, "default.nd")  # the tests' session: in-memory
    rc = cli.main(["run", "--input", str(api.SAMPLE), "--format", "jsonl", "--output", str(tmp_path / "o"),
                   "--output-table", "default.nd_cli", *SPARK])
    assert rc == 2
    assert "in-memory catalog" in capsys.readouterr().err
    assert not (tmp_path / "o").exists() and not spark.catalog.tableExists("default.nd_cli_clusters")


@pytest.fixture(scope="module")
def nights(tmp_path_factory):
    work = tmp_path_factory.mktemp("tables-nightly")
    rows = pd.read_json(api.SAMPLE, lines=True)
    return work, oracles.split_into_nights(rows, work, seed=3)


def _nightly(spark, work: Path, paths: list[str], prefix: str) -> tuple[str, list]:
    """Build from night 0 with tables, append nights 1 and 2 (tables), export: (index, reports)."""
    index = str(work / f"index-{prefix.replace('.', '-')}")
    base = {"input.format": "jsonl", "index.path": index}
    reports = [api.build_index(spark, Config().with_overrides(
        {**base, "input.path": paths[0], "output.table": f"{prefix}_n0"}))]
    for k in (1, 2):
        reports.append(api.run(spark, Config().with_overrides(
            {**base, "input.path": paths[k], "index.append": True, "output.path": str(work / f"{prefix}-out{k}"),
             "output.table": f"{prefix}_n{k}"})))
    return index, reports


@pytest.mark.parametrize("catalog", ["builtin", pytest.param("iceberg", marks=pytest.mark.compat)])
def test_nightly_tables_hold_what_the_files_hold(spark, nights, catalog):
    """Build, two appends and an export into tables: each table has the rows of the same
    night written as files, and a replayed night rewrites its tables unchanged."""
    if catalog == "iceberg" and not ICEBERG_JAR:
        pytest.skip("NEARDUP_ICEBERG_JAR is not set (the pyspark 3.5 leg sets it)")
    work, paths = nights
    prefix = "nd_nightly"
    if catalog == "iceberg":
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ICEBERG_CATALOG}.nd")
        prefix = f"{ICEBERG_CATALOG}.nd.nightly"
    index, reports = _nightly(spark, work, paths, prefix)
    # The same nights written as files, by a second index.
    files_index = str(work / f"files-{catalog}")
    api.build_index(spark, Config().with_overrides(
        {"input.format": "jsonl", "input.path": paths[0], "index.path": files_index}), output=str(work / f"f{catalog}0"))
    for k in (1, 2):
        api.run(spark, Config().with_overrides(
            {"input.format": "jsonl", "input.path": paths[k], "index.path": files_index, "index.append": True,
             "output.path": str(work / f"f{catalog}{k}")}))
    for k in (0, 1, 2):
        assert reports[k]["tables"]["clusters"] == table_name(f"{prefix}_n{k}", "clusters")
        for name in ("clusters", "pairs"):
            _same(spark, table_name(f"{prefix}_n{k}", name), work / f"f{catalog}{k}" / name, KEYS[name])
    assert api.export(spark, index, table=f"{prefix}_export") == reports[2]["index"]["documents"]
    api.export(spark, files_index, str(work / f"f{catalog}-export"))
    _same(spark, table_name(f"{prefix}_export", "clusters"), work / f"f{catalog}-export" / "clusters",
          KEYS["clusters"])
    # Night 1 again: a replay, its tables written again with the same rows.
    again = api.run(spark, Config().with_overrides(
        {"input.format": "jsonl", "input.path": paths[1], "index.path": index, "index.append": True,
         "output.path": str(work / f"{prefix}-out1"), "output.table": f"{prefix}_n1"}))
    assert again["replayed"]
    _same(spark, table_name(f"{prefix}_n1", "pairs"), work / f"f{catalog}1" / "pairs", KEYS["pairs"])
    if catalog == "iceberg":
        provider = {r.col_name: r.data_type for r in spark.sql(
            f"DESCRIBE TABLE EXTENDED {table_name(prefix + '_n1', 'clusters')}").collect()}["Provider"]
        assert provider.lower() == "iceberg"


def test_a_new_night_refuses_last_nights_tables(spark, nights, tmp_path):
    work, paths = nights
    index = str(tmp_path / "index")
    base = {"input.format": "jsonl", "index.path": index}
    api.build_index(spark, Config().with_overrides({**base, "input.path": paths[0]}))
    night = {**base, "index.append": True, "output.table": "nd_night"}
    api.run(spark, Config().with_overrides({**night, "input.path": paths[1], "output.path": str(tmp_path / "o1")}))
    with pytest.raises(NeardupError, match="already exist"):
        api.run(spark, Config().with_overrides({**night, "input.path": paths[2], "output.path": str(tmp_path / "o2")}))
    assert not (tmp_path / "o2").exists()


@pytest.mark.compat
def test_export_takes_a_directory_or_a_table(spark, nights, tmp_path, capsys):
    work, paths = nights
    index = str(tmp_path / "index")
    api.build_index(spark, Config().with_overrides({"input.format": "jsonl", "input.path": paths[0],
                                                    "index.path": index}))
    with pytest.raises(NeardupError, match="one of them"):
        api.export(spark, index)
    assert cli.main(["index", "export", "--index", index, *SPARK]) == 2
    assert "--output DIR or --output-table" in capsys.readouterr().err


def test_relocation_moves_every_name_of_a_class_and_keeps_its_layout():
    """scripts/relocate_jar.py (it gives the Iceberg jar of the 3.5 leg its relocated Jackson)."""
    import glob
    import importlib.util
    import struct
    import zipfile

    import pyspark

    script = Path(__file__).parents[1] / "scripts" / "relocate_jar.py"
    spec = importlib.util.spec_from_file_location("relocate_jar", script)
    relocate_jar = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(relocate_jar)
    jar = sorted(glob.glob(str(Path(pyspark.__file__).parent / "jars" / "jackson-databind-2.*.jar")))[0]
    with zipfile.ZipFile(jar) as zf:
        data = zf.read("com/fasterxml/jackson/databind/ObjectMapper.class")
    old, new = b"com/fasterxml/jackson", b"org/apache/iceberg/shaded/com/fasterxml/jackson"
    moved = relocate_jar.relocate_class(data, old, new)
    assert moved[:10] == data[:10]  # magic, versions and the constant-pool count
    assert moved.count(old) == moved.count(new) > 0  # every old name is now inside a new one
    assert b"com.fasterxml.jackson" not in moved.replace(b"org.apache.iceberg.shaded.com.fasterxml.jackson", b"")
    # The bytes after the constant pool (access flags onwards) are unchanged.
    assert moved.endswith(data[-200:]) and struct.unpack_from(">H", moved, 8) == struct.unpack_from(">H", data, 8)
