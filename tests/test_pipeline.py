"""The whole pipeline on generated corpora, against brute-force oracles."""

import json
import math

import pytest
from pyspark.sql import functions as F

from neardup_spark import columns as C
from neardup_spark.tools import corpus
from neardup_spark.config import Config
from neardup_spark.errors import InputError
from neardup_spark.kernels.lsh import candidate_probability, lsh_params
from neardup_spark.api import deduplicate

from . import oracles

META = "source,published_at,group,edit"


@pytest.fixture(scope="module")
def rows():
    return list(corpus.generate(corpus.CorpusSpec(n_docs=1200, seed=21)))


@pytest.fixture(scope="module")
def raw(spark, rows):
    return spark.createDataFrame(rows).repartition(3)


@pytest.fixture(scope="module")
def result(raw):
    res = deduplicate(raw, Config().with_overrides({"input.metadata_cols": META}))
    yield res
    res.unpersist()


@pytest.mark.compat
def test_pairs_match_brute_force_jaccard_up_to_the_s_curve(rows, result):
    cfg = Config()
    want = oracles.jaccard_pairs(rows, cfg.verify.threshold)
    reps = {i for i, r in oracles.exact_groups(rows).items() if r == i}
    got = {
        (r[C.DOC_A], r[C.DOC_B]): r
        for r in result.pairs.collect()
        if r[C.DOC_A] in reps and r[C.DOC_B] in reps
    }
    assert set(got) <= set(want), "a reported pair is below the threshold by exact Jaccard"
    for pair, r in got.items():
        j, ca, cb = want[pair]
        assert r[C.JACCARD] == pytest.approx(j, abs=0.005)
        assert r[C.CONTAINMENT_A] == pytest.approx(ca, abs=0.005)
        assert r[C.CONTAINMENT_B] == pytest.approx(cb, abs=0.005)
    lsh = lsh_params(cfg)
    expected_missed = sum(1 - candidate_probability(j, lsh.bands, lsh.rows) for j, _, _ in want.values())
    missed = len(set(want) - set(got))
    assert missed <= expected_missed + 3 * math.sqrt(expected_missed) + 1, (missed, expected_missed)
    assert len(want) > 300  # the corpus really has pairs to find


@pytest.mark.compat
def test_cached_frames_stay_deserialized_in_memory(result):
    # PySpark's StorageLevel.MEMORY_AND_DISK is the serialized level: every later read
    # of the sketch table would deserialize its cached batches again.
    # A frame cut from its lineage (verified pairs: a local checkpoint) is stored by Spark's
    # own MEMORY_AND_DISK, the deserialized one, and is not cached as a DataFrame.
    kept = [df for df, _ in result._runner.kept]
    assert kept, "the run keeps its intermediate frames cached"
    persisted = [df for df in [result.sketched, *kept] if df.is_cached]
    assert result.sketched.is_cached and len(persisted) < len(kept) + 1
    for df in persisted:
        level = df.storageLevel
        assert level.useMemory and level.useDisk and level.deserialized, level


@pytest.mark.compat
def test_every_document_exactly_once_and_clusters_are_stars_of_the_pairs(rows, result):
    # The default: keeper linkage, keepers by the smallest id (see test_linkage.py; the
    # components linkage's union-find oracle: test_components.py).
    clusters = result.clusters.collect()
    ids = [r[C.DOC_ID] for r in clusters]
    assert sorted(ids) == sorted(r["id"] for r in rows)
    found = [(r[C.DOC_A], r[C.DOC_B]) for r in result.pairs.collect()]
    rep = oracles.exact_groups(rows)  # a text: its normalised form, named by its smallest id
    text = {i: rep[i] if rep[i] is not None else ("empty", i) for i in ids}
    stars = oracles.sequential_stars(ids, text, found)
    want = {i: min(d for d in ids if stars[d] == stars[i]) for i in ids}
    assert {r[C.DOC_ID]: r[C.CLUSTER_ID] for r in clusters} == want
    for r in clusters:
        assert r[C.IS_KEEPER] == (r[C.DOC_ID] == r[C.KEEPER_ID])
    keepers = {r[C.CLUSTER_ID]: r[C.KEEPER_ID] for r in clusters if r[C.IS_KEEPER]}
    assert len(keepers) == len(set(want.values()))
    assert all(keepers[r[C.CLUSTER_ID]] == r[C.KEEPER_ID] for r in clusters)


