"""Stage 8, keepers: every document -> (doc_id, cluster_id, is_keeper, keeper_id, status).

The keeper of a cluster is the first document under the configured rules,
applied in order, with the smallest doc_id as the final tie-break:

* `earliest`: smallest `keeper.time_col` (nulls last);
* `source_priority`: first source in `keeper.source_priority` (unlisted last);
* `longest`: longest original text;
* `smallest_id`: smallest doc_id.

Every input document appears exactly once. Documents outside any edge are
clusters of one (`unique`); empty texts keep their own cluster (`empty`).
"""

from __future__ import annotations

from typing import Callable, Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup_spark import columns as C
from neardup_spark.config import KeeperConfig

TEXT_LEN = C.TEXT_LEN
_COMP = "_component"


def keeper_columns(keeper: KeeperConfig) -> list[str]:
    """The input columns the configured rules read."""
    cols = []
    if "earliest" in keeper.rules:
        cols.append(keeper.time_col)
    if "source_priority" in keeper.rules:
        cols.append(keeper.source_col)
    return cols


def _input(name: str) -> Column:
    """The column named `name` exactly (a name may hold dots or backquotes: never parsed)."""
    return F.col("`" + name.replace("`", "``") + "`")


def keeper_inputs(docs: DataFrame, keeper: KeeperConfig) -> list[Column]:
    """The rule columns as the rules compare them. Text times are parsed, so
    ISO strings with different UTC offsets order by instant; a string that
    does not parse counts as missing (sorted last)."""
    cols = []
    for name in keeper_columns(keeper):
        col = _input(name)
        if name == keeper.time_col and isinstance(docs.schema[name].dataType, T.StringType):
            col = F.try_to_timestamp(col)
        cols.append(col.alias(name))
    return cols


def rule_keys(keeper: KeeperConfig) -> list[Column]:
    """Sort keys (ascending) for the configured rules; doc_id always last."""
    keys: list[Column] = []
    for rule in keeper.rules:
        if rule == "earliest":
            t = _input(keeper.time_col)
            keys += [t.isNull(), t]
        elif rule == "source_priority":
            ranks = F.create_map(*[F.lit(x) for i, s in enumerate(keeper.source_priority) for x in (s, i + 1)])
            rank = ranks[_input(keeper.source_col).cast("string")]
            keys.append(F.coalesce(rank, F.lit(len(keeper.source_priority) + 1)))
        elif rule == "longest":
            keys.append(-F.col(TEXT_LEN))
        # smallest_id is the final key anyway
    return keys + [F.col(C.DOC_ID)]


def status_column(keeper_id: Column, keeper_hash: Column, size: Column) -> Column:
    """A document's status given its cluster's keeper id, the keeper's exact hash and the cluster size."""
    return (
        F.when(F.col(C.IS_EMPTY), F.lit(C.EMPTY))
        .when((F.col(C.DOC_ID) == keeper_id) & (size == 1), F.lit(C.UNIQUE))
        .when(F.col(C.DOC_ID) == keeper_id, F.lit(C.KEEPER))
        .when(F.col(C.EXACT_HASH) == keeper_hash, F.lit(C.EXACT_DUPLICATE))
        .otherwise(F.lit(C.DUPLICATE))
    )


def choose_keepers(docs: DataFrame, keeper: KeeperConfig, components: DataFrame,
                   keep: Sequence[str] = (), size_as: str | None = None) -> DataFrame:
    """docs(_nid, doc_id, is_empty, exact_hash, text_len, keeper columns) + components(doc_id, cluster_id)
    of internal ids -> clusters(doc_id, cluster_id, is_keeper, keeper_id, status[, keep][, size_as]).

    cluster_id is the smallest doc_id of the component, so it does not depend
    on the internal ids; documents in no component are clusters of one.
    """
    comps = components.select(F.col(C.DOC_ID).alias(C.NID), F.col(C.CLUSTER_ID).alias(_COMP))
    grouped = docs.join(comps, C.NID, "left").withColumn(_COMP, F.coalesce(F.col(_COMP), F.col(C.NID)))
    return ranked(grouped, keeper, _COMP, keep=keep, size_as=size_as)


_ID_FIELD = "id"


