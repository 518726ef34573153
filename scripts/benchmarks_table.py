"""Write BENCHMARKS.md: the current figure of every benchmark, from benchmarks/results/*.json.

    python scripts/benchmarks_table.py           # (re)write BENCHMARKS.md
    python scripts/benchmarks_table.py --check   # exit 1 if BENCHMARKS.md is not what this script writes

Results files are grouped by benchmark (and, for the peer comparison, by corpus
variant and the peers run); the current file of a group is the newest one: by
the commit time of the neardup code it records, else of a commit its name
carries (`scale-01b6532.json`), else of the last commit that changed the file
(`git log -1 --format=%ct -- FILE`; the file's mtime when git has no answer).
Each row gives the corpus, the key figures, the command that reproduces it
(the script's own flags, read from its argparse calls, where the record differs
from the defaults) and the file. A results file of a benchmark this script does
not know gets a generic row (its top-level numbers); a file that does not parse
gets a row that says so.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import generated  # scripts/generated.py, beside this file

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
OUTPUT = ROOT / "BENCHMARKS.md"
PYTHON = ".venv/bin/python"
ORDER = ("scale", "peers", "signatures", "nightly", "skew", "boilerplate", "quality", "scripts", "realtext", "linkage",
         "realdefaults",
         "simhash", "components", "review", "compare", "nights")
PEERS = {"neardup": "neardup", "mllib": "MLlib", "text-dedup": "text-dedup"}


# -- git and files --------------------------------------------------------------------------------------------


@lru_cache(maxsize=None)
def _git(*args: str) -> str:
    try:
        proc = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ""
    return proc.stdout.strip() if proc.returncode == 0 else ""


def _commit_time(ref: str) -> int | None:
    out = _git("log", "-1", "--format=%ct", f"{ref}^{{commit}}", "--")
    return int(out) if out.isdigit() else None


def _file_time(path: Path) -> int:
    out = _git("log", "-1", "--format=%ct", "--", str(path))
    return int(out) if out.isdigit() else int(path.stat().st_mtime)


def _recorded_heads(data: Any) -> list[str]:
    """Commits of the neardup code a record says it ran (git_head / head fields anywhere in it)."""
    found: list[str] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                if k in ("git_head", "head") and isinstance(v, str) and re.fullmatch(r"[0-9a-f]{7,40}", v):
                    found.append(v)
                else:
                    walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(data)
    return found


def _age(path: Path, data: Any) -> tuple:
    """Sort key, newest last: (run time, file time, canonical name, name)."""
    heads = [t for t in (_commit_time(h) for h in _recorded_heads(data)) if t is not None]
    named = [t for t in (_commit_time(tok) for tok in re.findall(r"(?<![0-9a-f])[0-9a-f]{7,40}(?![0-9a-f])", path.stem))
             if t is not None]
    file_time = _file_time(path)
    run = max(heads) if heads else (max(named) if named else file_time)
    canonical = path.stem == str(data.get("benchmark", "")) if isinstance(data, dict) else False
    return run, file_time, canonical, path.name


# -- the scripts' command lines -------------------------------------------------------------------------------


@lru_cache(maxsize=None)
def _options(script: str) -> list[tuple[str, str, Any, bool]]:
    """(flag, dest, default, is_store_true) of each `add_argument("--x", ...)` in benchmarks/<script>.py, in order."""
    tree = _module(script)
    if tree is None:
        return []
    out: list = []
    seen: set[str] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"
                and node.args and isinstance(node.args[0], ast.Constant) and str(node.args[0].value).startswith("--")):
            continue
        flag = str(node.args[0].value)
        kw = {k.arg: k.value for k in node.keywords}
        dest = kw["dest"].value if isinstance(kw.get("dest"), ast.Constant) else flag[2:].replace("-", "_")
        default = _evaluate(kw["default"], script) if "default" in kw else None
        store_true = isinstance(kw.get("action"), ast.Constant) and kw["action"].value == "store_true"
        if flag not in seen:
            seen.add(flag)
            out.append(((node.lineno, node.col_offset), (flag, dest, default, store_true)))
    return [option for _, option in sorted(out)]


def _evaluate(node: ast.AST, script: str) -> Any:
    """A default as the script computes it, where that is a literal, a module constant (its own or one
    it imports from benchmarks.*), or list()/tuple() of one; else ... (equal to no recorded value)."""
    try:
        return ast.literal_eval(node)
    except ValueError:
        pass
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("list", "tuple") \
            and len(node.args) == 1:
        inner = _evaluate(node.args[0], script)
        return list(inner) if isinstance(inner, (list, tuple)) else ...
    if isinstance(node, ast.Name):
        return _constant(script, node.id)
    return ...


@lru_cache(maxsize=None)
def _module(script: str) -> ast.Module | None:
    try:
        return ast.parse((ROOT / "benchmarks" / f"{script}.py").read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return None


def _constant(script: str, name: str, depth: int = 0) -> Any:
    tree = _module(script)
    if tree is None or depth > 3:
        return ...
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return _evaluate(node.value, script)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("benchmarks.") \
                and any((a.asname or a.name) == name for a in node.names):
            original = next(a.name for a in node.names if (a.asname or a.name) == name)
            return _constant(node.module.split(".", 1)[1], original, depth + 1)
    return ...


def _measures(script: str) -> str:
    """The first sentence of a benchmark script's docstring: what it measures."""
    tree = _module(script)
    doc = ast.get_docstring(tree) if tree is not None else None
    if not doc:
        return ""
    paragraph = " ".join(doc.split("\n\n", 1)[0].split())
    return re.split(r"(?<=[.?!])\s", paragraph, maxsplit=1)[0].rstrip(".")


