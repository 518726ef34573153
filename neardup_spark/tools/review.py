"""A run's review page: one self-contained HTML file to decide whether the threshold is right.

`page(spark, output)` reads a finished run's outputs (and its input, named in
report.json) and returns one HTML page with no network requests (inline CSS
and SVG): the run's summary; the S-curve with the threshold marked; the
Jaccard histogram of verified pairs beside that of random pairs; the
cluster-size distribution; the largest clusters, and the member of each that
is farthest from its keeper; and verified pairs sampled
across Jaccard strata, shown side by side with their differences marked.
It collects only what it shows: binned counts, a few thousand sampled texts.
"""

from __future__ import annotations

import difflib
import html
import math
from dataclasses import dataclass, field

import numpy as np
from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F

from neardup_spark import columns as C
from neardup_spark.kernels.lsh import candidate_probability
from neardup_spark.kernels.sketch import shingle_sets
from neardup_spark.runtime.report import summary_lines
from neardup_spark.stages.read import documents, read_input
from neardup_spark.tools.inspect import RunOutput, open_output, opening, set_figures

BINS = 50  # Jaccard histogram bins over [0, 1]
CONTEXT_WORDS = 12  # equal words kept around each difference in the side-by-side pairs


@dataclass
class PageData:
    """What the page shows, collected from a run's outputs."""

    report: dict
    near_bins: list[int]  # verified near pairs per Jaccard bin
    exact_pairs: int
    random_jaccards: list[float]  # sampled random pairs of documents
    size_counts: list[tuple[int, int]]  # (cluster size, clusters of that size)
    largest: list[dict] = field(default_factory=list)  # cluster_id, size, keeper_id, text
    # of each of the largest clusters: its member farthest from the keeper among those checked
    farthest: list[dict] = field(default_factory=list)  # cluster_id, doc_id, keeper_id, jaccard, texts, checked
    samples: list[dict] = field(default_factory=list)  # doc_a, doc_b, jaccard, containments, texts, stratum


def collect(spark: SparkSession, out: RunOutput, report: dict, per_stratum: int = 3, strata: int = 5,
            largest: int = 10, random_pairs: int = 500, seed: int = 1, members_checked: int = 200) -> PageData:
    """The page's data: binned counts in Spark, and only the sampled rows collected."""
    pairs = out.pairs(spark)
    near = pairs.where(F.col(C.MATCH) == C.MATCH_NEAR)
    bins = [0] * BINS
    binned = near.groupBy(F.least(F.floor(F.col(C.JACCARD) * BINS), F.lit(BINS - 1)).alias("b")).count()
    for r in binned.collect():
        bins[int(r["b"])] = int(r["count"])
    exact = pairs.where(F.col(C.MATCH) == C.MATCH_EXACT).count()

    clusters = out.clusters(spark)
    sizes = clusters.groupBy(C.CLUSTER_ID).agg(F.count(F.lit(1)).alias("size"))
    size_counts = sorted((int(r["size"]), int(r["count"])) for r in sizes.groupBy("size").count().collect())
    top = sizes.where(F.col("size") > 1).orderBy(F.col("size").desc(), C.CLUSTER_ID).limit(largest).collect()

    floor = _threshold(report) or 0.0  # strata span [threshold, 1], or all of [0, 1] without one
    width = (1.0 - floor) / strata if floor < 1.0 else 1.0 / strata
    order = Window.partitionBy("_s").orderBy(F.rand(seed), C.DOC_A, C.DOC_B)
    stratum = F.least(F.floor((F.col(C.JACCARD) - floor) / width), F.lit(strata - 1))
    drawn = (near.withColumn("_s", F.greatest(stratum, F.lit(0)))
             .withColumn("_r", F.row_number().over(order)).where(F.col("_r") <= per_stratum)
             .orderBy(C.JACCARD, C.DOC_A).collect())

    keeper_of = {r[C.CLUSTER_ID]: r for r in clusters.where(F.col(C.IS_KEEPER) & F.col(C.CLUSTER_ID).isin(
        [r[C.CLUSTER_ID] for r in top])).select(C.CLUSTER_ID, C.DOC_ID).collect()} if top else {}
    members = _members_of(clusters, [r[C.CLUSTER_ID] for r in top], members_checked, seed)
    ids = ({r[C.DOC_A] for r in drawn} | {r[C.DOC_B] for r in drawn} | {r[C.DOC_ID] for r in keeper_of.values()}
           | {d for ds in members.values() for d in ds})
    docs = documents(read_input(spark, out.cfg), out.cfg).select(C.DOC_ID, C.TEXT)
    texts = {r[0]: r[1] for r in docs.where(F.col(C.DOC_ID).isin(list(ids))).collect()} if ids else {}

    return PageData(
        report=report,
        near_bins=bins,
        exact_pairs=exact,
        random_jaccards=_random_jaccards(docs, out, report, random_pairs, seed),
        size_counts=size_counts,
        largest=[{"cluster_id": r[C.CLUSTER_ID], "size": int(r["size"]),
                  "keeper_id": keeper_of[r[C.CLUSTER_ID]][C.DOC_ID] if r[C.CLUSTER_ID] in keeper_of else None,
                  "text": texts.get(keeper_of[r[C.CLUSTER_ID]][C.DOC_ID]) if r[C.CLUSTER_ID] in keeper_of else None}
                 for r in top],
        farthest=_farthest(members, {c: r[C.DOC_ID] for c, r in keeper_of.items()}, texts, out.cfg),
        samples=[{"doc_a": r[C.DOC_A], "doc_b": r[C.DOC_B], "jaccard": r[C.JACCARD],
                  "containment_a": r[C.CONTAINMENT_A], "containment_b": r[C.CONTAINMENT_B],
                  "text_a": texts.get(r[C.DOC_A]), "text_b": texts.get(r[C.DOC_B])} for r in drawn],
    )


