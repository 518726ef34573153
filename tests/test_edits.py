"""The seven edits on real text (`tools.edits`): what each changes, and the stories built from them."""

import re
from collections import Counter

import numpy as np
import pytest

from neardup_spark.tools import edits
from neardup_spark.tools.corpus import EDITS

MIXED = ("列出指定文件的信息。如果没有指定排序方式，则按字母排序。\n\n"
         "必须的参数对长短选项都适用。Use the --sort option to change the order, then run it again.\n\n"
         "ファイルの一覧を表示します。オプションを指定しない場合は名前の順です。")
OTHER = "另一段文字从这里开始，它说的是别的事情。Another text begins here and says something else."


def _vocab():
    return edits.vocabulary([MIXED, OTHER])


def test_tokens_put_the_text_back_and_split_unspaced_letters_one_by_one():
    toks = edits.tokens(MIXED)
    assert "".join(toks) == MIXED
    assert "列" in toks and "ル" in toks and "option" in toks and "--" not in toks
    assert all(len(t) == 1 for t in toks if edits.unspaced(t))


@pytest.mark.parametrize("edit", EDITS)
def test_every_edit_changes_the_text_and_is_seeded(edit):
    one = edits.apply_edit(edit, MIXED, _vocab(), OTHER, np.random.default_rng(3))
    again = edits.apply_edit(edit, MIXED, _vocab(), OTHER, np.random.default_rng(3))
    assert one != MIXED and one == again


def test_whitespace_keeps_every_letter_and_reorder_every_sentence():
    rng = np.random.default_rng(1)
    spaced = edits.apply_edit("whitespace", MIXED, _vocab(), OTHER, rng)
    assert re.sub(r"\s", "", spaced).lower() == re.sub(r"\s", "", MIXED).lower()
    moved = edits.apply_edit("reorder", MIXED, _vocab(), OTHER, rng)
    letters = lambda t: Counter(re.sub(r"\s", "", t))  # noqa: E731
    assert letters(moved) == letters(MIXED) and re.sub(r"\s", "", moved) != re.sub(r"\s", "", MIXED)


def test_reorder_moves_sentences_not_pieces_of_names_and_always_moves_something():
    rng = np.random.default_rng(0)
    text = "Edit /etc/foo.conf to set 1.5 now. Then restart it. Check the log."
    moved = edits.apply_edit("reorder", text, _vocab(), OTHER, rng)
    assert sorted(moved.split(". ")) != [text] and "/etc/foo.conf" in moved and "1.5" in moved
    for one in ("Only one sentence here, nothing more.", "First paragraph.\n\nSecond paragraph."):
        out = edits.apply_edit("reorder", one, _vocab(), OTHER, rng)
        assert re.sub(r"\W", "", out) != re.sub(r"\W", "", one)
        assert letters_of(out) == letters_of(one)


def letters_of(text: str) -> Counter:
    return Counter(re.sub(r"\s", "", text))


def test_combining_marks_stay_with_their_letter_and_edits_survive_lowercasing():
    assert edits.tokens("हिन्दी भाषा") == ["हिन्दी", " ", "भाषा"]
    assert edits.tokens("ภาษาไทย") == ["ภ", "า", "ษ", "า", "ไ", "ท", "ย"]
    assert all(edits.unspaced(t) for t in edits.tokens("กิน"))  # a vowel sign joins its consonant
    rng = np.random.default_rng(0)
    for _ in range(20):
        out = edits.apply_edit("char", "Xerox XX", ([], []), OTHER, rng)
        assert out.lower() != "xerox xx"


def test_char_word_and_replace5_change_words_of_the_same_kind():
    rng = np.random.default_rng(2)
    words = [t for t in edits.tokens(MIXED) if edits.is_word(t)]
    changed = edits.apply_edit("char", MIXED, _vocab(), OTHER, rng)
    assert len(changed) == len(MIXED) and sum(a != b for a, b in zip(changed, MIXED)) == 1
    replaced = edits.tokens(edits.apply_edit("replace5", MIXED, _vocab(), OTHER, rng))
    assert len(replaced) == len(edits.tokens(MIXED))
    diff = [(a, b) for a, b in zip(edits.tokens(MIXED), replaced) if a != b]
    assert len(diff) == round(0.05 * len(words))
    assert all(edits.unspaced(a) == edits.unspaced(b) for a, b in diff)


def test_appends_take_words_from_the_other_text():
    rng = np.random.default_rng(4)
    words = sum(edits.is_word(t) for t in edits.tokens(MIXED))
    for edit, share in (("append10", 0.10), ("append50", 0.50)):
        out = edits.apply_edit(edit, MIXED, _vocab(), OTHER, rng)
        assert out.startswith(MIXED.rstrip()) and out[len(MIXED):].strip() and OTHER.startswith(out[len(MIXED):].strip())
        added = sum(edits.is_word(t) for t in edits.tokens(out[len(MIXED):]))
        assert added == min(round(share * words), sum(edits.is_word(t) for t in edits.tokens(OTHER)))


def test_real_stories_are_eight_documents_each_and_the_rest_unrelated():
    texts = [f"{MIXED} 第{i}篇。Number {i} of them." for i in range(27)]
    rows = list(edits.real_stories(texts, seed=5, label="x:"))
    assert rows == list(edits.real_stories(texts, seed=5, label="x:"))
    assert [r["id"] for r in rows] == list(range(1, len(rows) + 1))
    groups = Counter(r["group"] for r in rows)
    stories = [g for g, n in groups.items() if n > 1]
    assert len(stories) == 27 // 9 and all(groups[g] == 8 for g in stories)
    assert all(g.startswith("x:") for g in groups)
    assert sorted(r["edit"] for r in rows if r["group"] == stories[0]) == sorted(["original", *EDITS])
    assert sum(r["edit"] == "unrelated" for r in rows) == 27 - len(stories)


def test_a_text_without_words_is_refused():
    with pytest.raises(ValueError, match="no words"):
        edits.apply_edit("char", "。。 ", _vocab(), OTHER, np.random.default_rng(0))
