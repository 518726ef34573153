"""The one configuration tree every stage reads.

A config is loaded from TOML files (``conf/default.toml`` and friends), then
overridden by dotted keys from the command line (``{"verify.threshold": 0.4}``),
then validated here and nowhere else. Unknown sections or keys are an error, so
a typo never silently falls back to a default. Instances are frozen.
"""

from __future__ import annotations

import collections.abc
import math
import re
import sys
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from neardup_spark.errors import NeardupError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib


MAX_NUM_PERM = 4096  # minhash.num_perm's upper bound


class ConfigError(NeardupError, ValueError):
    """A configuration value is missing, unknown or out of range."""


INPUT_FORMATS = ("parquet", "jsonl", "json", "table", "delta")
SHINGLE_UNITS = ("auto", "word", "char")
LINKAGES = ("components", "keeper")
CLUSTER_BACKENDS = ("dataframe", "graphframes")
CHECKPOINT_MODES = ("local", "reliable", "none")
KEEPER_RULES = ("earliest", "source_priority", "longest", "smallest_id")
OUTPUT_MODES = ("errorifexists", "overwrite")
BOILERPLATE_UNITS = ("line", "sentence")
METHODS = ("minhash", "simhash")
MODES = ("jaccard", "containment")


@dataclass(frozen=True)
class InputConfig:
    path: str = ""
    format: str = "parquet"
    id_col: str = "id"
    text_col: str = "text"
    # Carried through to `deduplicated/` untouched; also where keeper rules look.
    metadata_cols: tuple[str, ...] = ()
    # Fewer input partitions than this are spread (round robin) before the
    # sketch stage; 0 = as many as Spark has cores. One .gz file is one
    # partition, and its whole sketch would otherwise run on one core.
    min_partitions: int = 0


@dataclass(frozen=True)
class NormaliseConfig:
    nfkc: bool = True
    lowercase: bool = True
    punctuation: bool = True  # punctuation (and underscores) become spaces


@dataclass(frozen=True)
class BoilerplateConfig:
    """Lines (or sentences) shared by many documents are removed before shingling."""

    enabled: bool = False
    unit: str = "line"  # "line", or "sentence" (lines split after . ! ?)
    # A segment is boilerplate when it occurs in at least
    # max(min_docs, ceil(min_share * documents)) documents. Keep min_docs above
    # the number of copies a story can have: a story's own lines, copied into
    # more documents than that, would count as boilerplate too.
    min_docs: int = 100
    min_share: float = 0.0
    # More boilerplate lines than this is an error: the rule is too loose.
    max_lines: int = 100_000


@dataclass(frozen=True)
class ShingleConfig:
    unit: str = "auto"  # words, and characters of scripts written without spaces; "word"; "char" n-grams
    k: int = 5


@dataclass(frozen=True)
class MinHashConfig:
    num_perm: int = 128
    seed: int = 1


@dataclass(frozen=True)
class MatchConfig:
    # minhash: b bands of r MinHash rows, verified by exact Jaccard (the default);
    # simhash: 64-bit SimHash, block tables, verified by Hamming distance.
    method: str = "minhash"
    # jaccard: duplicates by Jaccard (verify.threshold); containment: one document's
    # shingles mostly inside the other's (|A n B| / |A| >= containment_threshold),
    # found by size-partitioned LSH (see `stages.containment`), up to max_size_ratio.
    mode: str = "jaccard"
    containment_threshold: float = 0.8
    max_size_ratio: float = 16.0


@dataclass(frozen=True)
class SimHashConfig:
    hamming_distance: int = 3  # pairs within this many bits of the fingerprint are duplicates
    blocks: int = 0  # 0: hamming_distance + 1 (one table per block); more blocks, more tables, fewer checks
    verify_jaccard: bool = False  # also require exact Jaccard >= verify.threshold
    bits: int = 64  # 64 or 128: 128 separates near from unrelated more sharply, at twice the bytes
    weighting: str = "none"  # none: each distinct shingle counts once; tf: as often as it occurs


@dataclass(frozen=True)
class LshConfig:
    # 0 means "choose from the threshold" (see neardup_spark.kernels.lsh).
    bands: int = 0
    rows: int = 0
    # The automatic choice keeps P(candidate) at far_fraction * threshold
    # below max_far_probability: every such candidate is wasted verification.
    far_fraction: float = 1.0 / 3.0
    max_far_probability: float = 0.05
    # Buckets up to this size yield all their pairs; larger ones (a story
    # copied thousands of times, shared boilerplate) yield a star to their
    # smallest id, so candidates grow with documents, not with pairs. 16, not
    # 100: on a corpus with 5,000- and 20,000-copy stories (10k docs) it cut
    # candidates 2.4x, on 30% shared boilerplate 3x, with identical recall.
    all_pairs_bucket_limit: int = 16