@pytest.mark.compat
def test_labels_are_recovered(rows, result):
    truth = corpus.label_pairs(rows)
    labels = {r[C.DOC_ID]: r[C.CLUSTER_ID] for r in result.clusters.collect()}
    found = oracles.cluster_pairs(labels)
    recall = len(found & truth) / len(truth)
    precision = len(found & truth) / len(found)
    assert recall >= 0.99 and precision >= 0.999, (recall, precision)


@pytest.mark.compat
def test_deduplicated_holds_the_keepers_original_rows(rows, result):
    out = result.deduplicated.collect()
    keepers = {r[C.DOC_ID] for r in result.clusters.collect() if r[C.IS_KEEPER]}
    assert {r["id"] for r in out} == keepers
    by_id = {r["id"]: r for r in rows}
    assert all(r["text"] == by_id[r["id"]]["text"] and r["group"] == by_id[r["id"]]["group"] for r in out)


@pytest.mark.compat
def test_report_counts_add_up(rows, result):
    counts = result.report["counts"]
    assert counts["documents"] == len(rows)
    assert counts["removed"] == len(rows) - counts["clusters"]
    assert counts["candidate_pairs"] >= counts["verified_pairs"] > 0
    assert counts["exact_duplicates"] >= 1  # the whitespace edits
    assert set(result.report["stage_seconds"]) >= {"read", "sketch", "exact", "band_candidates", "verify", "components", "keepers"}
    assert result.report["lsh"]["bands"] == 42 and result.report["lsh"]["rows"] == 3


def _clusters(raw, cfg):
    res = deduplicate(raw, cfg)
    out = sorted(tuple(r) for r in res.clusters.collect())
    pairs = sorted(tuple(r) for r in res.pairs.collect())
    res.unpersist()
    return out, pairs


def test_same_clusters_and_keepers_at_1_3_and_8_partitions(spark, rows):
    raw = spark.createDataFrame(rows[:500])
    cfg = Config().with_overrides({"keeper.rules": "earliest"})
    runs = [_clusters(raw.repartition(n), cfg) for n in (1, 3, 8)]
    assert runs[0] == runs[1] == runs[2]


def test_same_clusters_and_pairs_at_1_3_and_8_partitions_with_star_buckets(spark):
    # Shared site boilerplate fills buckets beyond the all-pairs limit, which then emit a
    # star to their smallest internal id: that id must not depend on the partitioning
    # (with monotonically_increasing_id ids, clusters and pairs differed between these runs).
    rows = list(corpus.generate(corpus.CorpusSpec(n_docs=900, seed=21, boilerplate_share=0.4)))
    raw = spark.createDataFrame(rows)
    cfg = Config().with_overrides({"keeper.rules": "earliest", "lsh.all_pairs_bucket_limit": 2})
    runs = [_clusters(raw.repartition(n), cfg) for n in (1, 3, 8)]
    assert runs[0] == runs[1] == runs[2]


@pytest.mark.compat
def test_clashing_internal_ids_take_the_next_salt(spark, rows, monkeypatch):
    from neardup_spark.stages import read

    real = read.internal_id
    monkeypatch.setattr(read, "internal_id", lambda doc_id, salt: F.lit(7).cast("long") if salt == 0 else real(doc_id, salt))
    docs = read.documents(spark.createDataFrame(rows[:50]), Config())
    assert read.check_documents(docs) == (50, 1)
    twice = read.documents(spark.createDataFrame(rows[:50] + rows[:1]), Config())
    with pytest.raises(InputError, match="duplicate document ids"):  # repeats inside a clash are still found
        read.check_documents(twice)
    monkeypatch.setattr(read, "internal_id", real)
    assert read.check_documents(docs) == (50, 0)


@pytest.mark.compat
def test_string_ids_and_awkward_documents(spark):
    long_doc = " ".join(f"word{i % 5000}" for i in range(1_700_000))  # ~13 MB
    docs = [
        ("a", "One wire story arrives from six sites today, said the agency."),
        ("b", "ONE wire story   arrives from six sites today said the agency"),  # exact after normalising
        ("c", "word"),
        ("d", "word"),
        ("e", ""),
        ("f", None),
        ("g", "!!! ???"),
        ("h", long_doc),
        ("i", long_doc + " tail"),
        ("j", "Ünïcödé ＦＵＬＬ width text with ﬁ ligatures and more words"),
    ]
    raw = spark.createDataFrame(docs, "id string, text string")
    res = deduplicate(raw, Config())
    out = {r[C.DOC_ID]: r for r in res.clusters.collect()}
    assert set(out) == {d for d, _ in docs}
    assert out["b"][C.KEEPER_ID] == "a" and out["b"][C.STATUS] == C.EXACT_DUPLICATE
    assert out["d"][C.KEEPER_ID] == "c"
    assert {out[d][C.STATUS] for d in "efg"} == {C.EMPTY}
    assert out["i"][C.KEEPER_ID] == "h" and out["i"][C.STATUS] == C.DUPLICATE
    assert out["j"][C.STATUS] == C.UNIQUE
    res.unpersist()


