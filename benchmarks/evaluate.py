"""Evaluation of a real samples file: every program run once (the default) against the baseline
measured in the same run, `--judge-duplicates` (every sampled copy run). Also reports how many
verdicts differ between the two (timing noise on programs near the limit; 0 expected).

    .venv/bin/python benchmarks/evaluate.py [--samples results/seed0/samples/alpha+0.00/mini/reasoning.jsonl]
    .venv/bin/python benchmarks/evaluate.py --smoke

Needs a finished `make demo` (or any run) for its samples, problems and calibration; --smoke instead
judges a few of the mini set's own programs, each sampled twice (checks the benchmark runs).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd


def evaluate(args, out: Path, *extra: str) -> float:
    cmd = [sys.executable, "-m", "ewa.cli", "evaluate", "--problems", args.problems, "--samples", args.samples,
           "--calibration", args.calibration, "--early-stop", "--workers", str(args.workers), "--out", str(out),
           *extra]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def smoke_inputs(root: Path) -> tuple[str, str, str]:
    """(samples, problems, calibration) in `root`: per held-out problem of two families, its efficient and
    first wrong program twice each, and a time factor of 1."""
    import json

    from ewa.data.mini.loader import load
    from ewa.problems import write_problems

    problems = load(split="heldout", seed=0, families=["pairs_with_difference", "two_sum_count"])
    write_problems(problems, root / "problems.jsonl")
    with open(root / "samples.jsonl", "w") as f:
        for p in problems:
            programs = [p.meta["solutions"]["efficient"], p.meta["solutions"]["wrong"][0]] * 2
            for i, code in enumerate(programs):
                f.write(json.dumps({"problem_id": p.id, "sample_id": i, "code": code}) + "\n")
    (root / "calibration.json").write_text(json.dumps({"time_factor": 1.0}))
    return str(root / "samples.jsonl"), str(root / "problems.jsonl"), str(root / "calibration.json")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", default="results/seed0/samples/alpha+0.00/mini/reasoning.jsonl")
    p.add_argument("--problems", default="results/seed0/data/mini/problems.jsonl")
    p.add_argument("--calibration", default="results/calibration.json")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--smoke", action="store_true", help="judge a few mini programs instead of a run's samples")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.smoke:
            args.samples, args.problems, args.calibration = smoke_inputs(Path(tmp))
        for f in (args.samples, args.problems, args.calibration):
            if not Path(f).is_file():
                raise SystemExit(f"benchmarks/evaluate.py: {f} is missing (run `make demo` first)")
        every = evaluate(args, Path(tmp) / "every.parquet", "--judge-duplicates")
        once = evaluate(args, Path(tmp) / "once.parquet")
        a = pd.read_parquet(Path(tmp) / "every.parquet", columns=["problem_id", "sample_id", "verdict"])
        b = pd.read_parquet(Path(tmp) / "once.parquet", columns=["problem_id", "sample_id", "verdict", "duplicate_of"])
    both = a.merge(b, on=["problem_id", "sample_id"], suffixes=("_every", "_once"))
    differ = int((both.verdict_every != both.verdict_once).sum())
    copies = int(b.duplicate_of.notna().sum())
    print(f"{args.samples}: {len(b)} samples, {copies} copies of a program already sampled for the problem")
    print(f"baseline, every copy run (--judge-duplicates): {every:.1f} s")
    print(f"ewa evaluate, each program once:               {once:.1f} s  ->  {every / once:.2f}x faster")
    print(f"verdicts that differ between the two: {differ} of {len(both)}")


if __name__ == "__main__":
    main()