def _members_of(clusters, cluster_ids: list, most: int, seed: int) -> dict:
    """{cluster_id: up to `most` of its non-keeper members, drawn at random (seeded)}."""
    if not cluster_ids:
        return {}
    order = Window.partitionBy(C.CLUSTER_ID).orderBy(F.rand(seed), C.DOC_ID)
    drawn = (clusters.where(~F.col(C.IS_KEEPER) & F.col(C.CLUSTER_ID).isin(cluster_ids))
             .withColumn("_r", F.row_number().over(order)).where(F.col("_r") <= most)
             .select(C.CLUSTER_ID, C.DOC_ID).collect())
    out: dict = {}
    for r in drawn:
        out.setdefault(r[C.CLUSTER_ID], []).append(r[C.DOC_ID])
    return out


def _farthest(members: dict, keepers: dict, texts: dict, cfg) -> list[dict]:
    """Of each cluster's checked members, the one with the smallest exact Jaccard to its keeper,
    shingled as the run did but on the texts as read (a run that stripped boilerplate compared
    the stripped texts)."""
    out = []
    for cluster_id, docs in members.items():
        keeper = keepers.get(cluster_id)
        if keeper is None or texts.get(keeper) is None:
            continue
        docs = [d for d in docs if texts.get(d) is not None]
        if not docs:
            continue
        sets = shingle_sets([texts[keeper], *(texts[d] for d in docs)], cfg.normalise, cfg.shingle.unit,
                            cfg.shingle.k, cfg.minhash.seed)
        scores = [set_figures(sets[i + 1], sets[0])[0] for i in range(len(docs))]
        far = int(np.argmin(scores))
        out.append({"cluster_id": cluster_id, "doc_id": docs[far], "keeper_id": keeper, "jaccard": scores[far],
                    "text": texts[docs[far]], "keeper_text": texts[keeper], "checked": len(docs)})
    return out


def _threshold(report: dict) -> float | None:
    """The run's Jaccard threshold; None for a run that matched by containment or SimHash
    (its pairs' Jaccard may lie anywhere)."""
    lsh = report.get("lsh") or {}
    if "threshold" in lsh:
        return float(lsh["threshold"])
    if lsh.get("mode") == "containment" or lsh.get("method") == "simhash":
        return None
    return float(((report.get("config") or {}).get("verify") or {}).get("threshold", 0.5))


def _random_jaccards(docs, out: RunOutput, report: dict, pairs: int, seed: int) -> list[float]:
    """Jaccards of `pairs` random document pairs (texts sampled, shingled as the run did)."""
    n_docs = int((report.get("counts") or {}).get("documents") or 0)
    if n_docs < 2 or pairs < 1:
        return []
    fraction = min(1.0, 2.4 * pairs / n_docs)
    sample = docs.sample(fraction=fraction, seed=seed).limit(2 * pairs).collect()
    cfg = out.cfg
    sets = shingle_sets([r[1] for r in sample], cfg.normalise, cfg.shingle.unit, cfg.shingle.k, cfg.minhash.seed)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(sets))
    return [set_figures(sets[a], sets[b])[0] for a, b in zip(order[0::2], order[1::2])]


def page(spark: SparkSession, output: str, **kwargs) -> str:
    """The review page of the finished run at `output`, as one HTML string."""
    out = open_output(spark, output)
    return render(collect(spark, out, out.report, **kwargs))


