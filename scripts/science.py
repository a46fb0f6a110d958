"""Measure the study's four claims on finished runs and write them into the README.

    python scripts/science.py RUN_DIR [RUN_DIR ...] [--benchmark mini] [--setting reasoning] [--readme README.md]

Each RUN_DIR holds one seed's `results/` (the working directory of a `make demo` or `make science`
run). Every number comes from the pipeline's own evaluation tables; CIs are paired bootstraps over
problems, and the seed spread is the standard deviation of the point estimates across runs.
"""
from __future__ import annotations

import argparse
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from ewa.frontier import load_grid
from ewa.metrics import bootstrap_counts
from ewa.sandbox.types import VERDICTS

OPT = [VERDICTS.index(v) for v in ("TLE", "MLE")]
CORR = [VERDICTS.index(v) for v in ("WA", "RE", "CE")]
START, END = "<!-- science:start -->", "<!-- science:end -->"


def grid_of(run: Path, benchmark: str, setting: str):
    specs = []
    for path in sorted((run / "results/evals").glob(f"alpha*/{benchmark}/{setting}.parquet")):
        specs.append((float(re.fullmatch(r"alpha([+-]\d+\.\d+)", path.parts[-3])[1]), path))
    if not specs:
        raise SystemExit(f"science: no evaluation tables for {benchmark}/{setting} under {run}/results/evals")
    return load_grid(specs)


def shares(grid):
    """Per-problem shares [p, a]: optimization failures, correctness failures, AC."""
    n = grid.counts.sum(-1)
    return {name: grid.counts[..., cols].sum(-1) / n
            for name, cols in (("opt", OPT), ("corr", CORR), ("ac", [0]))}


def paired(values: np.ndarray, boot: np.ndarray) -> tuple[float, float, float]:
    """Mean over problems of a per-problem quantity, with a 95% bootstrap CI (problems resampled)."""
    means = (boot @ values) / boot.sum(1)
    return float(values.mean()), float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def claims_of(run: Path, benchmark: str, setting: str, reps: int = 1000, seed: int = 0) -> dict:
    grid = grid_of(run, benchmark, setting)
    s, a = shares(grid), grid.alphas
    if not (np.isclose(a, 0).any() and np.isclose(a, 1).any()):
        raise SystemExit(f"science: {run}: the alpha grid must contain the endpoints 0 and 1, got {a.tolist()}")
    lo, hi = int(np.argmin(abs(a - 0))), int(np.argmin(abs(a - 1)))
    boot = bootstrap_counts(len(grid.problem_ids), reps, seed)  # counts[r, p]
    out = {
        "opt_high_minus_low": paired(s["opt"][:, hi] - s["opt"][:, lo], boot),
        "corr_high_minus_low": paired(s["corr"][:, hi] - s["corr"][:, lo], boot),
        "ac_high_minus_low": paired(s["ac"][:, hi] - s["ac"][:, lo], boot),
        "opt_beyond_high": paired(s["opt"][:, -1] - s["opt"][:, hi], boot),
        "opt_below_low": paired(s["opt"][:, 0] - s["opt"][:, lo], boot),
        "corr_beyond_high": paired(s["corr"][:, -1] - s["corr"][:, hi], boot),
        "corr_below_low": paired(s["corr"][:, 0] - s["corr"][:, lo], boot),
    }
    inner = [i for i in range(len(a)) if 0 < a[i] < 1]
    between = [min(s[k][:, lo].mean(), s[k][:, hi].mean()) - 0.02 <= s[k][:, i].mean()
               <= max(s[k][:, lo].mean(), s[k][:, hi].mean()) + 0.02 for k in ("opt", "corr") for i in inner]
    out["interpolated_between"] = (float(np.mean(between)) if between else float("nan"),) * 3
    ens = pd.read_csv(run / f"results/frontier/{benchmark}/{setting}/ensembles.csv")
    mix = ens[(ens["split"] == "all") & (ens["ensemble"] == "uniform all")].head(1)
    if len(mix):
        out["ensemble_gain"] = tuple(float(mix[c].iloc[0]) for c in ("gain_vs_best_single", "gain_lo", "gain_hi"))
    # An endpoint already at 0 leaves extrapolation no room to fall further: say so, not "failed".
    out["opt_at_floor"] = bool(s["opt"][:, hi].mean() == 0)
    out["alphas"] = a.tolist()
    out["per_alpha"] = {k: s[k].mean(0).tolist() for k in s}
    return out


