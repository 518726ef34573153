import pandas as pd
import pytest

from neardup_spark.config import NormaliseConfig
from neardup_spark.kernels.normalise import normalise_series, normalise_text


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

    from neardup_spark.kernels.normalise import _separator_table

    table = _separator_table()
    spaces = [cp for cp in range(sys.maxunicode + 1) if chr(cp).isspace()]
    assert spaces and all(cp in table for cp in spaces)
    text = "".join(chr(cp) + "x" + chr(cp) * 2 for cp in spaces)
    assert normalise_text(" \t" + text + "\n") == " ".join(["x"] * len(spaces))


def _reference(text, opts):
    """Normalisation written the plain way (one string at a time): the oracle for the numpy path."""
    import unicodedata

    from neardup_spark.kernels.normalise import _separator_table

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


_ALL_OPTS = [NormaliseConfig(nfkc=a, lowercase=b, punctuation=c) for a in (True, False) for b in (True, False)
             for c in (True, False)]


# Their lower case takes another number of UTF-8 bytes, so a batch holding one is
# lower-cased on code points instead of in place.
_LENGTH_CHANGERS = ["\u1e9e", "\u212a", "\u2126", "\u023a"]


@pytest.mark.parametrize("as_bytes", [False, True])
@pytest.mark.parametrize("in_place", [True, False])
@pytest.mark.parametrize("opts", _ALL_OPTS)
def test_table_normalisation_matches_str_methods_on_mixed_batches(opts, in_place, as_bytes, monkeypatch):
    # ASCII texts take a byte table, the others code point tables (in place in UTF-8, or
    # on code points when a lower case changes length); Greek capital sigma and dotted
    # capital I, whose lower case depends on context or grows, go through str.lower.
    # Every text must come out as the plain definition, wherever it sits in the batch.
    import numpy as np

    from neardup_spark.kernels import normalise

    if in_place:
        monkeypatch.setattr(normalise, "_wide_utf8", None)  # the code point path must not run
    rng = np.random.default_rng(7)
    pool = _POOL + ["\u03c3", "\u00df", "\u0345", "\u1f88", "\u24b6", "\u00b5", "\u0416", "\u4e2d", "\u0100"]
    if not in_place:
        pool += _LENGTH_CHANGERS
    texts = ["".join(rng.choice(pool, size=rng.integers(0, 30))) for _ in range(400)]
    texts += ["ΟΔΟΣ ΟΔΟΣ.", "ΣΑΣ", "aΣ", "Σa", "İstanbul", "plain ascii, Text!", "", "!!", "x", "ÀÉÎ Ωμέγα Жж"]
    if not in_place:
        texts.append("\u1e9e")
    ascii_only = ["Some ASCII text, with CAPS_and-punctuation!"] * 3
    texts = ascii_only + texts + ascii_only
    if as_bytes:  # as Arrow hands them over, checked valid: no lone surrogates
        texts = [t.replace("\ud800", "?") for t in texts]
        data, offsets = normalise.normalised_utf8([t.encode() for t in texts], opts, valid_utf8=True)
    else:
        data, offsets = normalise.normalised_utf8(texts, opts)
    for i, t in enumerate(texts):
        want = _reference(t, opts)
        got = bytes(data[offsets[i] : offsets[i + 1]]).decode("utf-8", "surrogatepass")
        assert got == (want + " " if want else ""), (t, got, want)


def test_invalid_utf8_bytes_are_decoded_as_replacement_characters():
    # U+FFFD is a symbol, so it separates words like any other.
    from neardup_spark.kernels.normalise import normalised_utf8

    data, offsets = normalised_utf8([b"caf\xe9OK", "Caf\u00e9"], NormaliseConfig())
    assert bytes(data).decode() == "caf ok café "
    assert offsets.tolist() == [0, 7, 13]
    keep = NormaliseConfig(punctuation=False)
    data, _ = normalised_utf8([b"caf\xe9OK"], keep)
    assert bytes(data).decode() == "caf\ufffdok "