# -- rendering --------------------------------------------------------------------------------------------------

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1180px;
color:#1d2330;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #dde2ea;
padding-bottom:4px}pre{background:#f5f7fa;padding:10px 12px;border-radius:6px;overflow-x:auto;font-size:12.5px}
.grid{display:grid;grid-template-columns:1fr 1fr;gap:18px}.card{border:1px solid #dde2ea;border-radius:8px;
padding:10px 12px}table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #eef1f5;padding:5px 8px;
text-align:left;vertical-align:top}th{font-weight:600;background:#f8f9fb}.num{text-align:right;
font-variant-numeric:tabular-nums}.pair{display:grid;grid-template-columns:1fr 1fr;gap:10px;margin:6px 0 18px}
.pair div{background:#fbfcfd;border:1px solid #e6e9ef;border-radius:6px;padding:8px 10px;font-size:13px}
del{background:#ffd9d9;text-decoration:line-through;color:#7a1d1d}ins{background:#d4f5dc;text-decoration:none;
color:#14532d}.meta{color:#5b6472;font-size:12.5px}.skip{color:#8a93a3}svg text{font-size:11px;fill:#3b4454}
"""


def render(data: PageData) -> str:
    """The page's HTML: inline CSS and SVG only, no script, no external reference."""
    report = data.report
    threshold = _threshold(report)
    if threshold is None:
        marked, span = "no Jaccard threshold: pairs were accepted by containment or SimHash", "from 0 to 1"
    else:
        marked, span = f"the threshold {threshold:g} is marked", "between the threshold and 1"
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width,initial-scale=1'>",
        f"<title>neardup review: {_e(report.get('output') or '')}</title><style>{_CSS}</style></head><body>",
        "<h1>neardup review</h1>",
        f"<div class='meta'>{_e(report.get('output') or '')} · neardup-spark "
        f"{_e(report.get('neardup_spark_version') or '')} · Spark {_e(report.get('spark_version') or '')}</div>",
        "<h2>Summary</h2>",
        f"<pre>{_e(chr(10).join(summary_lines(report)))}</pre>",
        "<div class='grid'>",
        f"<div class='card'><b>S-curve</b><div class='meta'>Probability that a pair of Jaccard s becomes a "
        f"candidate; {marked}.</div>{_s_curve(report, threshold)}</div>",
        f"<div class='card'><b>Jaccard of verified pairs and of random pairs</b><div class='meta'>"
        f"{sum(data.near_bins):,} verified near pairs (and {data.exact_pairs:,} exact copies, not shown); "
        f"{len(data.random_jaccards):,} random pairs of documents. Random pairs far below the threshold "
        f"mean unrelated texts are safely apart.</div>{_histograms(data, threshold)}</div>",
        f"<div class='card'><b>Cluster sizes</b><div class='meta'>Clusters of each size (documents per "
        f"cluster); a few very large clusters often mean shared boilerplate.</div>{_sizes(data.size_counts)}</div>",
        f"<div class='card'><b>Largest clusters</b>{_largest(data.largest)}</div>",
        "</div>",
        "<h2>Farthest members of the largest clusters</h2>",
        "<div class='meta'>In each of the largest clusters, the member least like its keeper among those "
        "checked (exact Jaccard of the run's shingling, without boilerplate stripping): a member far below "
        "the threshold is a document removed for a keeper it does not resemble. The keeper is on the left.</div>",
        _farthest_html(data.farthest, threshold),
        "<h2>Verified pairs across Jaccard strata</h2>",
        f"<div class='meta'>Sampled from each band of Jaccard {span}; words only in the "
        "left text are <del>struck</del>, words only in the right text are <ins>marked</ins>.</div>",
        _samples(data.samples),
        "</body></html>",
    ]
    return "\n".join(parts)


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _axes(w: int, h: int, pad: int, x_label: str, y_label: str, x_ticks, y_ticks) -> list[str]:
    out = [f"<line x1='{pad}' y1='{h - pad}' x2='{w - 8}' y2='{h - pad}' stroke='#9aa3b2'/>",
           f"<line x1='{pad}' y1='8' x2='{pad}' y2='{h - pad}' stroke='#9aa3b2'/>",
           f"<text x='{(w + pad) / 2:.0f}' y='{h - 4}' text-anchor='middle'>{_e(x_label)}</text>",
           f"<text x='12' y='{(h - pad) / 2:.0f}' transform='rotate(-90 12 {(h - pad) / 2:.0f})' "
           f"text-anchor='middle'>{_e(y_label)}</text>"]
    for x, label in x_ticks:
        out.append(f"<text x='{x:.1f}' y='{h - pad + 14}' text-anchor='middle'>{_e(label)}</text>")
    for y, label in y_ticks:
        out.append(f"<text x='{pad - 4}' y='{y + 4:.1f}' text-anchor='end'>{_e(label)}</text>")
    return out


def _svg(w: int, h: int, body: list[str]) -> str:
    return (f"<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {w} {h}' width='100%' role='img'>"
            + "".join(body) + "</svg>")


def _s_curve(report: dict, threshold: float | None) -> str:
    lsh = report.get("lsh") or {}
    curves = []
    if "bands" in lsh and "rows" in lsh:
        curves.append((f"{lsh['bands']} x {lsh['rows']}", int(lsh["bands"]), int(lsh["rows"])))
    for c in lsh.get("size_classes") or []:
        curves.append((f"class {c['class']}: {c['bands']} x {c['rows']}", int(c["bands"]), int(c["rows"])))
    if not curves:
        return "<p class='meta'>No S-curve: this run matched by SimHash block tables.</p>"
    w, h, pad = 520, 260, 42
    x = lambda s: pad + s * (w - pad - 8)  # noqa: E731
    y = lambda p: (h - pad) - p * (h - pad - 8)  # noqa: E731
    body = _axes(w, h, pad, "Jaccard s", "P(candidate)", [(x(t / 5), f"{t / 5:.1f}") for t in range(6)],
                 [(y(t / 4), f"{t / 4:.2f}") for t in range(5)])
    colours = ["#2563eb", "#db2777", "#16a34a", "#ea580c", "#7c3aed", "#0891b2"]
    for i, (label, b, r) in enumerate(curves):
        pts = " ".join(f"{x(s):.1f},{y(candidate_probability(s, b, r)):.1f}" for s in np.linspace(0, 1, 101))
        colour = colours[i % len(colours)]
        body.append(f"<polyline fill='none' stroke='{colour}' stroke-width='2' points='{pts}'/>")
        body.append(f"<text x='{w - 12}' y='{24 + 14 * i}' text-anchor='end' fill='{colour}'>{_e(label)}</text>")
    if threshold is not None:
        body.append(f"<line x1='{x(threshold):.1f}' y1='8' x2='{x(threshold):.1f}' y2='{h - pad}' stroke='#111' "
                    f"stroke-dasharray='4 3'/><text x='{x(threshold) + 4:.1f}' y='20'>threshold {threshold:g}</text>")
    return _svg(w, h, body)


def _histograms(data: PageData, threshold: float | None) -> str:
    rand = [0] * BINS
    for j in data.random_jaccards:
        rand[min(int(j * BINS), BINS - 1)] += 1
    near_total, rand_total = max(sum(data.near_bins), 1), max(len(data.random_jaccards), 1)
    near_share = [n / near_total for n in data.near_bins]
    rand_share = [n / rand_total for n in rand]
    top = max(max(near_share), max(rand_share), 1e-9)
    w, h, pad = 520, 260, 42
    bw = (w - pad - 8) / BINS
    y = lambda p: (h - pad) - p / top * (h - pad - 8)  # noqa: E731
    body = _axes(w, h, pad, "Jaccard", "share of pairs", [(pad + t / 5 * (w - pad - 8), f"{t / 5:.1f}")
                                                          for t in range(6)],
                 [(y(top * t / 4), f"{top * t / 4:.2f}") for t in range(5)])
    for i in range(BINS):
        x0 = pad + i * bw
        if rand_share[i]:
            body.append(f"<rect x='{x0:.1f}' y='{y(rand_share[i]):.1f}' width='{bw * 0.9:.1f}' "
                        f"height='{h - pad - y(rand_share[i]):.1f}' fill='#94a3b8' fill-opacity='0.7'/>")
        if near_share[i]:
            body.append(f"<rect x='{x0:.1f}' y='{y(near_share[i]):.1f}' width='{bw * 0.9:.1f}' "
                        f"height='{h - pad - y(near_share[i]):.1f}' fill='#2563eb' fill-opacity='0.75'/>")
    if threshold is not None:
        tx = pad + threshold * (w - pad - 8)
        body.append(f"<line x1='{tx:.1f}' y1='8' x2='{tx:.1f}' y2='{h - pad}' stroke='#111' stroke-dasharray='4 3'/>")
    body.append(f"<text x='{w - 12}' y='22' text-anchor='end' fill='#2563eb'>verified pairs</text>"
                f"<text x='{w - 12}' y='36' text-anchor='end' fill='#64748b'>random pairs</text>")
    return _svg(w, h, body)


def _sizes(size_counts: list[tuple[int, int]]) -> str:
    """Clusters per size, sizes binned by powers of two (1, 2, 3-4, 5-8, ...)."""
    if not size_counts:
        return "<p class='meta'>No clusters.</p>"
    binned: dict[int, int] = {}
    for size, count in size_counts:
        k = 0 if size <= 1 else math.ceil(math.log2(size))
        binned[k] = binned.get(k, 0) + count
    keys = list(range(max(binned) + 1))
    labels = ["1" if k == 0 else "2" if k == 1 else f"{2 ** (k - 1) + 1}-{2 ** k}" for k in keys]
    values = [binned.get(k, 0) for k in keys]
    w, h, pad = 520, 260, 42
    top = math.log10(max(values) + 1)
    bw = (w - pad - 8) / len(keys)
    y = lambda v: (h - pad) - (math.log10(v + 1) / top if top else 0) * (h - pad - 24)  # noqa: E731
    body = _axes(w, h, pad, "documents per cluster", "clusters (log)",
                 [(pad + (i + 0.5) * bw, lab) for i, lab in enumerate(labels)], [])
    for i, v in enumerate(values):
        if v:
            body.append(f"<rect x='{pad + i * bw + 2:.1f}' y='{y(v):.1f}' width='{bw - 4:.1f}' "
                        f"height='{h - pad - y(v):.1f}' fill='#0f766e'/>"
                        f"<text x='{pad + (i + 0.5) * bw:.1f}' y='{y(v) - 3:.1f}' text-anchor='middle'>{v:,}</text>")
    return _svg(w, h, body)


def _largest(rows: list[dict]) -> str:
    if not rows:
        return "<p class='meta'>No cluster has more than one document.</p>"
    body = "".join(f"<tr><td>{_e(r['cluster_id'])}</td><td class='num'>{r['size']:,}</td>"
                   f"<td>{_e(r['keeper_id'])}</td><td>{_e(opening(r['text'], 110))}</td></tr>" for r in rows)
    return f"<table><tr><th>cluster</th><th class='num'>documents</th><th>keeper</th><th>keeper's text</th></tr>{body}</table>"


def side_by_side(a: str, b: str, context: int = CONTEXT_WORDS) -> tuple[str, str]:
    """Two texts as HTML, word by word: words only in `a` in <del>, only in `b` in <ins>; long
    stretches of equal words shortened to `context` words at each end."""
    wa, wb = a.split(), b.split()
    left, right = [], []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, wa, wb, autojunk=False).get_opcodes():
        if tag == "equal":
            same = wa[i1:i2]
            if len(same) > 2 * context + 3:
                shown = (_e(" ".join(same[:context])) + " <span class='skip'>… "
                         f"{len(same) - 2 * context} same words …</span> " + _e(" ".join(same[-context:])))
            else:
                shown = _e(" ".join(same))
            left.append(shown)
            right.append(shown)
            continue
        if i2 > i1:
            left.append(f"<del>{_e(' '.join(wa[i1:i2]))}</del>")
        if j2 > j1:
            right.append(f"<ins>{_e(' '.join(wb[j1:j2]))}</ins>")
    return " ".join(left), " ".join(right)