def rank_key(keeper: KeeperConfig, first: Sequence[Column] = ()) -> Column:
    """A document's rank as one struct (smaller keeps first): the `first` keys, the keeper rules,
    doc_id, exact_hash. Its ordering is Spark's, so a window sorted by it and a minimum over it
    (`ranked`) agree: the star pass (`stages.linkage`) depends on that."""
    keys = [*first, *rule_keys(keeper)]
    fields = [k.alias(f"k{i}") for i, k in enumerate(keys[:-1])]
    return F.struct(*fields, keys[-1].alias(_ID_FIELD), F.col(C.EXACT_HASH).alias("h"))


def ranked(docs: DataFrame, keeper: KeeperConfig, component: str,
           cluster_id: Callable[[Window], Column] | None = None, first: Sequence[Column] = (),
           keep: Sequence[str] = (), rank_as: str | None = None, size_as: str | None = None) -> DataFrame:
    """docs(doc_id, is_empty, exact_hash, text_len, keeper columns, `component`[, keep])
    -> (doc_id, cluster_id, is_keeper, keeper_id, status[, keep][, rank_as]).

    The one keeper ranking, for a full run and a nightly batch alike: per
    component, the document that sorts first by the `first` keys (the
    nightly index's sticky keepers), then the keeper rules, then the
    smallest id keeps it. cluster_id is `cluster_id(window)` (default: the
    smallest doc_id of the component). `rank_as` names a column of each document's
    rank (a struct: a smaller one would keep before a larger one); `size_as` one of the
    size of each document's cluster.
    """
    rank = rank_key(keeper, first)
    # One shuffle: window aggregates over the component instead of a groupBy and a join back.
    comp = Window.partitionBy(component)
    cluster = cluster_id(comp) if cluster_id is not None else F.min(C.DOC_ID).over(comp)
    own = (C.DOC_ID, C.IS_EMPTY, C.EXACT_HASH)
    scored = docs.select(
        *own, *[c for c in keep if c not in own], *([rank.alias(rank_as)] if rank_as else []),
        cluster.alias(C.CLUSTER_ID), F.min(rank).over(comp).alias("best"), F.count(F.lit(1)).over(comp).alias("size"),
    )
    keeper_id = F.col(f"best.{_ID_FIELD}")
    return scored.select(
        C.DOC_ID,
        C.CLUSTER_ID,
        (F.col(C.DOC_ID) == keeper_id).alias(C.IS_KEEPER),
        keeper_id.alias(C.KEEPER_ID),
        status_column(keeper_id, F.col("best.h"), F.col("size")).alias(C.STATUS),
        *keep, *([rank_as] if rank_as else []), *([F.col("size").alias(size_as)] if size_as else []),
    )


_KEEPER = "__neardup_keeper"


# Up to this many ids are broadcast to pick the keepers' rows, so the input
# (with its text) is read once and never shuffled; at 1M documents the
# shuffle join moved 1.7 GB and took most of the write stage.
BROADCAST_IDS = 5_000_000


def keeper_rows(raw: DataFrame, id_col: str, clusters: DataFrame, n_keepers: int | None = None,
                n_removed: int | None = None) -> DataFrame:
    """The raw input rows (id in `id_col`) whose id is a keeper's (all original columns).

    With the counts known, the smaller id set (keepers, or the removed
    documents for an anti-join) is broadcast when it is small enough.
    """
    raw_id = F.col(id_col)
    if dict(clusters.dtypes)[C.DOC_ID] == "bigint":
        raw_id = raw_id.cast("long")
    cols = [c for c in raw.columns if c != C.CORRUPT]
    by_removed = n_keepers is not None and n_removed is not None and n_removed < n_keepers
    wanted = ~F.col(C.IS_KEEPER) if by_removed else F.col(C.IS_KEEPER)
    ids = clusters.where(wanted).select(F.col(C.DOC_ID).alias(_KEEPER))
    smaller = n_removed if by_removed else n_keepers
    if smaller is not None and smaller <= BROADCAST_IDS:
        ids = F.broadcast(ids)
    return raw.join(ids, raw_id == F.col(_KEEPER), "left_anti" if by_removed else "left_semi").select(*cols)
