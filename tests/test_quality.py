"""The acceptance figure: 25,000 documents, seven edits, threshold 0.3, P=128."""

from benchmarks import quality


def test_25k_seven_edit_corpus(spark, tmp_path, capsys):
    result = quality.main(["--docs", "25000", "--shuffle-partitions", "2", "--out", str(tmp_path)])
    with capsys.disabled():  # the per-edit table belongs in the test log
        print("\n25k quality:", result["pairs"], result["recall_by_edit"])
    assert result["pairs"]["recall"] >= 0.99
    assert result["pairs"]["precision"] >= 0.999
    assert min(result["recall_by_edit"].values()) >= 0.98
    assert set(result["recall_by_edit"]) == {"whitespace", "char", "word", "reorder", "replace5", "append10", "append50"}
