"""Evaluation of a real samples file: every program run once (the default) against the baseline
measured in the same run, `--judge-duplicates` (every sampled copy run). Also reports how many
verdicts differ between the two (timing noise on programs near the limit; 0 expected).

Then a grid of samples files (every alpha of one setting, `--grid`): judged one after another with one
verdict cache (`evaluate.verdict_cache`) against the baseline of each file judged on its own.

    .venv/bin/python benchmarks/evaluate.py [--samples results/seed0/samples/alpha+0.00/mini/reasoning.jsonl]
        [--grid 'results/seed0/samples/alpha*/mini/reasoning.jsonl']
    .venv/bin/python benchmarks/evaluate.py --smoke

Needs a finished `make demo` (or any run) for its samples, problems and calibration; --smoke instead
judges a few of the mini set's own programs, each sampled twice, in a grid of three files that share
some of them (checks the benchmark runs).
"""
from __future__ import annotations

import argparse
import glob
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
    for k in range(3):  # a grid: file k holds the programs of every problem but the k-th
        with open(root / "samples.jsonl") as f, open(root / f"grid{k}.jsonl", "w") as out:
            out.writelines(line for i, line in enumerate(f) if i // 4 % 3 != k)
    return str(root / "samples.jsonl"), str(root / "problems.jsonl"), str(root / "calibration.json")


def grid(args, tmp: Path) -> None:
    """The grid's files judged one after another: each on its own, then all with one verdict cache."""
    files = sorted(glob.glob(args.grid))
    if not files:
        raise SystemExit(f"benchmarks/evaluate.py: no samples file matches {args.grid}")
    alone = cached = 0.0
    verdicts = {}
    for i, f in enumerate(files):
        alone += evaluate(args, tmp / f"alone{i}.parquet", "--samples", str(f))
    for i, f in enumerate(files):
        cached += evaluate(args, tmp / f"cached{i}.parquet", "--samples", str(f), "--verdict-cache", str(tmp / "cache"))
    for i in range(len(files)):
        a = pd.read_parquet(tmp / f"alone{i}.parquet", columns=["problem_id", "sample_id", "verdict"])
        b = pd.read_parquet(tmp / f"cached{i}.parquet", columns=["problem_id", "sample_id", "verdict", "cached_from"])
        both = a.merge(b, on=["problem_id", "sample_id"], suffixes=("_alone", "_cached"))
        verdicts[i] = (int((both.verdict_alone != both.verdict_cached).sum()), len(both), int(b.cached_from.notna().sum()))
    differ, total, reused = (sum(v[j] for v in verdicts.values()) for j in range(3))
    print(f"grid of {len(files)} samples files ({args.grid}): {total} samples, {reused} read from the cache")
    print(f"baseline, each file judged on its own: {alone:.1f} s")
    print(f"one verdict cache for the grid:        {cached:.1f} s  ->  {alone / cached:.2f}x faster")
    print(f"verdicts that differ between the two: {differ} of {total}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", default="results/seed0/samples/alpha+0.00/mini/reasoning.jsonl")
    p.add_argument("--problems", default="results/seed0/data/mini/problems.jsonl")
    p.add_argument("--calibration", default="results/calibration.json")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--grid", default="results/seed0/samples/alpha*/mini/reasoning.jsonl",
                   help="samples files judged with and without one verdict cache (a glob)")
    p.add_argument("--smoke", action="store_true", help="judge a few mini programs instead of a run's samples")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.smoke:
            args.samples, args.problems, args.calibration = smoke_inputs(Path(tmp))
            args.grid = str(Path(tmp) / "grid*.jsonl")
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
        (Path(tmp) / "grid").mkdir()
        grid(args, Path(tmp) / "grid")


if __name__ == "__main__":
    main()
