"""`ewa metrics`: one evaluation table -> pass@k, verdict mix and failure rates with bootstrap CIs.

    ewa metrics --evals results/evals/alpha+0.50/mini/reasoning.parquet --problems problems.jsonl \
        --k 1 10 --out metrics.json [--csv metrics.csv]
"""
from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path

from ewa.io import atomic_path, provenance, sha256_file, write_json
from ewa.metrics import MetricsSettings, compute_metrics, metrics_record, problem_difficulties, read_evals


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--evals", required=True, type=Path, help="evaluation table (parquet, one row per sample)")
    parser.add_argument("--problems", type=Path,
                        help="canonical problems.jsonl; adds a breakdown by difficulty")
    parser.add_argument("--k", type=int, nargs="+", default=[1, 10], help="pass@k for each k (default 1 10)")
    parser.add_argument("--bootstrap", type=int, default=1000, help="problem resamples for CIs; 0 = none")
    parser.add_argument("--ci", type=float, default=0.95, help="CI coverage (default 0.95)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    parser.add_argument("--out", required=True, type=Path, help="metrics JSON (provenance embedded)")
    parser.add_argument("--csv", type=Path, help="also write the long table scope,metric,value,lo,hi "
                        "(+ <csv>.provenance.json)")


def run(args: argparse.Namespace) -> int:
    settings = MetricsSettings(k=tuple(args.k), bootstrap=args.bootstrap, ci=args.ci, seed=args.seed)
    counts = read_evals(args.evals)
    difficulty = problem_difficulties(args.problems, counts.problem_ids) if args.problems else None
    table = compute_metrics(counts, difficulty, settings)
    inputs = {str(args.evals): sha256_file(args.evals)}
    if args.problems:
        inputs[str(args.problems)] = sha256_file(args.problems)
    prov = provenance(asdict(settings), inputs=inputs)
    write_json(args.out, {**metrics_record(counts, table, settings), "provenance": prov})
    if args.csv:
        with atomic_path(args.csv) as tmp:
            table.to_csv(tmp, index=False)
        write_json(f"{args.csv}.provenance.json", prov)
    overall = table[table.scope == "all"].set_index("metric")["value"]
    print(f"{args.evals}: {len(counts)} problems, pass@1 {overall['ac_rate']:.3f}, "
          f"optimization failures {overall['optimization_failure_rate']:.3f}, "
          f"correctness failures {overall['correctness_failure_rate']:.3f} -> {args.out}")
    return 0
