import gzip
import hashlib
import itertools
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from neardup_spark.tools import corpus, corpus_files
from neardup_spark.kernels.normalise import normalise_text

from .test_hashing import py_shingles


def jaccard(a, b):
    sa, sb = py_shingles(normalise_text(a), 5), py_shingles(normalise_text(b), 5)
    return len(sa & sb) / len(sa | sb)


def test_seeded_and_labelled():
    spec = corpus.CorpusSpec(n_docs=400, seed=3)
    rows = list(corpus.generate(spec))
    assert rows == list(corpus.generate(spec))
    assert len(rows) == 400 and len({r["id"] for r in rows}) == 400
    edits = {r["edit"] for r in rows}
    assert set(corpus.EDITS) | {"original", "unrelated"} <= edits


def test_edits_have_the_intended_similarity():
    rows = list(corpus.generate(corpus.CorpusSpec(n_docs=160, seed=5, dup_share=1.0)))
    story = [r for r in rows if r["group"] == "s0"]
    original = next(r for r in story if r["edit"] == "original")["text"]
    j = {r["edit"]: jaccard(original, r["text"]) for r in story if r["edit"] != "original"}
    assert j["whitespace"] == 1.0
    assert j["char"] > 0.9 and j["word"] > 0.9
    assert 0.3 < j["reorder"] < 0.8
    assert 0.4 < j["replace5"] < 0.9
    assert 0.8 < j["append10"] < 0.95
    assert 0.55 < j["append50"] < 0.75


def test_unrelated_documents_stay_far_apart():
    rows = [r for r in corpus.generate(corpus.CorpusSpec(n_docs=200, seed=9, dup_share=0.0, footer_share=0.5))]
    worst = max(jaccard(rows[i]["text"], rows[j]["text"]) for i in range(0, 200, 3) for j in range(i + 1, 200, 5))
    assert worst < 0.15


def test_label_pairs():
    rows = [{"id": 1, "group": "a"}, {"id": 3, "group": "a"}, {"id": 2, "group": "a"}, {"id": 4, "group": "b"}]
    assert corpus.label_pairs(rows) == {(1, 2), (1, 3), (2, 3)}


# --- default output is frozen -------------------------------------------------
# SHA-256 of the rows (published_at as ISO text, keys sorted, one JSON line each)
# computed with corpus.py as of commit 49ed2d3, before big_clusters and
# boilerplate_share existed. With both options off the generator must give
# byte-identical rows, so cached corpora, benchmark figures and the bundled
# sample stay valid.
FROZEN = [
    (dict(), 300, "391076896f1242a92c361839db38179d9a309c4528180b276f4b7e5184b0f133"),
    (dict(n_docs=400, seed=3), None, "be703af17e57845122d82f6a7a5b339b030b76a03a4849690bbf894f4764d527"),
    (dict(n_docs=1000, seed=11), None, "bd09c16e49531f04271e5f0b4e9104424b1b750e25974f225f756eabf0090ae0"),
    (dict(n_docs=600, seed=5, dup_share=1.0), None, "1b994fc8d7aa55907bb2fb87871c43908999f6d3cd3060ef6f0d934b8dfb6903"),
    (dict(n_docs=500, seed=9, dup_share=0.0, footer_share=0.5), None,
     "076d0afc4f811add6ab4d8671ec9ee33122b1541c49c8a27bda5b886886187bb"),
]


def rows_digest(rows) -> str:
    h = hashlib.sha256()
    for r in rows:
        h.update(json.dumps({**r, "published_at": r["published_at"].isoformat()}, sort_keys=True).encode())
        h.update(b"\n")
    return h.hexdigest()


@pytest.mark.parametrize("kwargs,first,digest", FROZEN)
def test_default_output_is_unchanged(kwargs, first, digest):
    rows = itertools.islice(corpus.generate(corpus.CorpusSpec(**kwargs)), first)
    assert rows_digest(rows) == digest


