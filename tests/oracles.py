"""Brute-force references the pipeline is checked against (plain Python)."""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict

from neardup_spark.kernels.normalise import normalise_text


def word_shingles(norm: str, k: int) -> frozenset:
    words = norm.split()
    if not words:
        return frozenset()
    if len(words) < k:
        return frozenset([tuple(words)])
    return frozenset(tuple(words[i : i + k]) for i in range(len(words) - k + 1))


def exact_groups(rows, id_col="id", text_col="text"):
    """{doc id: representative id (smallest id with the same normalised text)}; empty texts map to None."""
    by_text = defaultdict(list)
    rep = {}
    for r in rows:
        norm = normalise_text(r[text_col]) if r[text_col] is not None else ""
        if norm:
            by_text[norm].append(r[id_col])
        else:
            rep[r[id_col]] = None
    for ids in by_text.values():
        for i in ids:
            rep[i] = min(ids)
    return rep


def jaccard_pairs(rows, threshold, k=5, id_col="id", text_col="text"):
    """{(a, b): (jaccard, containment_a, containment_b)} over exact-pass representatives, a < b,
    for every pair with exact Jaccard >= threshold (inverted index, no all-pairs loop)."""
    rep = exact_groups(rows, id_col, text_col)
    sets = {}
    for r in rows:
        i = r[id_col]
        if rep[i] == i:
            sets[i] = word_shingles(normalise_text(r[text_col]), k)
    postings = defaultdict(list)
    for i, s in sets.items():
        for sh in s:
            postings[sh].append(i)
    inter = Counter()
    for ids in postings.values():
        inter.update(itertools.combinations(sorted(ids), 2))
    out = {}
    for (a, b), n in inter.items():
        j = n / (len(sets[a]) + len(sets[b]) - n)
        if j >= threshold:
            out[(a, b)] = (j, n / len(sets[a]), n / len(sets[b]))
    return out


def union_find_clusters(ids, edges):
    """{id: smallest id of its connected component}."""
    parent = {i: i for i in ids}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {i: find(i) for i in ids}


def sequential_stars(ids, text, pairs) -> dict:
    """Keeper linkage, one text at a time: {id: its keeper id}. Ids are in keeper order
    (smallest first); a text (ids with the same `text[id]`) ranks by its first id. A text no
    keeper took becomes one and takes every later text it has a pair with."""
    first = {}
    for i in sorted(ids):
        first.setdefault(text[i], i)
    adj = {}
    for a, b in pairs:
        ta, tb = first[text[a]], first[text[b]]
        if ta != tb:
            adj.setdefault(ta, set()).add(tb)
            adj.setdefault(tb, set()).add(ta)
    keeper = {}
    for t in sorted(set(first.values())):
        if t in keeper:
            continue
        keeper[t] = t
        for u in sorted(adj.get(t, ())):
            if u > t and u not in keeper:
                keeper[u] = t
    return {i: keeper[first[text[i]]] for i in ids}


def cluster_pairs(labels: dict) -> set:
    """All (a, b), a < b, of documents with the same label."""
    groups = defaultdict(list)
    for i, c in labels.items():
        groups[c].append(i)
    return {(a, b) for members in groups.values() for a, b in itertools.combinations(sorted(members), 2)}


def split_into_nights(rows, folder, seed: int, nights: int = 3) -> list[str]:
    """rows (a DataFrame) dealt at random into `nights` JSON Lines files under folder
    (batch0.jsonl ...): an archive and the nights after it. Returns their paths."""
    import numpy as np

    night = np.random.default_rng(seed).integers(0, nights, len(rows))
    paths = []
    for k in range(nights):
        path = folder / f"batch{k}.jsonl"
        rows[night == k].to_json(path, orient="records", lines=True, date_format="iso")
        paths.append(str(path))
    return paths
