"""The study's four claims tested on one run's alpha grid, each with a paired bootstrap CI.

Alpha 0 is the low-coverage checkpoint, alpha 1 the high-coverage one. Every claim but 3a is a difference
of per-problem rates, averaged over problems; its CI resamples problems, identically for every alpha.
A claim is reproduced only when its whole CI lies strictly on the claimed side. ewa.analysis.science
combines the claims.csv of several seeds into the table of docs/results.md.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ewa.analysis.bootstrap import bootstrap_counts, mean_ci, percentile_interval, resampled_means
from ewa.analysis.frontier import AlphaGrid
from ewa.verdicts import AC, CE, FAILURE_VERDICTS, columns

# "ce" is part of "corr"; it is kept apart to show where extrapolation breaks the model's syntax.
SHARES = {"opt": FAILURE_VERDICTS["optimization"], "corr": FAILURE_VERDICTS["correctness"], "ac": (AC,), "ce": (CE,)}
OUTPUT_FILES = ("claims.csv", "per_alpha.csv", "headroom.json", "claims.html", "provenance.json")
FLAT = 0.05  # claim 2b: a solve-rate change whose whole CI lies within +-FLAT counts as flat
# Claim 3a: an interpolated rate may overshoot the endpoints' range by sampling noise, measured as this
# many bootstrap standard errors of its overshoot (about a 95% interval's half-width).
BETWEEN_SES = 2.0
NO_ENSEMBLE = "no ensemble chosen"  # the allocation put the whole budget on one alpha


@dataclass(frozen=True)
class Claim:
    key: str
    title: str
    measure: str
    expect: str  # "<0", ">0", "~0" (within +-FLAT), "all" (a share that should be 1)


CLAIMS = (
    Claim("opt_high_minus_low", "1. optimization failures fall as coverage rises", "TLE+MLE share, alpha 1 minus alpha 0", "<0"),
    Claim("corr_high_minus_low", "2. correctness failures rise as coverage rises", "WA+RE+CE share, alpha 1 minus alpha 0", ">0"),
    Claim("ac_high_minus_low", "2b. ... with solve rate roughly flat", f"AC share, alpha 1 minus alpha 0 (flat: the whole CI within ±{FLAT})", "~0"),
    Claim("interpolated_between", "3a. interpolated alphas lie between the endpoints", f"share of (alpha, failure rate) pairs within {BETWEEN_SES:g} bootstrap SEs of the endpoints' range", "all"),
    Claim("opt_below_low", "3b. below 0, more optimization failures", "TLE+MLE share, smallest alpha minus alpha 0", ">0"),
    Claim("corr_below_low", "3c. below 0, fewer correctness failures", "WA+RE+CE share, smallest alpha minus alpha 0", "<0"),
    Claim("opt_beyond_high", "3d. beyond 1, fewer optimization failures", "TLE+MLE share, largest alpha minus alpha 1", "<0"),
    Claim("corr_beyond_high", "3e. beyond 1, more correctness failures", "WA+RE+CE share, largest alpha minus alpha 1", ">0"),
    Claim("ensemble_uniform", "4a. matched-budget ensemble beats the best single checkpoint", "pass@B, uniform mix of all alphas minus the best single alpha (chosen on the same problems)", ">0"),
    Claim("ensemble_selected", "4b. ... with both chosen on other problems", "pass@B on held-out test families, dev-selected allocation minus dev-selected single alpha", ">0"),
)
# Which row of ensembles.csv (split, ensemble) each ensemble claim reads.
ENSEMBLE_ROWS = {"ensemble_uniform": ("all", "uniform all"), "ensemble_selected": ("test", "optimized (dev-selected)")}


def shares(grid: AlphaGrid) -> dict[str, np.ndarray]:
    """Per-problem verdict shares [problem, alpha] for optimization failures, correctness failures, AC."""
    n = grid.counts.sum(-1)
    return {name: grid.counts[..., columns(verdicts)].sum(-1) / n
            for name, verdicts in SHARES.items()}


def verdict(expect: str, point: float, lo: float, hi: float) -> str:
    """reproduced: the whole CI lies strictly on the claimed side; direction only (a sign) or point only
    (flat, all): the point estimate does and the CI does not; partly: most of a share."""
    if np.isnan(point):
        return "n/a"
    if expect in ("<0", ">0"):
        sign = -1 if expect == "<0" else 1
        if sign * (hi if sign < 0 else lo) > 0:  # <0: hi < 0; >0: lo > 0 (a CI touching 0 is not enough)
            return "reproduced"
        return "direction only" if sign * point > 0 else "not reproduced"
    if expect == "~0":
        if -FLAT < lo and hi < FLAT:
            return "reproduced"
        return "point only" if abs(point) < FLAT else "not reproduced"
    if lo >= 1 - 1e-9:  # "all": a share cannot exceed 1, so the whole CI must sit at 1
        return "reproduced"
    return "point only" if point >= 1 - 1e-9 else ("partly" if point >= 0.5 else "not reproduced")


def measure(grid: AlphaGrid, ensembles: pd.DataFrame | None, reps: int, seed: int) -> pd.DataFrame:
    a = grid.alphas
    if not (np.isclose(a, 0).any() and np.isclose(a, 1).any()):
        raise ValueError(f"the alpha grid must contain the endpoints 0 and 1, got {a.tolist()}")
    lo, hi = int(np.argmin(abs(a))), int(np.argmin(abs(a - 1)))
    first, last = 0, len(a) - 1
    s = shares(grid)
    boot = bootstrap_counts(len(grid.problem_ids), reps, seed)
    nan = (float("nan"),) * 3
    diff = lambda k, i, j: mean_ci(s[k][:, i] - s[k][:, j], boot) if i != j else nan  # noqa: E731
    values = {
        "opt_high_minus_low": diff("opt", hi, lo),
        "corr_high_minus_low": diff("corr", hi, lo),
        "ac_high_minus_low": diff("ac", hi, lo),
        "interpolated_between": interpolated_between(s, lo, hi, [i for i in range(len(a)) if 0 < a[i] < 1], boot),
        "opt_below_low": diff("opt", first, lo),
        "corr_below_low": diff("corr", first, lo),
        "opt_beyond_high": diff("opt", last, hi),
        "corr_beyond_high": diff("corr", last, hi),
    }
    chosen = {}  # ensemble claim -> its allocation, "alpha:b ..."
    for key, (split, name) in ENSEMBLE_ROWS.items():
        values[key], chosen[key] = ensemble_gain(ensembles, split, name)
    rates = {k: s[k].mean(0) for k in s}
    rows = []
    for c in CLAIMS:
        point, low, high = values[c.key]
        why = note(c.key, rates, lo, hi) or (ceiling(grid) if c.key in ENSEMBLE_ROWS else "")
        if why.startswith("no room"):
            outcome = "no room"
        elif len(chosen.get(c.key, "").split()) == 1:  # a single alpha is not an ensemble, whatever it gains
            outcome = NO_ENSEMBLE
        else:
            outcome = verdict(c.expect, point, low, high)
        rows.append({"claim": c.key, "title": c.title, "measure": c.measure, "expect": c.expect,
                     "value": point, "ci_lo": low, "ci_hi": high, "verdict": outcome,
                     "allocation": chosen.get(c.key, ""), "note": why})
    return pd.DataFrame(rows)


def interpolated_between(s: dict, lo: int, hi: int, inner: list[int], boot: np.ndarray) -> tuple[float, float, float]:
    """Claim 3a: the share of (interpolated alpha, failure rate) pairs whose rate lies within BETWEEN_SES
    bootstrap SEs of the endpoints' range, with a percentile CI of that share over the same resamples.

    A pair's overshoot is how far its rate lies outside [min, max] of the endpoints' rates (negative
    inside); its tolerance is BETWEEN_SES times the overshoot's standard error over the resamples, so
    the test is as sharp as the data allow rather than a fixed width. Without resamples the tolerance
    is 0 and there is no CI.
    """
    if not inner:
        return (float("nan"),) * 3
    per_problem = np.stack([s["opt"], s["corr"]], axis=-1)  # (P, A, 2 rates)
    rates = np.concatenate([per_problem.mean(0)[None], resampled_means(per_problem, boot)])  # (1 + R, A, 2)
    ends = rates[:, [lo, hi]]  # (1 + R, 2 endpoints, 2 rates)
    overshoot = np.maximum(rates[:, inner] - ends.max(1)[:, None], ends.min(1)[:, None] - rates[:, inner])
    resamples = overshoot[1:]
    tolerance = BETWEEN_SES * resamples.std(0, ddof=1) if len(resamples) > 1 else np.zeros(overshoot.shape[1:])
    between = (overshoot <= tolerance).reshape(len(overshoot), -1).mean(1)  # share per (full, resample...)
    if len(resamples) < 2:
        return float(between[0]), float("nan"), float("nan")
    ci_lo, ci_hi = percentile_interval(between[1:])
    return float(between[0]), float(ci_lo), float(ci_hi)


def ensemble_gain(ensembles: pd.DataFrame | None, split: str, name: str) -> tuple[tuple[float, float, float], str]:
    """(gain over the reference single, CI) and the allocation of one row of ensembles.csv."""
    nan = (float("nan"),) * 3
    if ensembles is None:
        return nan, ""
    row = ensembles[(ensembles["split"] == split) & (ensembles["ensemble"] == name)].head(1)
    if row.empty:
        return nan, ""
    allocation = row["allocation"].iloc[0]
    return (tuple(float(row[c].iloc[0]) for c in ("gain_vs_best_single", "gain_lo", "gain_hi")),
            allocation if isinstance(allocation, str) else "")


def note(key: str, rates: dict, lo: int, hi: int) -> str:
    """Where a trend has nowhere left to go, say so: a rate at 0 cannot fall further."""
    if key == "opt_beyond_high" and rates["opt"][hi] == 0:
        return "no room: alpha 1 has no TLE/MLE"
    if key == "corr_below_low" and rates["corr"][lo] == 0:
        return "no room: alpha 0 has no WA/RE/CE"
    return ""


def headroom(grid: AlphaGrid) -> dict:
    """An ensemble can only add problems some alpha solves and the best one does not (within the n
    samples drawn): how many problems each is, for this run."""
    solved = grid.c > 0  # [problem, alpha]
    best = int(np.argmax(solved.sum(0)))  # ties: the lowest alpha
    return {"n_problems": len(solved), "solved_by_some_alpha": int(solved.any(1).sum()),
            "solved_by_best_single": int(solved[:, best].sum()), "best_single_alpha": float(grid.alphas[best])}


def ceiling(grid: AlphaGrid) -> str:
    room = headroom(grid)
    return (f"headroom: {room['solved_by_some_alpha']} of {room['n_problems']} problems solved by some alpha, "
            f"{room['solved_by_best_single']} by the best single one")


def per_alpha(grid: AlphaGrid) -> pd.DataFrame:
    s = shares(grid)
    return pd.DataFrame({"alpha": grid.alphas, **{k: s[k].mean(0) for k in s}})