@dataclass(frozen=True)
class VerifyConfig:
    threshold: float = 0.3  # exact Jaccard a pair needs to count as duplicate


@dataclass(frozen=True)
class ClusterConfig:
    backend: str = "dataframe"
    # keeper: a cluster is a star, every member a verified pair with its keeper (or an exact
    # copy of one); components: a connected component of verified pairs (A~B~C may hold A
    # and C that are not duplicates).
    linkage: str = "keeper"
    max_iterations: int = 200
    checkpoint: str = "local"
    checkpoint_interval: int = 2
    # Reliable checkpoints and GraphFrames write here (shared storage on a cluster).
    # "": the session's own, else a temporary directory under the run's output.
    checkpoint_dir: str = ""
    # Graphs of at most this many distinct edges are collected and solved on the driver
    # (numpy, one job) whatever the backend: an iterative Spark job costs seconds in
    # scheduling alone. 0: always the backend.
    driver_max_edges: int = 2_000_000
    # A schema (schema or catalog.schema) for the run's intermediate tables, where the session
    # cannot persist or checkpoint (Databricks serverless): each stage boundary is written
    # there and read back, and dropped when the run is done. "": cache as usual.
    scratch: str = ""


@dataclass(frozen=True)
class KeeperConfig:
    # Applied in order; the smallest id always breaks the remaining ties.
    rules: tuple[str, ...] = ("smallest_id",)
    time_col: str = "published_at"
    source_col: str = "source"
    source_priority: tuple[str, ...] = ()


@dataclass(frozen=True)
class OutputConfig:
    path: str = ""
    mode: str = "errorifexists"
    plots: bool = False  # PNG plots next to report.json (local outputs; needs matplotlib)
    # "catalog.schema.prefix": the tables go to the session's catalog as <prefix>_clusters,
    # <prefix>_pairs, <prefix>_deduplicated instead of under `path` (which keeps report.json).
    table: str = ""
    table_format: str = ""  # "": the catalog's default (Delta on Databricks); else a data source name


@dataclass(frozen=True)
class IndexConfig:
    """The archive index a nightly batch is checked against and appended to (see `archive.append`)."""

    path: str = ""
    append: bool = False  # run: query the batch against the index, then append it
    sticky_keeper: bool = False  # an archived keeper is never replaced by a newcomer
    # A batch document whose id is archived with other text: an error, or (True) the new
    # text replaces the old one, whose cluster is re-clustered without it.
    replace: bool = False
    # How a night reads the archived band rows that share a key with the batch: "auto" (an
    # index on a local or mounted filesystem: the tasks read its band files; at a URI:
    # Spark's join), "scan" (the tasks, or an error before any work), "join" (Spark's join).
    band_probe: str = "auto"
    # Where the parts this run writes (an append's, a build's, `index compact`'s) keep their
    # documents' shingle sets: "auto" (an index on a local or mounted filesystem: flat files
    # read by position, so a night reads only the sets it verifies against; at a URI: a
    # Parquet column), "files" (or an error before any work), "parquet" (the column).
    set_layout: str = "auto"


@dataclass(frozen=True)
class SparkConfig:
    """Only used by the CLI and jobs when they build a session themselves."""

    master: str = ""
    # A Spark Connect server (sc://host:port; "local[N]" starts one in this process).
    # "": $SPARK_REMOTE if set, else a classic session.
    remote: str = ""
    app_name: str = "neardup-spark"
    shuffle_partitions: int = 0  # 0: the session's own if someone set it, else sized for the run
    conf: Mapping[str, str] = field(default_factory=dict)
    # Local mode, JVM started by neardup: keep a class-data archive of the
    # driver JVM (see runtime.jvm.class_archive): the JVM starts seconds faster.
    class_cache: bool = True
    # Local mode, JVM started by neardup: "auto" runs the JIT's quick compiler
    # only (C1) when the local input is under runtime.jvm.SHORT_RUN_BYTES, "c1"
    # always, "default" never (see runtime.jvm.jit_options).
    jit: str = "auto"