def test_lower_case_table_is_str_lower_for_every_code_point():
    import sys

    from neardup_spark.kernels.normalise import _lower_table

    table = _lower_table()
    for cp in range(sys.maxunicode + 1):
        low = chr(cp).lower()
        if len(low) == 1:
            assert table[cp] == ord(low), hex(cp)
        else:
            assert table[cp] == cp and cp == 0x130


def _canonical_pairs():
    """(first, second) of every two-character canonical decomposition: the pairs NFC composes."""
    import sys
    import unicodedata

    for cp in range(sys.maxunicode + 1):
        mapping = unicodedata.decomposition(chr(cp))
        if mapping and mapping[0] != "<" and mapping.count(" ") == 1:
            yield tuple(chr(int(h, 16)) for h in mapping.split())


@pytest.mark.parametrize("opts", [NormaliseConfig(), NormaliseConfig(lowercase=False, punctuation=False)])
def test_texts_skipping_nfkc_still_come_out_as_nfkc_makes_them(opts):
    # Texts whose characters are all ASCII or NFKC-inert skip NFKC. A character that
    # composes with the one before it (a vowel sign after its consonant, Hangul jamo)
    # or that NFKC maps elsewhere must send its text through NFKC: every composable pair
    # of Unicode, both orders, between ASCII and beside inert characters.
    from neardup_spark.kernels.normalise import normalised_utf8

    texts = [f"A{x}{y}b \u201cQ\u201d" for x, y in _canonical_pairs()]
    texts += [f"{y}{x}" for x, y in _canonical_pairs()]
    texts += ["\u1100\u1161\u11a8 \u2014 \u1100\u1161", "\ufb01 \u00e9 \uff21", "e\u0301 \u201cx\u201d"]
    data, offsets = normalised_utf8(texts, opts)
    for i, t in enumerate(texts):
        want = _reference(t, opts)
        got = bytes(data[offsets[i] : offsets[i + 1]]).decode("utf-8", "surrogatepass")
        assert got == (want + " " if want else ""), (t, got, want)


def test_inert_characters_are_a_subset_of_what_nfkc_leaves_alone():
    import unicodedata

    import numpy as np

    from neardup_spark.kernels.normalise import _nfkc_inert

    inert = _nfkc_inert()
    seconds = {ord(y) for _, y in _canonical_pairs()}
    assert not any(inert[cp] for cp in seconds)
    assert not inert[0x1161] and not inert[0x11A8] and not inert[0x0301] and not inert[0xFB01]
    assert inert[ord("\u201c")] and inert[ord("\u00e9")] and inert[ord("\u4e2d")] and inert[ord("\u2014")]
    rng = np.random.default_rng(3)
    for cp in rng.choice(np.flatnonzero(inert), size=20_000, replace=False):
        text = "a" + chr(cp) + "\u201c" + chr(cp) + "z"
        assert unicodedata.normalize("NFKC", text) == text, hex(cp)


def test_typographic_text_is_normalised_without_str_methods(monkeypatch):
    # Curly quotes, dashes and accented letters are the common non-ASCII characters of
    # real text: they must take the UTF-8 tables, not the per-text str path.
    from neardup_spark.kernels import normalise

    def refuse(text, opts):
        raise AssertionError(f"str path taken for {text!r}")

    monkeypatch.setattr(normalise, "_str_normalised", refuse)
    texts = ["\u201cCaf\u00e9\u201d \u2014 na\u00efve \u00c0 la carte", b"\xe2\x80\x9cQuoted\xe2\x80\x9d", "plain"]
    data, offsets = normalise.normalised_utf8(texts, NormaliseConfig(), valid_utf8=True)
    assert bytes(data).decode() == "café naïve à la carte quoted plain "
    with pytest.raises(AssertionError, match="str path"):
        normalise.normalised_utf8(["\ufb01le"], NormaliseConfig())
