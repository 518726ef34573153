"""`neardup inspect` and `api.inspect`: a cluster's members against its keeper, word by word."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from neardup_spark import api, cli
from neardup_spark.config import NormaliseConfig
from neardup_spark.kernels.sketch import shingle_sets
from neardup_spark.tools.inspect import format_cluster, set_figures, word_diff

from . import oracles

SPARK = ["--shuffle-partitions", "2"]
STORY = ("the city council voted on tuesday to approve a new budget for the public library system "
         "after months of debate over funding for branches in the northern districts of the city "
         "and the mayor said the plan would keep every branch open through the next two years")
OTHER = ("a storm moved across the coast overnight bringing heavy rain and strong winds to towns "
         "along the shore where crews worked through the morning to clear fallen trees from roads")


def test_word_diff_marks_the_edit_with_context():
    old = " ".join(f"w{i}" for i in range(40))
    new = old.replace("w20", "changed").replace("w35 ", "")
    got = word_diff(old, new, context=3)
    assert got == "... w17 w18 w19 [-w20-] {+changed+} w21 w22 w23 ... w32 w33 w34 [-w35-] w36 w37 w38 w39"
    assert word_diff("a b  c", "a b c") == "(same words)"
    assert word_diff("", "new words") == "{+new words+}"


def test_set_figures_are_the_exact_jaccard_and_containments():
    opts = NormaliseConfig()
    a, b = STORY, STORY.replace("tuesday", "monday") + " more words at the end"
    sa, sb = shingle_sets([a, b], opts, "word", 5, 1)
    j, c_member, c_keeper = set_figures(sb, sa)
    ref_a = oracles.word_shingles(oracles.normalise_text(a), 5)
    ref_b = oracles.word_shingles(oracles.normalise_text(b), 5)
    inter = len(ref_a & ref_b)
    assert j == pytest.approx(inter / len(ref_a | ref_b), abs=0.02)  # 32-bit shingle hashes: rare collisions
    assert c_member == pytest.approx(inter / len(ref_b), abs=0.02)
    assert c_keeper == pytest.approx(inter / len(ref_a), abs=0.02)
    assert set_figures(np.array([], np.uint32), sa) == (0.0, 0.0, 0.0)


@pytest.fixture(scope="module")
def small_run(spark, tmp_path_factory):
    work = tmp_path_factory.mktemp("inspect")
    rows = [{"id": 1, "text": STORY},
            {"id": 2, "text": STORY.replace("tuesday", "monday")},
            {"id": 3, "text": STORY.replace("public library", "city library") + " officials said"},
            {"id": 4, "text": OTHER}]
    pd.DataFrame(rows).to_json(work / "in.jsonl", orient="records", lines=True)
    out = work / "out"
    assert cli.main(["run", "--input", str(work / "in.jsonl"), "--format", "jsonl", "--output", str(out),
                     "--threshold", "0.5", "--keeper-rules", "smallest_id", "--quiet", *SPARK]) == 0
    return out


def test_inspect_a_document_shows_its_keeper_and_the_edit(small_run, capsys):
    assert cli.main(["inspect", str(small_run), "--doc", "2", *SPARK]) == 0
    text = capsys.readouterr().out
    assert text.startswith("cluster 1: 3 documents, keeper 1")
    assert "  keeper 1: the city council voted on tuesday" in text
    assert "[-tuesday-] {+monday+}" in text
    assert "[-public-] {+city+}" in text and "{+officials said+}" in text
    pairs = pd.read_parquet(small_run / "pairs")
    j12 = pairs[(pairs.doc_a == 1) & (pairs.doc_b == 2)].jaccard.iloc[0]
    assert f"duplicate 2: jaccard {j12:.3f}" in text


def test_inspect_as_json_and_from_the_library(spark, small_run, capsys):
    assert cli.main(["inspect", str(small_run), "--cluster", "1", "--json", *SPARK]) == 0
    shown = json.loads(capsys.readouterr().out)["clusters"][0]
    assert shown["cluster"] == 1 and shown["size"] == 3 and shown["keeper"] == 1
    assert [m["doc_id"] for m in shown["members"]] == [1, 2, 3]
    frame = api.inspect(spark, str(small_run), doc=3, max_members=1)
    assert list(frame.doc_id) == [1, 2] and frame.attrs["size"] == 3  # the keeper and one other
    assert "showing 1 of 2 others" in format_cluster(frame)
    alone = api.inspect(spark, str(small_run), doc=4)
    assert list(alone.doc_id) == [4] and alone.attrs["size"] == 1


def test_inspect_a_sample_across_jaccard_strata(small_run, capsys):
    assert cli.main(["inspect", str(small_run), "--sample", "5", "--jaccard-range", "0.5,1", "--json",
                     *SPARK]) == 0
    shown = json.loads(capsys.readouterr().out)["clusters"]
    assert [c["cluster"] for c in shown] == [1]  # the one cluster with near pairs


@pytest.mark.parametrize("argv, message", [
    (["--doc", "99"], "no document 99"),
    (["--doc", "x"], "ids are integers"),
    (["--sample", "0"], "positive number"),
    (["--sample", "2", "--jaccard-range", "0.9,0.2"], "--jaccard-range needs"),
    (["--doc", "1", "--max-members", "-1"], "--max-members takes a number >= 0"),
])
def test_inspect_errors_are_one_line(small_run, capsys, argv, message):
    assert cli.main(["inspect", str(small_run), *argv, *SPARK]) == 2
    assert message in capsys.readouterr().err


def test_inspect_needs_a_finished_run(tmp_path, capsys):
    assert cli.main(["inspect", str(tmp_path), "--doc", "1"]) == 2  # before Spark starts
    assert "holds no finished run" in capsys.readouterr().err


@pytest.mark.jvm
def test_inspect_refuses_an_append_output(tmp_path, capsys):
    # An append's clusters/ lists the batch and the archived rows that changed, not whole clusters.
    (tmp_path / "report.json").write_text(json.dumps({"mode": "append", "config": {}}))
    assert cli.main(["inspect", str(tmp_path), "--doc", "1", *SPARK]) == 2
    assert "neardup index export" in capsys.readouterr().err


# What a hostile document may carry: a title change (OSC 0), a screen clear, an OSC 8
# hyperlink, a carriage return that overwrites the line, a bidirectional override.
PAYLOADS = ["\x1b]0;PWNED\x07", "\x1b[2J", "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\", "\r\x1b[K",
            "\u202e"]


@pytest.mark.jvm
def test_inspect_shows_control_characters_escaped(tmp_path, capsys):
    """Ids, texts and diffs from the data never reach the terminal raw."""
    rows = [{"id": "k\x1b]0;TITLE\x07", "text": STORY},
            {"id": "d\r\x1b[K", "text": STORY.replace("tuesday", "tuesday " + " ".join(PAYLOADS)) + " x\x1b[2J"}]
    pd.DataFrame(rows).to_json(tmp_path / "in.jsonl", orient="records", lines=True)
    out = tmp_path / "out"
    assert cli.main(["run", "--input", str(tmp_path / "in.jsonl"), "--format", "jsonl", "--output", str(out),
                     "--threshold", "0.3", "--quiet", *SPARK]) == 0
    capsys.readouterr()
    assert cli.main(["inspect", str(out), "--doc", rows[1]["id"], *SPARK]) == 0
    text = capsys.readouterr().out
    assert "\\x1b]0;TITLE\\x07" in text and "d\\r\\x1b[K" in text and "\\u202e" in text
    assert not any(ch in text for ch in "\x1b\x07\r\u202e"), repr(text)
    # The error line of an unknown id is escaped too.
    assert cli.main(["inspect", str(out), "--doc", "x\x1b[2Jy", *SPARK]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "x\\x1b[2Jy" in err


def test_printable_escapes_controls_and_keeps_other_text():
    from neardup_spark.terminal import printable

    assert printable("café 日本 ok") == "café 日本 ok"
    assert printable("a\tb\nc\x00\x7f\x9b\u2028") == "a\\tb\\nc\\x00\\x7f\\x9b\\u2028"
    assert all(ch not in printable("".join(PAYLOADS)) for ch in "\x1b\x07\r\u202e")
