"""LSH parameter maths: S-curves and the choice of (bands, rows). Pure Python.

A pair with Jaccard s shares at least one of b bands of r rows with
probability 1 - (1 - s**r)**b, an S-curve that bends near S* = (1/b)**(1/r).
Banding is a soft threshold, so the bend must sit *below* the verification
threshold T: a pair at T should become a candidate almost surely, while pairs
far below T (at `far_fraction * T`) should rarely do, since each of them is
verification work that grows with the archive.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from neardup_spark.config import MAX_NUM_PERM

TARGET_CATCH = 0.9  # below this at T, we tell the user to raise num_perm


def candidate_probability(s: float, bands: int, rows: int) -> float:
    """P(a pair with Jaccard `s` shares at least one band)."""
    if not 0.0 <= s <= 1.0:
        raise ValueError(f"jaccard must be in [0, 1], got {s}")
    return 1.0 - (1.0 - s**rows) ** bands


def s_star(bands: int, rows: int) -> float:
    """The S-curve's bend, (1/b)**(1/r): the usual stand-in for its 50% point (the
    probability there is 1 - (1 - 1/b)**b, 0.5 for b=1 and ~0.63 for many bands)."""
    return (1.0 / bands) ** (1.0 / rows)


def s_curve(bands: int, rows: int, step: float = 0.05) -> list[tuple[float, float]]:
    """[(jaccard, P(candidate))] on a grid from 0 to 1."""
    n = int(round(1.0 / step))
    return [(round(i * step, 10), candidate_probability(i * step, bands, rows)) for i in range(n + 1)]


@dataclass(frozen=True)
class LshParams:
    bands: int
    rows: int
    num_perm: int
    threshold: float
    chosen: bool  # True when derived from the threshold, False when pinned
    far_jaccard: float

    @property
    def s_star(self) -> float:
        return s_star(self.bands, self.rows)

    @property
    def p_at_threshold(self) -> float:
        return candidate_probability(self.threshold, self.bands, self.rows)

    @property
    def p_at_far(self) -> float:
        return candidate_probability(self.far_jaccard, self.bands, self.rows)

    def as_dict(self) -> dict:
        return {
            "bands": self.bands,
            "rows": self.rows,
            "num_perm": self.num_perm,
            "used_perm": self.bands * self.rows,
            "threshold": self.threshold,
            "chosen_from_threshold": self.chosen,
            "s_star": round(self.s_star, 4),
            "p_candidate_at_threshold": round(self.p_at_threshold, 6),
            "far_jaccard": round(self.far_jaccard, 4),
            "p_candidate_at_far_jaccard": round(self.p_at_far, 6),
        }


def choose_bands_rows(
    threshold: float,
    num_perm: int,
    far_fraction: float = 1.0 / 3.0,
    max_far_probability: float = 0.05,
) -> tuple[int, int]:
    """The (b, r) with b*r <= num_perm that best catches pairs at `threshold`.

    Among all (b, r) whose candidate probability at ``far_fraction * threshold``
    stays at or below ``max_far_probability``, take the one with the highest
    probability at the threshold; ties go to the lower far probability, then to
    fewer permutations used. If no (b, r) meets the far bound (tiny num_perm),
    the one with the lowest far probability is returned.

    Seed figures: T=0.3, P=128 gives b=42, r=3; T=0.8, P=128 gives b=25, r=5,
    not the b=9, r=13 whose bend sits above 0.8.
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    if num_perm < 1:
        raise ValueError(f"num_perm must be >= 1, got {num_perm}")
    choice = _Choice(max_far_probability)
    for visit in _visits(threshold, num_perm, far_fraction, max_far_probability):
        choice.offer(visit)
    return choice.pick


