"""The command line's options, in one table: argparse's flags and the config keys they set.

Each `Option` names its flag, the dotted config key it overrides (None for a
command's own argument, like `calibrate --pairs`), and its argparse settings.
`cli` builds the parser from `COMMANDS` and the overrides from the same rows,
and `scripts/config_reference.py` lists each key's flags from them: a flag
cannot be added to one place and forgotten in the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from neardup_spark.errors import NeardupError

PRESETS = Path(__file__).parent / "presets"
FORMATS = ["parquet", "jsonl", "json", "table", "delta"]


@dataclass(frozen=True)
class Option:
    """One flag (or positional argument) of a command."""

    name: str  # "--input", or a positional's name ("run_output")
    key: str | None = None  # the config key it sets; None: the command reads it itself
    help: str | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)  # argparse's type, choices, action, default...
    to: Callable[[Any], Any] | None = None  # the parsed value -> the config value (None: not set)
    group: str | None = None  # a mutually exclusive group of the command

    @property
    def dest(self) -> str:
        return self.name.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class Command:
    help: str
    options: tuple[Option, ...] = ()
    groups: Mapping[str, bool] = field(default_factory=dict)  # exclusive group -> required


def _conf(items: list[str]) -> dict[str, str] | None:
    conf = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise NeardupError(f"--conf takes KEY=VALUE, got {item!r}")
        conf[key] = value
    return conf or None


def _opt(name: str, key: str | None = None, help: str | None = None, to=None, group=None, **settings) -> Option:
    return Option(name, key, help, settings, to, group)


_CONFIG = _opt("--config", action="append", default=[], help="TOML config file (repeatable; later wins)")
_SETTINGS_CONFIG = _opt("--config", action="append", default=[], help="TOML config file (Spark settings)")
_JSON = _opt("--json", action="store_true", help="print one JSON object")
_METADATA = _opt("--metadata-cols", "input.metadata_cols", help="comma-separated columns to carry through")
_OVERWRITE = _opt("--overwrite", "output.mode", to=lambda v: "overwrite" if v else None, action="store_true",
                  help="replace an existing output")
_OUTPUT_DIR = _opt("--output", "output.path", help="output directory")

INPUT = (
    _opt("--input", "input.path", help="path (file or directory) or table name"),
    _opt("--format", "input.format", choices=FORMATS,
         help="input format; jsonl and json both read JSON Lines (one object a line, .gz too)"),
    _opt("--id-col", "input.id_col"),
    _opt("--text-col", "input.text_col"),
    _opt("--strip-boilerplate", "boilerplate.enabled", action="store_true", default=None,
         help="remove lines shared by many documents before shingling (boilerplate.enabled)"),
    _opt("--boilerplate-min-docs", "boilerplate.min_docs", type=int,
         help="documents a line must be in to be boilerplate"),
)
_MODE = _opt("--mode", "match.mode", choices=["jaccard", "containment"], help="match.mode (default jaccard)")
_CONTAINMENT = _opt("--containment-threshold", "match.containment_threshold", type=float,
                    help="containment mode: |A n B| / |A| needed (default 0.8)")
SHINGLE = (
    _opt("--method", "match.method", choices=["minhash", "simhash"], help="match.method (default minhash)"),
    _opt("--hamming-distance", "simhash.hamming_distance", type=int,
         help="SimHash: duplicates within this many bits (default 3)"),
    _opt("--simhash-bits", "simhash.bits", type=int, choices=[64, 128], help="SimHash fingerprint size (default 64)"),
    _opt("--simhash-weighting", "simhash.weighting", choices=["none", "tf"],
         help="SimHash: each distinct shingle counts once (none, default) or as often as it occurs (tf)"),
    _MODE,
    _CONTAINMENT,
    _opt("--seed", "minhash.seed", type=int, help="MinHash seed (minhash.seed)"),
    _opt("--shingle-unit", "shingle.unit", choices=["auto", "word", "char"]),
    _opt("--k", "shingle.k", type=int, help="shingle size in words (or characters)"),
)
KEEPER = (
    _opt("--keeper-rules", "keeper.rules", help="comma-separated: earliest, source_priority, longest, smallest_id"),
    _opt("--source-priority", "keeper.source_priority", help="comma-separated sources, most preferred first"),
)
SPARK = (
    _opt("--master", "spark.master", help="Spark master, e.g. local[2]; default: spark-submit's, else local[*]"),
    _opt("--remote", "spark.remote",
         help="Spark Connect server, sc://host:port (default: $SPARK_REMOTE); the package is shipped to it"),
    _opt("--shuffle-partitions", "spark.shuffle_partitions", type=int),
    _opt("--conf", "spark.conf", to=_conf, action="append", default=[], metavar="KEY=VALUE",
         help="extra Spark setting"),
    _opt("--scratch", "cluster.scratch", metavar="SCHEMA",
         help="write intermediate results as tables in this schema instead of caching them, for sessions "
              "that cannot persist or checkpoint (Databricks serverless)"),
)
PARAMS = (
    _opt("--preset", choices=sorted(f.stem for f in PRESETS.glob("*.toml")),
         help="settings shipped with the package: local (one machine) or cluster (spark-submit); "
              "--config files apply after it"),
    _CONFIG,
    _opt("--threshold", "verify.threshold", type=float, help="Jaccard a verified pair needs (verify.threshold)"),
    _opt("--num-perm", "minhash.num_perm", type=int, help="MinHash permutations (minhash.num_perm)"),
    _opt("--bands", "lsh.bands", type=int, help="pin LSH bands (with --rows)"),
    _opt("--rows", "lsh.rows", type=int, help="pin LSH rows per band (with --bands)"),
)
SHOWN = (
    _opt("--json", action="store_true", group="shown",
         help="print the report as one JSON object instead of a summary"),
    _opt("--quiet", action="store_true", group="shown",
         help="print nothing but errors and warnings (no summary, no progress)"),
)
LINKAGE = _opt("--linkage", "cluster.linkage", choices=["components", "keeper"],
               help="keeper (default): every removed document is verified against its own keeper (no chains); "
                    "components: connected components of verified pairs (A~B~C in one cluster)")


def tables(what: str) -> tuple[Option, ...]:
    return (
        _opt("--output-table", "output.table", metavar="CATALOG.SCHEMA.PREFIX",
             help=f"write {what} as catalog tables PREFIX_clusters, ... instead of files (output.table)"),
        _opt("--table-format", "output.table_format", metavar="FORMAT",
             help="the tables' format (delta, iceberg, parquet...; default: the catalog's own)"),
    )


_SHOWN_GROUP = {"shown": False}

COMMANDS: dict[tuple[str, ...], Command] = {
    ("run",): Command("deduplicate an input and write clusters, pairs and keepers", (
        *INPUT, _METADATA, _OUTPUT_DIR, _OVERWRITE, *tables("clusters, pairs and deduplicated"), *PARAMS, *SHINGLE,
        *KEEPER,
        _opt("--backend", "cluster.backend", choices=["dataframe", "graphframes"],
             help="connected components backend"),
        LINKAGE,
        _opt("--plots", "output.plots", to=lambda v: True if v is True else None, action="store_true",
             help="also write PNG plots next to report.json (needs matplotlib)"),
        _opt("--index", "index.path", help="archive index directory (with --append)"),
        _opt("--append", "index.append", action="store_true", default=None,
             help="check the batch against the index and itself, then append it (index.append)"),
        _opt("--sticky-keeper", "index.sticky_keeper", action="store_true", default=None,
             help="never replace an archived keeper with a newcomer (index.sticky_keeper)"),
        _opt("--replace", "index.replace", action="store_true", default=None,
             help="an archived id with new text replaces the old text instead of failing (index.replace)"),
        *SPARK, *SHOWN), _SHOWN_GROUP),
    ("calibrate",): Command("set the threshold from your data: random pairs, or labelled pairs", (
        *INPUT, *PARAMS, *SHINGLE,
        _opt("--pairs", type=int, default=5000, help="random pairs to sample (default 5000)"),
        _opt("--sample-seed", type=int, default=1, help="seed of the random samples"),
        _opt("--margin", type=float, default=0.05, help="recommended threshold >= p99 + margin (default 0.05)"),
        _opt("--floor", type=float, default=0.3, help="never recommend a threshold below this (default 0.3)"),
        _opt("--plots", metavar="DIR", help="write the S-curve and Jaccard histogram PNGs into DIR"),
        _opt("--sample-for-labelling", type=int, metavar="N", help="write N candidate pairs to label (CSV)"),
        _opt("--output", help="the CSV file --sample-for-labelling writes"),
        _opt("--range", default="0.3,1.0", help="Jaccard range of the labelling sample (default 0.3,1.0)"),
        _opt("--text-chars", type=int, default=600, help="characters of each text in the CSV"),
        _opt("--labels", metavar="FILE", help="score a labelled CSV: precision/recall per threshold"),
        _JSON, *SPARK)),
    ("evaluate",): Command("score a run's clusters against labelled groups", (
        _opt("--input", "input.path", required=True, help="the labelled documents (same formats as run)"),
        _opt("--format", "input.format", choices=FORMATS),
        _opt("--id-col", "input.id_col"),
        _opt("--labels-col", required=True, help="documents with the same value are duplicates"),
        _opt("--edit-col", help="also score recall per edit type (its 'original' rows are the reference)"),
        _opt("--clusters", required=True, help="a run's output directory (or its clusters/ table)"),
        _CONFIG, _JSON, *SPARK)),
    ("params",): Command("print the LSH (bands, rows) choice and its S-curve", (
        *PARAMS, _MODE, _CONTAINMENT,
        _opt("--step", type=float, default=0.05, help="S-curve table step"),
        _opt("--json", action="store_true", help="print JSON instead of a table"))),
    ("index",): Command("build, export, compact or vacuum the archive index of nightly batches"),
    ("index", "build"): Command("run the pipeline over the archive and write its index", (
        *INPUT, _METADATA,
        _opt("--index", "index.path", required=True, help="directory for the index (must not hold one)"),
        _opt("--output", "output.path", help="also write the run's tables and report here"),
        _opt("--overwrite", "output.mode", to=_OVERWRITE.to, action="store_true",
             help="replace an existing --output"),
        *tables("the run's tables"), *SHOWN, *PARAMS, *SHINGLE, *KEEPER, LINKAGE, *SPARK), _SHOWN_GROUP),
    ("index", "export"): Command("write the index's current clusters/ (a run's clusters schema)", (
        _opt("--index", "index.path", required=True),
        _opt("--output", "output.path", help="directory for clusters/ (or --output-table)"),
        _OVERWRITE, *tables("the clusters"), _CONFIG, *SPARK)),
    ("index", "compact"): Command(
        "rewrite the index as one part with the same assignments (the replaced parts stay until vacuum)",
        (_opt("--index", "index.path", required=True), _CONFIG, *SPARK)),
    ("index", "vacuum"): Command("remove replaced and orphaned parts that no reader needs", (
        _opt("--index", "index.path", required=True),
        _opt("--retain-days", type=float, default=7.0,
             help="keep what was replaced or written less than this long ago (default 7; keep it above "
                  "the longest append, whose part is not committed until its end)"),
        _opt("--dry-run", action="store_true", help="list what would go, remove nothing"),
        _CONFIG, *SPARK)),
    ("demo",): Command("run on the bundled 1,000-document sample (local preset): a first try", (
        _opt("--output", required=True, help="output directory"), _OVERWRITE, *SHOWN), _SHOWN_GROUP),
    ("job-file",): Command("print the path of the entry file for spark-submit"),
    ("inspect",): Command("show what a run merged: clusters against their keepers, word by word", (
        _opt("run_output", metavar="OUT", help="a finished run's output directory"),
        _opt("--doc", metavar="ID", group="which", help="the cluster of this document"),
        _opt("--cluster", metavar="ID", group="which", help="this cluster"),
        _opt("--sample", type=int, metavar="N", group="which", help="N clusters drawn across Jaccard strata"),
        _opt("--jaccard-range", default="0,1", help="with --sample: the pairs' Jaccard range (default 0,1)"),
        _opt("--max-members", type=int, default=20, help="members shown per cluster besides the keeper"),
        _opt("--sample-seed", type=int, default=1),
        _JSON, _SETTINGS_CONFIG, *SPARK), {"which": True}),
    ("report",): Command("write a run's review page: one self-contained HTML file", (
        _opt("run_output", metavar="OUT", help="a finished run's output directory"),
        _opt("--html", required=True, metavar="FILE", help="the HTML file to write"),
        _opt("--per-stratum", type=int, default=3, help="sampled pairs per Jaccard stratum (default 3)"),
        _SETTINGS_CONFIG, *SPARK)),
    ("generate",): Command("write a labelled corpus with the seven controlled edits", (
        _opt("--docs", type=int, default=10_000),
        _opt("--output", required=True),
        _opt("--format", choices=["parquet", "jsonl"], default="parquet"),
        _opt("--seed", type=int, default=7),
        _opt("--dup-share", type=float, default=0.5),
        _opt("--shards", type=int, default=1,
             help="write in this many independent pieces (one vocabulary and footer set): for 10M and more "
                  "documents; restartable, a second run finishes what a killed one left"),
        _opt("--workers", type=int, default=1, help="processes writing shards at once"))),
}


def overrides(command: tuple[str, ...], values: Mapping[str, Any]) -> dict[str, Any]:
    """The config keys a command's parsed `values` (argparse's dest -> value) set."""
    out: dict[str, Any] = {}
    for option in COMMANDS[command].options:
        value = values.get(option.dest)
        if option.key is None or value is None:
            continue
        value = option.to(value) if option.to else value
        if value is not None:
            out[option.key] = value
    if ("lsh.bands" in out) != ("lsh.rows" in out):
        raise NeardupError("--bands and --rows go together: give both or neither")
    return out


def config_files(values: Mapping[str, Any]) -> list[str]:
    """The preset (if any), then the --config files, in the order they apply."""
    preset = values.get("preset")
    return [*([str(PRESETS / f"{preset}.toml")] if preset else []), *(values.get("config") or [])]


def flags_of_keys() -> dict[str, list[str]]:
    """Config key -> the flags that set it, in the order the commands list them."""
    flags: dict[str, list[str]] = {}
    for command in COMMANDS.values():
        for option in command.options:
            if option.key and option.name not in flags.setdefault(option.key, []):
                flags[option.key].append(option.name)
    return flags