@dataclass(frozen=True)
class Config:
    input: InputConfig = InputConfig()
    normalise: NormaliseConfig = NormaliseConfig()
    boilerplate: BoilerplateConfig = BoilerplateConfig()
    shingle: ShingleConfig = ShingleConfig()
    minhash: MinHashConfig = MinHashConfig()
    match: MatchConfig = MatchConfig()
    simhash: SimHashConfig = SimHashConfig()
    lsh: LshConfig = LshConfig()
    verify: VerifyConfig = VerifyConfig()
    cluster: ClusterConfig = ClusterConfig()
    keeper: KeeperConfig = KeeperConfig()
    output: OutputConfig = OutputConfig()
    index: IndexConfig = IndexConfig()
    spark: SparkConfig = SparkConfig()

    def with_overrides(self, overrides: Mapping[str, Any]) -> "Config":
        """A validated copy with dotted keys replaced, e.g. {"verify.threshold": 0.5}.

        A mapping (spark.conf) is merged key by key, so `--conf k=v` adds to
        the config file's Spark settings instead of dropping them."""
        data = to_dict(self)
        for dotted, value in overrides.items():
            if value is None:
                continue
            section, _, key = dotted.partition(".")
            if not key:
                raise ConfigError(f"override {dotted!r} must be 'section.key'")
            current = data.setdefault(section, {})
            if isinstance(value, Mapping) and isinstance(current.get(key), Mapping):
                value = {**current[key], **value}
            current[key] = value
        return from_dict(data)


def to_dict(cfg: Config) -> dict[str, dict[str, Any]]:
    """Plain nested dict (tuples as lists), suitable for JSON and TOML round trips."""
    out: dict[str, dict[str, Any]] = {}
    for sec in fields(cfg):
        values = {}
        for f in fields(getattr(cfg, sec.name)):
            v = getattr(getattr(cfg, sec.name), f.name)
            values[f.name] = list(v) if isinstance(v, tuple) else (dict(v) if isinstance(v, Mapping) else v)
        out[sec.name] = values
    return out


def from_dict(data: Mapping[str, Any]) -> Config:
    """Build and validate a Config; unknown sections and keys are errors."""
    sections = {f.name: f for f in fields(Config)}
    unknown = sorted(set(data) - set(sections))
    if unknown:
        raise ConfigError(f"unknown config section(s): {', '.join(unknown)}")
    built = {}
    for name, f in sections.items():
        raw = data.get(name, {})
        if not isinstance(raw, Mapping):
            raise ConfigError(f"config section [{name}] must be a table")
        built[name] = _build_section(f.default.__class__, raw, name)
    cfg = Config(**built)
    validate(cfg)
    return cfg


def load_config(*paths: str | Path, overrides: Mapping[str, Any] | None = None) -> Config:
    """Merge TOML files left to right, apply dotted overrides, validate."""
    merged: dict[str, dict[str, Any]] = {}
    for path in paths:
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except FileNotFoundError:
            raise ConfigError(f"config file not found: {path}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
        for section, values in data.items():
            if not isinstance(values, Mapping):
                raise ConfigError(f"{path}: top-level key {section!r} must be a [section]")
            merged.setdefault(section, {}).update(values)
    cfg = from_dict(merged)
    return cfg.with_overrides(overrides) if overrides else cfg


def _build_section(cls: type, raw: Mapping[str, Any], section: str):
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise ConfigError(f"unknown key(s) in [{section}]: {', '.join(unknown)}")
    hints = typing.get_type_hints(cls)
    values = {name: _coerce(raw[name], hints[name], f"{section}.{name}") for name in raw}
    return cls(**values)


def _coerce(value: Any, hint: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise ConfigError(f"{where} must be true or false, got {value!r}")
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ConfigError(f"{where} must be an integer, got {value!r}")
        try:
            return int(value)
        except ValueError:
            raise ConfigError(f"{where} must be an integer, got {value!r}") from None
    if hint is float:
        if isinstance(value, bool):
            raise ConfigError(f"{where} must be a number, got {value!r}")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where} must be a number, got {value!r}") from None
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where} must be a string, got {value!r}")
        return value
    if origin is tuple:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where} must be a list of strings, got {value!r}")
        return tuple(value)
    if origin in (Mapping, dict, collections.abc.Mapping):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where} must be a table, got {value!r}")
        return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}
    raise ConfigError(f"{where}: unsupported config type {hint!r}")  # pragma: no cover


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def _one_of(value: str, choices: tuple[str, ...], where: str) -> None:
    _check(value in choices, f"{where} must be one of {', '.join(choices)}; got {value!r}")


