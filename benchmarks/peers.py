"""Whole-process time and pair quality of neardup against Spark peers on the same corpora.

    ./benchmarks/setup-peers.sh          # once: .venv-peers for text-dedup's script
    .venv/bin/python -m benchmarks.peers --docs 25000 50000 100000

For each size, on the seeded seven-edit corpus of benchmarks/scale.py
(parquet, generated once and cached under --work, generation not timed; with
--variant typographic every document between curly quotes, see
benchmarks/variants.py),
three tools run one after another, each as its own OS process timed from
outside, JVM and session start included, all with master local[2], 8 shuffle
partitions and a 4g driver heap (conf/local.toml's):

  neardup    `neardup run` as benchmarks/scale.py runs it (threshold 0.3, the
             default), scored on its clusters/ output, but without scale.py's
             instruments (Spark event log, memory monitor): the peers run
             without them, and they cost neardup ~0.6 s at 100k here.
  mllib      benchmarks/peer_mllib.py: RegexTokenizer, NGram(5), HashingTF,
             MinHashLSH(numHashTables=5), approxSimilarityJoin self-join at
             Jaccard distance 0.7 (similarity 0.3), pairs a<b to the driver.
  text-dedup ChenghaoMou/text-dedup's text_dedup/minhash_spark.py at commit
             6bb8e89 (the last whose clustering needs no GraphFrames jar),
             run unchanged from a checkout outside this repository through
             benchmarks/peer_textdedup.py (which only records its clusters;
             see that file) with .venv-peers' spark-submit:
             --threshold 0.3 (a similarity, like ours; theirs defaults to 0.7)
             --num_perm 128 --ngram_size 5 --column text --index_column id.

Every tool is scored the same way: its pairs (for text-dedup its
(document, component) edges) are joined into connected components with
union-find, and pair precision/recall against the corpus `group` labels come
from neardup_spark.tools.evaluate.pair_scores. Prints a table and writes
benchmarks/results/peers.json.

This machine is shared and its speed drifts by tens of percent within an
hour, so one run of each tool gives a noisy ratio. `--repeat N` runs N rounds
per size, the tools' order reversed every other round, and adds the median
process time of each tool and the ratio of the medians (the per-run ratio is
printed for the first round only).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import platform
import shlex
import signal
import subprocess
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from benchmarks import save
from benchmarks.scale import (
    ROOT,
    corpus_dir,
    describe_class_archive,
    ensure_class_archive,
    run_once,
)
from benchmarks.variants import VARIANTS, variant_corpus
from neardup_spark.tools.evaluate import pair_scores

RESULTS = Path(__file__).parent / "results"
TEXT_DEDUP_COMMIT = "6bb8e89e1c0368003fb39654e79290e506ebf4ba"
TEXT_DEDUP_SCRIPT = "text_dedup/minhash_spark.py"
# git blob id of text_dedup/minhash_spark.py at 6bb8e89: proves which revision ran.
TEXT_DEDUP_BLOB = "598459033f18e92a0d6ba7938202abbe939ba0b2"
DEFAULT_TEXT_DEDUP = "/tmp/peers/text-dedup/" + TEXT_DEDUP_SCRIPT
DRIVER_MEMORY = "4g"  # conf/local.toml's spark.driver.memory
HOW_TO_GET_TEXT_DEDUP = f"""\
text-dedup's Spark script was not found at {{path}}; the text-dedup column is skipped.
To include it (outside this repository; its code is never copied into it):
    git clone https://github.com/ChenghaoMou/text-dedup /tmp/peers/text-dedup
    git -C /tmp/peers/text-dedup checkout {TEXT_DEDUP_COMMIT[:7]}
    ./benchmarks/setup-peers.sh
