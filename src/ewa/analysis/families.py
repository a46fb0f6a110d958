"""The merge families compared on the same problems and samples: every point's failure rates, each family's
front (no other point of the family has both a lower optimization- and a lower correctness-failure rate),
its hypervolume, and the hypervolume difference of every pair of families with a cluster-bootstrap CI (one
paired resample of problem clusters for every point); matched-budget ensembles drawing on any family.

The hypervolume is the area of the square [0, 1]^2 of (correctness-, optimization-failure rate) that a
family's points dominate, with (1, 1) as the reference point: the larger, the better the family's front.

>>> hypervolume(np.array([[0.2, 0.6], [0.5, 0.3], [0.6, 0.6]]))  # the third point is dominated
0.47
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from ewa.analysis.bootstrap import bootstrap_counts, percentile_interval, weighted_means, weighted_samples
from ewa.analysis.ensemble import (choice_pairs, ensemble_pass, fold_scores, fold_text, optimize_allocation,
                                   preferred, uniform_allocation)
from ewa.analysis.frontier import load_grid, pareto_mask
from ewa.analysis.metrics import per_problem_stats
from ewa.io import atomic_path, provenance, write_json

TABLES = ("families.csv", "comparison.csv", "ensembles.csv", "summary.json", "provenance.json")
PLOTS = ("families",)
PLOT_FORMATS = ("png", "svg")
# The plane of the frontier plot: x, then y; both minimized.
AXES = ("correctness_failure_rate", "optimization_failure_rate")
REFERENCE = (1.0, 1.0)
ENSEMBLE_COLUMNS = ("budget", "family", "kind", "points", "allocation", "n_test_problems", "pass_at_budget",
                    "gain_vs_line_single", "gain_lo", "gain_hi")


def output_files(formats=PLOT_FORMATS) -> list[str]:
    """Every file write_families puts in its directory (the workflow declares exactly these)."""
    return [*TABLES, *(f"{plot}.{fmt}" for plot in PLOTS for fmt in formats)]


@dataclass(frozen=True)
class FamilySettings:
    """`ewa families` fills them from the config's `evaluate` section and `seed`."""
    k: tuple[int, ...]
    bootstrap: int
    ci: float
    seed: int
    cluster_by: str
    budget: int  # samples per problem of every ensemble and single point compared
    dev_fraction: float
    folds: int = 0  # 0: one dev/test split by family; K >= 2: K folds of families, each scored by the rest


def hypervolume(points: np.ndarray, reference=REFERENCE) -> float:
    """Area dominated by `points` (m, 2), both coordinates minimized, bounded by `reference`; NaN points and
    points beyond the reference add nothing."""
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    pts = pts[~np.isnan(pts).any(1) & (pts[:, 0] < reference[0]) & (pts[:, 1] < reference[1])]
    if not len(pts):
        return 0.0
    pts = pts[np.lexsort((pts[:, 1], pts[:, 0]))]  # x ascending, ties by y
    # the front: each point whose y is below every y before it (a sweep; the bootstrap calls this often)
    pts = pts[np.r_[True, pts[1:, 1] < np.minimum.accumulate(pts[:, 1])[:-1]]]
    right = np.append(pts[1:, 0], reference[0])
    return round(float(np.sum((right - pts[:, 0]) * (reference[1] - pts[:, 1]))), 12)


def family_members(spec: dict, tags: list[str]) -> list[tuple[dict, np.ndarray]]:
    """(family, indices of its points among `tags`) in the spec's order."""
    index = {t: i for i, t in enumerate(tags)}
    missing = [p["tag"] for f in spec["families"] for p in f["points"] if p["tag"] not in index]
    if missing:
        raise ValueError(f"no evaluation table for point {missing[0]} (--evals TAG:PATH)")
    return [(f, np.array([index[p["tag"]] for p in f["points"]])) for f in spec["families"]]


def point_label(point: dict) -> str:
    """endpoint (a source itself), interpolated (every weight in [0, 1]) or extrapolated."""
    weights = list(point["weights"].values())
    if len(weights) == 1:
        return "endpoint"
    return "interpolated" if all(0 <= w <= 1 for w in weights) else "extrapolated"


def points_table(spec: dict, tags: list[str], value, lo, hi, names: list[str], n_samples) -> pd.DataFrame:
    """One row per (family, point): its coordinates, weights, label, every metric with its CI, and whether
    it is on its family's front and on the front of all points."""
    rows = []
    overall = pareto_mask(value[:, [names.index(a) for a in AXES]])
    for family, idx in family_members(spec, tags):
        xy = value[idx][:, [names.index(a) for a in AXES]]
        front = pareto_mask(xy)
        for j, (i, point) in enumerate(zip(idx, family["points"])):
            row = {"family": family["name"], "kind": family["kind"], "tag": point["tag"],
                   "alpha": point["coords"][0] if family["kind"] != "simplex" else np.nan,
                   "label": point_label(point), "family_front": bool(front[j]), "overall_front": bool(overall[i]),
                   "n_samples": int(n_samples[i])}
            row.update({f"w_{s}": point["weights"].get(s, 0.0) for s in spec["sources"]})
            for m in names:
                s = names.index(m)
                row[m], row[f"{m}_lo"], row[f"{m}_hi"] = value[i, s], lo[i, s], hi[i, s]
            rows.append(row)
    return pd.DataFrame(rows)


