"""Connected components of a small graph on the driver, in numpy (see `stages.components`)."""

from __future__ import annotations


import numpy as np
import pandas as pd


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


def greedy_stars(comp: np.ndarray, pos: np.ndarray, text_pos: np.ndarray, nid: np.ndarray,
                 src: np.ndarray, dst: np.ndarray, sequential_below: int = 4096) -> np.ndarray:
    """Greedy stars in rank order, for the members of whole components -> each member's keeper nid.

    Members: `comp` (their component), `pos` (their rank within it, 1 first), `text_pos` (the
    best `pos` of their exact copies in the component: a text), `nid`. Edges `src`, `dst`:
    verified pairs between members (exact copies included), never across components.

    Within each component, texts are taken in rank order; a text no earlier keeper took
    becomes a keeper, and takes every later text it has an edge to. A member's keeper is
    the first document of its star's keeper text. This is the lexicographically first
    maximal independent set of the text graph, computed in vectorised rounds: a text with no
    undecided earlier neighbour is a keeper, and its undecided neighbours are taken; once
    fewer than `sequential_below` texts are left undecided, or a round decided less than an
    eighth of the rest (a long chain in rank order decides two texts a round), the rest run
    one text at a time, in the same order."""
    n = nid.size
    if n == 0:
        return nid.copy()
    # Texts: (comp, text_pos); ordered by component, then rank.
    sort = np.lexsort((text_pos, comp))
    c, p = comp[sort], text_pos[sort]
    starts = np.concatenate([[True], (c[1:] != c[:-1]) | (p[1:] != p[:-1])])
    t_of = np.empty(n, dtype=np.int64)
    t_of[sort] = np.cumsum(starts) - 1
    n_texts = int(starts.sum())
    first = np.empty(n_texts, dtype=nid.dtype)
    head = pos == text_pos
    first[t_of[head]] = nid[head]
    # Edges between texts, each once, earlier text first (np.unique's order is the rank order).
    at = pd.Index(nid)
    ia, ib = at.get_indexer(src), at.get_indexer(dst)
    if (ia < 0).any() or (ib < 0).any():  # -1 would silently name the last member
        raise ValueError("greedy_stars: an edge names a document that is not among the members")
    ta, tb = t_of[ia], t_of[ib]
    apart = ta != tb
    lo, hi = np.minimum(ta[apart], tb[apart]), np.maximum(ta[apart], tb[apart])
    lo, hi = _distinct_pairs(lo, hi, n_texts)
    state = np.zeros(n_texts, dtype=np.int8)  # 0 undecided, 1 keeper, 2 taken
    u, v = lo, hi
    last = 2 * n_texts + 1
    while True:
        open_ = state == 0
        both = open_[u] & open_[v]  # only edges between undecided texts decide anything more
        u, v = u[both], v[both]
        left = int(open_.sum())
        if left == 0:
            break
        if left < sequential_below or left > 8 * (last - left):
            _sequential(state, u, v, n_texts)
            break
        last = left
        blocked = np.zeros(n_texts, dtype=bool)
        blocked[v] = True
        new = open_ & ~blocked
        state[new] = 1
        state[v[new[u]]] = 2
    # Each taken text's keeper: its earliest keeper neighbour (the one that took it).
    keeper = np.where(state == 1, np.arange(n_texts), n_texts)
    by_keeper = (state[lo] == 1) & (state[hi] == 2)
    np.minimum.at(keeper, hi[by_keeper], lo[by_keeper])
    return first[keeper[t_of]]


def _distinct_pairs(lo: np.ndarray, hi: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    codes = lo.astype(np.int64) * n + hi
    codes.sort()
    codes = codes[np.concatenate([[True], codes[1:] != codes[:-1]])] if codes.size else codes
    return codes // n, codes % n


def _sequential(state: np.ndarray, u: np.ndarray, v: np.ndarray, n: int) -> None:
    """The greedy over the undecided texts (u, v: the edges among them, u earlier), one at a
    time in order (see `greedy_stars`)."""
    sort = np.argsort(u, kind="stable")
    u, v = u[sort], v[sort]
    starts = np.searchsorted(u, np.arange(n + 1))
    for t in np.flatnonzero(state == 0):
        if state[t] != 0:
            continue
        state[t] = 1
        later = v[starts[t]:starts[t + 1]]
        state[later[state[later] == 0]] = 2
