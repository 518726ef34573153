"""Connected components against a union-find oracle, and backend agreement."""

import random

import networkx as nx
import pytest

from neardup_spark import columns as C
from neardup_spark.components import connected_components
from neardup_spark.config import Config
from neardup_spark.errors import BackendError

from . import oracles


def union_find_labels(edges):
    return oracles.union_find_clusters({x for e in edges for x in e}, edges)


def run(spark, edges, schema="doc_a long, doc_b long", **overrides):
    df = spark.createDataFrame(edges, schema)
    out = connected_components(df, Config().with_overrides(overrides)).collect()
    labels = {r[C.DOC_ID]: r[C.CLUSTER_ID] for r in out}
    assert len(labels) == len(out), "a node appears twice"
    return labels


def random_graph(seed):
    rng = random.Random(seed)
    n = rng.randint(2, 120)
    m = rng.randint(1, 2 * n)
    nodes = rng.sample(range(10_000), n)
    return [(a, b) for a, b in ((rng.choice(nodes), rng.choice(nodes)) for _ in range(m)) if a != b] or [
        (nodes[0], nodes[1])
    ]


def test_twenty_random_graphs_match_union_find_and_networkx(spark):
    for seed in range(20):
        edges = random_graph(seed)
        want = union_find_labels(edges)
        assert run(spark, edges) == want, f"graph seed {seed}"
        g = nx.Graph(edges)
        assert sorted(sorted(c) for c in nx.connected_components(g)) == sorted(
            sorted(n for n, lab in want.items() if lab == root) for root in set(want.values())
        )


def test_long_path_converges(spark):
    # A path numbered in a scrambled order is the slow case for label propagation.
    n = 3000
    order = list(range(n))
    random.Random(1).shuffle(order)
    edges = list(zip(order, order[1:]))
    labels = run(spark, edges, **{"cluster.checkpoint_interval": 1})
    assert set(labels.values()) == {0} and len(labels) == n


def test_string_ids(spark):
    labels = run(spark, [("b", "c"), ("c", "d"), ("x", "y")], schema="doc_a string, doc_b string")
    assert labels == {"b": "b", "c": "b", "d": "b", "x": "x", "y": "x"}


def test_iteration_limit_is_an_error(spark):
    from neardup_spark.errors import ConvergenceError

    with pytest.raises(ConvergenceError):
        run(spark, [(i, i + 1) for i in range(200)], **{"cluster.max_iterations": 1})


def test_graphframes_without_its_jar_is_a_clear_error(spark, has_graphframes):
    if has_graphframes:
        pytest.skip("GraphFrames is installed here")
    with pytest.raises(BackendError, match="GraphFrames|graphframes"):
        run(spark, [(1, 2)], **{"cluster.backend": "graphframes"})


@pytest.mark.graphframes
def test_graphframes_gives_identical_clusters(spark, has_graphframes):
    if not has_graphframes:
        pytest.skip("set NEARDUP_GRAPHFRAMES_JAR and install the graphframes package")
    for seed in range(5):
        edges = random_graph(100 + seed)
        assert run(spark, edges, **{"cluster.backend": "graphframes"}) == run(spark, edges)
