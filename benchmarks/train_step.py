"""Share of a GRPO step of the tiny model (8 prompts x 4 generations x up to 128 tokens) spent judging the
reward in the sandbox, against the baseline of the whole step (TRL's step_time: generation, reward, loss and
backward) measured in the same run by the real trainer (ewa.train.grpo.train_regime). Target: reward <= 20%
of the step.

    .venv/bin/python benchmarks/train_step.py [--init results/seed0/init] [--steps 4] [--regime high]
                                              [--calibration results/calibration.json] [--threads 1] [--smoke]

Without --init it builds a tiny init with a short SFT on the mini train split first (not timed). --smoke
runs the smallest run that still goes through every part (a pico init, 2 families, 2 prompts x 2
generations); its untrained model rarely writes code, so its share says nothing about the target.
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from ewa.config import section  # noqa: E402
from ewa.data.mini.loader import load  # noqa: E402
from ewa.init.build import build_init  # noqa: E402
from ewa.problems import write_problems  # noqa: E402
from ewa.runtime import configure_cpu  # noqa: E402
from ewa.train.grpo import train_regime  # noqa: E402

REGIMES = [{"name": "low", "fraction": 0.5}, {"name": "high", "fraction": 1.0}]
TARGET_REWARD_SHARE = 0.20
STEP = {"prompts_per_step": 8, "num_generations": 4, "max_completion_length": 128}
SMOKE_STEP = {"prompts_per_step": 2, "num_generations": 2, "max_completion_length": 32}
# A pico model (tests/helpers.py PICO) and reasoning-only SFT, so the smoke init needs no sandbox traces.
SMOKE_MODEL = {"tiny": {"vocab_size": 600, "hidden_size": 32, "num_layers": 2, "num_heads": 2, "num_kv_heads": 1,
                        "intermediate_size": 64, "max_position_embeddings": 512},
               "sft": {"mix": {"brute": 1, "efficient": 1, "wrong": 1, "tools": 0, "agentic": 0}}}
SMOKE_FAMILIES = ["pairs_with_difference", "two_sum_count"]  # generating every family's tests is slow


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--init", help="an init directory (default: build one)")
    parser.add_argument("--steps", type=int, default=4, help="GRPO steps; the first is not timed (warm-up)")
    parser.add_argument("--regime", default="high", choices=[r["name"] for r in REGIMES])
    parser.add_argument("--sft-steps", type=int, default=150, help="SFT steps of the init built without --init")
    parser.add_argument("--calibration", help="calibration.json for the sandbox's time limits (default: measure now)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (`ewa train`'s default)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the benchmark runs, measures little")
    args = parser.parse_args()
    if args.smoke:
        args.steps, args.sft_steps = 2, min(args.sft_steps, 2)
    if args.steps < 2:
        parser.error("--steps: at least 2 (the first step is warm-up and is not timed)")
    configure_cpu(args.threads)
    with tempfile.TemporaryDirectory(prefix="ewa-bench-") as tmp:
        tmp = Path(tmp)
        problems = tmp / "train.jsonl"
        write_problems(load(split="train", seed=0, families=SMOKE_FAMILIES if args.smoke else None), problems)
        init = args.init
        if init is None:
            init = tmp / "init"
            model = {"init": "tiny", **(SMOKE_MODEL if args.smoke else {})}
            model = section("model", {**model, "sft": {**model.get("sft", {}), "steps": args.sft_steps}})
            start = time.perf_counter()
            build_init(model, problems, init, seed=0, sandbox=section("sandbox"))
            print(f"built tiny init ({args.sft_steps} SFT steps) in {time.perf_counter() - start:.1f} s")
        settings = {**(SMOKE_STEP if args.smoke else STEP), "max_steps": args.steps, "save_steps": 1000}
        regime = next(r for r in REGIMES if r["name"] == args.regime)
        start = time.perf_counter()
        record = train_regime(init, problems, regime, section("grpo", settings), tmp / "out", seed=0,
                              sandbox=section("sandbox"), calibration=args.calibration)
        wall = time.perf_counter() - start
        import pandas as pd

        metrics = pd.read_csv(tmp / "out" / "metrics.csv").iloc[1:]  # step 1 pays one-off warm-up costs
    step, reward = metrics["step_time_s"].mean(), metrics["reward_time_s"].mean()
    share = reward / step
    print(json.dumps({
        "steps_timed": len(metrics), "seconds_per_step": round(step, 3), "reward_seconds_per_step": round(reward, 3),
        "programs_run": int(metrics["programs_run"].sum()), "completions": int(metrics["completions"].sum()),
        "completion_length": round(metrics["completion_length"].mean(), 1),
        "verdicts": {v: int(metrics[f"verdict_{v}"].sum()) for v in ("AC", "WA", "TLE", "MLE", "RE", "CE", "no_code")},
        "sandbox": {k: record["sandbox"][k] for k in ("backend", "workers", "time_factor")},
        "run_wall_s": round(wall, 1)}, indent=1))
    print(f"baseline, whole GRPO step (generation + reward + loss + backward): {step:.3f} s")
    print(f"sandboxed reward ({record['sandbox']['backend']}, {int(metrics['programs_run'].sum())} programs run): "
          f"{reward:.3f} s")
    print(f"ratio reward / whole step: {share:.3f}x  (target <= {TARGET_REWARD_SHARE:.2f}: "
          f"{'met' if share <= TARGET_REWARD_SHARE else 'NOT met'})")


if __name__ == "__main__":
    main()
