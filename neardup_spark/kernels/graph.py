"""Connected components of a small graph on the driver, in numpy (see `stages.components`)."""

from __future__ import annotations


import numpy as np


def driver_components(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Edges as two id arrays -> (every node, sorted; the smallest node of its component).

    Nodes become their rank among all ids, so every parent pointer goes to a
    smaller rank. Each round hooks the larger root of every edge whose ends
    have different roots onto the smaller (the minimum wins when several
    edges hook one root), then jumps pointers until every node points at a
    root. Parents only decrease, so no cycle forms, and a root is the
    smallest node of its tree; when no edge joins two roots, trees are
    components.
    """
    nodes, inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
    a, b = inverse[: src.size], inverse[src.size :]
    parent = np.arange(nodes.size)
    while True:
        ra, rb = parent[a], parent[b]
        apart = ra != rb
        if not apart.any():
            break
        lo, hi = np.minimum(ra[apart], rb[apart]), np.maximum(ra[apart], rb[apart])
        np.minimum.at(parent, hi, lo)
        while True:
            jumped = parent[parent]
            if np.array_equal(jumped, parent):
                break
            parent = jumped
    return nodes, nodes[parent]