def _visits(threshold: float, num_perm: int, far_fraction: float, max_far_probability: float):
    """(bands, rows, p at threshold, p at far) of every (b, r) the choice weighs, b*r <= num_perm:
    for each rows, the bands up to the first whose far probability passes the bound (it only
    grows with more bands). `candidate_probability`'s arithmetic, each row power taken once."""
    far = far_fraction * threshold
    if not 0.0 <= far <= 1.0:  # candidate_probability's check, which this arithmetic skips
        raise ValueError(f"jaccard must be in [0, 1], got {far} (far_fraction * threshold)")
    for rows in range(1, num_perm + 1):
        miss_far, miss_t = 1.0 - far**rows, 1.0 - threshold**rows
        for bands in range(1, num_perm // rows + 1):
            p_far = 1.0 - miss_far**bands
            yield bands, rows, 1.0 - miss_t**bands, p_far
            if p_far > max_far_probability:
                break


class _Choice:
    """The choice among the visits offered so far (the first offered wins a tie).

    Among those within the far bound: the highest catch at the threshold, then the lowest
    far probability, then fewer permutations (rounded, so float noise does not pick a
    larger b*r for no real gain). If none is within it: the lowest far probability."""

    def __init__(self, max_far_probability: float):
        self._bound = max_far_probability
        self._best = self._fallback = None  # (key, (bands, rows))

    def offer(self, visit) -> None:
        bands, rows, p_t, p_far = visit
        fallback = ((p_far, -p_t, bands * rows), (bands, rows))
        if self._fallback is None or fallback[0] < self._fallback[0]:
            self._fallback = fallback
        if p_far <= self._bound:
            best = ((-round(p_t, 9), round(p_far, 9), bands * rows), (bands, rows))
            if self._best is None or best[0] < self._best[0]:
                self._best = best

    @property
    def pick(self) -> tuple[int, int]:
        return (self._best or self._fallback)[1]


def resolve(
    threshold: float,
    num_perm: int,
    bands: int = 0,
    rows: int = 0,
    far_fraction: float = 1.0 / 3.0,
    max_far_probability: float = 0.05,
) -> LshParams:
    """Pinned (bands, rows) when given, else the choice of `choose_bands_rows`."""
    chosen = bands == 0 and rows == 0
    if chosen:
        bands, rows = choose_bands_rows(threshold, num_perm, far_fraction, max_far_probability)
    elif bands * rows > num_perm or bands < 1 or rows < 1:
        raise ValueError(f"bands*rows must be in [1, num_perm={num_perm}]; got bands={bands}, rows={rows}")
    return LshParams(bands, rows, num_perm, threshold, chosen, far_fraction * threshold)


def catching(
    threshold: float,
    num_perm: int,
    min_probability: float = 0.95,
    far_fraction: float = 1.0 / 3.0,
    max_far_probability: float = 0.05,
) -> tuple[int, int]:
    """(b, r) that make pairs at `threshold` candidates with probability >= min_probability.

    The automatic choice when it does; else, among the (b, r) that do, the
    one with the fewest far candidates (p at far_fraction * threshold); else
    (num_perm too small) the automatic choice, whose probability tells.
    """
    bands, rows = choose_bands_rows(threshold, num_perm, far_fraction, max_far_probability)
    if candidate_probability(threshold, bands, rows) >= min_probability:
        return bands, rows
    far = far_fraction * threshold
    best_key, best = None, None
    for r in range(1, num_perm + 1):
        for b in range(1, num_perm // r + 1):
            if candidate_probability(threshold, b, r) >= min_probability:
                key = (round(candidate_probability(far, b, r), 9), b * r)
                if best_key is None or key < best_key:
                    best_key, best = key, (b, r)
                break  # more bands only raise the far probability
    return best if best is not None else (bands, rows)


def perm_needed(
    threshold: float,
    target: float = TARGET_CATCH,
    far_fraction: float = 1.0 / 3.0,
    max_far_probability: float = 0.05,
    limit: int = MAX_NUM_PERM,
) -> int | None:
    """Smallest num_perm (multiple of 8) whose automatic choice catches pairs at
    `threshold` with probability >= target; None if none up to `limit`."""
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    # The choice for p weighs exactly the visits for `limit` with b*r <= p (in the same
    # order), so one pass over them in order of b*r gives every p's choice: calling
    # choose_bands_rows for each p took ~7 s at threshold 0.2, on the driver, every run.
    # Both keys end in b*r, so a tie can only be between visits of one b*r, which the
    # stable sort keeps in the order choose_bands_rows meets them.
    visits = sorted(_visits(threshold, limit, far_fraction, max_far_probability), key=lambda v: v[0] * v[1])
    choice, at = _Choice(max_far_probability), 0
    for p in range(8, limit + 1, 8):
        while at < len(visits) and visits[at][0] * visits[at][1] <= p:
            choice.offer(visits[at])
            at += 1
        b, r = choice.pick
        if candidate_probability(threshold, b, r) >= target:
            return p
    return None


@dataclass(frozen=True)
class Caught:
    """What a run's verified pairs say about its LSH: `verified` near pairs, `near` of them within
    NEAR of the threshold, and `missed`, the pairs at or above the threshold that LSH did not
    propose, estimated (each verified pair of Jaccard s stands for 1 / p(s) pairs of its kind)."""

    verified: int
    near: int
    missed: float


NEAR = 0.05  # "near the threshold": Jaccard in [T, T + NEAR)
MISS_WORTH_ADVICE = 0.01  # an estimated miss below this share of the verified pairs needs no advice


def advice(params: LshParams, far_fraction: float, max_far_probability: float,
           caught: Caught | None = None) -> list[str]:
    """Human warnings about a parameter set: weak catch rate, bend above T. With `caught` (a
    run's measured figures) the catch rate is told as what it cost this run."""
    notes = []
    if caught is not None and params.p_at_threshold < TARGET_CATCH:
        notes.append(_measured(params, caught, far_fraction, max_far_probability))
    elif params.p_at_threshold < TARGET_CATCH:
        need = perm_needed(params.threshold, TARGET_CATCH, far_fraction, max_far_probability)
        more = (
            f"num_perm={need} would reach {TARGET_CATCH:.0%} with the far-pair bound kept"
            if need
            else f"no num_perm up to {MAX_NUM_PERM} does with the far-pair bound kept; loosen lsh.max_far_probability"
        )
        if not params.chosen:
            more = (f"bands x rows are pinned ({params.bands} x {params.rows}); unset lsh.bands and lsh.rows "
                    f"to have them chosen for the threshold ({more})")
        above = min(1.0, params.threshold + 0.2)
        notes.append(
            f"pairs at exactly the threshold {params.threshold:g} become candidates with probability "
            f"{params.p_at_threshold:.3f} (< {TARGET_CATCH:.0%}); {more}. "
            f"At Jaccard {above:.2f} the probability is "
            f"{candidate_probability(above, params.bands, params.rows):.3f} (see the S-curve)."
        )
    if params.s_star > params.threshold:
        notes.append(
            f"the S-curve bend S*={params.s_star:.3f} is above the threshold {params.threshold:g}: "
            "many true pairs just above the threshold will be missed"
        )
    return notes


def _measured(params: LshParams, caught: Caught, far_fraction: float, max_far_probability: float) -> str:
    """The catch rate at the threshold, as this run's figures: pairs near it and pairs missed."""
    share = caught.missed / caught.verified if caught.verified else 0.0
    p_near = candidate_probability(min(1.0, params.threshold + NEAR), params.bands, params.rows)
    note = (f"{caught.near:,} of {caught.verified:,} verified pairs lie within {NEAR:g} of the threshold "
            f"{params.threshold:g}, where a pair becomes a candidate with p = {params.p_at_threshold:.3f} to "
            f"{p_near:.3f}; LSH missed an estimated {caught.missed:,.0f} pairs at or above the threshold "
            f"({share:.1%} of those verified; each verified pair of Jaccard s counts for 1/p(s)).")
    if share < MISS_WORTH_ADVICE:
        return note + " Nothing to change."
    if not params.chosen:
        return note + (f" bands x rows are pinned ({params.bands} x {params.rows}): unset lsh.bands and "
                       "lsh.rows to have them chosen for the threshold.")
    need = perm_needed(params.threshold, TARGET_CATCH, far_fraction, max_far_probability)
    if need:
        return note + (f" num_perm={need} would catch {TARGET_CATCH:.0%} at the threshold, at about "
                       f"{need / params.num_perm:.1f}x the signature cost.")
    return note + " Raise num_perm to catch more (neardup params shows the S-curve)."


def format_report(params: LshParams, far_fraction: float, max_far_probability: float, step: float = 0.05) -> str:
    """The text `neardup params` prints: the choice, its figures, the S-curve."""
    lines = [
        f"threshold        {params.threshold:g}",
        f"num_perm         {params.num_perm} ({params.bands * params.rows} used)",
        f"bands x rows     {params.bands} x {params.rows}" + ("  (chosen)" if params.chosen else "  (pinned)"),
        f"S* (bend)        {params.s_star:.4f}",
        f"P(candidate) at threshold {params.threshold:g}: {params.p_at_threshold:.4f}",
        f"P(candidate) at far Jaccard {params.far_jaccard:.3g}: {params.p_at_far:.4f}",
    ]
    for note in advice(params, far_fraction, max_far_probability):
        lines.append(f"warning: {note}")
    lines.append("")
    lines.append("jaccard  P(candidate)")
    for s, p in s_curve(params.bands, params.rows, step):
        mark = "  <- threshold" if abs(s - params.threshold) < step / 2 else ""
        lines.append(f"{s:7.2f}  {p:12.4f}  {'#' * int(round(p * 40))}{mark}")
    return "\n".join(lines)


def expected_recall(jaccards, bands: int, rows: int) -> float:
    """Mean candidate probability over a list of true-pair Jaccards (an S-curve oracle)."""
    values = list(jaccards)
    if not values:
        return 1.0
    return math.fsum(candidate_probability(j, bands, rows) for j in values) / len(values)


def lsh_params(cfg) -> LshParams:
    """The LSH parameters a validated Config asks for."""
    return resolve(
        cfg.verify.threshold,
        cfg.minhash.num_perm,
        cfg.lsh.bands,
        cfg.lsh.rows,
        cfg.lsh.far_fraction,
        cfg.lsh.max_far_probability,
    )
