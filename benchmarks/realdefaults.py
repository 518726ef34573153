"""The default clustering on real text, judged against `--linkage components`: whole-process time
and the exact Jaccard of every removed document with its keeper, on five real corpora and on the
seven-edit generator.

    .venv/bin/python -m benchmarks.realdefaults                        # five real corpora, seven-edit 10k and 100k
    .venv/bin/python -m benchmarks.realdefaults --generated 1000000    # and the generated 1M, timed
    .venv/bin/python -m benchmarks.realdefaults --linkages keeper,components --limit 500 --rounds 1 \\
        --seven-edit 2000 --out /tmp/realdefaults                      # a quick look, keeper standing in for the default

Every corpus runs as `neardup run --input CORPUS --output OUT --overwrite`, its own process, with
no other option (the defaults, whatever linkage the package ships), and as the same with
`--linkage components`, alternating, `--rounds` times each, the order reversed every other round
(`--linkages A,B`: A is judged, B is the baseline; `default` means no --linkage option, `strip`
the defaults with `--strip-boilerplate`, to judge boilerplate stripping). The time
is the whole process's, JVM start included; the driver JVM's class-data archive is made first by
an untimed run. The real corpora are written as JSON Lines (id, text, group where labelled,
source) and, as the runs' input, as Parquet of id and text (`--input-format jsonl` runs them from
the JSON Lines instead, adding `--format jsonl`).

Corpora (`--corpora`), rebuilt by benchmarks/realcorpora.py from what installs here (PyPI, Debian's
archive, npm) and cached under `--cache`, never committed; once cached they build offline:

- `licences`: licence texts, each one document: ScanCode's licences and full-text licence rules
  (the `licensedcode-data` wheel, `pip download`), the SPDX licence list's texts (`npm pack
  spdx-license-list`), the dist-info licence files of the wheels of sixty well-known PyPI packages
  and of the Python packages installed here, and /usr/share/common-licenses;
- `versions`: every release's long description of those sixty packages (PyPI's JSON API lists
  the releases; the description is each release's core metadata: its wheel's `.metadata` file,
  else its sdist's PKG-INFO), one document a release, labelled by package;
- `debian-copyright`: /usr/share/doc/*/copyright of the installed Debian packages and of
  `--debian-extra` more source packages (seeded choice of small ones, `apt-get download`);
- `manpages`: benchmarks/realtext.py's man pages (en, zh, ja) with the seven edits, labelled by
  story;
- `npm-history`: the README and the changelog of up to `--npm-versions` releases of thirty npm
  packages (`npm pack`), labelled by package and file.

And generated: `seven-edit-N` (`--seven-edit`, 10k and 100k: `tools.corpus.generate(
CorpusSpec(n_docs=N, seed=7, words=200))`, labelled) and `generated-N` (`--generated N`:
benchmarks/scale.py's corpus, timed; above `--check-all-below` documents the Jaccard check takes a
seeded sample of `--check-sample` removed documents).

Figures of each run's output (clusters/): the removed documents (status duplicate or
exact_duplicate); the share of them whose exact Jaccard with their keeper, on the pipeline's own
shingle sets (normalisation, shingle unit and k, and seed of the run's report.json), is at least
the run's threshold less `--margin`; the lowest such Jaccard; the largest cluster; pair precision
and recall against the labels where there are labels (a package's releases need not be
near-duplicates of each other, so on versions and npm-history those are figures, not targets).

Targets, printed and stored: on every real corpus a share >= 0.995 of the removed documents with
J >= t - 0.03 under the judged linkage; its median time <= 1.2x the baseline's on every corpus;
on the seven-edit corpora pair recall >= 0.99 and precision >= 0.999 against the labels.
Writes benchmarks/results/realdefaults.json (realdefaults-<judged>-vs-<baseline>.json for other
`--linkages`, and -limit<N> with --limit).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.compute as pc
import pyarrow.dataset as ds

from benchmarks import machine, realcorpora, save
from benchmarks.peers import neardup_code_state
from benchmarks.scale import corpus_dir, corpus_path, describe_class_archive, ensure_class_archive
from neardup_spark.config import Config
from neardup_spark.kernels.sketch import shingle_sets
from neardup_spark.tools import corpus as generator
from neardup_spark.tools.evaluate import pair_scores

RESULTS = Path(__file__).parent / "results"
CORPORA = "licences,versions,debian-copyright,manpages,npm-history"  # realcorpora.BUILDERS, in this order
LINKAGES = ("default", "components", "keeper", "strip")
REMOVED = ("duplicate", "exact_duplicate")
NEARDUP = Path(sys.executable).parent / "neardup"


@dataclass
class Corpus:
    name: str
    kind: str  # real | seven-edit | generated
    path: Path  # the runs' input
    documents: int
    labels: pd.Series | None  # group by document id
    options: list[str] = field(default_factory=list)  # input options the runs need (--format)
    build: dict = field(default_factory=dict)


# -- corpora --------------------------------------------------------------------------------------------------


def real_corpus(name: str, args) -> Corpus:
    opts = {"debian-copyright": {"extra": args.debian_extra}, "npm-history": {"per_package": args.npm_versions}}
    cache = Path(args.cache)
    realcorpora.FETCHED.clear()
    start = time.perf_counter()
    frame = realcorpora.BUILDERS[name](cache, limit=args.limit, seed=args.seed, **opts.get(name, {}))
    seconds = round(time.perf_counter() - start, 1)
    stem = cache / "corpora" / (name if not args.limit else f"{name}-limit{args.limit}")
    stem.parent.mkdir(parents=True, exist_ok=True)
    frame.to_json(f"{stem}.jsonl.gz", orient="records", lines=True, force_ascii=False, compression="gzip")
    frame[["id", "text"]].to_parquet(f"{stem}.parquet", index=False)
    jsonl = args.input_format == "jsonl"
    sources = frame["source"].str.split(":", n=1).str[0] if name in ("licences", "debian-copyright") else None
    build = {"seconds": seconds, "fetched": dict(realcorpora.FETCHED), "from_cache": not realcorpora.FETCHED,
             "median_chars": int(frame["text"].str.len().median()), "megabytes": round(frame["text"].str.len().sum() / 1e6, 1)}
    if sources is not None:
        build["by_source"] = sources.value_counts().to_dict()
    if "group" in frame:
        build["groups"] = int(frame["group"].nunique())
    return Corpus(name, "real", Path(f"{stem}.jsonl.gz" if jsonl else f"{stem}.parquet"), len(frame),
                  frame.set_index("id")["group"] if "group" in frame else None,
                  ["--format", "jsonl"] if jsonl else [], build)


def seven_edit_corpus(docs: int, args) -> Corpus:
    path = Path(args.cache) / "generated" / f"seven-edit-{docs}-{args.seed}-w200"
    start = time.perf_counter()
    made = not (path / "_DONE").exists()
    if made:
        generator.write(generator.CorpusSpec(n_docs=docs, seed=args.seed, words=200), path, "parquet")
        (path / "_DONE").write_text("")
    labels = pd.read_parquet(path, columns=["id", "group"]).set_index("id")["group"]
    return Corpus(f"seven-edit-{docs}", "seven-edit", path, len(labels), labels,
                  build={"seconds": round(time.perf_counter() - start, 1), "from_cache": not made})


def generated_corpus(docs: int, args) -> Corpus:
    start = time.perf_counter()
    cached = (corpus_path(Path(args.cache) / "generated", docs, args.seed) / "_DONE").exists()
    path = corpus_dir(Path(args.cache) / "generated", docs, args.seed)
    labels = pd.read_parquet(path, columns=["id", "group"]).set_index("id")["group"]
    return Corpus(f"generated-{docs}", "generated", path, len(labels), labels,
                  build={"seconds": round(time.perf_counter() - start, 1), "from_cache": cached})


# -- runs -----------------------------------------------------------------------------------------------------


def linkage_options(linkage: str) -> list[str]:
    if linkage == "strip":
        return ["--strip-boilerplate"]
    return [] if linkage == "default" else ["--linkage", linkage]


def run_cli(corpus: Corpus, linkage: str, out: Path) -> dict:
    """One `neardup run` as its own process, timed from outside."""
    argv = ["run", "--input", str(corpus.path), *corpus.options, "--output", str(out), "--overwrite",
            *linkage_options(linkage)]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    start = time.perf_counter()
    proc = subprocess.run([str(NEARDUP), *argv], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"neardup {' '.join(argv)} failed:\n{proc.stderr[-3000:]}")
    report = json.loads((out / "report.json").read_text())
    return {"linkage": linkage, "argv": ["neardup", *argv], "process_seconds": round(wall, 2),
            "pipeline_seconds": report["wall_seconds"], "linkage_ran": report["config"]["cluster"]["linkage"],
            "stage_seconds": report["stage_seconds"], "counts": report["counts"], "sizing": report.get("sizing")}


# -- figures --------------------------------------------------------------------------------------------------


def shingling(report: dict) -> Config:
    """The config whose shingle sets the run compared (its report's normalisation, shingle and seed)."""
    cfg = report["config"]
    overrides = {f"{section}.{k}": v for section in ("normalise", "shingle") for k, v in cfg[section].items()}
    return Config().with_overrides({**overrides, "minhash.seed": cfg["minhash"]["seed"]})


class SetCache:
    """Shingle sets of a corpus's documents, made on demand (texts read from its Parquet or JSON
    Lines by id) and kept for the next run on the same corpus."""

    def __init__(self, corpus: Corpus):
        self.corpus, self.sets, self.key = corpus, {}, None

    def _texts(self, ids: np.ndarray) -> pd.Series:
        if self.corpus.path.suffix == ".gz":
            frame = pd.read_json(self.corpus.path, lines=True)
            return frame.set_index("id")["text"].reindex(ids)
        table = ds.dataset(self.corpus.path).to_table(columns=["id", "text"], filter=pc.field("id").isin(ids))
        return table.to_pandas().set_index("id")["text"].reindex(ids)

    def jaccard(self, a: np.ndarray, b: np.ndarray, cfg: Config) -> np.ndarray:
        key = (cfg.normalise, cfg.shingle, cfg.minhash.seed)
        if key != self.key:
            self.sets, self.key = {}, key
        need = np.setdiff1d(np.union1d(a, b), np.fromiter(self.sets, dtype=np.int64, count=len(self.sets)))
        if need.size:
            texts = self._texts(need)
            made = shingle_sets(texts.tolist(), cfg.normalise, cfg.shingle.unit, cfg.shingle.k, cfg.minhash.seed)
            self.sets.update(zip(need.tolist(), made))
        out = np.empty(len(a))
        for i, (x, y) in enumerate(zip(a.tolist(), b.tolist())):
            s, t = self.sets[x], self.sets[y]
            n = np.intersect1d(s, t, assume_unique=True).size
            union = s.size + t.size - n
            out[i] = n / union if union else 1.0  # two texts that both normalise to nothing are equal
        return out


def judge(out: Path, corpus: Corpus, sets: SetCache, args) -> dict:
    report = json.loads((out / "report.json").read_text())
    t = float(report["config"]["verify"]["threshold"])
    clusters = pd.read_parquet(out / "clusters", columns=["doc_id", "cluster_id", "keeper_id", "status"])
    removed = clusters[clusters["status"].isin(REMOVED)]
    checked = removed
    if corpus.documents > args.check_all_below and len(removed) > args.check_sample:
        checked = removed.sample(n=args.check_sample, random_state=args.seed)
    j = sets.jaccard(checked["doc_id"].to_numpy(), checked["keeper_id"].to_numpy(), shingling(report))
    ok = j >= t - args.margin
    sizes = clusters.groupby("cluster_id").size()
    worst = np.argsort(j, kind="stable")[:5]
    figures = {
        "threshold": t, "documents": len(clusters), "removed": len(removed),
        "removed_share": round(len(removed) / max(len(clusters), 1), 6),
        "status": {k: int(v) for k, v in clusters["status"].value_counts().items()},
        "clusters": int(len(sizes)), "clusters_with_duplicates": int((sizes > 1).sum()),
        "largest_cluster": int(sizes.max()) if len(sizes) else 0,
        "checked": len(checked), "sampled": len(checked) < len(removed),
        "share_at_least_t_minus_margin": round(float(ok.mean()), 6) if len(j) else 1.0,
        "share_at_least_t": round(float((j >= t).mean()), 6) if len(j) else 1.0,
        "below_t_minus_margin": int((~ok).sum()),
        "lowest_jaccard": round(float(j.min()), 4) if len(j) else None,
        "worst": [{"doc_id": int(checked["doc_id"].iloc[i]), "keeper_id": int(checked["keeper_id"].iloc[i]),
                   "jaccard": round(float(j[i]), 4)} for i in worst],
    }
    if corpus.labels is not None:
        figures["pairs_vs_labels"] = pair_scores(clusters.set_index("doc_id")["cluster_id"], corpus.labels).as_dict()
    return figures


def measure(corpus: Corpus, linkages: list[str], args) -> dict:
    runs = []
    for r in range(args.rounds):
        for linkage in (linkages if r % 2 == 0 else linkages[::-1]):
            run = run_cli(corpus, linkage, Path(args.cache) / "out" / f"{corpus.name}-{linkage}")
            runs.append({"round": r, **run})
            print(f"  {corpus.name} round {r + 1} {linkage:<10} {run['process_seconds']:>8.1f} s "
                  f"(ran {run['linkage_ran']}, removed {run['counts'].get('removed')})", flush=True)
    sets = SetCache(corpus)
    figures = {linkage: judge(Path(args.cache) / "out" / f"{corpus.name}-{linkage}", corpus, sets, args)
               for linkage in linkages}
    medians = {linkage: statistics.median(r["process_seconds"] for r in runs if r["linkage"] == linkage)
               for linkage in linkages}
    judged, baseline = linkages
    ran = {linkage: next(r["linkage_ran"] for r in runs if r["linkage"] == linkage) for linkage in linkages}
    if ran[judged] == ran[baseline] and "strip" not in linkages:
        print(f"  note: {judged} and {baseline} both ran the {ran[judged]} linkage", flush=True)
    return {"corpus": corpus.name, "kind": corpus.kind, "documents": corpus.documents,
            "labelled": corpus.labels is not None, "input": str(corpus.path), "build": corpus.build,
            "runs": runs, "process_seconds_median": medians,
            "time_ratio": round(medians[judged] / medians[baseline], 3),
            "linkage_ran": ran,
            "figures": figures}


# -- targets and the table ------------------------------------------------------------------------------------


def targets(rows: list[dict], linkages: list[str], args) -> list[dict]:
    judged, baseline = linkages
    out = []

    def add(corpus: str, what: str, value, op: str, bound: float):
        met = value is not None and (value >= bound if op == ">=" else value <= bound)
        out.append({"corpus": corpus, "what": what, "value": value, "target": f"{op} {bound}", "met": bool(met)})

    for row in rows:
        f = row["figures"][judged]
        if row["kind"] == "real":
            add(row["corpus"], f"{judged}: share of removed docs with J >= t - {args.margin}",
                f["share_at_least_t_minus_margin"], ">=", args.share_target)
        if row["kind"] == "seven-edit":
            add(row["corpus"], f"{judged}: pair recall vs labels", f["pairs_vs_labels"]["recall"], ">=",
                args.recall_target)
            add(row["corpus"], f"{judged}: pair precision vs labels", f["pairs_vs_labels"]["precision"], ">=",
                args.precision_target)
        add(row["corpus"], f"median time {judged} / {baseline}", row["time_ratio"], "<=", args.time_target)
    return out


def print_row(row: dict, linkages: list[str], margin: float) -> None:
    for linkage in linkages:
        f = row["figures"][linkage]
        p = f.get("pairs_vs_labels")
        labels = f"{p['precision']:.4f}/{p['recall']:.4f}" if p else "-"
        lowest = f"{f['lowest_jaccard']:.3f}" if f["lowest_jaccard"] is not None else "-"
        print(f"{row['corpus']:<18} {row['documents']:>9,} {linkage:<10} {row['process_seconds_median'][linkage]:>8.1f}"
              f" {f['removed']:>9,} {f['share_at_least_t_minus_margin']:>9.4f} {lowest:>8} {f['largest_cluster']:>8,}"
              f"  {labels}", flush=True)
    judged, baseline = linkages
    print(f"{'':<18} time {judged}/{baseline}: {row['time_ratio']:.3f}", flush=True)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpora", default=CORPORA, help="real corpora, comma-separated ('' for none)")
    ap.add_argument("--seven-edit", type=int, nargs="*", default=[10_000, 100_000],
                    help="sizes of the labelled seven-edit corpora (none: skip)")
    ap.add_argument("--generated", type=int, default=0, help="also time the generated corpus of N documents")
    ap.add_argument("--linkages", default="default,components",
                    help="JUDGED,BASELINE: default (no --linkage option), components or keeper")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0, help="at most N documents a real corpus (0: all)")
    ap.add_argument("--debian-extra", type=int, default=600, help="debian-copyright: packages to download")
    ap.add_argument("--npm-versions", type=int, default=25, help="npm-history: releases a package")
    ap.add_argument("--input-format", choices=["parquet", "jsonl"], default="parquet",
                    help="what the real corpora's runs read (jsonl adds --format jsonl)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--margin", type=float, default=0.03, help="a removed doc counts with J >= threshold - margin")
    ap.add_argument("--check-sample", type=int, default=20_000)
    ap.add_argument("--check-all-below", type=int, default=200_000,
                    help="corpora of more documents check a sample of --check-sample removed documents")
    ap.add_argument("--share-target", type=float, default=0.995)
    ap.add_argument("--time-target", type=float, default=1.2)
    ap.add_argument("--recall-target", type=float, default=0.99)
    ap.add_argument("--precision-target", type=float, default=0.999)
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "neardup-bench" / "realdefaults"))
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    linkages = args.linkages.split(",")
    if len(linkages) != 2 or len(set(linkages)) != 2 or not set(linkages) <= set(LINKAGES):
        ap.error(f"--linkages takes two of {', '.join(LINKAGES)}: the judged one, then the baseline")
    names = [n for n in args.corpora.split(",") if n]
    unknown = sorted(set(names) - set(realcorpora.BUILDERS))
    if unknown:
        ap.error(f"unknown corpora {', '.join(unknown)} (known: {CORPORA})")

    from neardup_spark.config import SparkConfig
    from neardup_spark.runtime.masters import planned_master

    master = planned_master(SparkConfig())
    Path(args.cache).mkdir(parents=True, exist_ok=True)
    archive = ensure_class_archive(master, Path(args.cache))
    print(describe_class_archive(archive), flush=True)
    makers = [(n, lambda n=n: real_corpus(n, args)) for n in names]
    makers += [(f"seven-edit-{d}", lambda d=d: seven_edit_corpus(d, args)) for d in args.seven_edit or []]
    if args.generated:
        makers.append((f"generated-{args.generated}", lambda: generated_corpus(args.generated, args)))
    rows = []
    for name, make in makers:
        corpus = make()
        b = corpus.build
        print(f"{name}: {corpus.documents:,} documents, built in {b['seconds']} s"
              + (f" (downloads: {json.dumps(b['fetched'])})" if b.get("fetched") else " (from the cache)"
                 if b.get("from_cache") else ""), flush=True)
        rows.append(measure(corpus, linkages, args))
        print(f"{'corpus':<18} {'docs':>9} {'linkage':<10} {'median s':>8} {'removed':>9} "
              f"{'J>=t-' + str(args.margin):>9} {'lowest J':>8} {'largest':>8}  P/R vs labels")
        print_row(rows[-1], linkages, args.margin)
    goals = targets(rows, linkages, args)
    print("\ntargets:")
    for g in goals:
        print(f"  {'met ' if g['met'] else 'MISSED'} {g['corpus']:<18} {g['what']}: {g['value']} (target {g['target']})")
    result = {"benchmark": "realdefaults",
              "title": "default clustering against --linkage components on real text",
              "linkages": linkages, "judged": linkages[0], "baseline": linkages[1], "rounds": args.rounds,
              "limit": args.limit, "corpora": names, "seven_edit": args.seven_edit or [], "generated": args.generated,
              "debian_extra": args.debian_extra, "npm_versions": args.npm_versions, "input_format": args.input_format,
              "seed": args.seed, "margin": args.margin, "check_sample": args.check_sample,
              "check_all_below": args.check_all_below,
              "options": {linkage: linkage_options(linkage) for linkage in linkages},
              "targets": goals, "targets_met": all(g["met"] for g in goals),
              "rows": rows, "master": master, "cache": args.cache, "code": neardup_code_state(), "machine": machine(),
              **archive}
    name = "realdefaults" if linkages == ["default", "components"] else f"realdefaults-{'-vs-'.join(linkages)}"
    save(result, args.out, f"{name}.json" if not args.limit else f"{name}-limit{args.limit}.json")
    return result


if __name__ == "__main__":
    main()
