import pandas as pd
import pytest

from neardup_spark.config import NormaliseConfig
from neardup_spark.normalise import normalise_series, normalise_text


@pytest.mark.parametrize(
    "text, want",
    [
        ("Hello,  World!!", "hello world"),
        ("  The_quick—brown\tfox\n\njumps. ", "the quick brown fox jumps"),
        ("ＦＵＬＬ width ﬁle", "full width file"),  # NFKC
        ("नमस्ते, दुनिया", "नमस्ते दुनिया"),  # combining vowel signs stay inside words
        ("a\u00a0b\u200bc", "a b c"),  # no-break space, zero-width space
        ("...!!!", ""),
        ("", ""),
        ("$5 + 3% = ok", "5 3 ok"),
    ],
)
def test_normalise_text(text, want):
    assert normalise_text(text) == want


def test_null_stays_null_and_options_apply():
    out = normalise_series(pd.Series(["A, B", None]), NormaliseConfig())
    assert out.tolist() == ["a b", None]
    keep = NormaliseConfig(nfkc=False, lowercase=False, punctuation=False)
    assert normalise_text("A,  B\n c", keep) == "A, B c"


def test_whitespace_and_case_copies_normalise_identically():
    a = "One wire story,\narrives  from SIX sites."
    b = "one wire story, arrives from six sites."
    assert normalise_text(a) == normalise_text(b)


def test_every_whitespace_character_is_a_separator():
    # Collapsing runs of " " after translate equals split/join only if no other whitespace survives it.
    import sys

    from neardup_spark.normalise import _separator_table

    table = _separator_table()
    spaces = [cp for cp in range(sys.maxunicode + 1) if chr(cp).isspace()]
    assert spaces and all(cp in table for cp in spaces)
    text = "".join(chr(cp) + "x" + chr(cp) * 2 for cp in spaces)
    assert normalise_text(" \t" + text + "\n") == " ".join(["x"] * len(spaces))


def _reference(text, opts):
    """Normalisation written the plain way (one string at a time): the oracle for the numpy path."""
    import unicodedata

    from neardup_spark.normalise import _separator_table

    if opts.nfkc:
        text = unicodedata.normalize("NFKC", text)
    if opts.lowercase:
        text = text.lower()
    if opts.punctuation:
        return " ".join(w for w in text.translate(_separator_table()).split(" ") if w)
    return " ".join(text.split())


# Letters, digits, combining marks, every kind of separator, wide and astral characters.
_POOL = list("aZ09 _-.,'\"\t\n\r\x0b\x0c\x1c\x85") + [
    "\u00a0", "\u200b", "\u2028", "\u3000", "\u0301", "\u093f", "\u00c9", "\uff21", "\ufb01",
    "\u03a3", "\u0130", "\U0001f600", "\U00010400", "\ud800", "\ue000", "\u2014", "\u00ad", "\x00",
]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("opts", [NormaliseConfig(), NormaliseConfig(nfkc=False, lowercase=False, punctuation=False)])
def test_vectorised_normalisation_matches_the_plain_definition(seed, opts):
    import numpy as np

    rng = np.random.default_rng(seed)
    texts = ["".join(rng.choice(_POOL, size=rng.integers(0, 40))) for _ in range(300)]
    texts += ["", " ", "  a  ", "\u03a3\u03a3 \u03a3", None]
    got = normalise_series(pd.Series(texts, dtype=object), opts).tolist()
    assert got == [None if t is None else _reference(t, opts) for t in texts]
