"""The correctness-efficiency frontier of one alpha grid: the frontier table, per-problem solve matrix and
overlaps, matched-budget ensembles and their plots, all written into one directory the step owns alone
(OUTPUT_FILES names every file). Alpha 0 is the low-coverage checkpoint, alpha 1 the high-coverage one.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from ewa.alphas import alpha_label, alpha_tag
from ewa.analysis.behaviour import behaviour_table
from ewa.analysis.bootstrap import bootstrap_counts, clusters_of, weighted_means
from ewa.analysis.ensemble import EnsembleSettings, matched_budget_table
from ewa.analysis.metrics import (MetricsSettings, VerdictCounts, id_family, pass_at_k_or_nan, per_problem_stats,
                                  problem_attributes, read_evals)
from ewa.io import atomic_path, provenance, write_json

TABLES = ("frontier.csv", "frontier_by_difficulty.csv", "pass_at_k_curves.csv", "solve_matrix.parquet",
          "solve_matrix.csv", "overlaps.csv", "ensembles.csv", "behaviour.csv", "summary.json", "provenance.json")
PLOTS = ("frontier", "pass_at_k", "ensembles", "overlaps")
PLOT_FORMATS = ("png", "svg")


def output_files(formats=PLOT_FORMATS) -> list[str]:
    """Every file write_frontier puts in its directory (the workflow declares exactly these)."""
    return [*TABLES, *(f"{plot}.{fmt}" for plot in PLOTS for fmt in formats)]


@dataclass
class AlphaGrid(VerdictCounts):
    """Verdict counts of every problem under every alpha: counts[p, a, v], alphas ascending.
    difficulty per problem comes from the problems file (None without one); family from the problems
    file or, without one, from the problem's id (metrics.id_family; None: every problem its own)."""
    alphas: np.ndarray = None
    sources: list[str] = None
    difficulty: np.ndarray | None = None
    families: np.ndarray | None = None

    def clusters(self, cluster_by: str) -> np.ndarray:
        """The bootstrap's cluster of every problem (evaluate.cluster_by: "family" or "problem")."""
        return clusters_of(self.problem_ids, self.families, cluster_by)


def load_grid(specs: list[tuple[float, Path]], problems: Path | None = None) -> AlphaGrid:
    """Read every alpha's table; all must cover the same problems (else one names the difference)."""
    if not specs:
        raise ValueError("no evaluation tables given (--evals)")
    specs = sorted(specs, key=lambda s: s[0])
    alphas = np.array([a for a, _ in specs])
    dup = alphas[1:][np.isclose(np.diff(alphas), 0)]
    if dup.size:
        raise ValueError(f"alpha {alpha_tag(dup[0])} is given twice")
    with tqdm(specs, desc="read evals", unit="table") as bar:  # closed on error: the message starts a line
        tables = [read_evals(path) for _, path in bar]
    ref = tables[0]
    for t in tables[1:]:
        if len(t) != len(ref) or np.any(t.problem_ids != ref.problem_ids):
            missing = sorted(set(ref.problem_ids) - set(t.problem_ids))
            extra = sorted(set(t.problem_ids) - set(ref.problem_ids))
            example = (missing or extra)[0]
            raise ValueError(f"{t.source}: problems differ from {ref.source}: {len(missing)} missing, "
                             f"{len(extra)} extra (e.g. {example!r})")
    counts = np.stack([t.counts for t in tables], axis=1)
    difficulty, families = (problem_attributes(problems, ref.problem_ids, "difficulty", "family") if problems
                            else (None, np.array([id_family(p) for p in ref.problem_ids], dtype=object)))
    return AlphaGrid(ref.problem_ids, counts, alphas, [t.source for t in tables], difficulty, families)


def pareto_mask(points, minimize=True) -> np.ndarray:
    """True for points no other point dominates (<= in every objective, < in one). minimize is one
    bool or one per column; NaN points are never optimal."""
    pts = np.asarray(points, dtype=np.float64)
    sign = np.where(np.broadcast_to(np.asarray(minimize), pts.shape[1:]), 1.0, -1.0)
    pts = pts * sign
    valid = ~np.isnan(pts).any(axis=1)
    le = (pts[:, None, :] <= pts[None, :, :]).all(-1)  # le[j, i]: j at least as good as i everywhere
    lt = (pts[:, None, :] < pts[None, :, :]).any(-1)
    dominated = ((le & lt) & valid[:, None]).any(axis=0)
    return valid & ~dominated


FRONT_METRICS = ("optimization_failure_rate", "correctness_failure_rate", "ac_rate", "solved_rate")


def frontier_table(counts: np.ndarray, alphas: np.ndarray, settings: MetricsSettings,
                   clusters=None) -> pd.DataFrame:
    """One row per alpha: every metric with _lo/_hi, and `pareto` (no other alpha has both a lower
    optimization-failure and a lower correctness-failure rate). CIs share one paired resample of
    `clusters` (one label per problem, AlphaGrid.clusters; None: every problem its own)."""
    names, X, W = per_problem_stats(counts, settings.k)
    units = len(counts) if clusters is None else clusters
    boot = bootstrap_counts(units, settings.bootstrap, settings.seed) if settings.bootstrap else None
    value, lo, hi = weighted_means(X, W, boot, settings.ci)  # (A, S)
    n = counts.sum(-1)
    frame = pd.DataFrame({"alpha": alphas, "label": [alpha_label(a) for a in alphas],
                          "n_problems": len(counts), "n_samples": n.sum(0),
                          "min_samples_per_problem": n.min(0)})
    order = list(FRONT_METRICS) + [m for m in names if m not in FRONT_METRICS]
    for m in order:
        s = names.index(m)
        frame[m], frame[f"{m}_lo"], frame[f"{m}_hi"] = value[:, s], lo[:, s], hi[:, s]
    frame.insert(2, "pareto", pareto_mask(frame[["optimization_failure_rate", "correctness_failure_rate"]]))
    return frame


