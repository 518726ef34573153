"""Each stage on hand-written rows."""

import numpy as np
import pytest
from pyspark.sql import functions as F

from neardup_spark import columns as C
from neardup_spark.stages.banding import representatives
from neardup_spark.stages.candidates import candidate_pairs, representative_pairs
from neardup_spark.config import Config
from neardup_spark.stages.exact import exact_copies, exact_edges
from neardup_spark.stages.keepers import choose_keepers
from neardup_spark.kernels.lsh import lsh_params
from neardup_spark.plan import resolve
from neardup_spark.stages.read import spread
from neardup_spark.stages.sketch import sketch
from neardup_spark.stages.verify import PARTITION_SET_BYTES, intersected, partitions, verify
from neardup_spark.stages.keepers import keeper_rows

pytestmark = pytest.mark.compat  # also run on CI's pyspark 3.5 leg


def cfg(**overrides):
    return Config().with_overrides(overrides)


def _sketched(spark, rows):
    docs = spark.createDataFrame(rows, "doc_id long, text string")
    return docs.withColumn(C.NID, F.col(C.DOC_ID) * 10).transform(sketch, cfg(), resolve(cfg()).matcher)


def test_sketch_and_exact_copies(spark):
    rows = [(5, "Same  TEXT here."), (2, "same text here"), (9, "other"), (3, None), (4, "!!!"), (7, "same text, here")]
    table = _sketched(spark, rows)
    out = {r[C.DOC_ID]: r for r in table.collect()}
    assert out[5][C.EXACT_HASH] == out[2][C.EXACT_HASH] == out[7][C.EXACT_HASH] != out[9][C.EXACT_HASH]
    assert out[5][C.BANDS] == out[2][C.BANDS] and len(out[9][C.BANDS]) == lsh_params(cfg()).bands
    assert out[3][C.IS_EMPTY] and out[4][C.IS_EMPTY] and not out[9][C.IS_EMPTY]
    assert out[3][C.EXACT_HASH] is None and out[4][C.BANDS] == [] and bytes(out[4][C.SHINGLES]) == b""
    assert C.TEXT not in table.columns
    copies = exact_copies(table)
    assert sorted(tuple(r) for r in copies.collect()) == [(50, 20), (70, 20)]  # (_nid, rep _nid)
    edges = sorted((r[C.DOC_A], r[C.DOC_B], r[C.JACCARD], r[C.MATCH]) for r in exact_edges(copies).collect())
    assert edges == [(20, 50, 1.0, C.MATCH_EXACT), (20, 70, 1.0, C.MATCH_EXACT)]


def test_banding_leaves_out_exact_copies_and_empty_texts(spark):
    table = _sketched(spark, [(1, "one two three four five six"), (2, "One two, three four five six!"), (3, "")])
    rows = representatives(table, exact_copies(table), 1).collect()
    assert [r[C.NID] for r in rows] == [10]
    assert len(rows[0][C.BANDS]) == lsh_params(cfg()).bands


def _banded(spark, rows):
    return spark.createDataFrame(rows, "_nid long, bucket long")


def test_candidates_all_pairs_in_small_buckets_deduplicated_across_bands(spark):
    rows = [(d, 11) for d in (3, 1, 2)] + [(d, 7) for d in (1, 2)] + [(4, 8)]
    got = sorted(tuple(r) for r in candidate_pairs(_banded(spark, rows), resolve(cfg()).matcher.bucket_limit).collect())
    assert got == [(1, 2), (1, 3), (2, 3)]


def test_candidates_star_beyond_the_limit(spark):
    rows = [(d, 5) for d in range(10, 0, -1)]
    got = sorted(tuple(r) for r in candidate_pairs(_banded(spark, rows), resolve(cfg(**{"lsh.all_pairs_bucket_limit": 4})).matcher.bucket_limit).collect())
    assert got == [(1, d) for d in range(2, 11)]  # n-1 pairs, not n(n-1)/2


def _packed(values):
    return bytearray(np.array(sorted(values), dtype="<u4").tobytes())


@pytest.mark.parametrize("n_candidates", [None, 3])  # shuffle join, broadcast join
def test_verify_exact_jaccard_and_containment(spark, n_candidates):
    shingled = spark.createDataFrame(
        [(1, _packed([1, 2, 3, 4])), (2, _packed(range(1, 9))), (3, _packed([9, 10])), (4, _packed([1, 2, 3, 5]))],
        "_nid long, shingles binary",
    )
    cands = spark.createDataFrame([(1, 2), (1, 3), (1, 4)], "doc_a long, doc_b long")
    got = {(r[0], r[1]): r for r in verify(cands, cfg(**{"verify.threshold": 0.3}), shingled, n_candidates).collect()}
    assert set(got) == {(1, 2), (1, 4)}
    assert got[(1, 2)][C.JACCARD] == pytest.approx(0.5)
    assert got[(1, 2)][C.CONTAINMENT_A] == pytest.approx(1.0)
    assert got[(1, 2)][C.CONTAINMENT_B] == pytest.approx(0.5)
    assert got[(1, 4)][C.JACCARD] == pytest.approx(3 / 5)



