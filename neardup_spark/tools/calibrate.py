"""Thresholds from the user's own data: what unrelated pairs look like, and where labels flip.

A near-duplicate threshold does not travel between corpora: shared
boilerplate lifts the Jaccard of unrelated pages. Two procedures transfer:

- **Random pairs** (`random_pairs`): pairs of documents drawn at random are
  overwhelmingly unrelated in any real archive, so their exact Jaccard (on
  the configured normalisation, boilerplate stripping and shingles) is the
  noise floor. `recommend` sets aside the sampled pairs that look like
  duplicates (above a gap), puts the threshold above the upper confidence
  bound of the rest's 99th percentile and
  picks the (b, r) that catch pairs at that threshold with probability
  >= 0.95, and estimates how many candidates the unrelated pairs will cost.
- **Labels** (`labelling_sample`, `score_labels`): verified pairs drawn
  stratified across a Jaccard range, with both texts, for a person to mark
  duplicate or not; read back, they give precision and recall per
  threshold (weighted back to the population of each stratum) and where
  the labels flip.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from neardup_spark import columns as C
from neardup_spark.config import Config
from neardup_spark.errors import InputError
from neardup_spark.kernels import hashing
from neardup_spark.kernels.lsh import candidate_probability, catching, s_star
from neardup_spark.plan import resolve
from neardup_spark.stages import boilerplate

PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p99_9": 99.9}
MIN_CATCH = 0.95  # P(candidate) the recommended (b, r) give pairs at the recommended threshold


def pair_jaccards(left: list[bytes], right: list[bytes]) -> np.ndarray:
    """Exact Jaccard of stored shingle sets, pair by pair (two empty sets: 0)."""
    inter = hashing.intersection_sizes(left, right).astype(np.float64)
    sizes = np.array([len(a) // 4 + len(b) // 4 for a, b in zip(left, right)], dtype=np.float64)
    union = sizes - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def sample_shingle_sets(table: DataFrame, n: int, n_docs: int, seed: int) -> list[bytes]:
    """Up to n shingle sets of non-empty documents of table(shingles, is_empty), in random order."""
    fraction = min(1.0, 1.5 * n / max(n_docs, 1) + 1e-6)
    sample = table.where(~F.col(C.IS_EMPTY)).sample(fraction=fraction, seed=seed)
    rows = sample.select(C.SHINGLES).orderBy(F.rand(seed)).limit(n).collect()
    return [bytes(r[0]) for r in rows]


def random_pair_jaccards(table: DataFrame, pairs: int, n_docs: int, seed: int) -> np.ndarray:
    """Exact Jaccard of up to `pairs` random pairs of distinct non-empty documents."""
    sets = sample_shingle_sets(table, 2 * pairs, n_docs, seed)
    half = len(sets) // 2
    return pair_jaccards(sets[:half], sets[half : 2 * half])


def distribution(values: np.ndarray) -> dict:
    """p50, p90, p99, p99.9, max and mean of a Jaccard sample."""
    if values.size == 0:
        raise InputError("no random pairs: the input needs at least two documents with text")
    out = {name: round(float(np.percentile(values, q)), 6) for name, q in PERCENTILES.items()}
    out["max"] = round(float(values.max()), 6)
    out["mean"] = round(float(values.mean()), 6)
    return out


def _round_up(x: float, step: float = 0.01) -> float:
    return round(min(1.0, math.ceil(round(x / step, 9)) * step), 10)


# A gap at least this wide between consecutive sampled Jaccards, above NOISE_SHARE of them,
# is the valley between unrelated pairs and the duplicates a random sample also draws. Two
# random documents are of one story with probability sum(size^2) / documents^2: 0.3% when
# every document is in a story of 8 among 2,500; a tail of more than 1% is noise.
VALLEY = 0.1
NOISE_SHARE = 0.99
# A percentile q rests on at least TAIL_VALUES sampled values above it, or it is not used.
TAIL_VALUES = 10
CONFIDENCE = 0.95  # of the p99's upper bound


def split_noise(values: np.ndarray, valley: float = VALLEY) -> tuple[np.ndarray, np.ndarray]:
    """(unrelated pairs, pairs that look like duplicates) of a random-pair Jaccard sample.

    Random pairs are overwhelmingly unrelated, but a duplicate-dense sample also
    draws some duplicates, far above the rest. They are the values above the
    lowest gap of at least `valley` between consecutive sorted values, looked for
    above the NOISE_SHARE-th of them; without such a gap, every value is noise."""
    v = np.sort(values)
    lo = int(math.ceil(NOISE_SHARE * v.size)) - 1
    if v.size < 2 or lo >= v.size - 1:
        return v, v[:0]
    gaps = np.flatnonzero(np.diff(v[max(lo, 0):]) >= valley)
    if not gaps.size:
        return v, v[:0]
    cut = max(lo, 0) + int(gaps[0]) + 1
    return v[:cut], v[cut:]


def enough_for(n: int, q: float) -> bool:
    """Whether n sampled values put at least TAIL_VALUES above the q-th percentile."""
    return n * (1.0 - q / 100.0) >= TAIL_VALUES


def p99_upper(noise: np.ndarray) -> float:
    """An upper CONFIDENCE bound of the noise's p99, free of any assumed distribution: the
    order statistic that the p99 stays below with that confidence (the count of values
    under the p99 is binomial(n, 0.99); normal approximation, one-sided)."""
    v = np.sort(noise)
    z = 1.6448536269514722  # the 0.95 quantile of the standard normal
    rank = math.ceil(v.size * 0.99 + z * math.sqrt(v.size * 0.99 * 0.01))
    return float(v[min(rank, v.size - 1)])


def recommend(values: np.ndarray, cfg: Config, n_docs: int, margin: float = 0.05, floor: float = 0.3) -> dict:
    """The recommended threshold and (b, r) for a sample of random-pair Jaccards.

    The pairs that look like duplicates (`split_noise`) are set aside; of the rest,
    threshold = max(floor, round_up(max(95% upper bound of p99 + margin, p99.9))), with
    p99.9 only when the sample has TAIL_VALUES values above it (10,000 pairs): above
    nearly every unrelated pair, with a margin for what the sample did not see. The
    floor keeps it where banding stays affordable and where edited copies
    (sentence reorders sit near 0.5) are still found.
    """
    distribution(values)  # refuses an empty sample
    noise, dupes = split_noise(values)
    upper = p99_upper(noise)
    deep = enough_for(noise.size, 99.9)
    p999 = float(np.percentile(noise, 99.9))
    level = max(upper + margin, p999) if deep else upper + margin
    threshold = max(floor, _round_up(level))
    why = (f"max(p99 upper bound {upper:.4f} + {margin:g}, p99.9 {p999:.4f})" if deep
           else f"p99 upper bound {upper:.4f} + {margin:g}") + f" = {level:.4f}"
    if dupes.size:
        why += f", from the {noise.size:,} pairs below the gap at {dupes[0]:.3f}"
    if threshold == floor and level < floor:
        why += f"; raised to the floor {floor:g}"
    warnings = []
    if not enough_for(noise.size, 99.0):
        warnings.append(f"{noise.size:,} unrelated pairs put fewer than {TAIL_VALUES} values above their p99: "
                        f"sample at least {math.ceil(TAIL_VALUES / 0.01):,} pairs for a p99 to rest on")
    if dupes.size:
        warnings.append(f"{dupes.size:,} of {values.size:,} random pairs looked like duplicates (Jaccard "
                        f"{dupes[0]:.3f}-{dupes[-1]:.3f}, above a gap of at least {VALLEY:g}) and were left out of "
                        "the noise percentiles")
    num_perm = cfg.minhash.num_perm
    b, r = catching(threshold, num_perm, MIN_CATCH, cfg.lsh.far_fraction, cfg.lsh.max_far_probability)
    p_random = np.array([candidate_probability(float(j), b, r) for j in noise])
    all_pairs = n_docs * (n_docs - 1) // 2
    return {
        "recommended_threshold": threshold,
        "why": why,
        "noise_pairs": int(noise.size),
        "duplicate_looking_pairs": int(dupes.size),
        "noise_p99": round(float(np.percentile(noise, 99.0)), 6),
        "noise_p99_upper": round(upper, 6),
        "noise_p99_9": round(p999, 6) if deep else None,
        "warnings": warnings,
        "bands": b,
        "rows": r,
        "num_perm": num_perm,
        "s_star": round(s_star(b, r), 4),
        "p_candidate_at_threshold": round(candidate_probability(threshold, b, r), 6),
        "random_pairs_at_or_above_threshold": round(float((values >= threshold).mean()), 6),
        # What unrelated pairs cost in verification: each becomes a candidate with P(its Jaccard).
        "expected_candidates_from_unrelated_pairs": int(round(float(p_random.mean()) * all_pairs)),
    }


@dataclass(frozen=True)
class Calibration:
    documents: int
    pairs: int
    jaccards: np.ndarray  # the sampled random-pair Jaccards (for plots)
    report: dict


def calibrate(raw: DataFrame, cfg: Config, pairs: int = 5000, seed: int = 1, margin: float = 0.05,
              floor: float = 0.3, top_lines: int = 10) -> Calibration:
    """Random-pair Jaccard distribution of `raw` and the threshold and (b, r) it recommends.

    Documents go through the configured normalisation, boilerplate stripping
    and shingles, exactly as `deduplicate` would see them; boilerplate is
    found on every document, but only the ~2 * pairs sampled ones are sketched.
    """
    from neardup_spark.stages.pipeline import prepared  # the pipeline's own read and sketch steps

    if pairs < 10:
        raise InputError(f"calibrate needs at least 10 pairs; got {pairs}")
    prep = prepared(raw, resolve(cfg), sample_docs=2 * pairs, seed=seed)
    try:
        n_docs = prep.counts["documents"]
        values = random_pair_jaccards(prep.table, pairs, prep.counts["sampled_documents"], seed)
        report = {
            "documents": n_docs,
            "sampled_documents": prep.counts["sampled_documents"],  # sketched (boilerplate figures: these only)
            "pairs": int(values.size),
            **distribution(values),
            **recommend(values, cfg, n_docs, margin, floor),
            "boilerplate": prep.boilerplate,
            "share_at_or_above": {f"{t:.1f}": round(float((values >= t).mean()), 6) for t in (0.1, 0.2, 0.3, 0.5)},
        }
        if top_lines:
            report["frequent_lines"] = frequent_lines(prep.docs, cfg, top_lines, n_docs, seed)
    finally:
        prep.release()
    return Calibration(n_docs, int(values.size), values, report)


def frequent_lines(docs: DataFrame, cfg: Config, n: int, n_docs: int, seed: int, sample_docs: int = 20_000) -> list:
    """The n most frequent lines of a document sample, with estimated document counts:
    the gap between site boilerplate and a story's copies, to set boilerplate.min_docs."""
    fraction = min(1.0, sample_docs / max(n_docs, 1))
    sample = docs if fraction >= 1.0 else docs.sample(fraction=fraction, seed=seed)
    unit = cfg.boilerplate.unit
    top = boilerplate.top_lines(sample, cfg.normalise, unit, n)
    examples = boilerplate.examples(sample, cfg.normalise, unit, frozenset(k for k, _ in top))
    return [
        {"estimated_documents": int(round(c / fraction)), "sampled_documents": c, "example": examples.get(k)}
        for k, c in top
    ]