JIT_MODES = ("auto", "c1", "default")
BAND_PROBES = ("auto", "scan", "join")
SET_LAYOUTS = ("auto", "files", "parquet")


def validate(cfg: Config) -> None:
    """Every cross-field rule lives here, so stages can trust their config."""
    _one_of(cfg.input.format, INPUT_FORMATS, "input.format")
    _check(bool(cfg.input.id_col), "input.id_col must not be empty")
    _check(bool(cfg.input.text_col), "input.text_col must not be empty")
    _check(cfg.input.id_col != cfg.input.text_col, "input.id_col and input.text_col must differ")
    _check(cfg.input.min_partitions >= 0, f"input.min_partitions must be >= 0, got {cfg.input.min_partitions}")
    _one_of(cfg.shingle.unit, SHINGLE_UNITS, "shingle.unit")
    bp = cfg.boilerplate
    _one_of(bp.unit, BOILERPLATE_UNITS, "boilerplate.unit")
    _check(bp.min_docs >= 2, f"boilerplate.min_docs must be >= 2 (a line in one document is not shared); got {bp.min_docs}")
    _check(0.0 <= bp.min_share <= 1.0, f"boilerplate.min_share must be in [0, 1]; got {bp.min_share}")
    _check(1 <= bp.max_lines <= 10_000_000, f"boilerplate.max_lines must be in [1, 10000000]; got {bp.max_lines}")
    _check(cfg.shingle.k >= 1, f"shingle.k must be >= 1; got {cfg.shingle.k}")
    _check(1 <= cfg.minhash.num_perm <= MAX_NUM_PERM,
           f"minhash.num_perm must be in [1, {MAX_NUM_PERM}]; got {cfg.minhash.num_perm}")
    _check(0 <= cfg.minhash.seed < 2**63, f"minhash.seed must be in [0, 2**63); got {cfg.minhash.seed}")
    _one_of(cfg.match.method, METHODS, "match.method")
    _one_of(cfg.match.mode, MODES, "match.mode")
    if cfg.match.mode == "containment":
        _check(cfg.match.method == "minhash", "match.mode = 'containment' needs match.method = 'minhash'")
    ct = cfg.match.containment_threshold
    _check(0.5 <= ct <= 1.0, f"match.containment_threshold must be in [0.5, 1]; got {ct}")
    _check(1.0 <= cfg.match.max_size_ratio <= 1024, f"match.max_size_ratio must be in [1, 1024]; got {cfg.match.max_size_ratio}")
    sh = cfg.simhash
    blocks = sh.blocks or sh.hamming_distance + 1
    _check(sh.bits in (64, 128), f"simhash.bits must be 64 or 128; got {sh.bits}")
    _one_of(sh.weighting, ("none", "tf"), "simhash.weighting")
    _check(0 <= sh.hamming_distance < sh.bits,
           f"simhash.hamming_distance must be in [0, {sh.bits - 1}]; got {sh.hamming_distance}")
    _check(sh.blocks == 0 or sh.hamming_distance < sh.blocks <= sh.bits,
           f"simhash.blocks must be 0 or in (hamming_distance, {sh.bits}]; got {sh.blocks}")
    _check(math.comb(blocks, blocks - sh.hamming_distance) <= 1000,
           f"simhash layout needs {math.comb(blocks, blocks - sh.hamming_distance)} tables (> 1000); use fewer blocks")
    t = cfg.verify.threshold
    _check(math.isfinite(t) and 0.0 < t <= 1.0, f"verify.threshold must be in (0, 1]; got {t}")
    b, r = cfg.lsh.bands, cfg.lsh.rows
    _check(b >= 0 and r >= 0, f"lsh.bands and lsh.rows must be >= 0; got bands={b}, rows={r}")
    _check((b == 0) == (r == 0), f"lsh.bands and lsh.rows go together: give both or neither; got bands={b}, rows={r}")
    _check(
        b * r <= cfg.minhash.num_perm,
        f"lsh.bands * lsh.rows = {b * r} exceeds minhash.num_perm = {cfg.minhash.num_perm}",
    )
    _check(0.0 < cfg.lsh.far_fraction < 1.0, f"lsh.far_fraction must be in (0, 1); got {cfg.lsh.far_fraction}")
    _check(
        0.0 < cfg.lsh.max_far_probability < 1.0,
        f"lsh.max_far_probability must be in (0, 1); got {cfg.lsh.max_far_probability}",
    )
    _check(cfg.lsh.all_pairs_bucket_limit >= 2, "lsh.all_pairs_bucket_limit must be >= 2")
    _one_of(cfg.spark.jit, JIT_MODES, "spark.jit")
    _one_of(cfg.cluster.backend, CLUSTER_BACKENDS, "cluster.backend")
    _one_of(cfg.cluster.linkage, LINKAGES, "cluster.linkage")
    _one_of(cfg.cluster.checkpoint, CHECKPOINT_MODES, "cluster.checkpoint")
    _check(cfg.cluster.max_iterations >= 1, "cluster.max_iterations must be >= 1")
    _check(cfg.cluster.checkpoint_interval >= 1, "cluster.checkpoint_interval must be >= 1")
    parts = cfg.cluster.scratch.split(".")
    _check(not cfg.cluster.scratch or (len(parts) <= 2 and all(p.strip() for p in parts) and "/" not in parts[-1]),
           f"cluster.scratch must name a schema (schema or catalog.schema) the run may write tables to; "
           f"got {cfg.cluster.scratch!r}")
    _check(0 <= cfg.cluster.driver_max_edges <= 100_000_000,
           f"cluster.driver_max_edges must be in [0, 100000000]; got {cfg.cluster.driver_max_edges}")
    _check(len(cfg.keeper.rules) >= 1, "keeper.rules must name at least one rule")
    for rule in cfg.keeper.rules:
        _one_of(rule, KEEPER_RULES, "keeper.rules entries")
    _check(len(set(cfg.keeper.rules)) == len(cfg.keeper.rules), "keeper.rules must not repeat a rule")
    if "source_priority" in cfg.keeper.rules:
        _check(bool(cfg.keeper.source_priority), "keeper rule 'source_priority' needs keeper.source_priority")
    _check(
        len(set(cfg.keeper.source_priority)) == len(cfg.keeper.source_priority),
        "keeper.source_priority must not repeat a source",
    )
    _one_of(cfg.output.mode, OUTPUT_MODES, "output.mode")
    if cfg.output.table:
        table_name_parts(cfg.output.table)
    _check(not cfg.output.table_format or bool(cfg.output.table),
           "output.table_format is the format of output.table's tables: set output.table (--output-table) too")
    _check(cfg.spark.shuffle_partitions >= 0, "spark.shuffle_partitions must be >= 0")
    _one_of(cfg.index.band_probe, BAND_PROBES, "index.band_probe")
    _one_of(cfg.index.set_layout, SET_LAYOUTS, "index.set_layout")
    _check(not cfg.index.append or bool(cfg.index.path), "index.append needs index.path (--index)")
    _check(not cfg.index.append or cfg.match.mode == "jaccard",
           "the archive index supports match.mode = 'jaccard' only (containment batches: run them whole)")


