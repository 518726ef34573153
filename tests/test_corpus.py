from neardup_spark import corpus
from neardup_spark.normalise import normalise_text

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