ROWS = [
    ("1. optimization failures fall with coverage", "opt_high_minus_low", "<0", "TLE+MLE share, alpha 1 minus alpha 0"),
    ("2. correctness failures rise with coverage", "corr_high_minus_low", ">0", "WA+RE+CE share, alpha 1 minus alpha 0"),
    ("2b. solve rate roughly flat", "ac_high_minus_low", "~0", "AC share, alpha 1 minus alpha 0"),
    ("3a. interpolated alphas lie between the endpoints", "interpolated_between", "=1", "share of (alpha, rate) pairs within 0.02 of the endpoint range"),
    ("3b. extrapolation beyond 1 continues: fewer optimization failures", "opt_beyond_high", "<0", "TLE+MLE share, largest alpha minus alpha 1"),
    ("3c. extrapolation below 0 continues: more optimization failures", "opt_below_low", ">0", "TLE+MLE share, smallest alpha minus alpha 0"),
    ("3d. extrapolation beyond 1: more correctness failures", "corr_beyond_high", ">0", "WA+RE+CE share, largest alpha minus alpha 1"),
    ("4. matched-budget ensemble >= best single checkpoint", "ensemble_gain", ">=0", "pass@B of a uniform mix of all alphas minus the best single alpha"),
]


def verdict(sign: str, lo: float, hi: float, point: float) -> str:
    if np.isnan(point):
        return "n/a"
    if sign == "<0":
        return "reproduced" if hi < 0 else ("direction only" if point < 0 else "not reproduced")
    if sign == ">0":
        return "reproduced" if lo > 0 else ("direction only" if point > 0 else "not reproduced")
    if sign == ">=0":
        return "reproduced" if point >= 0 else "not reproduced"
    if sign == "~0":
        return "reproduced" if lo <= 0.05 and hi >= -0.05 and abs(point) <= 0.05 else "not reproduced"
    return "reproduced" if point >= 0.99 else ("partly" if point >= 0.5 else "not reproduced")


def section(runs: list[dict], names: list[str], benchmark: str, setting: str) -> str:
    first = runs[0]
    lines = [START, "", f"Measured by `scripts/science.py` on {benchmark} (held-out) / {setting}, "
             f"{len(runs)} seed(s): {', '.join(names)}. CI: 95% paired bootstrap over problems (first seed); "
             "spread: standard deviation across seeds.", "",
             "| claim | measure | value [95% CI] | seed spread | verdict |", "|---|---|---|---|---|"]
    for title, key, sign, measure in ROWS:
        if key not in first:
            lines.append(f"| {title} | {measure} | n/a | n/a | n/a |")
            continue
        point, lo, hi = first[key]
        spread = np.std([r[key][0] for r in runs if key in r]) if len(runs) > 1 else float("nan")
        spread_txt = f"±{spread:.3f}" if not np.isnan(spread) else "one seed"
        outcome = verdict(sign, lo, hi, point)
        if key == "opt_beyond_high" and first.get("opt_at_floor"):
            outcome = "no room: alpha 1 already has no TLE/MLE"
        lines.append(f"| {title} | {measure} | {point:+.3f} [{lo:+.3f}, {hi:+.3f}] | {spread_txt} | {outcome} |")
    lines += ["", "Per alpha (first seed):", "", "| alpha | " + " | ".join(f"{a:+.2f}" for a in first["alphas"]) + " |",
              "|---|" + "---|" * len(first["alphas"])]
    for k, label in (("opt", "TLE+MLE"), ("corr", "WA+RE+CE"), ("ac", "AC")):
        lines.append(f"| {label} | " + " | ".join(f"{v:.3f}" for v in first["per_alpha"][k]) + " |")
    lines += ["", f"![frontier](docs/frontier-{benchmark}-{setting}.png)", "", END]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--benchmark", default="mini")
    p.add_argument("--setting", default="reasoning")
    p.add_argument("--readme", type=Path, default=Path("README.md"))
    args = p.parse_args()
    runs = [claims_of(r, args.benchmark, args.setting) for r in args.runs]
    names = ["demo (seed 0)" if str(r) == "." else str(r) for r in args.runs]
    text = section(runs, names, args.benchmark, args.setting)
    plot = args.runs[0] / f"results/frontier/{args.benchmark}/{args.setting}/frontier.png"
    docs = args.readme.parent / "docs"
    docs.mkdir(exist_ok=True)
    shutil.copy(plot, docs / f"frontier-{args.benchmark}-{args.setting}.png")
    readme = args.readme.read_text()
    if START in readme:
        readme = readme[:readme.index(START)] + text + readme[readme.index(END) + len(END):]
    else:
        readme += "\n## Does the miniature reproduce the study?\n\n" + text + "\n"
    args.readme.write_text(readme)
    print(text)


if __name__ == "__main__":
    main()