def test_bundled_sample_is_the_seed_11_corpus():
    sample_path = Path(corpus.__file__).parents[1] / "data" / "sample.jsonl.gz"
    with gzip.open(sample_path, "rt", encoding="utf-8") as fh:
        sample = [json.loads(line) for line in fh]
    rows = corpus.generate(corpus.CorpusSpec(n_docs=1000, seed=11))
    assert sample == [{**r, "published_at": r["published_at"].isoformat()} for r in rows]


# --- big clusters ---------------------------------------------------------------


def test_big_clusters_sizes_labels_and_document_count():
    spec = corpus.CorpusSpec(n_docs=2000, seed=4, big_clusters=(150, 600))
    rows = list(corpus.generate(spec))
    assert len(rows) == 2000 and sorted(r["id"] for r in rows) == list(range(1, 2001))
    groups = Counter(r["group"] for r in rows)
    assert groups["b0"] == 150 and groups["b1"] == 600
    # the other 1,250 documents: 8-document stories and unrelated articles by dup_share
    stories = [g for g in groups if g.startswith("s")]
    assert len(stories) == int(1250 * 0.5) // 8 and all(groups[g] == 8 for g in stories)
    assert sum(1 for g in groups if g.startswith("u")) == 1250 - 8 * len(stories)
    names = {e for e, _ in corpus.BIG_CLUSTER_EDITS}
    for g in ("b0", "b1"):
        members = [r for r in rows if r["group"] == g]
        originals = [r for r in members if r["edit"] == "original"]
        assert len(originals) == 1
        assert {r["edit"] for r in members} - {"original"} <= names
        exact = [r for r in members if r["edit"] == "exact"]
        assert exact and all(r["text"] == originals[0]["text"] for r in exact)
        edited = Counter(r["edit"] for r in members if r["edit"] not in ("original", "exact"))
        assert len(edited) >= 5  # a mix, not one edit type
        assert len({r["text"] for r in members}) > len(members) // 2  # mostly distinct texts


def test_big_cluster_copies_stay_similar_to_the_original_and_each_other():
    rows = list(corpus.generate(corpus.CorpusSpec(n_docs=400, seed=6, big_clusters=(200,))))
    members = [r for r in rows if r["group"] == "b0"]
    original = next(r for r in members if r["edit"] == "original")["text"]
    assert min(jaccard(original, r["text"]) for r in members) > 0.5
    assert min(jaccard(members[i]["text"], members[i + 1]["text"]) for i in range(0, 198, 2)) > 0.3


def test_big_clusters_are_seeded():
    spec = corpus.CorpusSpec(n_docs=600, seed=8, big_clusters=(100, 250))
    rows = list(corpus.generate(spec))
    assert rows == list(corpus.generate(spec))
    other = list(corpus.generate(corpus.CorpusSpec(n_docs=600, seed=9, big_clusters=(100, 250))))
    assert [r["text"] for r in rows] != [r["text"] for r in other]


def test_big_clusters_may_fill_the_corpus_but_not_more():
    rows = list(corpus.generate(corpus.CorpusSpec(n_docs=300, seed=1, big_clusters=(100, 200))))
    assert Counter(r["group"] for r in rows) == {"b0": 100, "b1": 200}
    with pytest.raises(ValueError, match="more than n_docs"):
        list(corpus.generate(corpus.CorpusSpec(n_docs=300, big_clusters=(200, 200))))
    with pytest.raises(ValueError, match=">= 2"):
        list(corpus.generate(corpus.CorpusSpec(n_docs=300, big_clusters=(1,))))


# --- site boilerplate -----------------------------------------------------------


def words(text: str) -> int:
    return len(normalise_text(text).split())


