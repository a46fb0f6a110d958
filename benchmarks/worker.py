"""Sample jobs in a worker (EWA_WORKER=1, ewa.worker) vs each in its own process (EWA_WORKER=0, the
baseline), as Snakemake runs them: `ewa sample` on the miniature's tiny model (random weights), one job
after another, each a new command. The served jobs' first one starts the worker and is counted. Both
runs must write the same samples, byte for byte.

    .venv/bin/python benchmarks/worker.py [--jobs 6 --problems 4 --n 4 --max-new-tokens 64] [--out DIR] [--smoke]

--smoke: 2 jobs of 1 problem x 1 sample on a pico model (checks the benchmark runs).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sample import PICO, tiny_model  # noqa: E402

EWA = Path(sys.executable).parent / "ewa"
OUT = Path(__file__).resolve().parent / "out" / "worker"


def run_jobs(out: Path, model: str, problems: Path, args, worker: bool) -> tuple[list[float], list[bytes]]:
    # A fresh idle time per run keeps this run's worker apart from any other's (ewa.worker keys on the env).
    env = {**os.environ, "EWA_WORKER": "1" if worker else "0", "EWA_WORKER_IDLE_S": "10",
           "EWA_BENCHMARK_RUN": str(time.time_ns())}
    config = json.dumps({"sample": {"n": args.n, "max_new_tokens": args.max_new_tokens, "batch_size": 16},
                         "seed": 0})
    times, outputs = [], []
    for job in range(args.jobs):
        target = out / ("served" if worker else "own") / f"job{job}.jsonl"
        start = time.perf_counter()
        subprocess.run([str(EWA), "sample", "--config", config, "--model", model, "--problems", str(problems),
                        "--setting", "reasoning", "--stream", "alpha+0.00", "--max-k", str(args.n), "--threads",
                        "1", "--out", str(target)], env=env, check=True, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
        outputs.append(target.read_bytes())
    return times, outputs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=6)
    ap.add_argument("--problems", type=int, default=4)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    if args.smoke:
        args.jobs, args.problems, args.n, args.max_new_tokens = 2, 1, 1, 4
    args.out.mkdir(parents=True, exist_ok=True)
    model = tiny_model(args.out / ("pico" if args.smoke else "tiny"), PICO if args.smoke else None)
    problems = args.out / "problems.jsonl"
    subprocess.run([str(EWA), "prepare", "--format", "mini", "--split", "heldout", "--limit", str(args.problems),
                    "--out", str(problems)], env={**os.environ, "EWA_WORKER": "0"}, check=True,
                   stderr=subprocess.DEVNULL)
    own, own_outputs = run_jobs(args.out, model, problems, args, worker=False)
    served, served_outputs = run_jobs(args.out, model, problems, args, worker=True)
    print(f"{args.jobs} sample jobs of {args.problems} problems x {args.n} samples, one after another")
    print(f"baseline, each job in its own process: {sum(own):.1f} s (median job {statistics.median(own):.2f} s)")
    print(f"in a worker (EWA_WORKER=1, its start counted): {sum(served):.1f} s (first job {served[0]:.2f} s, "
          f"median {statistics.median(served):.2f} s)")
    print(f"ratio own processes / worker: {sum(own) / sum(served):.2f}x")
    print(f"samples files that differ between the two: {sum(a != b for a, b in zip(own_outputs, served_outputs))} "
          f"of {args.jobs}")


if __name__ == "__main__":
    main()