def _farthest_html(rows: list[dict], threshold: float | None) -> str:
    if not rows:
        return "<p class='meta'>No cluster has more than one document.</p>"
    out = []
    for r in sorted(rows, key=lambda r: r["jaccard"]):
        below = threshold is not None and r["jaccard"] < threshold
        flag = " · <b>below the threshold</b>" if below else ""
        left, right = side_by_side(r["keeper_text"], r["text"])
        out.append(f"<div class='meta'><b>Jaccard {r['jaccard']:.3f}</b>{flag} · cluster {_e(r['cluster_id'])}: "
                   f"keeper {_e(r['keeper_id'])} and member {_e(r['doc_id'])} (farthest of {r['checked']:,} "
                   f"checked)</div><div class='pair'><div>{left}</div><div>{right}</div></div>")
    return "".join(out)


def _samples(samples: list[dict]) -> str:
    if not samples:
        return "<p class='meta'>No verified near pairs.</p>"
    out = []
    for s in samples:
        left, right = side_by_side(s["text_a"] or "", s["text_b"] or "")
        out.append(f"<div class='meta'><b>Jaccard {s['jaccard']:.3f}</b> · {_e(s['doc_a'])} "
                   f"(containment {s['containment_a']:.3f}) and {_e(s['doc_b'])} "
                   f"(containment {s['containment_b']:.3f})</div>"
                   f"<div class='pair'><div>{left}</div><div>{right}</div></div>")
    return "".join(out)