@pytest.mark.parametrize("parts", [1, 3, 7])
def test_intersected_sizes_match_python_sets_on_any_partitioning(spark, parts):
    # Each partition gets only the sets its pairs ask for: a set routed to the wrong
    # partition raises, a set counted twice or a pair lost changes the result.
    rng = np.random.default_rng(parts)
    sets = {nid: set(rng.choice(60, int(rng.integers(0, 25)), replace=False).tolist()) for nid in range(-20, 40)}
    shingled = spark.createDataFrame([(n, _packed(s)) for n, s in sets.items()], "_nid long, shingles binary")
    ids = list(sets)
    pairs = sorted({tuple(sorted(rng.choice(ids, 2, replace=False).tolist())) for _ in range(200)})
    cands = spark.createDataFrame(pairs, "doc_a long, doc_b long")
    want = {(a, b): (len(sets[a] & sets[b]), len(sets[a]), len(sets[b])) for a, b in pairs}
    for small in (False, True):  # needs shuffled or broadcast
        got = {(r[0], r[1]): tuple(r[2:]) for r in intersected(cands, shingled, parts, small).collect()}
        assert got == want


def test_verify_partitions_grow_with_the_sets_candidates_ask_for(spark):
    base = int(spark.conf.get("spark.sql.shuffle.partitions"))
    assert partitions(spark, None, None) == partitions(spark, 10, 1500.0) == base
    many = 100_000_000
    assert partitions(spark, many, 1500.0) == -(-2 * many * 1500 // PARTITION_SET_BYTES) > base


@pytest.mark.parametrize("mode", ["jaccard", "containment"])
def test_verify_runs_the_intersection_udf_once_per_pair(spark, mode):
    # The optimiser once pushed the threshold filter below the projection and
    # evaluated the UDF in both places: twice the Python work, two workers a task.
    shingled = spark.createDataFrame([(1, _packed([1, 2])), (2, _packed([2, 3]))], "_nid long, shingles binary")
    cands = spark.createDataFrame([(1, 2)], "doc_a long, doc_b long")
    out = verify(cands, cfg(**{"match.mode": mode}), shingled, 1)
    plan = out._jdf.queryExecution().optimizedPlan().toString()
    assert plan.count("MapInArrow") == 1, plan  # PythonMapInArrow on Spark 3.5

def _index(spark):
    # doc 1..4 in one cluster, 5 alone, 6 empty. Internal ids run backwards
    # (_nid = 100 - doc_id) so the smallest _nid is never the smallest doc_id.
    docs = spark.createDataFrame(
        [
            (1, False, "h1", 100, "2026-01-05", "wire"),
            (2, False, "h2", 300, "2026-01-02", "blog"),
            (3, False, "h1", 100, None, "paper"),
            (4, False, "h4", 300, "2026-01-02", "paper"),
            (5, False, "h5", 50, "2026-01-01", "wire"),
            (6, True, None, 0, "2026-01-01", "wire"),
        ],
        "doc_id long, is_empty boolean, exact_hash string, text_len int, published_at string, source string",
    )
    return docs.withColumn(C.NID, 100 - F.col(C.DOC_ID))


def _comps(spark, doc_ids):
    """Components over internal ids: every listed document in one, named by its smallest _nid."""
    nids = [100 - d for d in doc_ids]
    return spark.createDataFrame([(n, min(nids)) for n in nids], "doc_id long, cluster_id long")


@pytest.mark.parametrize(
    "rules, extra, keeper",
    [
        ("smallest_id", {}, 1),
        ("earliest", {}, 2),  # 2 and 4 tie on time; smallest id wins
        ("longest", {}, 2),
        ("source_priority", {"keeper.source_priority": "paper,wire"}, 3),
        ("source_priority,longest", {"keeper.source_priority": "paper,wire"}, 4),
    ],
)
def test_keeper_rules(spark, rules, extra, keeper):
    comps = _comps(spark, (1, 2, 3, 4))
    applied = resolve(cfg(**{"keeper.rules": rules, **extra})).keeper
    out = {r[C.DOC_ID]: r for r in choose_keepers(_index(spark), applied, comps).collect()}
    assert len(out) == 6
    assert {d: out[d][C.KEEPER_ID] for d in (1, 2, 3, 4)} == {d: keeper for d in (1, 2, 3, 4)}
    assert [d for d in (1, 2, 3, 4) if out[d][C.IS_KEEPER]] == [keeper]
    assert {out[d][C.CLUSTER_ID] for d in (1, 2, 3, 4)} == {1}  # the smallest doc_id, not _nid
    assert out[5][C.STATUS] == C.UNIQUE and out[5][C.KEEPER_ID] == 5 and out[5][C.IS_KEEPER]
    assert out[6][C.STATUS] == C.EMPTY and out[6][C.CLUSTER_ID] == 6
    assert out[keeper][C.STATUS] == C.KEEPER
    if keeper == 1:
        assert out[3][C.STATUS] == C.EXACT_DUPLICATE and out[2][C.STATUS] == C.DUPLICATE


def test_earliest_puts_missing_times_last(spark):
    comps = _comps(spark, (1, 3))
    out = choose_keepers(_index(spark).where(F.col("doc_id").isin(1, 3)), resolve(cfg(**{"keeper.rules": "earliest"})).keeper,
                         comps)
    assert {r[C.KEEPER_ID] for r in out.collect()} == {1}


@pytest.mark.parametrize("n_keepers, n_removed", [(None, None), (2, 1), (1, 2), (10**9, 10**9 - 1)])
def test_keeper_rows_pick_the_keepers_original_rows(spark, n_keepers, n_removed):
    raw = spark.createDataFrame([(1, "a", "x"), (2, "b", "y"), (3, "c", "z")], "id long, text string, extra string")
    clusters = spark.createDataFrame(
        [(1, 1, True, 1, "keeper"), (2, 1, False, 1, "duplicate"), (3, 3, True, 3, "unique")],
        "doc_id long, cluster_id long, is_keeper boolean, keeper_id long, status string",
    )
    rows = keeper_rows(raw, cfg().input.id_col, clusters, n_keepers, n_removed).collect()  # semi, anti, broadcast or not
    assert sorted(tuple(r) for r in rows) == [(1, "a", "x"), (3, "c", "z")]


def test_spread_repartitions_only_too_few_partitions(spark):
    one = spark.range(100, numPartitions=1).withColumnRenamed("id", C.DOC_ID)
    assert spread(one, cfg(**{"input.min_partitions": 3})).rdd.getNumPartitions() == 3
    many = spark.range(100, numPartitions=5)
    assert spread(many, cfg(**{"input.min_partitions": 3})).rdd.getNumPartitions() == 5
    assert spread(one, cfg()).rdd.getNumPartitions() == spark.sparkContext.defaultParallelism


def _brute_pairs(rows, limit):
    members = {}
    for nid, bucket in rows:
        members.setdefault(bucket, []).append(nid)
    out = set()
    for ids in members.values():
        ids = sorted(ids)
        if len(ids) > limit:
            out |= {(ids[0], d) for d in ids[1:] if d != ids[0]}
        else:
            out |= {(a, b) for i, a in enumerate(ids) for b in ids[i + 1:] if a < b}
    return out


@pytest.mark.parametrize("batch", [7, 1 << 20])  # chunked output, one chunk
def test_bucket_pairs_against_brute_force(monkeypatch, batch):
    from neardup_spark.kernels import buckets

    monkeypatch.setattr(buckets, "_BATCH_PAIRS", batch)
    rng = np.random.default_rng(3)
    for limit in (2, 4, 16):
        # bucket sizes from 1 to 40, random ids (some negative), an id twice in one bucket
        sizes = rng.integers(1, 40, size=60)
        bucket = np.repeat(rng.integers(-2**62, 2**62, size=len(sizes)), sizes)
        nid = rng.integers(-1000, 1000, size=len(bucket))
        nid[1] = nid[0]
        perm = rng.permutation(len(nid))
        nid, bucket = nid[perm], bucket[perm]
        got = [(int(a), int(b)) for xa, xb in buckets.bucket_pairs(nid, bucket, limit) for a, b in zip(xa, xb)]
        assert set(got) == _brute_pairs(zip(nid.tolist(), bucket.tolist()), limit)
        assert all(a < b for a, b in got)
    assert list(buckets.bucket_pairs(np.array([5]), np.array([1]), 4)) == []


def test_group_keys_keep_every_key_once_and_a_bucket_in_one_group():
    from neardup_spark.stages.candidates import group_keys
    from neardup_spark.kernels.buckets import key_groups

    rng = np.random.default_rng(5)
    nid = rng.permutation(np.arange(-50, 50))[:40]
    counts = rng.integers(0, 9, size=40)
    keys = rng.integers(-2**63, 2**63 - 1, size=int(counts.sum()), dtype=np.int64)
    keys[::3] = keys[0]  # one bucket many documents share
    offsets = np.r_[0, np.cumsum(counts)]
    group, ids, row_offsets, row_keys = group_keys(nid, offsets, keys, 5)
    rows = [(int(g), int(i), row_keys[row_offsets[r]:row_offsets[r + 1]].tolist())
            for r, (g, i) in enumerate(zip(group, ids))]
    assert sorted((i, k) for _, i, ks in rows for k in ks) == sorted(zip(np.repeat(nid, counts).tolist(), keys.tolist()))
    assert all(ks and {int(x) for x in key_groups(np.array(ks), 5)} == {g} for g, _, ks in rows)
    assert len({(g, i) for g, i, _ in rows}) == len(rows)  # one row per (group, document)


@pytest.mark.parametrize("parts", [1, 3, 8, 64])  # keys grouped by partition (1-8), exploded (64)
def test_representative_pairs_against_brute_force_on_either_layout(spark, parts):
    rng = np.random.default_rng(parts)
    shared = rng.integers(-2**62, 2**62, size=12)
    reps = [(int(n), [int(shared[j]) for j in rng.choice(12, int(rng.integers(0, 6)), replace=False)]
             + [int(rng.integers(-2**62, 2**62))]) for n in rng.permutation(np.arange(-30, 30))[:45]]
    df = spark.createDataFrame(reps, "_nid long, bands array<long>")
    for limit in (3, 100):
        got = representative_pairs(df, limit, 42, parts).collect()
        want = _brute_pairs(((n, k) for n, ks in reps for k in ks), limit)
        assert sorted(tuple(r) for r in got) == sorted(want)


def test_huge_bucket_all_pairs_in_chunks(monkeypatch):
    # SimHash has no bucket limit: a bucket bigger than one output batch is paired row by row.
    from neardup_spark.kernels import buckets

    monkeypatch.setattr(buckets, "_BATCH_PAIRS", 10)
    nid = np.arange(30, 0, -1)
    chunks = list(buckets.bucket_pairs(nid, np.zeros(30, dtype=np.int64), 2**62))
    got = {(int(a), int(b)) for xa, xb in chunks for a, b in zip(xa, xb)}
    assert got == {(a, b) for a in range(1, 31) for b in range(a + 1, 31)}
    assert max(len(a) for a, _ in chunks) <= 29


def test_sketch_counts_characters_as_spark_length_does(spark):
    # Valid UTF-8 (one to four bytes a character) and invalid bytes of every kind: stray
    # continuation bytes, truncated sequences, bytes UTF-8 never allows.
    rng = np.random.default_rng(5)
    pieces = ["ascii", "café", "日本語", "\U0001f600", "c3", "e282", "80bf", "c0c1", "f5ff", "f09f98", "ed a080"]
    hexes = []
    for _ in range(60):
        parts = rng.choice(pieces, size=rng.integers(0, 6))
        hexes.append("".join(p.replace(" ", "") if all(c in "0123456789abcdef " for c in p) else p.encode().hex()
                             for p in parts))
    docs = spark.createDataFrame([(i, h) for i, h in enumerate(hexes)] + [(len(hexes), None)], "doc_id long, hex string")
    docs = docs.select("doc_id", F.unhex("hex").cast("string").alias(C.TEXT))
    want = {r[C.DOC_ID]: r["n"] for r in docs.select(C.DOC_ID, F.length(C.TEXT).alias("n")).collect()}
    sketched = sketch(docs, cfg(), resolve(cfg()).matcher)
    got = {r[C.DOC_ID]: r[C.TEXT_LEN] for r in sketched.select(C.DOC_ID, C.TEXT_LEN).collect()}
    assert got == want and want[len(hexes)] is None


def test_keeper_inputs_take_any_column_name_as_it_is(spark):
    """A time or source column named with a backquote, a dot or a comma is read as that column,
    never parsed into SQL (`a`, `b` once became two arguments)."""
    from neardup_spark.config import KeeperConfig
    from neardup_spark.stages.keepers import keeper_inputs, rule_keys

    for time_col in ("pub`date", "pub.date", "a`, `b"):
        keeper = KeeperConfig(rules=["earliest", "source_priority"], time_col=time_col, source_col="src.name",
                              source_priority=["x"])
        df = spark.createDataFrame([(1, "2024-01-02T00:00:00Z", "y"), (2, "2024-01-01T00:00:00Z", "x"),
                                    (3, "not a time", "x")], ["doc_id", time_col, "src.name"])
        ranked = df.select("doc_id", *keeper_inputs(df, keeper)).orderBy(*rule_keys(keeper))
        assert [r.doc_id for r in ranked.collect()] == [2, 1, 3]