def _same(value: Any, default: Any) -> bool:
    if isinstance(value, (list, tuple)) and isinstance(default, (list, tuple)):
        return len(value) == len(default) and all(_same(a, b) for a, b in zip(value, default))
    if isinstance(value, (int, float)) and isinstance(default, (int, float)) and not isinstance(value, bool):
        return float(value) == float(default)
    return value == default


def _arg(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return " ".join(_arg(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return repr(value)
    text = str(value)
    return f"'{text}'" if not text or re.search(r"[^\w.,=/:@+-]", text) else text


def command(script: str, values: dict[str, Any], prefix: str = "") -> str:
    """`.venv/bin/python -m benchmarks.<script>` with the flags whose recorded value is not the default."""
    parts = [f"{prefix}{PYTHON} -m benchmarks.{script}"]
    for flag, dest, default, store_true in _options(script):
        if dest not in values or values[dest] is None:
            continue
        value = values[dest]
        if store_true:
            if value:
                parts.append(flag)
        elif not _same(value, default):
            parts.append(f"{flag} {_arg(value)}")
    return " ".join(parts)


# -- rows -----------------------------------------------------------------------------------------------------


def _docs(n: Any) -> str:
    if not isinstance(n, (int, float)):
        return str(n)
    n = int(n)
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return f"{n:,}"


def _s(x: Any) -> str:
    return f"{x:.1f} s" if isinstance(x, (int, float)) else "-"


def _f(x: Any, digits: int = 3) -> str:
    return f"{x:.{digits}f}" if isinstance(x, (int, float)) else "-"


def _where(data: dict) -> str:
    master = data.get("master")
    return f", {master}" if master else ""


def _scale(data: dict) -> tuple[str, str, str]:
    runs = data["runs"]
    sizes = [r["docs"] for r in runs]
    figures = "; ".join(f"{_docs(r['docs'])}: {_s(r.get('process_seconds'))}" for r in runs)
    big, small = max(runs, key=lambda r: r["docs"]), min(runs, key=lambda r: r["docs"])
    if big.get("peak_pss_mb"):
        figures += f" (peak PSS {big['peak_pss_mb']:,} MB at {_docs(big['docs'])})"
    elif big.get("peak_rss_mb"):
        figures += f" (peak RSS {big['peak_rss_mb']:,} MB at {_docs(big['docs'])})"
    if big is not small:
        figures += (f"; {_docs(big['docs'])} / {_docs(small['docs'])}: "
                    f"{big['process_seconds'] / small['process_seconds']:.2f}x the time")
    if big.get("disk_mb"):
        figures += f"; disk at the peak {big['disk_mb']['peak_mb'] / 1024:.0f} GB"
    sized = (big.get("sizing") or {}) if data.get("sized") else {}
    if sized:
        figures += (f"; sized itself: {sized.get('shuffle_partitions')} shuffle partitions, "
                    f"driver {sized.get('driver_memory')}")
    corpus = f"seven-edit corpus, {'/'.join(_docs(n) for n in sizes)} docs{_where(data)}"
    cmd = command("scale", {"docs": sizes, "master": data.get("master"), "shuffle_partitions":
                            data.get("shuffle_partitions"), "driver_memory": data.get("driver_memory"),
                            "conf": data.get("conf"), "sized": data.get("sized")})
    return corpus, "whole `neardup run` process: " + figures, cmd


def _tools(data: dict) -> list[str]:
    present = {r["tool"] for r in data.get("runs", [])}
    return [t for t in PEERS if t in present] + sorted(present - set(PEERS))


def _peers(data: dict) -> tuple[str, str, str]:
    runs = data["runs"]
    tools = _tools(data)
    sizes = sorted({r["docs"] for r in runs})
    largest = sizes[-1]
    ok = [r for r in runs if r["docs"] == largest and r.get("status") == "ok"]
    recall = {t: next((r["scores"]["recall"] for r in ok if r["tool"] == t and r.get("scores")), None) for t in tools}
    parts = []
    medians = [m for m in data.get("medians") or [] if m["docs"] == largest]
    if medians:
        for m in medians:
            ratio = f" ({m['time_vs_neardup_median']}x neardup)" if m.get("time_vs_neardup_median") else ""
            parts.append(f"{PEERS.get(m['tool'], m['tool'])} {_s(m.get('process_seconds_median'))}{ratio}")
        timing = f"medians of {data.get('repeat')} rounds at {_docs(largest)}: " + ", ".join(parts)
    else:
        for r in (r for r in ok if r.get("round", 0) == 0):
            ratio = f" ({r['time_vs_neardup']}x neardup)" if r.get("time_vs_neardup") else ""
            parts.append(f"{PEERS.get(r['tool'], r['tool'])} {_s(r.get('process_seconds'))}{ratio}")
        timing = f"at {_docs(largest)}: " + ", ".join(parts)
    quality = ", ".join(f"{PEERS.get(t, t)} {_f(v)}" for t, v in recall.items() if v is not None)
    variant = data.get("variant") or "ascii"
    corpus = f"seven-edit corpus{'' if variant == 'ascii' else f' ({variant})'}, " \
             f"{'/'.join(_docs(n) for n in sizes)} docs{_where(data)}"
    values = {"docs": sizes, "tools": tools, "repeat": data.get("repeat") or 1, "variant": variant,
              "seed": data.get("seed"), "master": data.get("master"),
              "shuffle_partitions": data.get("shuffle_partitions")}
    return corpus, f"process time, {timing}; pair recall {quality}", command("peers", values)


def _signatures(data: dict) -> tuple[str, str, str]:
    rows = data["rows"]
    udf_sizes = data.get("udf_docs") or []
    parts = []
    for variant in data.get("variants") or ["ascii"]:
        mine = {k.split(": ", 1)[1]: v for k, v in rows.items() if k.startswith(f"{variant}: ") and v}
        kernel = next((v for k, v in mine.items() if "kernel" in k), None)
        udfs = [v for k, v in mine.items() if "UDF" in k]
        udf = max(udfs, key=lambda v: v.get("docs", 0)) if udfs else None
        bits = []
        if kernel:
            bits.append(f"kernel {kernel['docs_per_s_per_core']:,.0f} ({kernel.get('vs_datasketch', '-')}x datasketch)")
        if udf:
            bits.append(f"Spark UDF at {_docs(udf.get('docs'))} {udf['docs_per_s_per_core']:,.0f} "
                        f"({udf.get('vs_datasketch', '-')}x)")
        if bits:
            parts.append(f"{variant}: " + ", ".join(bits))
    rounds = f"; medians of {data['rounds']} rounds" if data.get("rounds") else ""
    udf = "/".join(map(_docs, udf_sizes))
    corpus = f"first {_docs(data.get('docs'))} of the seven-edit corpus (UDF rows: {udf}), " \
             f"{data.get('mean_chars', '-')} chars a document"
    values = {"docs": data.get("docs"), "udf_docs": udf_sizes, "rounds": data.get("rounds") or 1,
              "variants": data.get("variants")}
    if not data.get("rounds"):
        values.pop("rounds")
    return corpus, "docs/s per core: " + "; ".join(parts) + rounds, command("signatures", values)


def _nightly(data: dict) -> tuple[str, str, str]:
    sizes = data["sizes"]
    big = max(sizes, key=lambda s: s["docs"])
    t = data.get("targets", {})
    figures = [f"{_docs(s['batch_documents'])} batch against {_docs(s['archive_documents'])} archived: "
               f"append {_s(s['append'].get('process_seconds'))}" for s in sizes]
    if "rerun" in big:
        figures.append(f"full re-run of {_docs(big['docs'])}: {_s(big['rerun'].get('process_seconds'))}")
    if big.get("build", {}).get("process_seconds") is not None:
        figures.append(f"index build of {_docs(big['archive_documents'])}: {_s(big['build']['process_seconds'])}")
    peaks = [f"{run} {big[run]['disk_mb']['peak_mb'] / 1024:.0f} GB"
             + (" (understated: see disk_mb_note in the file)" if big[run].get("disk_mb_note") else "")
             for run in ("build", "append", "rerun")
             if (big.get(run) or {}).get("disk_mb", {}).get("peak_mb") is not None]
    if peaks:
        figures.append(f"disk at the peak at {_docs(big['docs'])}: " + ", ".join(peaks))
    ratios = []
    if t.get("append_scale", {}).get("ratio") is not None:
        ratios.append(f"append at the largest / smallest archive {t['append_scale']['ratio']}x")
    if t.get("append_vs_rerun", {}).get("ratio") is not None:
        ratios.append(f"append / re-run {t['append_vs_rerun']['ratio']}x")
    for key, label in (("build_scale", "build"), ("rerun_scale", "re-run")):
        if t.get(key, {}).get("ratio") is not None:
            ratios.append(f"{label} at the largest / smallest size {t[key]['ratio']}x (target <= {t[key]['target']}x)")
    for key, label in (("flat_candidate_pairs", "candidates"), ("flat_verified_pairs", "verified pairs")):
        if t.get(key, {}).get("ratio") is not None:
            ratios.append(f"{label} per document largest / smallest {t[key]['ratio']}x")
    if t.get("peak_memory", {}).get("ratio") is not None:
        ratios.append(f"largest peak PSS {t['peak_memory']['ratio']} GB")
    docs = "/".join(_docs(s["docs"]) for s in sizes)
    corpus = f"seven-edit corpus split into archive + batch, {docs} docs{_where(data)}"
    values = {"sizes": ",".join(str(s["docs"]) for s in sizes), "batch": data.get("batch"), "seed": data.get("seed"),
              "no_rerun": "rerun" not in big, "rerun_every_size": data.get("rerun_every_size"),
              "free_index": data.get("free_index"),
              "master": data.get("master"), "config": data.get("config"), "conf": data.get("conf"),
              "shuffle_partitions": data.get("shuffle_partitions"), "driver_memory": data.get("driver_memory")}
    if data.get("linkage") not in (None, "components"):
        values["linkage"] = data["linkage"]
        corpus += f", {data['linkage']} linkage"
    values["growth_target"], values["memory_target_gb"] = data.get("growth_target"), data.get("memory_target_gb")
    values["scale_target"] = t.get("append_scale", {}).get("target")
    values["rerun_target"] = t.get("append_vs_rerun", {}).get("target")
    return corpus, "; ".join(figures + ratios), command("nightly", values, "PYSPARK_PYTHON=$PWD/.venv/bin/python ")


def _skew(data: dict) -> tuple[str, str, str]:
    runs = {r["case"]: r for r in data["runs"]}
    parts = []
    v = data.get("skewed_vs_baseline") or {}
    if v:
        parts.append(f"big clusters: {v.get('time_ratio')}x the baseline's time, {v.get('candidates_ratio')}x its "
                     f"candidates, recall {_f(v.get('recall_skewed_big'))}")
    for case, r in runs.items():
        if case.startswith("boilerplate"):
            q = r.get("quality", {}).get("all", {})
            parts.append(f"{case}: precision {_f(q.get('precision'), 4)}, recall {_f(q.get('recall'))}")
    corpus = f"seven-edit corpus with big clusters or shared boilerplate, {_docs(data.get('docs'))} docs{_where(data)}"
    shares = sorted(float(c.split("-", 1)[1]) for c in runs if c.startswith("boilerplate-"))
    values = {"docs": data.get("docs"), "seed": data.get("seed"), "boilerplate": shares,
              "master": data.get("master"), "shuffle_partitions": data.get("shuffle_partitions")}
    return corpus, "; ".join(parts), command("skew", values)


def _boilerplate(data: dict) -> tuple[str, str, str]:
    by_share: dict[float, dict[str, dict]] = {}
    for r in data["runs"]:
        by_share.setdefault(r["share"], {})[r["stripping"]] = r
    parts = []
    for share, pair in sorted(by_share.items()):
        bits = [f"{mode} {_f(r.get('precision'), 4)}/{_f(r.get('recall'))}"
                for mode, r in sorted(pair.items(), reverse=True)]
        parts.append(f"{share:.2f}: " + ", ".join(bits))
    corpus = f"every document with site boilerplate, {_docs(data.get('docs'))} docs, threshold {data.get('threshold')}"
    values = {"docs": data.get("docs"), "seed": data.get("seed"), "shares": data.get("shares"),
              "threshold": data.get("threshold"), "num_perm": data.get("num_perm"), "master": data.get("master"),
              "shuffle_partitions": data.get("shuffle_partitions")}
    return corpus, "pair precision/recall by boilerplate share, stripping off and on: " + "; ".join(parts), \
        command("boilerplate", values)


def _quality(data: dict) -> tuple[str, str, str]:
    p, lsh = data["pairs"], data.get("lsh") or {}
    layout = f" (bands {lsh['bands']} x rows {lsh['rows']})" if "bands" in lsh else ""
    worst = min((data.get("recall_by_edit") or {}).items(), key=lambda kv: kv[1], default=None)
    edit = f"; lowest recall by edit type {worst[0]} {_f(worst[1])}" if worst and worst[1] < 1 else ""
    if not edit and data.get("recall_by_edit"):
        edit = f"; recall 1.000 on each of the {len(data['recall_by_edit'])} edit types"
    corpus = f"seven-edit corpus, {_docs(data.get('docs'))} docs, threshold {data.get('threshold')}{layout}"
    values = {"docs": data.get("docs"), "seed": data.get("seed"), "threshold": data.get("threshold"),
              "num_perm": data.get("num_perm"), "method": data.get("method"), "master": data.get("master")}
    return corpus, f"pair precision {_f(p.get('precision'), 4)}, recall {_f(p.get('recall'), 4)}{edit}", \
        command("quality", values)


def _scripts(data: dict) -> tuple[str, str, str]:
    scripts = data["scripts"]
    parts = []
    for run in data["runs"]:
        each = ", ".join(f"{s} {_f(run[s]['precision'], 3)}/{_f(run[s]['recall'], 3)}" for s in scripts)
        parts.append(f"{run['unit']} k={run['k']}: {each}")
    corpus = (f"seven-edit corpora of {', '.join(scripts)} run together, {_docs(data.get('docs_per_script'))} docs "
              f"each, {data.get('words')} words, threshold {data.get('threshold')}")
    values = {"docs_per_script": data.get("docs_per_script"), "scripts": ",".join(scripts),
              "words": data.get("words"), "threshold": data.get("threshold"), "master": data.get("master")}
    return corpus, "pair precision/recall per script: " + "; ".join(parts), command("scripts", values)


def _linkage(data: dict) -> tuple[str, str, str]:
    by_corpus: dict[str, dict] = {}
    for row in data["rows"]:
        by_corpus.setdefault(row["corpus"], {})[row["linkage"]] = row
    parts = []
    for name, runs in by_corpus.items():
        each = ", ".join(f"{link} {_f(r['precision'], 3)}/{_f(r['recall'], 3)}/{_f(r['f1'], 3)}"
                         for link, r in runs.items())
        docs = next(iter(runs.values()))["documents"]
        parts.append(f"{name} ({_docs(docs)} docs): {each}")
    corpus = f"{', '.join(by_corpus)}; truth: exact Jaccard >= {data.get('threshold')}"
    values = {"threshold": data.get("threshold"), "docs": data.get("docs"), "num_perm": data.get("num_perm"),
              "master": data.get("master")}
    return corpus, "pair precision/recall/F1: " + "; ".join(parts), command("linkage", values)


def _realtext(data: dict) -> tuple[str, str, str]:
    languages = data["languages"]
    parts = []
    for run in data["runs"]:
        each = ", ".join(f"{s} {_f(run[s]['precision'], 3)}/{_f(run[s]['precision_with_real_pairs'], 3)}/"
                         f"{_f(run[s]['recall'], 3)}" for s in languages)
        parts.append(f"{run['unit']} k={run['k']} {run['linkage']}{' stripped' if run.get('strip') else ''}: {each}")
    sizes = data.get("documents") or {}
    corpus = (f"man pages with the seven edits, run together: "
              + ", ".join(f"{s} {_docs(sizes.get(s))} docs" for s in languages)
              + f"; threshold {data.get('threshold')}")
    values = {"threshold": data.get("threshold"), "languages": ",".join(languages),
              "piece_chars": data.get("piece_chars"), "seed": data.get("seed"), "master": data.get("master")}
    return corpus, ("pair precision against labels / against labels and the pages' own near-duplicates / "
                    "recall, per language: " + "; ".join(parts)), command("realtext", values)


def _simhash(data: dict) -> tuple[str, str, str]:
    parts, specs = [], []
    for row in data["rows"]:
        p = row["pairs"]
        parts.append(f"{row['method']}: F1 {_f(p.get('f1'))}, {row.get('lookup_bytes_per_document')} B/doc")
        if row["method"].startswith("simhash "):
            specs.append(row["method"].split(" ", 1)[1])
    corpus = f"seven-edit corpus, {_docs(data.get('docs'))} docs, MinHash threshold {data.get('threshold')}"
    values = {"docs": data.get("docs"), "seed": data.get("seed"), "threshold": data.get("threshold")}
    cmd = command("simhash", values)
    if specs and specs != ["k=3", "k=6"]:
        cmd += " --simhash " + " ".join(specs)
    return corpus, "; ".join(parts), cmd


def _components(data: dict) -> tuple[str, str, str]:
    runs = data["runs"]
    parts = [f"{_docs(r['nodes'])} nodes: {r['rounds']} rounds, {_s(r.get('seconds'))} in a running session"
             for r in runs]
    corpus = f"{data.get('graph', 'path graphs')}{_where(data)}"
    return corpus, "; ".join(parts), command("components", {"nodes": [r["nodes"] for r in runs],
                                                            "master": data.get("master")})


def _no_config(data: dict) -> bool:
    """A comparison of one tree with its tuned config file (old) against none at all (new)."""
    return data.get("new_config") == "none"


def _compare(data: dict, path: Path) -> tuple[str, str, str]:
    label = re.sub(rf"^compare-{data.get('docs')}-?", "", path.stem)
    sides = "no config/conf/local.toml" if _no_config(data) else "new/old"
    figures = (f"median {sides} {data.get('median_ratio_new_to_old')} ({_s(data.get('median_new_seconds'))} against "
               f"{_s(data.get('median_old_seconds'))}, {len(data.get('pairs', []))} alternating pairs)")
    names = label.split("-") if label else []
    old = "." if _no_config(data) else f"CHECKOUT_OF_{names[0]}" if names else "OLD_CHECKOUT"
    values = {"old": old, "docs": data.get("docs"), "pairs": len(data.get("pairs", [])),
              "master": data.get("master"), "threshold": data.get("threshold"), "label": label}
    if _no_config(data):
        values["new_config"] = "none"
    corpus = f"seven-edit corpus, {_docs(data.get('docs'))} docs{_where(data)}"
    return corpus, figures, command("compare", values)


def _nights(data: dict) -> tuple[str, str, str]:
    pairs = data.get("pairs", [])
    sides = " and ".join(f"{side} {' '.join(data.get(f'{side}_set') or [])}" for side in ("new", "old")
                         if data.get(f"{side}_set"))
    figures = (f"median new/old {data.get('median_ratio_new_to_old')} ({_s(data.get('median_new_seconds'))} against "
               f"{_s(data.get('median_old_seconds'))}, {len(pairs)} alternating pairs"
               f"{', page cache dropped before each' if data.get('drop_caches') else ''})" + (f"; {sides}" if sides else ""))
    corpus = (f"a night of {_docs(data.get('batch_documents'))} docs against an index of "
              f"{_docs(data.get('index_documents'))}{_where(data)}")
    values = {"index": "INDEX", "batch": "BATCH", "old": "." if data.get("old") == data.get("new") else "OLD_CHECKOUT",
              "pairs": len(pairs), "old_set": data.get("old_set"), "new_set": data.get("new_set"),
              "drop_caches": data.get("drop_caches"), "label": data.get("label"),
              "shuffle_partitions": data.get("shuffle_partitions"), "driver_memory": data.get("driver_memory"),
              "conf": data.get("conf"), "master": data.get("master")}
    return corpus, figures, command("nights", values)


def _generic(data: Any) -> tuple[str, str, str]:
    if not isinstance(data, dict):
        return "-", f"a {type(data).__name__}, not a record", "-"
    figures = [f"{k} {v}" for k, v in data.items()
               if isinstance(v, (int, float, bool)) and not isinstance(v, str)][:8]
    return "-", ", ".join(figures) or "no top-level figures", "-"


def _review(data: dict) -> tuple[str, str, str]:
    corpus = f"seven-edit corpus, {_docs(data.get('docs'))} docs{_where(data)}"
    figures = (f"`neardup report` process {_s(data.get('report_process_seconds'))}; page "
               f"{data.get('page_kib')} KiB; opens in {_f(data.get('page_open_seconds'))} s more than an "
               f"empty page in headless Chromium")
    return corpus, figures, command("review", {"docs": data.get("docs"), "master": data.get("master")},
                                    prefix="PYSPARK_PYTHON=$PWD/.venv/bin/python ")


def _realdefaults(data: dict) -> tuple[str, str, str]:
    judged, baseline = data["judged"], data["baseline"]
    parts = []
    for row in data["rows"]:
        f, base = row["figures"][judged], row["figures"][baseline]
        bits = [f"{row['time_ratio']:.2f}x the time"]
        if row["kind"] == "real":
            bits.append(f"J >= t-{data['margin']:g} {_f(f['share_at_least_t_minus_margin'], 4)} of {f['removed']:,} "
                        f"removed ({baseline} {_f(base['share_at_least_t_minus_margin'], 3)}), "
                        f"largest cluster {f['largest_cluster']:,} ({baseline} {base['largest_cluster']:,})")
        elif f.get("pairs_vs_labels"):
            p = f["pairs_vs_labels"]
            bits.append(f"P/R {_f(p['precision'], 4)}/{_f(p['recall'], 4)}")
        parts.append(f"{row['corpus']}: " + ", ".join(bits))
    missed = [g for g in data.get("targets", []) if not g["met"]]
    verdict = "all targets met" if not missed else "missed: " + "; ".join(
        f"{g['corpus']} {g['what']} {g['value']} (target {g['target']})" for g in missed)
    corpus = ", ".join(f"{r['corpus']} ({_docs(r['documents'])} docs)" for r in data["rows"]) + _where(data)
    values = {"corpora": ",".join(data.get("corpora") or []), "seven_edit": data.get("seven_edit"),
              "generated": data.get("generated"), "linkages": ",".join(data["linkages"]), "rounds": data.get("rounds"),
              "limit": data.get("limit"), "debian_extra": data.get("debian_extra"),
              "npm_versions": data.get("npm_versions"), "input_format": data.get("input_format"),
              "seed": data.get("seed"), "margin": data.get("margin")}
    if not values["seven_edit"]:
        values["seven_edit"] = None  # the flag with no sizes: `--seven-edit` alone, added below
    cmd = command("realdefaults", values, prefix="PYSPARK_PYTHON=$PWD/.venv/bin/python ")
    cmd += "" if data.get("seven_edit") else " --seven-edit"
    figures = (f"{judged} against {baseline}, median of {data.get('rounds')} whole processes each: "
               + "; ".join(parts) + f"; {verdict}")
    return corpus, figures, cmd


SUMMARIES: dict[str, Callable[[dict], tuple[str, str, str]]] = {
    "scale": _scale, "peers": _peers, "signatures": _signatures, "nightly": _nightly, "skew": _skew,
    "boilerplate": _boilerplate, "quality": _quality, "simhash": _simhash, "components": _components,
    "review": _review, "scripts": _scripts, "linkage": _linkage, "realtext": _realtext, "nights": _nights,
    "realdefaults": _realdefaults,
}


# -- grouping -------------------------------------------------------------------------------------------------


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return {"_unreadable": f"{type(exc).__name__}"}


def _benchmark(path: Path, data: Any) -> str:
    name = data.get("benchmark") if isinstance(data, dict) else None
    return str(name) if name else re.split(r"[-.]", path.name, maxsplit=1)[0]


def _group(path: Path, data: Any) -> tuple[str, str]:
    """(benchmark, the label of its row): one row per benchmark, and for peers per variant and peer set."""
    bench = _benchmark(path, data)
    if not isinstance(data, dict):
        return bench, bench
    if bench == "peers":
        try:
            tools = [PEERS.get(t, t) for t in _tools(data) if t != "neardup"]
        except (KeyError, TypeError, AttributeError):
            tools = []
        variant = data.get("variant") or "ascii"
        return bench, f"peers: {', '.join(tools) or 'neardup'}" + ("" if variant == "ascii" else f" ({variant})")
    if bench == "quality" and data.get("method") not in (None, "minhash"):
        return bench, f"quality ({data.get('method')})"
    if bench == "nightly" and data.get("linkage") not in (None, "components"):
        return bench, f"nightly ({data['linkage']} linkage)"
    if bench == "nightly" and data.get("batch") not in (None, 10_000):
        return bench, f"nightly ({_docs(data['batch'])} batch)"  # a row per batch size
    if bench == "linkage" and data.get("threshold") is not None:
        return bench, f"linkage ({data['threshold']})"  # a row per threshold
    if bench == "realdefaults" and (data.get("limit") or data.get("linkages") != ["default", "components"]):
        label = " against ".join(data.get("linkages") or [])
        return bench, f"realdefaults ({label}{', limit ' + str(data['limit']) if data.get('limit') else ''})"
    if bench == "scale" and data.get("sized"):
        return bench, "scale (sized, no config)"
    if bench == "nights" and data.get("label"):
        return bench, f"nights ({data['label']})"  # a row per comparison
    if bench == "compare" and data.get("docs"):  # a row per corpus size, and for runs without a config
        return bench, f"compare{' defaults' if _no_config(data) else ''} ({_docs(data['docs'])})"
    return bench, bench


def rows() -> list[dict]:
    groups: dict[tuple[str, str], list[tuple[tuple, Path, Any]]] = {}
    for path in sorted(RESULTS.glob("*.json")):
        data = _load(path)
        groups.setdefault(_group(path, data), []).append((_age(path, data), path, data))
    out = []
    for (bench, label), members in groups.items():
        members.sort(key=lambda m: m[0])
        _, path, data = members[-1]
        try:
            if isinstance(data, dict) and "_unreadable" in data:
                corpus, figures, cmd = "-", f"unreadable ({data['_unreadable']})", "-"
            elif bench == "compare":
                corpus, figures, cmd = _compare(data, path)
            elif bench in SUMMARIES:
                corpus, figures, cmd = SUMMARIES[bench](data)
            else:
                corpus, figures, cmd = _generic(data)
        except Exception:  # noqa: BLE001 - a record of another shape: its top-level figures instead
            corpus, figures, cmd = _generic(data)
        heads = _recorded_heads(data)
        out.append({"bench": bench, "label": label, "measures": _measures(bench), "corpus": corpus,
                    "figures": figures, "command": cmd,
                    "file": path.name, "code": heads[0][:7] if heads else None,
                    "older": [m[1].name for m in reversed(members[:-1])],
                    "machine": _machine(data)})
    rank = {name: i for i, name in enumerate(ORDER)}
    out.sort(key=lambda r: (rank.get(r["bench"], len(ORDER)), r["label"]))
    return out


def _machine(data: Any) -> str | None:
    if not isinstance(data, dict):
        return None
    m = data.get("machine")
    if isinstance(m, str):
        return m
    if isinstance(m, dict):
        return f"{m.get('machine', '?')}, {m.get('cores', '?')} cores, Python {m.get('python', '?')}"
    return None


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render() -> str:
    table = rows()
    machines = sorted({r["machine"] for r in table if r["machine"]})
    lines = [
        "# Benchmarks",
        "",
        "<!-- Generated by scripts/benchmarks_table.py from benchmarks/results/*.json: do not edit by hand. -->",
        "",
        "The current figure of each benchmark: one row per benchmark (the peer comparison: per peer and corpus",
        "variant), taken from its newest results file in `benchmarks/results/`. Earlier runs keep their own",
        "results files (listed below the table), and the history of every figure is in git",
        "(`git log -p -- benchmarks/results/`). Run the commands from the repository root after",
        "`./scripts/setup.sh`; the peer benchmarks also need `./benchmarks/setup-peers.sh`. Times are whole",
        "processes (JVM start included) unless a row says otherwise.",
        "",
    ]
    if machines:
        lines += ["Recorded on: " + "; ".join(machines) + ". Shared machines drift: compare figures of one row,",
                  "taken within one run, rather than figures of different rows.", ""]
    lines += ["| Benchmark | Measures | Corpus / size | Key figures | Command | Results file |",
              "|---|---|---|---|---|---|"]
    for r in table:
        file_cell = f"[`{r['file']}`](benchmarks/results/{r['file']})" + (f" (code {r['code']})" if r["code"] else "")
        cmd = f"`{_cell(r['command'])}`" if r["command"] != "-" else "-"
        lines.append(f"| {_cell(r['label'])} | {_cell(r['measures']) or '-'} | {_cell(r['corpus'])} | "
                     f"{_cell(r['figures'])} | {cmd} | {file_cell} |")
    older = [r for r in table if r["older"]]
    if older:
        lines += ["", "## Earlier results files", "", "Newest first; each holds the figures of its own run.", ""]
        for r in older:
            lines.append(f"- {r['label']}: " + ", ".join(f"`{name}`" for name in r["older"]))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    return generated.main(OUTPUT, render, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    sys.exit(main())
