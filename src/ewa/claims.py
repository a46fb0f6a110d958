"""`ewa claims`: test the study's four claims on one run's alpha grid, each with a paired bootstrap CI.

    ewa claims --evals alpha=0:a.parquet alpha=1:b.parquet ... --ensembles ensembles.csv \
        --out results/frontier/{benchmark}/{setting}/claims.csv

Alpha 0 is the low-coverage checkpoint, alpha 1 the high-coverage one. Every claim is a difference of
per-problem rates, averaged over problems; its CI resamples problems, identically for every alpha.
`scripts/science.py` combines the claims.csv of several seeds into the README's table.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ewa.frontier import AlphaGrid, load_grid, parse_eval_spec
from ewa.io import atomic_path, provenance, sha256_file, write_json
from ewa.metrics import bootstrap_counts
from ewa.sandbox.types import VERDICTS

# "ce" is part of "corr"; it is kept apart to show where extrapolation breaks the model's syntax.
SHARES = {"opt": ("TLE", "MLE"), "corr": ("WA", "RE", "CE"), "ac": ("AC",), "ce": ("CE",)}
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
    return {name: grid.counts[..., [VERDICTS.index(v) for v in verdicts]].sum(-1) / n
            for name, verdicts in SHARES.items()}


def mean_ci(values: np.ndarray, boot: np.ndarray) -> tuple[float, float, float]:
    """Mean over problems with a 95% bootstrap CI (boot: resample counts [reps, problems])."""
    means = (boot @ values) / boot.sum(1)
    return float(values.mean()), float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


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
    solved = grid.counts[..., VERDICTS.index("AC")] > 0  # [problem, alpha], within the n samples drawn
    return (f"headroom: {int(solved.any(1).sum())} of {len(solved)} problems solved by some alpha, "
            f"{int(solved.sum(0).max())} by the best single one")


def per_alpha(grid: AlphaGrid) -> pd.DataFrame:
    s = shares(grid)
    return pd.DataFrame({"alpha": grid.alphas, **{k: s[k].mean(0) for k in s}})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--evals", nargs="+", required=True, help="alpha=A:PATH evaluation tables (as for ewa frontier)")
    parser.add_argument("--ensembles", default=None, help="ensembles.csv from ewa frontier (claim 4)")
    parser.add_argument("--out", required=True, help="claims.csv; claims.html and per_alpha.csv are written beside it")
    parser.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples over problems")
    parser.add_argument("--seed", type=int, default=0)


def run(args: argparse.Namespace) -> None:
    specs = [parse_eval_spec(s) for s in args.evals]
    grid = load_grid(specs)
    ensembles = pd.read_csv(args.ensembles) if args.ensembles else None
    table = measure(grid, ensembles, args.bootstrap, args.seed)
    out = Path(args.out)
    with atomic_path(out) as tmp:
        table.to_csv(tmp, index=False)
    with atomic_path(out.with_name("per_alpha.csv")) as tmp:
        per_alpha(grid).to_csv(tmp, index=False)
    shown = table[["title", "measure", "value", "ci_lo", "ci_hi", "verdict", "note"]]
    with atomic_path(out.with_suffix(".html")) as tmp:
        Path(tmp).write_text(shown.to_html(index=False, float_format=lambda v: f"{v:+.3f}"))
    write_json(out.with_suffix(".provenance.json"), provenance(
        {"bootstrap": args.bootstrap, "seed": args.seed, "alphas": grid.alphas.tolist(),
         "evals": {str(p): sha256_file(p) for _, p in specs},
         "ensembles": sha256_file(args.ensembles) if args.ensembles else None}))
    for r in table.itertuples():
        print(f"{r.title}: {r.value:+.3f} [{r.ci_lo:+.3f}, {r.ci_hi:+.3f}] {r.verdict} {r.note}".rstrip())