then re-run, or pass --text-dedup PATH/{TEXT_DEDUP_SCRIPT} (or set NEARDUP_TEXT_DEDUP)."""


# ---------------------------------------------------------------- scoring

def components(ids, pairs) -> pd.Series:
    """Union-find over `pairs`; cluster id = smallest id in the component, indexed by every id."""
    parent = {i: i for i in ids}

    def find(x):
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            if rb < ra:
                ra, rb = rb, ra
            parent[rb] = ra
    return pd.Series({i: find(i) for i in ids}, name="cluster")


def score(cluster_of: pd.Series, labels: pd.Series) -> dict:
    s = pair_scores(cluster_of, labels)
    clusters = cluster_of.value_counts()
    return {**s.as_dict(), "clusters": int(clusters.size), "clusters_with_duplicates": int((clusters > 1).sum())}


def read_pairs_csv(path: Path, a: str, b: str) -> list[tuple[int, int]]:
    with open(path, newline="") as f:
        return [(int(r[a]), int(r[b])) for r in csv.DictReader(f)]


# ---------------------------------------------------------------- processes

def timed(cmd: list[str], env: dict, timeout: float, log: Path) -> dict:
    """Run cmd as its own process group, wall time from outside; kill the group past timeout."""
    start = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return {"status": "timeout", "process_seconds": round(time.perf_counter() - start, 2),
                    "timeout_seconds": timeout}
    wall = round(time.perf_counter() - start, 2)
    if rc:
        tail = log.read_text()[-3000:]
        print(f"  {cmd[0]} ... exited {rc}; last output:\n{tail}", file=sys.stderr)
        return {"status": f"failed (exit {rc})", "process_seconds": wall}
    return {"status": "ok", "process_seconds": wall}


class _NeardupCommand:
    """Records the argv that benchmarks.scale.run_once starts (it may add options of its own)."""

    def __enter__(self):
        self.argv, self._popen, self._run = None, subprocess.Popen, subprocess.run

        def capture(real):
            def call(cmd, *a, **kw):
                if self.argv is None and isinstance(cmd, (list, tuple)) and Path(str(cmd[0])).name == "neardup":
                    self.argv = [str(c) for c in cmd]
                return real(cmd, *a, **kw)
            return call

        subprocess.Popen, subprocess.run = capture(self._popen), capture(self._run)
        return self

    def __exit__(self, *exc):
        subprocess.Popen, subprocess.run = self._popen, self._run


def run_neardup(path: Path, out: Path, args, labels: pd.Series) -> dict:
    code = neardup_code_state()  # the pipeline may change between runs: record what this one ran
    with _NeardupCommand() as started:
        try:
            row = run_once(path, out, args.master, args.shuffle_partitions, instrumented=False)
        except SystemExit as e:  # run_once's way of reporting a failed run
            print(f"  {e}", file=sys.stderr)
            return {"status": "failed", "process_seconds": float("nan"), "neardup_code": code}
    clusters = pd.read_parquet(out / "clusters", columns=["doc_id", "cluster_id"]).set_index("doc_id")["cluster_id"]
    pairs = len(pd.read_parquet(out / "pairs", columns=["doc_a"]))
    extra = {k: v for k, v in row.items() if k != "process_seconds"}
    return {"status": "ok", "process_seconds": row["process_seconds"], "pairs": pairs,
            "pairs_kind": "verified pairs (pairs/)", "scores": score(clusters, labels), **extra,
            "command": shlex.join(started.argv) if started.argv else None, "neardup_code": code}


def run_mllib(path: Path, work: Path, args, labels: pd.Series) -> dict:
    out = work / "mllib-pairs.csv"
    out.unlink(missing_ok=True)
    cmd = [sys.executable, str(Path(__file__).parent / "peer_mllib.py"), "--input", str(path),
           "--output", str(out), "--master", args.master, "--shuffle-partitions", str(args.shuffle_partitions),
           "--driver-memory", DRIVER_MEMORY]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    res = {"command": shlex.join(cmd), **timed(cmd, env, args.timeout, work / "mllib.log")}
    if res["status"] == "ok":
        pairs = read_pairs_csv(out, "a", "b")
        res.update(pairs=len(pairs), pairs_kind="approxSimilarityJoin pairs a<b",
                   scores=score(components(labels.index, pairs), labels))
    return res


def run_text_dedup(path: Path, work: Path, args, labels: pd.Series, peers_python: Path) -> dict:
    comps = work / "text-dedup-components.csv"
    comps.unlink(missing_ok=True)
    spark_home = subprocess.run([str(peers_python), "-c", "import os, pyspark; print(os.path.dirname(pyspark.__file__))"],
                                capture_output=True, text=True, check=True).stdout.strip()
    script_args = ["--input", str(path), "--output", str(work / "text-dedup-out"),
                   "--threshold", str(args.text_dedup_threshold), "--num_perm", "128", "--ngram_size", "5",
                   "--column", "text", "--index_column", "id"]
    cmd = [str(peers_python.parent / "spark-submit"), "--master", args.master, "--driver-memory", DRIVER_MEMORY,
           "--conf", f"spark.sql.shuffle.partitions={args.shuffle_partitions}",
           "--conf", "spark.ui.enabled=false", "--conf", "spark.ui.showConsoleProgress=false",
           str(Path(__file__).parent / "peer_textdedup.py"), "--script", str(args.text_dedup),
           "--components", str(comps), "--", *script_args]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_", "VIRTUAL_ENV"))}
    env.update(SPARK_HOME=spark_home, PYSPARK_PYTHON=str(peers_python), PYSPARK_DRIVER_PYTHON=str(peers_python))
    res = {"command": shlex.join(cmd), **timed(cmd, env, args.timeout, work / "text-dedup.log")}
    if res["status"] == "ok":
        edges = [(a, c) for a, c in read_pairs_csv(comps, "doc_id", "component") if a != c]
        res.update(pairs=len(edges), pairs_kind="(document, component) edges",
                   scores=score(components(labels.index, edges), labels))
    return res


# ---------------------------------------------------------------- provenance

def git_blob_id(path: Path) -> str:
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def text_dedup_info(script: Path, peers_python: Path, threshold: float, num_perm: int = 128) -> dict:
    info = {"script": str(script), "expected_commit": TEXT_DEDUP_COMMIT, "script_git_blob": git_blob_id(script)}
    # The (bands, rows) its optimal_param picks, from its own function (loaded, not run as __main__).
    code = (f"import json, runpy; f = runpy.run_path({str(script)!r}, run_name='peer_params')['optimal_param']; "
            f"print(json.dumps(f({threshold!r}, {num_perm!r})))")
    br = subprocess.run([str(peers_python), "-c", code], capture_output=True, text=True, check=False)
    if br.returncode == 0:
        info["bands"], info["rows"] = json.loads(br.stdout)
    info["script_matches_commit"] = info["script_git_blob"] == TEXT_DEDUP_BLOB
    head = subprocess.run(["git", "-C", str(script.parent), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    if head.returncode == 0:
        info["checkout_head"] = head.stdout.strip()
    return info


def machine_info() -> dict:
    mem = next((line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
                if line.startswith("MemTotal")), None) if Path("/proc/meminfo").exists() else None
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False).stderr.splitlines()
    return {"platform": platform.platform(), "machine": platform.machine(), "cores": os.cpu_count(),
            "memory_gib": round(int(mem) / 2**20, 1) if mem else None, "python": platform.python_version(),
            "java": java[0] if java else None}


def neardup_code_state() -> dict:
    """Git HEAD, uncommitted files under neardup_spark/, and a hash of its .py files as they are now."""
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "neardup_spark"],
                           capture_output=True, text=True, check=False)
    digest = hashlib.sha1()
    for f in sorted((ROOT / "neardup_spark").rglob("*.py")):
        digest.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes() + b"\0")
    return {"git_head": head.stdout.strip() or None,
            "uncommitted": [line[3:] for line in dirty.stdout.splitlines()],
            "sources_sha1": digest.hexdigest()}


def versions(peers_python: Path | None) -> dict:
    import pyspark

    import neardup_spark

    out = {"neardup_spark": getattr(neardup_spark, "__version__", None), "pyspark": pyspark.__version__,
           "neardup_code_at_start": neardup_code_state()}
    if peers_python:
        code = ("import json, pyspark, numpy, scipy; print(json.dumps({'pyspark': pyspark.__version__, "
                "'numpy': numpy.__version__, 'scipy': scipy.__version__}))")
        v = subprocess.run([str(peers_python), "-c", code],
                           capture_output=True, text=True, check=False)
        out["peers_venv"] = json.loads(v.stdout) if v.returncode == 0 else None
    return out


# ---------------------------------------------------------------- main

def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--docs", type=int, nargs="+", default=[25_000, 50_000, 100_000])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--shuffle-partitions", type=int, default=8)
    ap.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "neardup-bench"),
                    help="corpora (shared with benchmarks/scale.py) and outputs")
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--tools", nargs="+", default=["neardup", "mllib", "text-dedup"],
                    choices=["neardup", "mllib", "text-dedup"])
    ap.add_argument("--text-dedup", type=Path,
                    default=Path(os.environ.get("NEARDUP_TEXT_DEDUP", DEFAULT_TEXT_DEDUP)),
                    help=f"path of text-dedup's {TEXT_DEDUP_SCRIPT} at {TEXT_DEDUP_COMMIT[:7]} "
                         f"(default: $NEARDUP_TEXT_DEDUP or {DEFAULT_TEXT_DEDUP})")
    ap.add_argument("--text-dedup-threshold", type=float, default=0.3,
                    help="text-dedup's --threshold, a Jaccard similarity (theirs defaults to 0.7)")
    ap.add_argument("--peers-venv", type=Path, default=ROOT / ".venv-peers",
                    help="venv made by benchmarks/setup-peers.sh")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds per size; with more than one, the tools' order flips every round and the "
                         "ratios are of median process times (this machine's drift is seconds per minute)")
    ap.add_argument("--variant", choices=VARIANTS, default="ascii",
                    help="the corpus as generated (ascii) or each document between curly quotes (typographic, "
                         "as real English text has them); see benchmarks/variants.py")
    ap.add_argument("--timeout", type=float, default=900.0,
                    help="seconds before a peer's process is stopped and reported as a timeout")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error(f"--repeat must be at least 1, got {args.repeat}")
    work = Path(args.work)
    tools = list(args.tools)

    peers_python, td = None, None
    if "text-dedup" in tools:
        if not args.text_dedup.is_file():
            print(HOW_TO_GET_TEXT_DEDUP.format(path=args.text_dedup), file=sys.stderr)
            tools.remove("text-dedup")
        elif not (args.peers_venv / "bin" / "python").exists():
            print(f"no benchmark venv at {args.peers_venv}: run ./benchmarks/setup-peers.sh; "
                  "the text-dedup column is skipped", file=sys.stderr)
            tools.remove("text-dedup")
        else:
            peers_python = args.peers_venv / "bin" / "python"
            td = text_dedup_info(args.text_dedup, peers_python, args.text_dedup_threshold)
            print(f"text-dedup: {args.text_dedup} (matches {TEXT_DEDUP_COMMIT[:7]}: {td['script_matches_commit']}), "
                  f"--threshold {args.text_dedup_threshold}: b={td.get('bands')} r={td.get('rows')}", flush=True)
            if not td["script_matches_commit"]:
                print(f"warning: {args.text_dedup} is not {TEXT_DEDUP_SCRIPT} at {TEXT_DEDUP_COMMIT[:7]} "
                      f"(git blob {td['script_git_blob']})", file=sys.stderr)

    started_versions = versions(peers_python)
    archive = {}
    if "neardup" in tools:
        work.mkdir(parents=True, exist_ok=True)
        archive = ensure_class_archive(args.master, work)
        print(describe_class_archive(archive), flush=True)
    runs, summary = [], []
    header = (f"{'docs':>7} {'tool':<10} {'process s':>10} {'x neardup':>9} {'pairs':>8} "
              f"{'clusters':>8} {'precision':>9} {'recall':>8}  status")
    print(header, flush=True)
    for docs in args.docs:
        path = variant_corpus(corpus_dir(work, docs, args.seed), args.variant)
        labels = pd.read_parquet(path, columns=["id", "group"]).set_index("id")["group"]
        size_work = work / f"peers-{docs}"
        size_work.mkdir(parents=True, exist_ok=True)
        base = None
        for rnd, tool in rounds(tools, args.repeat):
            load_before = round(os.getloadavg()[0], 2)
            if tool == "neardup":
                res = run_neardup(path, work / f"out-peers-{docs}", args, labels)
            elif tool == "mllib":
                res = run_mllib(path, size_work, args, labels)
            else:
                res = run_text_dedup(path, size_work, args, labels, peers_python)
            if tool == "neardup" and rnd == 0:
                base = res["process_seconds"] if res["status"] == "ok" else None
            res = {"docs": docs, "tool": tool, "round": rnd, **res, "load_avg_1min_before": load_before}
            if base and tool != "neardup" and res["status"] == "ok" and rnd == 0:
                res["time_vs_neardup"] = round(res["process_seconds"] / base, 2)
            runs.append(res)
            s = res.get("scores", {})
            secs = f"{res['process_seconds']:.1f}" + ("+" if res["status"] == "timeout" else "")
            ratio = f"{res['time_vs_neardup']:.2f}" if "time_vs_neardup" in res else ("1.00" if tool == "neardup" else "-")
            print(f"{docs:>7} {tool:<10} {secs:>10} {ratio:>9} {res.get('pairs', '-'):>8} "
                  f"{s.get('clusters', '-'):>8} {s.get('precision', float('nan')):>9.4f} "
                  f"{s.get('recall', float('nan')):>8.4f}  {res['status']}", flush=True)
        if args.repeat > 1:
            summary += medians([r for r in runs if r["docs"] == docs], tools)
    for row in summary:
        ratio = f"{row['time_vs_neardup_median']:.2f}" if row.get("time_vs_neardup_median") else "-"
        print(f"median of {row['ok_runs']}: {row['docs']:>7} {row['tool']:<10} "
              f"{row['process_seconds_median'] or float('nan'):>8.1f} s  x neardup {ratio}  "
              f"(runs {', '.join(f'{x:.1f}' for x in row['process_seconds_all'])})", flush=True)

    result = {
        "benchmark": "peers", "seed": args.seed, "variant": args.variant, "master": args.master,
        "shuffle_partitions": args.shuffle_partitions, "driver_memory": DRIVER_MEMORY,
        "timeout_seconds": args.timeout, "machine": machine_info(), "versions": started_versions, **archive,
        "settings": {
            "neardup": "conf/local.toml, defaults: word 5-shingles, num_perm 128, threshold 0.3 (exact Jaccard "
                       "verification); scored on clusters/",
            "mllib": "RegexTokenizer(\\W+, lower-case), NGram(5), HashingTF(2^18, binary), MinHashLSH("
                     "numHashTables=5, seed=1), approxSimilarityJoin distance < 0.7; union-find on its pairs",
            "text-dedup": (f"--threshold {args.text_dedup_threshold} --num_perm 128 --ngram_size 5 --column text "
                           "--index_column id (min_length 5 and b, r from its optimal_param, both defaults); "
                           "union-find on its (document, component) edges")
                          if "text-dedup" in tools else "skipped (script or .venv-peers missing)",
        },
        "text_dedup": td if "text-dedup" in tools else None,
        "repeat": args.repeat,
        "runs": runs,
        "medians": summary,
    }
    save(result, args.out, "peers.json" if args.variant == "ascii" else f"peers-{args.variant}.json")
    return result


def rounds(tools: list[str], repeat: int):
    """(round, tool) in running order: the tools as given, then reversed, alternating, so
    that drift in the machine's speed during a run falls on every tool alike."""
    for rnd in range(repeat):
        for tool in (tools if rnd % 2 == 0 else tools[::-1]):
            yield rnd, tool


def medians(runs: list[dict], tools: list[str]) -> list[dict]:
    """Per tool: the median process time of its ok runs, and its ratio to neardup's median."""
    out = []
    for tool in tools:
        secs = sorted(r["process_seconds"] for r in runs if r["tool"] == tool and r["status"] == "ok")
        out.append({"docs": runs[0]["docs"], "tool": tool, "ok_runs": len(secs),
                    "process_seconds_all": secs, "process_seconds_median": statistics.median(secs) if secs else None})
    base = next((row["process_seconds_median"] for row in out if row["tool"] == "neardup"), None)
    for row in out:
        if base and row["process_seconds_median"] and row["tool"] != "neardup":
            row["time_vs_neardup_median"] = round(row["process_seconds_median"] / base, 2)
    return out


if __name__ == "__main__":
    main()