def _dominated_share(a: np.ndarray, b: np.ndarray) -> float:
    """Share of b's front points that some point of a's front weakly dominates (<= in both rates)."""
    fa, fb = a[pareto_mask(a)], b[pareto_mask(b)]
    if not len(fb):
        return np.nan
    return float(np.mean([(fa <= q).all(1).any() for q in fb]))


def comparison_table(spec: dict, tags: list[str], xy: np.ndarray, boot_xy: np.ndarray | None, ci: float,
                     n_per_point: int) -> pd.DataFrame:
    """Every pair of families (a before b in the spec: the alpha line first): each one's hypervolume and the
    difference a - b with percentile CIs over the same resamples, the share of resamples in which a is
    ahead, and how much of each front the other weakly dominates. `xy` (M, 2), `boot_xy` (R, M, 2)."""
    members = family_members(spec, tags)
    hv = np.array([hypervolume(xy[idx]) for _, idx in members])
    hv_boot = (np.array([[hypervolume(b[idx]) for _, idx in members] for b in
                         tqdm(boot_xy, desc="hypervolumes", unit="resample", mininterval=5)])
               if boot_xy is not None and len(boot_xy) else None)
    rows = []
    for i, (fa, ia) in enumerate(members):
        for j, (fb, ib) in enumerate(members):
            if j <= i:
                continue
            row = {"family_a": fa["name"], "family_b": fb["name"], "kind_a": fa["kind"], "kind_b": fb["kind"],
                   "points_a": len(ia), "points_b": len(ib), "samples_per_problem_a": len(ia) * n_per_point,
                   "samples_per_problem_b": len(ib) * n_per_point, "equal_budget": len(ia) == len(ib),
                   "hv_a": hv[i], "hv_b": hv[j], "hv_diff": hv[i] - hv[j]}
            if hv_boot is not None:
                diff = hv_boot[:, i] - hv_boot[:, j]
                (row["hv_a_lo"], row["hv_a_hi"]), (row["hv_b_lo"], row["hv_b_hi"]) = (
                    percentile_interval(hv_boot[:, i], ci), percentile_interval(hv_boot[:, j], ci))
                row["hv_diff_lo"], row["hv_diff_hi"] = percentile_interval(diff, ci)
                row["share_a_ahead"] = float(np.mean(diff > 0))
            else:
                row.update(dict.fromkeys(("hv_a_lo", "hv_a_hi", "hv_b_lo", "hv_b_hi", "hv_diff_lo", "hv_diff_hi",
                                          "share_a_ahead"), np.nan))
            row["b_front_dominated_by_a"] = _dominated_share(xy[ia], xy[ib])
            row["a_front_dominated_by_b"] = _dominated_share(xy[ib], xy[ia])
            row["verdict"] = verdict(row)
            rows.append(row)
    return pd.DataFrame(rows)


def verdict(row: dict) -> str:
    """a dominates b: the CI of the hypervolume difference is above 0 and a's front weakly dominates every
    point of b's; a ahead: the CI is above 0 only; b ahead / b dominates likewise; else no difference."""
    lo, hi = row.get("hv_diff_lo"), row.get("hv_diff_hi")
    if lo is None or np.isnan(lo):
        return "no CI"
    if lo > 0:
        return "a dominates b" if row["b_front_dominated_by_a"] == 1 else "a ahead"
    if hi < 0:
        return "b dominates a" if row["a_front_dominated_by_b"] == 1 else "b ahead"
    return "no difference resolved"


