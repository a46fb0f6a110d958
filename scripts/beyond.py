"""docs/beyond.md's figure and results: the geometry of a config's merge families (--figure PNG), and the family
comparison of a finished run (--run DIR), checked against its registration in docs/registry.yaml first and
then recorded there as reported.

    python scripts/beyond.py --config configs/beyond.yaml --figure docs/beyond-geometry.png
    python scripts/beyond.py --config configs/beyond.yaml --run RUN_DIR --page docs/beyond.md [--publish]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from ewa.analysis.registry import REGISTRY_FILE, RegistryError, check, record_report
from ewa.config import ConfigError, load
from ewa.errors import UserError
from ewa.families import INIT, families
from ewa.io import write_text

ROOT = Path(__file__).resolve().parent.parent
START, END = "<!-- beyond:start -->", "<!-- beyond:end -->"


def figure(config: dict, out: Path) -> None:
    """The families in weight space, drawn in the plane of the first simplex's three regimes: its lattice
    (outside the triangle where a weight is negative), the alpha line on its low-high edge, and each
    trajectory from the init (drawn off the plane, as it generally is) through its regime and beyond."""
    from ewa.analysis.plots import _save, _simplex_colour, _ternary_xy, plt

    fams = families(config)
    simplex = next(f for f in fams if f.kind == "simplex")
    corners = dict(zip(simplex.sources, _ternary_xy(np.eye(3))))
    init_xy = np.array([-1.15, 0.95])  # a schematic place: the init is not in the regimes' plane

    def place(point) -> np.ndarray:
        return sum(w * (init_xy if s == INIT else corners[s]) for s, w in point.weights)

    fig, ax = plt.subplots(figsize=(6.4, 5.6))
    tri = np.array(list(corners.values()))
    ax.fill(tri[:, 0], tri[:, 1], facecolor="0.94", edgecolor="0.35", lw=1.0, zorder=0)
    weights = np.array(simplex.coords)
    xy = _ternary_xy(weights)
    inside = (weights >= -1e-9).all(1)
    colours = np.array([_simplex_colour(w) for w in weights])
    ax.scatter(xy[inside, 0], xy[inside, 1], c=colours[inside], s=70, edgecolors="0.2", zorder=3,
               label=f"{simplex.name}: inside the simplex")
    ax.scatter(xy[~inside, 0], xy[~inside, 1], c=colours[~inside], marker="D", s=50, edgecolors="0.2", zorder=3,
               label="outside it (a weight < 0)")
    styles = {"line": ("black", "-"), "trajectory": (None, "--")}
    for colour, family in zip(("tab:orange", "tab:blue", "tab:green"), (f for f in fams if f.kind != "simplex")):
        c, ls = styles[family.kind]
        pts = np.array([place(p) for p in family.points])
        ax.plot(pts[:, 0], pts[:, 1], ls, color=c or colour, lw=1.6, zorder=2, marker="o", ms=4,
                label=f"{family.name} ({family.kind}), alpha {family.coords[0][0]:g} to {family.coords[-1][0]:g}")
        ax.annotate(f"{family.coords[-1][0]:+g}", pts[-1], xytext=(5, -3), textcoords="offset points", fontsize=7,
                    color=c or colour)
    for name, (x, y) in corners.items():
        ax.annotate(f"theta_{name}", (x, y), xytext=(16, 4) if y > 0.5 else (0, -14), textcoords="offset points",
                    ha="center", fontsize=9, weight="bold")
    ax.scatter(*init_xy, s=80, c="white", edgecolors="black", zorder=4)
    ax.annotate("theta_init (off the plane)", init_xy, xytext=(0, -14), textcoords="offset points", ha="center",
                fontsize=9, weight="bold")
    ax.set_title("Merge families in weight space: sum_i w_i theta_i, weights summing to 1", fontsize=9)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.legend(loc="upper left", bbox_to_anchor=(0.0, -0.02), frameon=False, fontsize=7.5, ncol=1)
    _save(fig, out.with_suffix(""), ("png",))


def results(config: dict, run: Path, config_path: str, publish: bool) -> str:
    """The page's results section from the run's families and frontier outputs, after checking the run
    against its registration; with publish, the registration is recorded as reported."""
    seed = config["seed"]
    benchmark, setting = next(iter(config["benchmarks"])), config["sample"]["settings"][0]
    fam_dir = run / f"results/seed{seed}/families/{benchmark}/{setting}"
    front_dir = run / f"results/seed{seed}/frontier/{benchmark}/{setting}"
    registration = check(ROOT / REGISTRY_FILE, [(seed, fam_dir, front_dir)], ROOT)
    if publish:
        record_report(ROOT / REGISTRY_FILE, registration)
    comparison = pd.read_csv(fam_dir / "comparison.csv")
    points = pd.read_csv(fam_dir / "families.csv")
    ensembles = pd.read_csv(fam_dir / "ensembles.csv")
    summary = json.loads((fam_dir / "summary.json").read_text())
    ci = int(round(100 * config["evaluate"]["ci"]))
    lines = [f"Seed {seed} ({config_path}), {benchmark}, {setting} setting: {summary['models']} models, "
             f"{summary['n_problems']} problems, {summary['samples_per_problem_per_point']} samples per problem "
             f"each; registered at `{registration['commit'][:7]}` before it ran, and its outputs' provenance "
             "matches that commit and config. "
             f"Hypervolume of each family's front ({ci}% CIs: bootstrap over problem families, "
             f"{config['evaluate']['bootstrap']} resamples):", "",
             "| family a | family b | points a / b | HV a | HV b | HV a − b [CI] | a ahead in | b's front dominated by a | verdict |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in comparison.itertuples():
        lines.append(f"| {r.family_a} | {r.family_b} | {r.points_a} / {r.points_b} | {r.hv_a:.3f} | {r.hv_b:.3f} | "
                     f"{r.hv_diff:+.3f} [{r.hv_diff_lo:+.3f}, {r.hv_diff_hi:+.3f}] | {r.share_a_ahead:.0%} | "
                     f"{r.b_front_dominated_by_a:.0%} | {r.verdict} |")
    lines += ["", "Every model (family front: no point of its family has both failure rates lower; overall: "
              "none of any family has):", "",
              "| family | model | α | correctness failures [CI] | optimization failures [CI] | pass@1 | family front | overall front |",
              "|---|---|---|---|---|---|---|---|"]
    for r in points.itertuples():
        alpha = "" if np.isnan(r.alpha) else f"{r.alpha:+g}"
        lines.append(f"| {r.family} | `{r.tag}` | {alpha} | {r.correctness_failure_rate:.3f} "
                     f"[{r.correctness_failure_rate_lo:.3f}, {r.correctness_failure_rate_hi:.3f}] | "
                     f"{r.optimization_failure_rate:.3f} [{r.optimization_failure_rate_lo:.3f}, "
                     f"{r.optimization_failure_rate_hi:.3f}] | {r.ac_rate:.3f} | {'yes' if r.family_front else ''} | "
                     f"{'yes' if r.overall_front else ''} |")
    folds = config["evaluate"].get("folds", 0)
    how = (f"each of {folds} folds of families scored by the choice made on the other folds" if folds else
           "chosen on the dev families, scored on the test families")
    lines += ["", f"Matched-budget ensembles (budget {config['evaluate']['budget']} per problem, {how}; gain over "
              "the alpha line's dev-chosen single model):", "",
              "| family | kind | allocation | pass@budget | gain [CI] |", "|---|---|---|---|---|"]
    for r in ensembles.itertuples():
        gain = (f"{r.gain_vs_line_single:+.3f} [{r.gain_lo:+.3f}, {r.gain_hi:+.3f}]"
                if "gain_lo" in ensembles and not np.isnan(r.gain_lo) else "")
        lines.append(f"| {r.family} | {r.kind} | `{r.allocation}` | {r.pass_at_budget:.3f} | {gain} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, required=True, help="the experiment config (configs/beyond.yaml)")
    p.add_argument("--figure", type=Path, help="write the geometry figure here (PNG)")
    p.add_argument("--run", type=Path, help="the finished run's working directory")
    p.add_argument("--page", type=Path, help="the page whose results section is replaced (docs/beyond.md)")
    p.add_argument("--publish", action="store_true", help="record the registration as reported")
    args = p.parse_args()
    try:
        config = load(args.config)
        if args.figure:
            figure(config, args.figure)
        if args.run:
            section = results(config, args.run, str(args.config), args.publish)
            if args.page:
                page = args.page.read_text()
                head, _, rest = page.partition(START)
                _, _, tail = rest.partition(END)
                write_text(args.page, f"{head}{START}\n{section}\n{END}{tail}")
            else:
                print(section)
    except (ConfigError, RegistryError, UserError, FileNotFoundError) as e:
        sys.exit(f"beyond.py: {e}")


if __name__ == "__main__":
    main()
