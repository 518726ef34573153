"""Whole-process cost and quality of `neardup run` on skewed corpora: big clusters and shared boilerplate.

    .venv/bin/python -m benchmarks.skew --docs 100000

At an equal document count, four seeded corpora (generated once, cached under
--work; generation not timed), each run by `neardup run` as its own process
(`benchmarks.scale.run_once`: --master local[2], conf/local.toml, JVM start
included):

  baseline         the default corpus: 8-document stories and unrelated articles
  skewed           the same size with two big clusters (by default 5% and 20%
                   of --docs: 5,000 and 20,000 copies at 100k) in place of
                   other documents
  boilerplate-S    every document carries one of four site header/footer
                   blocks making up share S of a median document (0.30, 0.45)

For each: process and stage seconds, candidate and verified pairs (from
report.json), and pair precision/recall of the run's clusters/ against the
corpus `group` labels (neardup_spark.tools.evaluate.pair_scores), also restricted to
the big clusters' documents and to the other documents. Prints a table with
the skewed/baseline time and candidates ratios (target: time <= 2x, recall
unchanged) and writes benchmarks/results/skew.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import pandas as pd

from benchmarks import machine, save
from benchmarks.scale import corpus_dir as scale_corpus_dir
from benchmarks.scale import run_once
from neardup_spark.tools import corpus, corpus_files
from neardup_spark.tools.evaluate import pair_scores, recall_by_edit

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
TIME_TARGET = 2.0  # skewed/baseline process seconds


def corpus_path(work: Path, name: str, spec: corpus.CorpusSpec) -> tuple[Path, float | None]:
    """Generate `spec` once under work (the baseline shares scale.py's cache); (path, generation seconds or None)."""
    start = time.perf_counter()
    if spec == corpus.CorpusSpec(n_docs=spec.n_docs, seed=spec.seed):
        marker = work / f"corpus-{spec.n_docs}-{spec.seed}" / "_DONE"
        cached = marker.exists()
        path = scale_corpus_dir(work, spec.n_docs, spec.seed)
        return path, None if cached else round(time.perf_counter() - start, 2)
    path = work / f"corpus-{spec.n_docs}-{spec.seed}-{name}"
    want = json.dumps(dataclasses.asdict(spec), sort_keys=True)
    done, spec_file = path / "_DONE", path / "_SPEC.json"
    if done.exists() and spec_file.exists() and spec_file.read_text() == want:
        return path, None
    if path.exists():
        for f in path.iterdir():
            f.unlink()
    corpus_files.write(spec, path, "parquet")
    spec_file.write_text(want)
    done.write_text("")
    return path, round(time.perf_counter() - start, 2)


def score(corpus_dir: Path, out: Path) -> dict:
    """Pair precision/recall of out/clusters against the corpus labels: all documents, big clusters, the rest."""
    labels = pd.read_parquet(corpus_dir, columns=["id", "group", "edit"]).set_index("id")
    clusters = pd.read_parquet(out / "clusters", columns=["doc_id", "cluster_id"]).set_index("doc_id")["cluster_id"]
    if len(clusters) != len(labels) or not clusters.index.isin(labels.index).all():
        raise SystemExit(f"{out / 'clusters'} does not hold every corpus document exactly once")
    group = labels["group"]
    big = group.str.startswith("b")
    result = {"all": pair_scores(clusters, group).as_dict()}
    rest_ids = group.index[~big]
    result["rest"] = pair_scores(clusters.reindex(rest_ids), group.reindex(rest_ids)).as_dict()
    if big.any():
        big_ids = group.index[big]
        result["big"] = pair_scores(clusters.reindex(big_ids), group.reindex(big_ids)).as_dict()
        per = {}
        for g, members in group[big].groupby(group[big]):
            sizes = clusters.reindex(members.index).value_counts()
            original = labels.index[(labels["group"] == g) & (labels["edit"] == "original")][0]
            per[g] = {
                "documents": len(members),
                "clusters": int(sizes.size),
                "largest_cluster_share": round(float(sizes.iloc[0] / len(members)), 6),
                "copies_with_original": round(float((clusters.reindex(members.index) == clusters[original]).mean()), 6),
            }
        result["big_clusters"] = per
    # share of each edit's copies in their original's cluster: 8-document stories, then big clusters
    for key, mask in (("recall_by_edit", group.str.startswith("s")), ("big_recall_by_edit", big)):
        if mask.any():
            by_edit = recall_by_edit(clusters, labels[mask])
            result[key] = {e: round(float(r), 6) for e, r in by_edit["recall"].items()}
    # how far wrong merges spread: documents in the largest predicted cluster, and its labels
    sizes = clusters.value_counts()
    result["largest_cluster"] = {"documents": int(sizes.iloc[0]),
                                 "labels": int(group.reindex(clusters.index[clusters == sizes.index[0]]).nunique())}
    return result


def pipeline_tree() -> dict:
    """HEAD and uncommitted pipeline files: the pipeline may be changing between runs."""
    def git(*args):
        proc = subprocess.run(["git", *args], check=False, cwd=ROOT, capture_output=True, text=True)
        return proc.stdout.strip() if proc.returncode == 0 else None

    status = git("status", "--porcelain", "--", "neardup_spark", "conf")
    return {"head": git("rev-parse", "HEAD"), "uncommitted": status.splitlines() if status else [],
            "source_sha256": source_digest()}


def source_digest() -> str:
    """SHA-256 over the pipeline's source files (corpus.py excluded) and conf/, as they are on disk now."""
    h = hashlib.sha256()
    files = sorted(p for p in [*(ROOT / "neardup_spark").rglob("*.py"), *(ROOT / "conf").glob("*.toml")]
                   if p.name != "corpus.py")
    for f in files:
        h.update(f.relative_to(ROOT).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def cases(args) -> list[tuple[str, corpus.CorpusSpec]]:
    big = tuple(args.big_clusters) if args.big_clusters else (round(0.05 * args.docs), round(0.20 * args.docs))
    out = [("baseline", corpus.CorpusSpec(n_docs=args.docs, seed=args.seed)),
           ("skewed", corpus.CorpusSpec(n_docs=args.docs, seed=args.seed, big_clusters=big))]
    for share in args.boilerplate:
        out.append((f"boilerplate-{share:.2f}",
                    corpus.CorpusSpec(n_docs=args.docs, seed=args.seed, boilerplate_share=share, footer_share=1.0)))
    if args.only:
        out = [c for c in out if c[0] in args.only]
    return out


def _ratio(a, b):
    return round(a / b, 3) if a is not None and b else None


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--big-clusters", type=int, nargs="+", default=None,
                    help="copies per big cluster (default: 5%% and 20%% of --docs)")
    ap.add_argument("--boilerplate", type=float, nargs="*", default=[0.30, 0.45],
                    help="boilerplate shares of a median document, one corpus each")
    ap.add_argument("--only", nargs="+", default=None, help="run only these cases (e.g. baseline skewed)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--shuffle-partitions", type=int, default=8)
    ap.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "neardup-bench"))
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)

    runs = []
    for name, spec in cases(args):
        path, gen_s = corpus_path(work, name, spec)
        gen = "cached" if gen_s is None else f"generated in {gen_s} s"
        print(f"[{name}] corpus {path} ({gen}); running neardup run ...", flush=True)
        out = work / f"skew-out-{args.docs}-{name}"
        load = [round(x, 2) for x in os.getloadavg()]  # the machine is shared: record how busy it was
        tree = pipeline_tree()  # and the pipeline may be edited between (or during) runs
        row = run_once(path, out, args.master, args.shuffle_partitions)
        after = source_digest()
        report = json.loads((out / "report.json").read_text())
        row = {"case": name, "docs": spec.n_docs,
               "corpus": {k: v for k, v in dataclasses.asdict(spec).items() if k in
                          ("n_docs", "seed", "dup_share", "footer_share", "n_footers", "big_clusters",
                           "boilerplate_share")},
               "corpus_generation_seconds": gen_s, "load_average_before": load,
               "pipeline_tree": tree, "pipeline_changed_during_run": after != tree["source_sha256"], **row,
               "lsh": {k: report.get("lsh", {}).get(k) for k in ("bands", "rows", "threshold")},
               "quality": score(path, out)}
        runs.append(row)
        q = row["quality"]
        print(f"[{name}] {row['process_seconds']} s, candidates {row['counts'].get('candidate_pairs')}, "
              f"verified {row['counts'].get('verified_pairs')}, precision {q['all']['precision']:.6f}, "
              f"recall {q['all']['recall']:.6f}", flush=True)

    base = next((r for r in runs if r["case"] == "baseline"), None)
    for r in runs:
        r["vs_baseline"] = None if base is None else {
            "process_seconds": _ratio(r["process_seconds"], base["process_seconds"]),
            "candidate_pairs": _ratio(r["counts"].get("candidate_pairs"), base["counts"].get("candidate_pairs")),
        }

    print()
    print(f"{'case':<17} {'docs':>7} {'process s':>10} {'x base':>7} {'candidates':>11} {'x base':>7} "
          f"{'verified':>10} {'precision':>10} {'recall':>9} {'recall rest':>12} {'recall big':>11}")
    for r in runs:
        q, vs = r["quality"], r["vs_baseline"] or {}
        big = f"{q['big']['recall']:.6f}" if "big" in q else "-"
        print(f"{r['case']:<17} {r['docs']:>7} {r['process_seconds']:>10} {vs.get('process_seconds', '-')!s:>7} "
              f"{r['counts'].get('candidate_pairs'):>11} {vs.get('candidate_pairs', '-')!s:>7} "
              f"{r['counts'].get('verified_pairs'):>10} {q['all']['precision']:>10.6f} {q['all']['recall']:>9.6f} "
              f"{q['rest']['recall']:>12.6f} {big:>11}")
    print()
    for r in runs:
        print(f"{r['case']:<17} stage seconds {json.dumps(r['stage_seconds'])}")
    for r in runs:
        for g, b in r["quality"].get("big_clusters", {}).items():
            print(f"{r['case']:<17} {g}: {b['documents']} documents in {b['clusters']} cluster(s), "
                  f"largest holds {b['largest_cluster_share']:.4f}, with the original {b['copies_with_original']:.4f}")
        lc = r["quality"]["largest_cluster"]
        print(f"{r['case']:<17} largest predicted cluster: {lc['documents']} documents from {lc['labels']} label(s)")

    sources = {r["pipeline_tree"]["source_sha256"] for r in runs}
    changed = [r["case"] for r in runs if r["pipeline_changed_during_run"]]
    if len(sources) > 1 or changed:
        print(f"\nWARNING: the pipeline source changed across these runs ({len(sources)} versions"
              f"{'; during ' + ', '.join(changed) if changed else ''}): ratios compare different code")
    verdict = None
    skewed = next((r for r in runs if r["case"] == "skewed"), None)
    if base and skewed:
        ratio = skewed["vs_baseline"]["process_seconds"]
        rb, rs = base["quality"]["rest"]["recall"], skewed["quality"]["rest"]["recall"]
        big_r = skewed["quality"]["big"]["recall"]
        verdict = {"time_ratio": ratio, "time_target": TIME_TARGET, "time_met": ratio <= TIME_TARGET,
                   "candidates_ratio": skewed["vs_baseline"]["candidate_pairs"],
                   "recall_baseline": rb, "recall_skewed_rest": rs, "recall_skewed_big": big_r,
                   "recall_unchanged": rs >= rb and big_r >= rb,
                   "same_pipeline_source": (base["pipeline_tree"]["source_sha256"] == skewed["pipeline_tree"]["source_sha256"]
                                            and not base["pipeline_changed_during_run"]
                                            and not skewed["pipeline_changed_during_run"])}
        print(f"\nskewed/baseline: time x{ratio} (target <= {TIME_TARGET}: {'met' if verdict['time_met'] else 'NOT met'}), "
              f"candidates x{verdict['candidates_ratio']}; recall baseline {rb:.6f}, skewed other documents {rs:.6f}, "
              f"skewed big clusters {big_r:.6f} ({'unchanged' if verdict['recall_unchanged'] else 'LOWER'})")

    result = {"benchmark": "skew", "docs": args.docs, "seed": args.seed, "master": args.master,
              "shuffle_partitions": args.shuffle_partitions,
              "machine": machine(),
              "spark_version": report.get("spark_version") if runs else None,
              "skewed_vs_baseline": verdict, "runs": runs}
    save(result, args.out, "skew.json")
    return result


if __name__ == "__main__":
    main()
