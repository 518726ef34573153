"""The benchmark corpus as generated, and as real English text would have it.

The generated corpus is pure ASCII. Real text is not: a curly quote or a dash
is enough to send Python's str methods to their per-character slow path, which
made neardup's sketch ~4x slower on such text until 67ee905, unseen by every
benchmark. So the benchmarks that time the sketch can run on a variant too:

* `ascii`: the documents as generated;
* `typographic`: each document between curly quotes (U+201C ... U+201D).
"""

from __future__ import annotations

from pathlib import Path

OPEN_QUOTE, CLOSE_QUOTE = "\u201c", "\u201d"
VARIANTS = ("ascii", "typographic")


def variant_texts(texts: list[str], variant: str) -> list[str]:
    """The documents as the variant has them."""
    return texts if variant == "ascii" else [OPEN_QUOTE + t + CLOSE_QUOTE for t in texts]


def variant_corpus(path: Path, variant: str) -> Path:
    """A corpus directory of Parquet files as the variant has them: `path` itself for
    ascii, else a copy beside it (made once) with only the text column changed."""
    if variant == "ascii":
        return path
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    out = path.parent / f"{path.name}-{variant}"
    if not (out / "_DONE").exists():
        out.mkdir(parents=True, exist_ok=True)
        for part in sorted(path.glob("*.parquet")):
            table = pq.read_table(part)
            text = pc.binary_join_element_wise(OPEN_QUOTE, table["text"], CLOSE_QUOTE, "")
            pq.write_table(table.set_column(table.schema.get_field_index("text"), "text", text), out / part.name)
        (out / "_DONE").write_text("")
    return out
