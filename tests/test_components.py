"""Connected components against a union-find oracle, and backend agreement."""

import random

import networkx as nx
import pytest

from neardup_spark import columns as C
from neardup_spark.stages.components import connected_components
from neardup_spark.config import Config
from neardup_spark.errors import BackendError

from . import oracles


def union_find_labels(edges):
    return oracles.union_find_clusters({x for e in edges for x in e}, edges)


SPARK_ONLY = {"cluster.driver_max_edges": 0}  # the backend, however small the graph


def run(spark, edges, schema="doc_a long, doc_b long", **overrides):
    df = spark.createDataFrame(edges, schema)
    out = connected_components(df, Config().with_overrides({**SPARK_ONLY, **overrides})).collect()
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


@pytest.mark.parametrize("where", ["spark", "driver"])
def test_twenty_random_graphs_match_union_find_and_networkx(spark, where):
    # One run over the twenty graphs side by side (node ids apart): its components are theirs,
    # and label propagation needs as many rounds as the widest of them.
    limit = {"cluster.driver_max_edges": 0 if where == "spark" else 100_000}
    edges = [(a + 10_000 * seed, b + 10_000 * seed) for seed in range(20) for a, b in random_graph(seed)]
    want = union_find_labels(edges)
    assert run(spark, edges, **limit) == want
    g = nx.Graph(edges)
    assert sorted(sorted(c) for c in nx.connected_components(g)) == sorted(
        sorted(n for n, lab in want.items() if lab == root) for root in set(want.values())
    )


@pytest.mark.compat
def test_long_path_converges(spark):
    # A path numbered in a scrambled order is the slow case for label propagation.
    n = 3000
    order = list(range(n))
    random.Random(1).shuffle(order)
    edges = list(zip(order, order[1:]))
    labels = run(spark, edges, **{"cluster.checkpoint_interval": 1})
    assert set(labels.values()) == {0} and len(labels) == n


@pytest.mark.compat
@pytest.mark.parametrize("limit", [0, 10])
def test_string_ids(spark, limit):
    labels = run(spark, [("b", "c"), ("c", "d"), ("x", "y")], schema="doc_a string, doc_b string",
                 **{"cluster.driver_max_edges": limit})
    assert labels == {"b": "b", "c": "b", "d": "b", "x": "x", "y": "x"}


def test_driver_path_only_below_its_limit(spark):
    edges = spark.createDataFrame([(i, i + 1) for i in range(50)], "doc_a long, doc_b long")
    for limit, on_driver in ((50, True), (49, False)):
        stats: dict = {}
        got = connected_components(edges, Config().with_overrides({"cluster.driver_max_edges": limit}), stats)
        assert {r[C.CLUSTER_ID] for r in got.collect()} == {0} and got.count() == 51
        assert stats["components_on_driver"] == int(on_driver) and stats["components_edges"] == 50


def test_driver_components_on_scrambled_paths_and_random_graphs():
    import numpy as np

    from neardup_spark.stages.components import driver_components

    order = np.random.default_rng(1).permutation(100_000)
    nodes, labels = driver_components(order[:-1], order[1:])
    assert nodes.size == 100_000 and (labels == 0).all()
    for seed in range(50):
        edges = random_graph(seed)
        nodes, labels = driver_components(np.array([a for a, _ in edges]), np.array([b for _, b in edges]))
        assert dict(zip(nodes.tolist(), labels.tolist())) == union_find_labels(edges)


@pytest.mark.compat
def test_iteration_limit_is_an_error(spark):
    from neardup_spark.errors import ConvergenceError

    with pytest.raises(ConvergenceError):
        run(spark, [(i, i + 1) for i in range(200)], **{"cluster.max_iterations": 1})


@pytest.mark.compat
def test_graphframes_without_its_jar_is_a_clear_error(spark, has_graphframes):
    if has_graphframes:
        pytest.skip("GraphFrames is installed here")
    with pytest.raises(BackendError, match="GraphFrames|graphframes"):
        run(spark, [(1, 2)], **{"cluster.backend": "graphframes"})


@pytest.mark.compat
@pytest.mark.graphframes
def test_graphframes_gives_identical_clusters(spark, has_graphframes):
    if not has_graphframes:
        pytest.skip("set NEARDUP_GRAPHFRAMES_JAR and install the graphframes package")
    # Five random graphs side by side as one (a GraphFrames run takes ~30 s here), against the oracle.
    edges = [(a + 10_000 * seed, b + 10_000 * seed) for seed in range(5) for a, b in random_graph(100 + seed)]
    assert run(spark, edges, **{"cluster.backend": "graphframes"}) == union_find_labels(edges)


@pytest.mark.compat
@pytest.mark.parametrize("limit", [0, 10])
def test_a_graph_without_edges_has_no_components(spark, limit):
    assert run(spark, [], **{"cluster.driver_max_edges": limit}) == {}
    assert run(spark, [(4, 4)], **{"cluster.driver_max_edges": limit}) == {}  # self-loops are dropped