_TABLE_PART = re.compile(r"`(?:[^`]|``)+`|[A-Za-z0-9_]+")


def table_name_parts(prefix: str) -> list[str]:
    """The dot-separated parts of output.table (backquoted parts may hold dots), or ConfigError."""
    parts, at = [], 0
    while True:
        m = _TABLE_PART.match(prefix, at)
        if m is None:
            raise ConfigError(f"output.table {prefix!r} is not a table name: give [catalog.][schema.]prefix, "
                              "each part letters, digits and _ (or `backquoted`)")
        parts.append(m.group(0))
        at = m.end()
        if at == len(prefix):
            return parts
        if prefix[at] != ".":
            raise ConfigError(f"output.table {prefix!r} is not a table name: unexpected {prefix[at]!r} at {at}")
        at += 1


def require_io_paths(cfg: Config) -> None:
    """A full run (not a library call on a DataFrame) also needs input and output."""
    _check(bool(cfg.input.path), "input.path is required (--input)")
    _check(bool(cfg.output.path), "output.path is required (--output)")
    _check(not cfg.index.path or cfg.index.append,
           "index.path (--index) is read only by a nightly batch: add --append (index.append = true) to check "
           "this input against the index and append it, or drop --index for a plain run")


__all__ = [
    "Config",
    "ConfigError",
    "load_config",
    "from_dict",
    "to_dict",
    "validate",
    "require_io_paths",
]