@pytest.mark.compat
def test_invalid_utf8_bytes_are_processed(spark):
    raw = spark.createDataFrame([(1, "x"), (2, "x")], "id long, text string").select(
        "id", F.concat(F.lit("café "), F.unhex(F.lit("C3FF")).cast("string"), F.lit(" au lait et du pain")).alias("text")
    )
    res = deduplicate(raw, Config())
    assert {r[C.DOC_ID]: r[C.KEEPER_ID] for r in res.clusters.collect()} == {1: 1, 2: 1}
    res.unpersist()


@pytest.mark.compat
@pytest.mark.parametrize(
    "rows_, schema, cfg, message",
    [
        ([(1, "a")], "doc long, text string", {}, "no column(s) id"),
        ([(1, "a"), (1, "b")], "id long, text string", {}, "duplicate document ids"),
        ([(None, "a")], "id long, text string", {}, "null id"),
        ([(1, 5)], "id long, text long", {}, "text column 'text' must be a string"),
        ([(1.5, "a")], "id double, text string", {}, "id column 'id' must be an integer or string"),
        ([(1, "a")], "id long, text string", {"keeper.rules": "earliest"}, "no column(s) published_at"),
        ([(1, "a", "x")], "id long, text string, _nid string", {"input.metadata_cols": "_nid"}, "clash with pipeline"),
    ],
)
def test_bad_input_is_a_one_line_error(spark, rows_, schema, cfg, message):
    raw = spark.createDataFrame(rows_, schema)
    with pytest.raises(InputError) as err:
        deduplicate(raw, Config().with_overrides(cfg))
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.compat
@pytest.mark.graphframes
def test_graphframes_backend_gives_identical_clusters(spark, rows, has_graphframes):
    if not has_graphframes:
        pytest.skip("set NEARDUP_GRAPHFRAMES_JAR and install the graphframes package")
    raw = spark.createDataFrame(rows[:600])
    spark_only = {"cluster.driver_max_edges": 0}  # small graphs would otherwise skip both backends
    ours = _clusters(raw, Config().with_overrides(spark_only))
    theirs = _clusters(raw, Config().with_overrides({**spark_only, "cluster.backend": "graphframes"}))
    assert ours == theirs


@pytest.mark.compat
def test_earliest_compares_instants_not_strings(spark):
    text = "the same wire story about the harbour strike arrived from several sites this morning"
    raw = spark.createDataFrame(
        [
            (1, text, "2026-01-01T06:00:00+00:00"),
            (2, text + " also read", "2026-01-01T10:00:00+05:00"),  # 05:00 UTC: the earliest instant
            (3, text + " more", "yesterday"),  # does not parse: sorted last
        ],
        "id long, text string, published_at string",
    )
    res = deduplicate(raw, Config().with_overrides({"keeper.rules": "earliest"}))
    assert {r[C.KEEPER_ID] for r in res.clusters.collect()} == {2}
    res.unpersist()


@pytest.mark.compat
def test_unreadable_path_is_an_input_error(spark, tmp_path):
    from neardup_spark.stages.read import read_input

    cfg = Config().with_overrides({"input.path": str(tmp_path / "missing"), "input.format": "parquet"})
    with pytest.raises(InputError, match="cannot read parquet input"):
        read_input(spark, cfg)


def _jsonl(path, lines: list[bytes]) -> str:
    path.write_bytes(b"\n".join(lines) + b"\n")
    return str(path)


def _read_jsonl(spark, path: str):
    from neardup_spark.stages.read import read_input

    return read_input(spark, Config().with_overrides({"input.path": path, "input.format": "jsonl"}))


@pytest.mark.compat
def test_malformed_json_lines_are_a_one_line_error(spark, tmp_path):
    good = [b'{"id": "d%d", "text": "the harbour strike story number %d"}' % (i, i) for i in range(4)]
    path = _jsonl(tmp_path / "in.jsonl", [*good[:2], b'{"id": "d9", "text": "cut off', *good[2:]])
    with pytest.raises(InputError) as err:
        deduplicate(_read_jsonl(spark, path), Config())
    message = str(err.value)
    assert "1 malformed JSON line(s)" in message and "cut off" in message and "in.jsonl" in message
    assert "\n" not in message