# -- labelled pairs ---------------------------------------------------------------------------------------------

LABEL = "label"
WEIGHT = "weight"
STRATUM = "stratum"
_YES = {"1", "true", "yes", "y", "dup", "duplicate", "same"}
_NO = {"0", "false", "no", "n", "not", "different", "distinct"}


def labelling_sample(raw: DataFrame, cfg: Config, n: int, lo: float = 0.3, hi: float = 1.0, strata: int = 7,
                     seed: int = 1, text_chars: int = 600) -> pd.DataFrame:
    """n verified pairs with Jaccard in [lo, hi], drawn evenly from `strata` equal-width
    Jaccard bins, with both texts trimmed, for a person to label.

    Pairs come from the pipeline run at threshold `lo` (LSH parameters chosen
    for `lo`, so pairs near it are found too); exact copies count as Jaccard
    1.0. `weight` = pairs in the stratum / pairs drawn from it, so scores
    can be weighted back to all pairs in [lo, hi]. Columns: doc_a, doc_b,
    jaccard, containment_a, containment_b, stratum, weight, label (empty),
    text_a, text_b.
    """
    from neardup_spark.stages.pipeline import verified, with_doc_ids

    if not 0.0 < lo < hi <= 1.0:
        raise InputError(f"the Jaccard range must satisfy 0 < lo < hi <= 1; got {lo}, {hi}")
    if n < 1 or strata < 1:
        raise InputError(f"the sample needs n >= 1 and strata >= 1; got n={n}, strata={strata}")
    low = cfg.with_overrides({"verify.threshold": lo, "lsh.bands": 0, "lsh.rows": 0})
    v = verified(raw, resolve(low))
    try:
        pairs = with_doc_ids(v.edges, v.prep.table.select(C.NID, C.DOC_ID)).where(F.col(C.JACCARD) <= hi)
        width = (hi - lo) / strata
        pairs = pairs.withColumn(STRATUM, F.least(F.floor((F.col(C.JACCARD) - lo) / width), F.lit(strata - 1)).cast("int"))
        drawn = _draw_per_stratum(pairs, math.ceil(n / strata), seed)
        texts = _texts(raw, cfg, drawn, text_chars)
    finally:
        v.prep.release()
    out = drawn.assign(label="")
    out["text_a"] = out[C.DOC_A].map(texts)
    out["text_b"] = out[C.DOC_B].map(texts)
    cols = [C.DOC_A, C.DOC_B, C.JACCARD, C.CONTAINMENT_A, C.CONTAINMENT_B, STRATUM, WEIGHT, LABEL, "text_a", "text_b"]
    return out[cols].sort_values([C.JACCARD, C.DOC_A, C.DOC_B], ignore_index=True)