@pytest.mark.parametrize("share", [0.3, 0.45])
def test_boilerplate_share_of_a_median_document(share):
    spec = corpus.CorpusSpec(n_docs=600, seed=2, boilerplate_share=share, footer_share=1.0)
    rows = list(corpus.generate(spec))
    blocks = corpus.site_blocks(spec)
    assert len(blocks) == spec.n_footers
    for header, footer in blocks:
        assert words(header) + words(footer) == corpus.boilerplate_words(spec)
    block_words = corpus.boilerplate_words(spec)
    shares = np.array([block_words / words(r["text"]) for r in rows])
    assert abs(float(np.median(shares)) - share) < 0.01
    # every document carries its site's block: header first, footer last
    for r in rows:
        header, footer = blocks[corpus.SOURCES.index(r["source"]) % spec.n_footers]
        assert r["text"].startswith(header + "\n\n") and r["text"].endswith("\n\n" + footer)


def test_boilerplate_makes_unrelated_same_site_documents_share_shingles():
    spec = corpus.CorpusSpec(n_docs=300, seed=3, dup_share=0.0, boilerplate_share=0.45, footer_share=1.0)
    rows = list(corpus.generate(spec))
    assert {r["edit"] for r in rows} == {"unrelated_boilerplate"}
    block = [corpus.SOURCES.index(r["source"]) % spec.n_footers for r in rows]
    sets = [py_shingles(normalise_text(r["text"]), 5) for r in rows]
    same, other = [], []
    for i in range(0, 300, 4):
        for j in range(i + 1, 300, 9):
            (same if block[i] == block[j] else other).append(len(sets[i] & sets[j]) / len(sets[i] | sets[j]))
    assert 0.2 < float(np.median(same)) < 0.35 and max(same) > 0.3  # some unrelated pairs pass 0.3
    assert max(other) < 0.15


def test_boilerplate_covers_story_copies_and_is_seeded():
    spec = corpus.CorpusSpec(n_docs=400, seed=4, boilerplate_share=0.3, footer_share=0.5, big_clusters=(50,))
    rows = list(corpus.generate(spec))
    assert rows == list(corpus.generate(spec))
    assert len(rows) == 400
    header_starts = {h.split("\n")[0] for h, _ in corpus.site_blocks(spec)}
    carried = [r["text"].split("\n")[0] in header_starts for r in rows]
    assert 0.4 < np.mean(carried) < 0.6  # footer_share of every document, stories included
    assert {r["group"][0] for r, c in zip(rows, carried) if c} == {"s", "u", "b"}
    assert {"unrelated_boilerplate", "unrelated"} <= {r["edit"] for r in rows}
    assert corpus.site_blocks(corpus.CorpusSpec()) == []
    with pytest.raises(ValueError, match="boilerplate_share"):
        list(corpus.generate(corpus.CorpusSpec(n_docs=10, boilerplate_share=1.0)))


def _read_dir(path: Path) -> list[dict]:
    import pyarrow.dataset as ds

    return sorted(ds.dataset(path, format="parquet").to_table().to_pylist(), key=lambda r: r["id"])


def test_sharded_corpus_is_one_corpus(tmp_path):
    spec = corpus.CorpusSpec(n_docs=1001, seed=4, footer_share=0.5)
    one = corpus_files.write_sharded(spec, tmp_path / "serial", shards=3, rows_per_file=200)
    two = corpus_files.write_sharded(spec, tmp_path / "pool", shards=3, workers=2, rows_per_file=200)
    rows = _read_dir(one)
    assert rows == _read_dir(two)  # the same corpus whatever the workers
    assert [r["id"] for r in rows] == list(range(1, 1002))
    # ids in ranges per shard (334, 334, 333 documents), groups never cross shards
    shard_of = {r["id"]: r["group"].rsplit("@", 1)[1] for r in rows}
    assert [corpus.shard_range(1001, k, 3) for k in range(3)] == [(1, 334), (335, 334), (669, 333)]
    assert {shard_of[i] for i in range(1, 335)} == {"0"} and {shard_of[i] for i in range(669, 1002)} == {"2"}
    groups = Counter(r["group"] for r in rows)
    assert all(groups[g] == len(corpus.EDITS) + 1 for g in groups if g.startswith("s"))
    # one vocabulary and one set of footers for the whole corpus
    footers = {k: {r["text"].rsplit("\n\n", 1)[1] for r in rows
                   if r["edit"] == "unrelated_footer" and shard_of[r["id"]] == k} for k in "012"}
    assert len(footers["0"] | footers["1"] | footers["2"]) == spec.n_footers
    assert footers["0"] & footers["1"] & footers["2"]


