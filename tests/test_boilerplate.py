"""Boilerplate stripping: the segment kernel against the normaliser, `find` against a Python
count, and the acceptance figure: shared site blocks no longer collapse precision."""

import random
from collections import Counter

import pandas as pd
import pytest

from neardup_spark import Config, deduplicate
from neardup_spark.stages import boilerplate
from neardup_spark.tools import corpus
from neardup_spark.config import BoilerplateConfig, ConfigError, NormaliseConfig
from neardup_spark.errors import NeardupError
from neardup_spark.tools.evaluate import pair_scores
from neardup_spark.kernels.normalise import normalise_series, normalise_text

ALPHABET = list("abc ABC\n\r\t.!?,;-'\u00a0\u2028\u0301\u00e9\ufb01\uff21\u0130\x85\x0b\x1c 12") + ["\r\n", ". "]


def _random_texts(seed: int, n: int = 400) -> pd.Series:
    rng = random.Random(seed)
    texts = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 40))) for _ in range(n)]
    return pd.Series([*texts, None], dtype=object)


@pytest.mark.parametrize("unit", ["line", "sentence"])
@pytest.mark.parametrize(
    "opts", [NormaliseConfig(), NormaliseConfig(punctuation=False), NormaliseConfig(nfkc=False, lowercase=False)]
)
def test_nothing_to_strip_gives_exactly_the_normalised_text(unit, opts):
    texts = _random_texts(hash((unit, str(opts))) % 1000)
    got, stripped = boilerplate.strip_normalised(texts, opts, unit, frozenset())
    assert got.tolist() == normalise_series(texts, opts).tolist()
    assert not stripped.any()


@pytest.mark.parametrize("unit", ["line", "sentence"])
def test_raw_segments_line_up_with_their_keys(unit):
    texts = _random_texts(3)
    seg = boilerplate.segment_batch(texts, NormaliseConfig(), unit)
    for i, text in enumerate(texts):
        if text is not None:
            raw = boilerplate.split_segments(text, unit)
            assert len(raw) == seg.offsets[i + 1] - seg.offsets[i]
            forms = seg.forms[seg.of(i)]
            assert forms == [normalise_text(s) if normalise_text(s) else "" for s in raw]


def test_strip_removes_listed_segments_and_keeps_all_boilerplate_documents_whole():
    opts = NormaliseConfig()
    footer = "Share | Tweet | Subscribe"
    texts = pd.Series(
        [
            f"Story one, first line.\n{footer}\nSecond line here",
            f"{footer}\n\n  SHARE  |  tweet | subscribe ",  # boilerplate only (twice): kept whole
            None,
            "",
            "No boilerplate. Here.",
        ],
        dtype=object,
    )
    key = boilerplate.segment_batch(pd.Series([footer]), opts, "line").keys[0]
    got, stripped = boilerplate.strip_normalised(texts, opts, "line", frozenset([key]))
    assert got.tolist() == [
        "story one first line second line here",
        "share tweet subscribe share tweet subscribe",
        None,
        "",
        "no boilerplate here",
    ]
    assert stripped.tolist() == [1, 0, 0, 0, 0]
    sentences, n = boilerplate.strip_normalised(
        pd.Series(["Keep this. Drop me! Keep that? Drop me!"]), opts, "sentence",
        frozenset(boilerplate.segment_batch(pd.Series(["drop me"]), opts, "line").keys),
    )
    assert sentences.tolist() == ["keep this keep that"] and n.tolist() == [2]


def test_config_rules():
    with pytest.raises(ConfigError, match="boilerplate.unit"):
        Config().with_overrides({"boilerplate.unit": "paragraph"})
    with pytest.raises(ConfigError, match="min_docs"):
        Config().with_overrides({"boilerplate.min_docs": 1})
    assert boilerplate.min_documents(BoilerplateConfig(min_docs=10, min_share=0.01), 5000) == 50
    assert boilerplate.min_documents(BoilerplateConfig(min_docs=10, min_share=0.01), 100) == 10


def _site_rows(share: float, n: int = 1200, seed: int = 11) -> list[dict]:
    spec = corpus.CorpusSpec(n_docs=n, seed=seed, boilerplate_share=share, footer_share=1.0, words=200)
    return list(corpus.generate(spec))


def test_find_counts_documents_per_line_like_python(spark):
    rows = _site_rows(0.3, n=400)
    docs = spark.createDataFrame([(r["id"], r["text"]) for r in rows], "doc_id long, text string")
    per_line = Counter()
    for r in rows:
        per_line.update({normalise_text(s) for s in r["text"].splitlines()} - {""})
    cfg = BoilerplateConfig(enabled=True, min_docs=20)
    found = boilerplate.find(docs, cfg, NormaliseConfig(), len(rows))
    want = {form: c for form, c in per_line.items() if c >= 20}
    assert len(found.keys) == len(want) > 0
    got = dict(zip(found.lines[boilerplate.EXAMPLE].map(normalise_text), found.lines[boilerplate.DOCS]))
    assert got == want  # every line found, with its exact document count and an example of it
    with pytest.raises(NeardupError, match="max_lines"):
        boilerplate.find(docs, BoilerplateConfig(enabled=True, min_docs=20, max_lines=3), NormaliseConfig(), len(rows))


@pytest.mark.parametrize("share", [0.45, 0.5])
def test_stripping_restores_precision_on_shared_site_blocks(spark, share):
    rows = _site_rows(share)
    raw = spark.createDataFrame(pd.DataFrame(rows)[["id", "text", "group"]])
    labels = pd.Series({r["id"]: r["group"] for r in rows})
    scores = {}
    for on in (False, True):
        # Components: the linkage that shared blocks collapse (keeper linkage only removes a
        # document that matches its own keeper, so its precision holds without stripping).
        cfg = Config().with_overrides({"verify.threshold": 0.3, "boilerplate.enabled": on, "boilerplate.min_docs": 50,
                                       "cluster.linkage": "components"})
        result = deduplicate(raw, cfg)
        clusters = result.clusters.toPandas().set_index("doc_id")["cluster_id"]
        scores[on] = pair_scores(clusters, labels)
        if on:
            bp = result.report["boilerplate"]
            assert bp["lines"] > 0 and bp["documents_stripped"] == len(rows) and bp["stripped_segments"] > len(rows)
            assert result.boilerplate.count() == bp["lines"]
        result.unpersist()
    print(f"\nboilerplate {share}: off {scores[False].as_dict()}, on {scores[True].as_dict()}")
    assert scores[False].precision < 0.5  # the collapse without stripping
    assert scores[True].precision >= 0.99 and scores[True].recall >= 0.98
