"""The signatures benchmark's rounds and medians (pure functions; nothing is timed)."""

from benchmarks.signatures import run_round, summarise, table


def _round(ref, kernel, ds, udf=None):
    out = {"ascii: numpy reference (1 core)": {"docs_per_s_per_core": ref},
           "ascii: neardup kernel (1 core, no Spark)": {"docs_per_s_per_core": kernel},
           "ascii: datasketch 128 perm (1 core)": None if ds is None else {"docs_per_s_per_core": ds}}
    if udf is not None:
        out["ascii: neardup Arrow UDF, Spark local[2], 100k"] = {"docs_per_s_per_core": udf, "cores": 2, "docs": 100}
    return out


def test_ratios_are_taken_within_each_round_then_their_median():
    # The machine halves its speed in round 2: every rate halves, the ratios hold.
    rounds = [_round(10_000, 20_000, 2_000, 16_000), _round(5_000, 10_000, 1_000, 8_000),
              _round(10_000, 30_000, 2_000, 20_000)]
    rows = summarise(rounds)
    udf = rows["ascii: neardup Arrow UDF, Spark local[2], 100k"]
    assert udf["docs_per_s_per_core"] == 16_000  # median of the rates
    assert udf["vs_datasketch_rounds"] == [8.0, 8.0, 10.0]
    assert udf["vs_datasketch"] == 8.0  # not 16,000 / 2,000 of medians taken apart
    assert udf["vs_numpy_ref"] == 1.6 and udf["cores"] == 2 and udf["docs"] == 100
    assert rows["ascii: datasketch 128 perm (1 core)"]["vs_datasketch"] == 1.0


def test_a_skipped_reference_leaves_its_ratio_out():
    rows = summarise([_round(10_000, 20_000, None), _round(10_000, 22_000, None)])
    kernel = rows["ascii: neardup kernel (1 core, no Spark)"]
    assert kernel["vs_numpy_ref"] == 2.1 and "vs_datasketch" not in kernel
    assert rows["ascii: datasketch 128 perm (1 core)"] is None
    printed = "\n".join(table(rows))
    assert "skipped" in printed and "2.10x" in printed


def test_every_other_round_runs_the_rows_in_reverse():
    ran = []
    plan = [(name, lambda name=name: ran.append(name) or {"docs_per_s_per_core": 1.0}) for name in "abc"]
    first, second = run_round(0, plan), run_round(1, plan)
    assert ran == ["a", "b", "c", "c", "b", "a"]
    assert list(first) == list(second) == ["a", "b", "c"]  # reported in plan order either way


def test_steal_share_is_of_the_ticks_between_two_readings():
    from benchmarks.signatures import steal_share

    assert steal_share((10, 1_000), (30, 1_200)) == 0.1
    assert steal_share(None, (30, 1_200)) is None
    assert steal_share((10, 1_000), (10, 1_000)) is None  # no time passed
