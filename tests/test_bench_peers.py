"""The peers benchmark's round order and medians (pure functions; no peer is run)."""

from benchmarks.peers import medians, rounds


def test_rounds_reverse_the_order_every_other_round():
    order = list(rounds(["neardup", "text-dedup", "mllib"], 3))
    assert order == [(0, "neardup"), (0, "text-dedup"), (0, "mllib"),
                     (1, "mllib"), (1, "text-dedup"), (1, "neardup"),
                     (2, "neardup"), (2, "text-dedup"), (2, "mllib")]
    assert list(rounds(["neardup"], 1)) == [(0, "neardup")]


def _run(tool, secs, status="ok"):
    return {"docs": 100, "tool": tool, "process_seconds": secs, "status": status}


def test_medians_are_of_ok_runs_and_the_ratio_is_of_medians():
    runs = [_run("neardup", 20.0), _run("text-dedup", 110.0), _run("text-dedup", 100.0),
            _run("neardup", 24.0), _run("neardup", 22.0), _run("text-dedup", 130.0),
            _run("mllib", 900.0, "timeout")]
    rows = {r["tool"]: r for r in medians(runs, ["neardup", "text-dedup", "mllib"])}
    assert rows["neardup"]["process_seconds_median"] == 22.0
    assert rows["text-dedup"]["process_seconds_median"] == 110.0
    assert rows["text-dedup"]["time_vs_neardup_median"] == 5.0
    assert rows["text-dedup"]["process_seconds_all"] == [100.0, 110.0, 130.0]
    assert rows["mllib"]["ok_runs"] == 0 and rows["mllib"]["process_seconds_median"] is None
    assert "time_vs_neardup_median" not in rows["mllib"] and "time_vs_neardup_median" not in rows["neardup"]


def test_an_even_number_of_runs_takes_the_mean_of_the_middle_two():
    rows = medians([_run("neardup", 20.0), _run("neardup", 23.0)], ["neardup"])
    assert rows[0]["process_seconds_median"] == 21.5