def _draw_per_stratum(pairs: DataFrame, quota: int, seed: int) -> pd.DataFrame:
    """Up to `quota` random pairs per stratum, with the stratum's weight."""
    sizes = {int(r[STRATUM]): int(r["count"]) for r in pairs.groupBy(STRATUM).count().collect()}
    if not sizes:
        return pd.DataFrame(columns=[C.DOC_A, C.DOC_B, C.JACCARD, C.CONTAINMENT_A, C.CONTAINMENT_B, STRATUM, WEIGHT])
    fractions = {s: min(1.0, 3.0 * quota / c + 1e-9) for s, c in sizes.items()}  # a margin, cut to quota below
    thinned = pairs.sampleBy(STRATUM, fractions, seed)
    order = Window.partitionBy(STRATUM).orderBy(F.rand(seed), C.DOC_A, C.DOC_B)
    rows = thinned.withColumn("_r", F.row_number().over(order)).where(F.col("_r") <= quota).drop("_r")
    drawn = rows.select(C.DOC_A, C.DOC_B, C.JACCARD, C.CONTAINMENT_A, C.CONTAINMENT_B, STRATUM).toPandas()
    taken = drawn.groupby(STRATUM)[C.DOC_A].transform("size")
    drawn[WEIGHT] = drawn[STRATUM].map(sizes) / taken
    return drawn