def test_sharded_corpus_resumes(tmp_path):
    spec = corpus.CorpusSpec(n_docs=600, seed=2)
    path = corpus_files.write_sharded(spec, tmp_path / "c", shards=3, rows_per_file=150)
    want = _read_dir(path)
    # a run killed while writing shard 1: its marker and a moved file gone, a half-written scratch dir left
    (path / "_shard-1.done").unlink()
    next(path.glob("part-0001-*.parquet")).unlink()
    (path / ".shard-1").mkdir()
    (path / ".shard-1" / "part-0001-00000.parquet").write_bytes(b"partial")
    before = {p.name: p.stat().st_mtime_ns for p in path.glob("part-0000-*")}
    corpus_files.write_sharded(spec, path, shards=3, rows_per_file=150)
    assert _read_dir(path) == want
    assert {p.name: p.stat().st_mtime_ns for p in path.glob("part-0000-*")} == before  # finished shards kept
    assert not (path / ".shard-1").exists()
    # killed after moving its files in but before the marker, with a file the new attempt will not write
    (path / "_shard-2.done").unlink()
    (path / "part-0002-00099.parquet").write_bytes((path / "part-0002-00000.parquet").read_bytes())
    corpus_files.write_sharded(spec, path, shards=3, rows_per_file=150)
    assert _read_dir(path) == want


def test_sharded_corpus_refuses_to_mix(tmp_path):
    spec = corpus.CorpusSpec(n_docs=300, seed=2)
    path = corpus_files.write_sharded(spec, tmp_path / "c", shards=3, rows_per_file=150)
    (path / "_shard-2.done").unlink()  # unfinished: a resume with other settings would mix two corpora
    for other in ({"shards": 2}, {"shards": 3, "rows_per_file": 100}, {"shards": 3, "fmt": "jsonl"}):
        with pytest.raises(ValueError, match="other settings"):
            corpus_files.write_sharded(spec, path, **other)
    with pytest.raises(ValueError, match="other settings"):
        corpus_files.write_sharded(corpus.CorpusSpec(n_docs=300, seed=3), path, shards=3, rows_per_file=150)
    corpus_files.write(spec, tmp_path / "plain")
    with pytest.raises(ValueError, match="not empty"):
        corpus_files.write_sharded(spec, tmp_path / "plain", shards=3)


def test_sharded_corpus_rejects_bad_shapes(tmp_path):
    with pytest.raises(ValueError, match="shards"):
        corpus_files.write_sharded(corpus.CorpusSpec(n_docs=10), tmp_path / "a", shards=0)
    with pytest.raises(ValueError, match="cannot make"):
        corpus_files.write_sharded(corpus.CorpusSpec(n_docs=2), tmp_path / "b", shards=3)
    with pytest.raises(ValueError, match="shard must be"):
        list(corpus.generate(corpus.CorpusSpec(n_docs=10), shard=2, shards=2))
    with pytest.raises(ValueError, match="do not fit in shard 0"):
        list(corpus.generate(corpus.CorpusSpec(n_docs=300, big_clusters=(200,)), shard=0, shards=3))
    with pytest.raises(ValueError, match="do not fit in shard 0"):  # before any process starts
        corpus_files.write_sharded(corpus.CorpusSpec(n_docs=300, big_clusters=(200,)), tmp_path / "c", shards=3, workers=2)
    assert not (tmp_path / "c").exists()