@pytest.mark.compat
def test_a_stray_text_file_in_a_jsonl_directory_is_named(spark, tmp_path):
    # Spark reads every file of a directory but _* and .* ones; a README is not data.
    (tmp_path / "in").mkdir()
    _jsonl(tmp_path / "in" / "part-0.jsonl", [b'{"id": "d1", "text": "one story"}'])
    _jsonl(tmp_path / "in" / "README.txt", [b"not data"])
    with pytest.raises(InputError, match=r"malformed JSON line\(s\).*README\.txt"):
        deduplicate(_read_jsonl(spark, str(tmp_path / "in")), Config())


@pytest.mark.compat
def test_json_lines_with_bytes_that_are_not_utf8_are_kept(spark, tmp_path):
    path = _jsonl(tmp_path / "in.jsonl", [b'{"id": "d1", "text": "caf\xe9 story about the strike"}',
                                          b'{"id": "d2", "text": "another story"}'])
    res = deduplicate(_read_jsonl(spark, path), Config())
    assert sorted(r[C.DOC_ID] for r in res.clusters.collect()) == ["d1", "d2"]
    res.unpersist()


@pytest.mark.compat
def test_an_input_with_no_rows_gives_empty_results(spark):
    raw = spark.createDataFrame([], "id string, text string, source string")
    res = deduplicate(raw, Config().with_overrides({"input.metadata_cols": "source"}))
    counts = res.report["counts"]
    assert counts["documents"] == 0 and counts["clusters"] == 0 and counts["removed"] == 0
    assert res.clusters.count() == 0 and res.pairs.count() == 0 and res.deduplicated.count() == 0
    res.unpersist()


@pytest.mark.compat
@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([], "has no columns: it is empty"),
        (json.dumps([{"id": "d1", "text": "one story"}], indent=2).encode().splitlines(),
         "no line of input .* is a JSON object: jsonl/json input is JSON Lines"),
    ],
)
def test_json_without_objects_is_a_one_line_error(spark, tmp_path, lines, message):
    path = tmp_path / "in.json"
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(InputError, match=message) as err:
        deduplicate(_read_jsonl(spark, str(path)), Config())
    assert "\n" not in str(err.value)


def test_python_workers_are_warmed_once_per_session(spark):
    # `run` starts the warm-up before it reads the input; `checked_documents` then gets
    # the same thread back instead of a second one-row job.
    from neardup_spark.stages.pipeline import warm_python_workers

    first = warm_python_workers(spark)
    assert warm_python_workers(spark) is first
    first.join(timeout=120)
    assert not first.is_alive()
    assert warm_python_workers(spark) is first


def test_default_shingles_find_copies_in_scripts_written_without_spaces(spark):
    """English, Chinese and Thai stories with the seven edits, run as one archive: the default
    ("auto") finds every copy in each script; plain word shingles lose the Chinese and Thai
    whitespace, reorder and 5%-replace copies (a clause is one "word")."""
    import pandas as pd

    from neardup_spark.tools.evaluate import pair_scores

    frames = []
    for i, script in enumerate(("latin", "han", "thai")):
        docs = pd.DataFrame(corpus.generate(corpus.CorpusSpec(n_docs=240, seed=20 + i, script=script, words=150)))
        frames.append(docs.assign(id=docs["id"] + 1000 * i, group=script + docs["group"], script=script))
    docs = pd.concat(frames, ignore_index=True)
    frame = spark.createDataFrame(docs[["id", "text"]])
    labels = docs.set_index("id")
    recall = {}
    for unit in ("auto", "word"):
        result = deduplicate(frame, Config().with_overrides({"shingle.unit": unit}))
        clusters = result.clusters.select("doc_id", "cluster_id").toPandas().set_index("doc_id")["cluster_id"]
        result.unpersist()
        for script in ("latin", "han", "thai"):
            mine = labels.index[labels["script"] == script]
            scores = pair_scores(clusters.loc[mine], labels.loc[mine, "group"])
            recall[unit, script] = scores.recall
            assert scores.precision == 1.0, (unit, script)
        assert pair_scores(clusters, labels["group"]).precision == 1.0  # no cluster across scripts
    assert all(recall["auto", s] >= 0.98 for s in ("latin", "han", "thai")), recall
    assert recall["word", "latin"] == recall["auto", "latin"]
    assert recall["word", "han"] < 0.9 and recall["word", "thai"] < 0.9, recall