def pass_at_k_curves(grid: AlphaGrid) -> pd.DataFrame:
    """pass@k for k = 1..n (log-spaced beyond 64 values) per alpha, for the curve plot."""
    n_max = int(grid.n.min())
    ks = np.arange(1, n_max + 1) if n_max <= 64 else np.unique(np.geomspace(1, n_max, 48).round().astype(int))
    rows = [{"alpha": a, "k": int(k), "pass_at_k": float(pass_at_k_or_nan(grid.n[:, i], grid.c[:, i], int(k)).mean())}
            for i, a in enumerate(grid.alphas) for k in ks]
    return pd.DataFrame(rows)


def solve_matrix(grid: AlphaGrid) -> pd.DataFrame:
    """Long form: one row per (problem, alpha) with samples, AC count and solved (>= 1 AC)."""
    P, A = grid.n.shape
    return pd.DataFrame({
        "problem_id": np.repeat(grid.problem_ids, A),
        "difficulty": np.repeat(grid.difficulty if grid.difficulty is not None else np.full(P, ""), A),
        "alpha": np.tile(grid.alphas, P), "n_samples": grid.n.ravel(), "n_ac": grid.c.ravel(),
        "solved": grid.c.ravel() > 0})


def overlaps(grid: AlphaGrid) -> pd.DataFrame:
    """Per pair of alphas: how many problems each solves, jointly and alone, and Jaccard overlap."""
    S = grid.c > 0
    rows = []
    for i in range(len(grid.alphas)):
        for j in range(i + 1, len(grid.alphas)):
            a, b = S[:, i], S[:, j]
            union = int((a | b).sum())
            rows.append({"alpha_a": grid.alphas[i], "alpha_b": grid.alphas[j], "solved_a": int(a.sum()),
                         "solved_b": int(b.sum()), "solved_both": int((a & b).sum()),
                         "only_a": int((a & ~b).sum()), "only_b": int((b & ~a).sum()), "union": union,
                         "jaccard": (a & b).sum() / union if union else np.nan})
    return pd.DataFrame(rows, columns=["alpha_a", "alpha_b", "solved_a", "solved_b", "solved_both",
                                       "only_a", "only_b", "union", "jaccard"])


def by_difficulty(grid: AlphaGrid, settings: MetricsSettings) -> pd.DataFrame:
    if grid.difficulty is None:
        return pd.DataFrame()
    frames = []
    clusters = grid.clusters(settings.cluster_by)
    for d in sorted(set(grid.difficulty)):
        these = grid.difficulty == d
        frame = frontier_table(grid.counts[these], grid.alphas, settings, clusters[these])
        frame.insert(0, "difficulty", d)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def write_frontier(grid: AlphaGrid, out_dir: Path, metrics: MetricsSettings, ensembles: EnsembleSettings,
                   formats=PLOT_FORMATS, prov: dict | None = None) -> dict:
    """Write every table and plot into out_dir at once (a temp dir renamed on success)."""
    front = frontier_table(grid.counts, grid.alphas, metrics, grid.clusters(metrics.cluster_by))
    ens = matched_budget_table(grid.n, grid.c, grid.alphas, ensembles, grid.families)
    curves = pass_at_k_curves(grid)
    pairs = overlaps(grid)
    solved = grid.c > 0
    best = front.loc[front["ac_rate"].idxmax()]
    summary = {
        "alphas": grid.alphas.tolist(), "n_problems": len(grid.problem_ids),
        "samples_per_problem": {"min": int(grid.n.min()), "max": int(grid.n.max())},
        "solved_by_any_alpha": int(solved.any(1).sum()), "solved_by_every_alpha": int(solved.all(1).sum()),
        "best_alpha_by_pass@1": float(best["alpha"]), "pareto_alphas": front.loc[front.pareto, "alpha"].tolist(),
    }
    with atomic_path(out_dir) as tmp:
        tmp.mkdir()
        front.to_csv(tmp / "frontier.csv", index=False)
        by_difficulty(grid, metrics).to_csv(tmp / "frontier_by_difficulty.csv", index=False)
        curves.to_csv(tmp / "pass_at_k_curves.csv", index=False)
        long = solve_matrix(grid)
        long.to_parquet(tmp / "solve_matrix.parquet", index=False)
        wide = long.pivot(index=["problem_id", "difficulty"], columns="alpha", values="n_ac")
        wide.columns = [f"n_ac@{alpha_tag(a)}" for a in wide.columns]
        wide.reset_index().to_csv(tmp / "solve_matrix.csv", index=False)
        pairs.to_csv(tmp / "overlaps.csv", index=False)
        ens.to_csv(tmp / "ensembles.csv", index=False)
        behaviour_table(grid.alphas, grid.sources).to_csv(tmp / "behaviour.csv", index=False)
        write_json(tmp / "summary.json", summary)
        if formats:
            from ewa.analysis import plots  # matplotlib only when plotting
            plots.plot_frontier(front, tmp / "frontier", formats)
            plots.plot_pass_at_k(curves, tmp / "pass_at_k", formats)
            plots.plot_ensembles(ens, tmp / "ensembles", formats)
            plots.plot_overlaps(pairs, grid.alphas, tmp / "overlaps", formats)
        write_json(tmp / "provenance.json", prov or provenance(
            {"metrics": asdict(metrics), "ensembles": asdict(ensembles)}))
    return summary
