"""The study's four claims tested on one run's alpha grid, each with a paired bootstrap CI.

Alpha 0 is the low-coverage checkpoint, alpha 1 the high-coverage one. Every claim is a difference of
per-problem rates, averaged over problems; its CI resamples problems, identically for every alpha.
ewa.analysis.science combines the claims.csv of several seeds into the README's table.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ewa.analysis.bootstrap import bootstrap_counts, mean_ci
from ewa.analysis.frontier import AlphaGrid
from ewa.verdicts import AC, CE, FAILURE_VERDICTS, columns

# "ce" is part of "corr"; it is kept apart to show where extrapolation breaks the model's syntax.
SHARES = {"opt": FAILURE_VERDICTS["optimization"], "corr": FAILURE_VERDICTS["correctness"], "ac": (AC,), "ce": (CE,)}
OUTPUT_FILES = ("claims.csv", "per_alpha.csv", "claims.html", "provenance.json")
BETWEEN_TOLERANCE = 0.02  # an interpolated rate may overshoot the endpoints' range by sampling noise


@dataclass(frozen=True)
class Claim:
    key: str
    title: str
    measure: str
    expect: str  # "<0", ">0", "~0" (within +-0.05), ">=0", "all" (a share that should be 1)


CLAIMS = (
    Claim("opt_high_minus_low", "1. optimization failures fall as coverage rises", "TLE+MLE share, alpha 1 minus alpha 0", "<0"),
    Claim("corr_high_minus_low", "2. correctness failures rise as coverage rises", "WA+RE+CE share, alpha 1 minus alpha 0", ">0"),
    Claim("ac_high_minus_low", "2b. ... with solve rate roughly flat", "AC share, alpha 1 minus alpha 0 (flat: within ±0.05)", "~0"),
    Claim("interpolated_between", "3a. interpolated alphas lie between the endpoints", f"share of (alpha, failure rate) pairs within {BETWEEN_TOLERANCE} of the endpoints' range", "all"),
    Claim("opt_below_low", "3b. below 0, more optimization failures", "TLE+MLE share, smallest alpha minus alpha 0", ">0"),
    Claim("corr_below_low", "3c. below 0, fewer correctness failures", "WA+RE+CE share, smallest alpha minus alpha 0", "<0"),
    Claim("opt_beyond_high", "3d. beyond 1, fewer optimization failures", "TLE+MLE share, largest alpha minus alpha 1", "<0"),
    Claim("corr_beyond_high", "3e. beyond 1, more correctness failures", "WA+RE+CE share, largest alpha minus alpha 1", ">0"),
    Claim("ensemble_uniform", "4a. matched-budget ensemble >= best single checkpoint", "pass@B, uniform mix of all alphas minus the best single alpha (chosen on the same problems)", ">=0"),
    Claim("ensemble_selected", "4b. ... with both chosen on other problems", "pass@B on held-out test problems, dev-selected ensemble minus dev-selected single alpha", ">=0"),
)


def shares(grid: AlphaGrid) -> dict[str, np.ndarray]:
    """Per-problem verdict shares [problem, alpha] for optimization failures, correctness failures, AC."""
    n = grid.counts.sum(-1)
    return {name: grid.counts[..., columns(verdicts)].sum(-1) / n
            for name, verdicts in SHARES.items()}


def verdict(expect: str, point: float, lo: float, hi: float) -> str:
    """reproduced: the CI agrees; direction only: the point does, the CI does not exclude the opposite."""
    if np.isnan(point):
        return "n/a"
    if expect in ("<0", ">0"):
        sign = -1 if expect == "<0" else 1
        if (hi if sign < 0 else -lo) < 0:
            return "reproduced"
        return "direction only" if sign * point > 0 else "not reproduced"
    if expect == "~0":
        return "reproduced" if abs(point) <= 0.05 else "not reproduced"
    if expect == ">=0":
        if lo >= 0 or point >= 0:
            return "reproduced" if lo >= 0 else "within CI"
        return "within CI" if hi >= 0 else "not reproduced"
    return "reproduced" if point >= 0.99 else ("partly" if point >= 0.5 else "not reproduced")


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
        "opt_below_low": diff("opt", first, lo),
        "corr_below_low": diff("corr", first, lo),
        "opt_beyond_high": diff("opt", last, hi),
        "corr_beyond_high": diff("corr", last, hi),
    }
    inner = [i for i in range(len(a)) if 0 < a[i] < 1]
    rates = {k: s[k].mean(0) for k in s}
    between = [min(rates[k][lo], rates[k][hi]) - BETWEEN_TOLERANCE <= rates[k][i]
               <= max(rates[k][lo], rates[k][hi]) + BETWEEN_TOLERANCE for k in ("opt", "corr") for i in inner]
    values["interpolated_between"] = (float(np.mean(between)),) * 3 if between else nan
    values["ensemble_uniform"] = ensemble_gain(ensembles, "all", "uniform all")
    values["ensemble_selected"] = ensemble_gain(ensembles, "test", "optimized (dev-selected)")
    rows = []
    for c in CLAIMS:
        point, low, high = values[c.key]
        why = note(c.key, rates, lo, hi) or (ceiling(grid) if c.key.startswith("ensemble") else "")
        rows.append({"claim": c.key, "title": c.title, "measure": c.measure, "expect": c.expect,
                     "value": point, "ci_lo": low, "ci_hi": high,
                     "verdict": "no room" if why.startswith("no room") else verdict(c.expect, point, low, high),
                     "note": why})
    return pd.DataFrame(rows)


def ensemble_gain(ensembles: pd.DataFrame | None, split: str, name: str) -> tuple[float, float, float]:
    if ensembles is None:
        return (float("nan"),) * 3
    row = ensembles[(ensembles["split"] == split) & (ensembles["ensemble"] == name)].head(1)
    if row.empty:
        return (float("nan"),) * 3
    return tuple(float(row[c].iloc[0]) for c in ("gain_vs_best_single", "gain_lo", "gain_hi"))


def note(key: str, rates: dict, lo: int, hi: int) -> str:
    """Where a trend has nowhere left to go, say so: a rate at 0 cannot fall further."""
    if key == "opt_beyond_high" and rates["opt"][hi] == 0:
        return "no room: alpha 1 has no TLE/MLE"
    if key == "corr_below_low" and rates["corr"][lo] == 0:
        return "no room: alpha 0 has no WA/RE/CE"
    return ""


def ceiling(grid: AlphaGrid) -> str:
    """An ensemble can only add problems some alpha solves and the best one does not."""
    solved = grid.c > 0  # [problem, alpha], within the n samples drawn
    return (f"headroom: {int(solved.any(1).sum())} of {len(solved)} problems solved by some alpha, "
            f"{int(solved.sum(0).max())} by the best single one")


def per_alpha(grid: AlphaGrid) -> pd.DataFrame:
    s = shares(grid)
    return pd.DataFrame({"alpha": grid.alphas, **{k: s[k].mean(0) for k in s}})