def _texts(raw: DataFrame, cfg: Config, drawn: pd.DataFrame, chars: int) -> dict:
    """{doc id: its text, whitespace collapsed, trimmed to `chars`} for the drawn pairs."""
    from neardup_spark.stages.read import documents

    ids = sorted(set(drawn[C.DOC_A]) | set(drawn[C.DOC_B]))
    if not ids:
        return {}
    docs = documents(raw, cfg).select(C.DOC_ID, C.TEXT)
    wanted = raw.sparkSession.createDataFrame([(i,) for i in ids], docs.select(C.DOC_ID).schema)
    rows = docs.join(F.broadcast(wanted), C.DOC_ID).collect()
    return {r[C.DOC_ID]: _trim(r[C.TEXT] or "", chars) for r in rows}


def _trim(text: str, chars: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= chars else flat[: chars - 1].rstrip() + "\u2026"


def parse_labels(values: pd.Series) -> pd.Series:
    """Labels as booleans (1/0, yes/no, true/false, dup/not...); unlabelled rows are NA."""
    text = values.fillna("").astype(str).str.strip().str.lower()
    bad = sorted(set(text) - _YES - _NO - {""})
    if bad:
        raise InputError(f"labels must be yes/no, 1/0, true/false or dup/not (or empty); found {bad[:5]}")
    out = pd.Series(pd.NA, index=values.index, dtype="boolean")
    out[text.isin(_YES)] = True
    out[text.isin(_NO)] = False
    return out


def score_labels(labelled: pd.DataFrame, step: float = 0.05) -> dict:
    """Precision, recall and F1 of "jaccard >= t" against the labels, per threshold t,
    each pair weighted by its stratum's weight; where labels flip; the best threshold.

    Recall counts the labelled duplicates in the sampled Jaccard range only:
    duplicates below it were never drawn.
    """
    for col in (C.JACCARD, LABEL):
        if col not in labelled.columns:
            raise InputError(f"the labels file needs a {col!r} column; it has {', '.join(map(str, labelled.columns))}")
    label = parse_labels(labelled[LABEL])
    done = labelled.assign(_dup=label)[label.notna()]
    if done.empty:
        raise InputError("no labelled rows: fill the label column with yes/no (or 1/0)")
    j = done[C.JACCARD].astype(float).to_numpy()
    dup = done["_dup"].astype(bool).to_numpy()
    w = done[WEIGHT].astype(float).to_numpy() if WEIGHT in done.columns else np.ones(len(done))
    grid = np.round(np.arange(math.floor(j.min() / step) * step, 1.0 + step / 2, step), 10)
    rows = []
    for t in grid:
        predicted = j >= t
        tp, fp, fn = (w * (predicted & dup)).sum(), (w * (predicted & ~dup)).sum(), (w * (~predicted & dup)).sum()
        p = tp / (tp + fp) if tp + fp else 1.0
        r = tp / (tp + fn) if tp + fn else 1.0
        f1 = 2 * p * r / (p + r) if p + r else 0.0
        rows.append({"threshold": float(t), "precision": round(p, 4), "recall": round(r, 4), "f1": round(f1, 4)})
    best = max(rows, key=lambda row: (row["f1"], -row["threshold"]))  # ties: the lower threshold (more recall)
    return {
        "labelled": int(len(done)),
        "unlabelled": int(len(labelled) - len(done)),
        "duplicates": int(dup.sum()),
        "flip": {
            "lowest_duplicate_jaccard": round(float(j[dup].min()), 4) if dup.any() else None,
            "highest_non_duplicate_jaccard": round(float(j[~dup].max()), 4) if (~dup).any() else None,
        },
        "recommended_threshold": best["threshold"],
        "at_recommended": best,
        "by_threshold": rows,
    }


# -- output -----------------------------------------------------------------------------------------------------


def write_plots(result: Calibration, directory: str, threshold: float | None = None, verified=()) -> list:
    """S-curve of the recommended (b, r) and the random-pair Jaccard histogram (with the
    `verified` pairs' Jaccards beside them, if given), as PNG files; the histogram marks
    `threshold` (default: the recommended one)."""
    from neardup_spark.tools import plots

    rep = result.report
    marks = {k: rep[k] for k in ("p99", "p99_9")}
    return [
        plots.s_curve(rep["bands"], rep["rows"], rep["recommended_threshold"], f"{directory}/s_curve.png"),
        plots.jaccard_histogram(result.jaccards, list(verified), f"{directory}/jaccard_random_pairs.png",
                                threshold=rep["recommended_threshold"] if threshold is None else threshold,
                                percentiles=marks),
    ]


def format_report(rep: dict) -> str:
    """The text `neardup calibrate` prints."""
    lines = [
        f"documents {rep['documents']}, random pairs {rep['pairs']}"
        + (" (boilerplate stripped)" if rep["boilerplate"].get("enabled") else ""),
        "random-pair Jaccard: " + ", ".join(f"{k.replace('_', '.')} {rep[k]:.4f}" for k in (*PERCENTILES, "max")),
        f"recommended threshold {rep['recommended_threshold']:g}  ({rep['why']})",
        f"LSH for it: bands {rep['bands']} x rows {rep['rows']} of {rep['num_perm']} permutations, "
        f"P(candidate) at the threshold {rep['p_candidate_at_threshold']:.4f}, S* {rep['s_star']:.4f}",
        f"unrelated pairs expected as candidates: ~{rep['expected_candidates_from_unrelated_pairs']:,}",
        *(f"warning: {w}" for w in rep.get("warnings", [])),
    ]
    for line in rep.get("frequent_lines", []):
        lines.append(f"  ~{line['estimated_documents']:>9,} docs  {str(line['example'])[:70]!r}")
    if rep.get("frequent_lines"):
        lines.insert(5 + len(rep.get("warnings", [])), "most frequent lines (estimated documents; set boilerplate.min_docs between stories and these):")
    return "\n".join(lines)


def strata_summary(frame: pd.DataFrame) -> list[dict]:
    """Per stratum of a labelling sample: its Jaccard span, pairs drawn, pairs it stands for."""
    out = []
    for stratum, rows in frame.groupby(STRATUM):
        out.append({
            STRATUM: int(stratum),
            "jaccard_min": round(float(rows[C.JACCARD].min()), 4),
            "jaccard_max": round(float(rows[C.JACCARD].max()), 4),
            "drawn": int(len(rows)),
            "pairs_in_stratum": int(round(float(rows[WEIGHT].iloc[0]) * len(rows))),
        })
    return out


def format_strata(summary: dict) -> str:
    lines = [f"wrote {summary['pairs']} pairs to {summary['output']}: fill the 'label' column with yes/no, "
             "then run `neardup calibrate --labels FILE`"]
    for s in summary["per_stratum"]:
        lines.append(f"  Jaccard {s['jaccard_min']:.3f}-{s['jaccard_max']:.3f}: {s['drawn']} of {s['pairs_in_stratum']} pairs")
    return "\n".join(lines)


def format_labels(scores: dict) -> str:
    """The text `neardup calibrate --labels` prints."""
    flip = scores["flip"]
    lines = [
        f"labelled {scores['labelled']} pairs ({scores['duplicates']} duplicates), {scores['unlabelled']} unlabelled",
        f"labels flip between Jaccard {flip['highest_non_duplicate_jaccard']} (highest non-duplicate) "
        f"and {flip['lowest_duplicate_jaccard']} (lowest duplicate)",
        f"recommended threshold {scores['recommended_threshold']:g} (best weighted F1)",
        "",
        "threshold  precision  recall     F1",
    ]
    for row in scores["by_threshold"]:
        mark = "  <- recommended" if row["threshold"] == scores["recommended_threshold"] else ""
        lines.append(f"{row['threshold']:9.2f}  {row['precision']:9.4f}  {row['recall']:6.4f}  {row['f1']:.4f}{mark}")
    return "\n".join(lines)
