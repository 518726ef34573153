"""The benchmark corpus variants (pure pyarrow; no Spark)."""

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.variants import variant_corpus, variant_texts


def test_typographic_variant_quotes_every_text_and_keeps_the_rest(tmp_path):
    src = tmp_path / "corpus"
    src.mkdir()
    table = pa.table({"id": [1, 2], "text": ["one story", "two"], "group": ["g1", "g2"]})
    pq.write_table(table, src / "part-00000.parquet")
    assert variant_corpus(src, "ascii") == src
    out = variant_corpus(src, "typographic")
    got = pq.read_table(out)
    assert got.column_names == table.column_names
    assert got["text"].to_pylist() == ["\u201cone story\u201d", "\u201ctwo\u201d"]
    assert got["id"].to_pylist() == [1, 2] and got["group"].to_pylist() == ["g1", "g2"]
    assert variant_corpus(src, "typographic") == out  # made once
    assert variant_texts(["a"], "typographic") == ["\u201ca\u201d"] and variant_texts(["a"], "ascii") == ["a"]