def ensembles_table(spec: dict, tags: list[str], n: np.ndarray, c: np.ndarray, families, settings: FamilySettings,
                    boot_clusters) -> pd.DataFrame:
    """At the matched budget B, per family and for all points pooled: the dev-chosen single point, the
    dev-optimised allocation over the family's points and the uniform one, each scored on the test
    problems (split by problem family; with evaluate.folds every problem, each fold under the choice made
    on the other folds), with its gain over the alpha line's dev-chosen single point and a cluster-bootstrap
    CI of that gain (the same resamples of the test problems for every row)."""
    B = settings.budget
    pairs, test = choice_pairs(families, settings.folds, settings.dev_fraction, settings.seed)
    if not pairs:  # one family: nothing to choose on that is not also scored
        return pd.DataFrame(columns=ENSEMBLE_COLUMNS)
    groups = [(f["name"], idx) for f, idx in family_members(spec, tags)]
    groups.append(("all", np.arange(len(tags))))
    boot = bootstrap_counts(boot_clusters[test], settings.bootstrap, settings.seed) if settings.bootstrap else None

    def single(idx, dev):
        cap = n[:, idx].min(0)
        ok = [a for a in range(len(idx)) if cap[a] >= B]
        if not ok:
            return None
        allocs = [B * (np.arange(len(idx)) == a) for a in ok]
        return preferred(allocs, [ensemble_pass(n[dev][:, idx], c[dev][:, idx], s).mean() for s in allocs])

    def scored(idx, allocs):
        return fold_scores(n[:, idx], c[:, idx], pairs, test, allocs)

    line = groups[0][1]
    reference = scored(line, [single(line, dev) for dev, _ in pairs])
    rows = []
    for name, idx in groups:
        choices = [("best_single_dev", [single(idx, dev) for dev, _ in pairs])]
        if n[:, idx].min(0).sum() >= B:
            choices.append(("optimized", [optimize_allocation(n[dev][:, idx], c[dev][:, idx], B) for dev, _ in pairs]))
        uni = uniform_allocation(B, len(idx))
        if np.all(uni <= n[:, idx].min(0)):
            choices.append(("uniform", [uni] * len(pairs)))
        for kind, allocs in choices:
            per_problem = scored(idx, allocs)
            if per_problem is None:
                continue
            row = {"budget": B, "family": name, "kind": kind, "points": len(idx),
                   "allocation": fold_text([" ".join(f"{tags[i]}:{int(b)}" for i, b in zip(idx, a) if b) for a in allocs]),
                   "n_test_problems": len(test), "pass_at_budget": float(per_problem.mean())}
            if reference is not None:
                gain = per_problem - reference
                row["gain_vs_line_single"] = float(gain.mean())
                if boot is not None:
                    row["gain_lo"], row["gain_hi"] = percentile_interval((boot @ gain) / boot.sum(1), settings.ci)
            rows.append(row)
    return pd.DataFrame(rows)


def load_points(evals: list[tuple[str, Path]], problems: Path | None):
    """The evaluation tables of every point (tag, path), checked to cover the same problems."""
    tags = [t for t, _ in evals]
    if len(set(tags)) != len(tags):
        raise ValueError(f"point {next(t for t in tags if tags.count(t) > 1)} is given twice")
    grid = load_grid([(float(i), Path(p)) for i, (_, p) in enumerate(evals)], problems)  # in the given order
    return tags, grid


def write_families(spec: dict, evals: list[tuple[str, Path]], problems: Path | None, out_dir: Path,
                   settings: FamilySettings, formats=PLOT_FORMATS, prov: dict | None = None) -> dict:
    """Every table and the plot into out_dir at once (a temp dir renamed on success)."""
    tags, grid = load_points(evals, problems)
    family_members(spec, tags)  # every point has its table, before any work
    names, X, W = per_problem_stats(grid.counts, settings.k)
    clusters = grid.clusters(settings.cluster_by)
    boot = bootstrap_counts(clusters, settings.bootstrap, settings.seed) if settings.bootstrap else None
    value, lo, hi = weighted_means(X, W, boot, settings.ci)  # (M, S)
    axes = [names.index(a) for a in AXES]
    boot_xy = weighted_samples(X[..., axes], W[..., axes], boot) if boot is not None else None  # (R, M, 2)
    n_min = int(grid.n.min())
    points = points_table(spec, tags, value, lo, hi, names, grid.n.sum(0))
    comparison = comparison_table(spec, tags, value[:, axes], boot_xy, settings.ci, n_min)
    ensembles = ensembles_table(spec, tags, grid.n, grid.c, grid.families if grid.families is not None
                                else np.asarray(grid.problem_ids), settings, clusters)
    line = spec["families"][0]["name"]
    headline = comparison[(comparison.family_a == line) & (comparison.kind_b == "trajectory")]
    summary = {
        "families": {f["name"]: {"kind": f["kind"], "points": len(f["points"])} for f in spec["families"]},
        "models": len(tags), "n_problems": len(grid.problem_ids), "samples_per_problem_per_point": n_min,
        "hypervolume": {r.family_a: r.hv_a for r in comparison.itertuples()} | {r.family_b: r.hv_b for r in
                                                                                comparison.itertuples()},
        "line_vs_trajectories": [{k: (v if not isinstance(v, float) or np.isfinite(v) else None)
                                  for k, v in r.items()} for r in headline.to_dict("records")],
        "overall_front": points.loc[points.overall_front, "tag"].drop_duplicates().tolist(),
    }
    with atomic_path(out_dir) as tmp:
        tmp.mkdir()
        points.to_csv(tmp / "families.csv", index=False)
        comparison.to_csv(tmp / "comparison.csv", index=False)
        ensembles.to_csv(tmp / "ensembles.csv", index=False)
        write_json(tmp / "summary.json", summary)
        if formats:
            from ewa.analysis import plots  # matplotlib only when plotting
            plots.plot_families(points, spec, comparison, tmp / "families", formats)
        write_json(tmp / "provenance.json", prov or provenance({"families": spec, "settings": asdict(settings)}))
    return summary
