"""Frontier aggregation at paper scale: 1,000 problems x 250 samples x 20 alphas (5M judged samples).

Times ewa's vectorised path (arrow counting, pass@k tables, matrix bootstrap) against the naive
baseline measured in the same run: pandas groupby-apply computing pass@k with math.comb per problem.

    .venv/bin/python benchmarks/frontier.py [--problems 1000 --samples 250 --alphas 20 --reps 1000] [--smoke]
"""
from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ewa.analysis.ensemble import EnsembleSettings, matched_budget_table
from ewa.analysis.frontier import frontier_table, load_grid, write_frontier
from ewa.analysis.metrics import MetricsSettings, pass_at_k_or_nan
from ewa.config import validate
from ewa.verdicts import VERDICTS


def write_synthetic(root: Path, P: int, N: int, alphas: np.ndarray, seed: int = 0) -> list[tuple[float, Path]]:
    """One evaluation table per alpha; problem hardness shared across alphas, failure kind shifts with alpha."""
    rng = np.random.default_rng(seed)
    hard = rng.normal(size=P)
    pid = pa.array(np.repeat([f"problem-{i:05d}" for i in range(P)], N))
    sid = pa.array(np.tile(np.arange(N), P))
    specs = []
    for alpha in alphas:
        p_ac = 1 / (1 + np.exp(2 * hard + 1.5 - np.sin(2 * alpha)))
        opt = np.clip(0.55 - 0.25 * alpha, 0.05, 0.95)
        fail_mix = np.array([0, (1 - opt) * 0.7, opt * 0.8, opt * 0.2, (1 - opt) * 0.2, (1 - opt) * 0.1])
        u = rng.random((P, N))
        failed = u >= p_ac[:, None]
        code = np.searchsorted(np.cumsum(fail_mix[1:]), rng.random((P, N))) + 1
        verdict = np.where(failed, np.minimum(code, 5), 0).ravel()
        table = pa.table({
            "problem_id": pid, "sample_id": sid, "verdict": pa.array(np.array(VERDICTS)[verdict]),
            "tests_passed": pa.array(np.zeros(P * N, dtype=np.int32)), "tests_total": pa.array(np.full(P * N, 10, np.int32)),
            "first_failed_test": pa.nulls(P * N, pa.int32()), "first_failed_tier": pa.nulls(P * N, pa.int32()),
            "cpu_time_s": pa.array(rng.random(P * N)), "peak_memory_mb": pa.array(np.full(P * N, 12.0))})
        path = root / f"alpha{alpha:+.2f}" / "bench" / "reasoning.parquet"
        path.parent.mkdir(parents=True)
        pq.write_table(table, path)
        specs.append((float(alpha), path))
    return specs


def naive_pass_at_k(specs, ks) -> pd.DataFrame:
    """The obvious pandas version: per alpha, group samples by problem and apply math.comb."""
    rows = []
    for alpha, path in specs:
        frame = pd.read_parquet(path)

        def per_problem(g):
            n, c = len(g), int((g["verdict"] == "AC").sum())
            return pd.Series({f"pass@{k}": 1 - math.comb(n - c, k) / math.comb(n, k) for k in ks})

        per = frame.groupby("problem_id").apply(per_problem)
        rows.append({"alpha": alpha, **per.mean().to_dict()})
    return pd.DataFrame(rows)


def frontier_settings(ks, budget: int, reps: int) -> tuple[MetricsSettings, EnsembleSettings]:
    """What `ewa frontier` builds from a config of the schema's defaults, with these k, budget and reps."""
    config = validate({}, partial=True)
    ev = config["evaluate"]
    return (MetricsSettings(k=tuple(ks), bootstrap=reps, ci=ev["ci"], seed=config["seed"], cluster_by=ev["cluster_by"]),
            EnsembleSettings(budgets=(budget,), windows=tuple(ev["windows"]), dev_fraction=ev["dev_fraction"],
                             seed=config["seed"], bootstrap=reps, ci=ev["ci"], cluster_by=ev["cluster_by"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=250)
    ap.add_argument("--alphas", type=int, default=20)
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--smoke", action="store_true", help="20 problems x 12 samples x 3 alphas, 20 reps")
    args = ap.parse_args()
    if args.smoke:
        vars(args).update(problems=20, samples=12, alphas=3, reps=20)
    ks = tuple(k for k in (1, 10, 100) if k <= args.samples)
    alphas = np.round(np.linspace(-1.0, 2.0, args.alphas), 2)
    with tempfile.TemporaryDirectory(prefix="ewa-bench-frontier-") as tmp:
        t = time.perf_counter()
        specs = write_synthetic(Path(tmp), args.problems, args.samples, alphas)
        print(f"data: {args.alphas} alphas x {args.problems} problems x {args.samples} samples "
              f"= {args.alphas * args.problems * args.samples:,} rows, written in {time.perf_counter() - t:.1f} s")

        # like for like: read every table and compute mean pass@k per alpha (no CIs)
        t = time.perf_counter()
        grid = load_grid(specs)
        ours = np.array([[np.mean(pass_at_k_or_nan(grid.n[:, a], grid.c[:, a], k)) for k in ks]
                         for a in range(len(alphas))])
        t_ours = time.perf_counter() - t
        t = time.perf_counter()
        naive = naive_pass_at_k(specs, ks)
        t_naive = time.perf_counter() - t
        assert np.allclose(naive[[f"pass@{k}" for k in ks]].to_numpy(), ours, atol=1e-12), "baseline disagrees"
        print(f"pass@k {ks} per alpha (read + aggregate): ewa {t_ours:.2f} s | naive pandas groupby-apply "
              f"+ math.comb {t_naive:.2f} s | ratio {t_naive / t_ours:.1f}x")

        t = time.perf_counter()
        metrics, ensembles = frontier_settings(ks, args.samples, args.reps)
        front = frontier_table(grid.counts, grid.alphas, metrics)
        t_front = time.perf_counter() - t
        print(f"frontier table: {front.shape[1]} columns x {len(front)} alphas, {args.reps} paired bootstrap "
              f"reps for every metric: {t_front:.2f} s")

        t = time.perf_counter()
        ens = matched_budget_table(grid.n, grid.c, grid.alphas, ensembles)
        t_ens = time.perf_counter() - t
        opt = ens[ens.kind == "optimized"].iloc[0]
        print(f"ensembles at B={args.samples}: {len(ens)} rows incl. allocation optimised on "
              f"{args.problems // 2} dev problems ({opt.allocation}): {t_ens:.2f} s")
        print(f"total without plots: {t_ours + t_front + t_ens:.2f} s (baseline pass@k alone: {t_naive:.2f} s)")

        t = time.perf_counter()  # what `ewa frontier` does after reading: every table and figure, on disk
        write_frontier(grid, Path(tmp) / "out", metrics, ensembles)
        print(f"write_frontier (all tables + 4 figures as PNG and SVG): {time.perf_counter() - t:.2f} s")


if __name__ == "__main__":
    main()
