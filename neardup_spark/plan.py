"""The plan: what a run derives from its configuration, resolved once.

`resolve(cfg)` runs at the entry points (`api`, the CLI), and where a tool
runs the pipeline on a config of its own (calibration's low-threshold pass):
the (bands, rows) of the LSH search and their advice, the matcher (MinHash
LSH bands, SimHash block tables or containment size classes), the bucket
limit and the keeper rules as applied (containment puts "longest" first: a
contained document points at its container). Stages receive these values;
none of them derives them again from the config.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property

from neardup_spark.config import Config, KeeperConfig
from neardup_spark.kernels import containment as _containment
from neardup_spark.kernels import lsh as _lsh
from neardup_spark.kernels import simhash as _simhash
from neardup_spark.kernels.containment import SizeClass
from neardup_spark.kernels.lsh import LshParams
from neardup_spark.kernels.sketch import SimHashLayout

# SimHash block tables are exact only with every pair of a bucket checked (their
# buckets fill with unrelated fingerprints sharing a block, so a star to one member
# would miss pairs): no limit there; the table layout (bits per key) decides sizes.
NO_BUCKET_LIMIT = 2**62


@dataclass(frozen=True)
class Matcher:
    """How candidate pairs are found: the sketch's bucket keys and the candidate stage's limit."""

    kind: str  # "minhash" (Jaccard LSH bands), "simhash" (block tables) or "containment" (size classes)
    lsh: LshParams  # bands x rows; in containment and SimHash mode reported, not searched
    keys_per_doc: int  # bucket keys per document: bands, or SimHash tables
    bucket_limit: int  # buckets up to this size yield all pairs, larger ones a star
    simhash: SimHashLayout | None = None
    classes: tuple[SizeClass, ...] | None = None


@dataclass(frozen=True)
class Plan:
    """A validated config and everything resolved from it. Frozen: phases share it."""

    cfg: Config
    matcher: Matcher
    keeper: KeeperConfig  # the rules as applied

    @property
    def lsh(self) -> LshParams:
        return self.matcher.lsh

    @cached_property
    def advice(self) -> list[str]:
        """What the report says about the candidate search: the Jaccard bands' S-curve,
        or the containment size classes (SimHash: nothing). Pure Python, computed on first use."""
        cfg, m = self.cfg, self.matcher
        if m.kind == "simhash":
            return []
        if m.kind == "containment":
            return _containment.advice(list(m.classes), cfg.match.containment_threshold, cfg.minhash.num_perm,
                                       pinned=bool(cfg.lsh.bands or cfg.lsh.rows))
        return _lsh.advice(m.lsh, cfg.lsh.far_fraction, cfg.lsh.max_far_probability)


def matcher_of(cfg: Config) -> Matcher:
    lsh = _lsh.lsh_params(cfg)
    sim = SimHashLayout.of(cfg)
    if sim is not None:
        tables = len(_simhash.table_masks(sim.distance, sim.blocks, sim.bits))
        return Matcher("simhash", lsh, simhash=sim, keys_per_doc=tables, bucket_limit=NO_BUCKET_LIMIT)
    limit = cfg.lsh.all_pairs_bucket_limit
    if cfg.match.mode == "containment":
        classes = _containment.size_classes(cfg.match.containment_threshold, cfg.minhash.num_perm,
                                            cfg.match.max_size_ratio)
        return Matcher("containment", lsh, classes=tuple(classes), keys_per_doc=lsh.bands, bucket_limit=limit)
    return Matcher("minhash", lsh, keys_per_doc=lsh.bands, bucket_limit=limit)


def keeper_of(cfg: Config) -> KeeperConfig:
    """The keeper rules as applied: in containment mode the longest document of a cluster
    keeps it, before the configured rules."""
    if cfg.match.mode != "containment" or cfg.keeper.rules[0] == "longest":
        return cfg.keeper
    return dataclasses.replace(cfg.keeper, rules=("longest", *[r for r in cfg.keeper.rules if r != "longest"]))


def resolve(cfg: Config) -> Plan:
    """The plan of a run with `cfg` (already validated: a Config is validated when built)."""
    if not isinstance(cfg, Config):
        raise TypeError(f"resolve takes a neardup_spark.Config; got {type(cfg).__name__}")
    return Plan(cfg, matcher_of(cfg), keeper_of(cfg))
