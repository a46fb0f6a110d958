"""Seconds per GRPO step of the tiny model (8 prompts x 4 generations x up to 128 tokens) and the share of
the step spent judging the reward in the sandbox. Target: reward <= 20% of the step.

    .venv/bin/python benchmarks/train_step.py [--init results/seed0/init] [--steps 4] [--regime high]

Without --init it builds a tiny init with a short SFT on the mini train split first (not timed).
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ewa.data.mini.loader import load  # noqa: E402
from ewa.init.build import build_init  # noqa: E402
from ewa.problems import write_problems  # noqa: E402
from ewa.train.grpo import train_regime  # noqa: E402

REGIMES = [{"name": "low", "fraction": 0.5}, {"name": "high", "fraction": 1.0}]
TARGET_REWARD_SHARE = 0.20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--init", help="an init directory (default: build one)")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--regime", default="high", choices=[r["name"] for r in REGIMES])
    parser.add_argument("--sft-steps", type=int, default=150)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ewa-bench-") as tmp:
        tmp = Path(tmp)
        problems = tmp / "train.jsonl"
        write_problems(load(split="train", seed=0), problems)
        init = args.init
        if init is None:
            init = tmp / "init"
            start = time.perf_counter()
            build_init("tiny", {"seed": 0, "sft": {"steps": args.sft_steps}}, problems, init)
            print(f"built tiny init ({args.sft_steps} SFT steps) in {time.perf_counter() - start:.1f} s")
        settings = {"max_steps": args.steps, "prompts_per_step": 8, "num_generations": 4,
                    "max_completion_length": 128, "save_steps": 1000}
        regime = next(r for r in REGIMES if r["name"] == args.regime)
        start = time.perf_counter()
        train_regime(init, problems, regime, REGIMES, settings, tmp / "out", seed=0,
                     sandbox_settings={"workers": args.workers})
        wall = time.perf_counter() - start
        import pandas as pd

        metrics = pd.read_csv(tmp / "out" / "metrics.csv").iloc[1:]  # step 1 pays one-off warm-up costs
        step, reward = metrics["step_time_s"].mean(), metrics["reward_time_s"].mean()
        share = reward / step
        print(json.dumps({
            "steps_timed": len(metrics), "seconds_per_step": round(step, 3),
            "reward_seconds_per_step": round(reward, 3),
            "reward_share": round(share, 3), "target_share": TARGET_REWARD_SHARE,
            "share_vs_target": round(share / TARGET_REWARD_SHARE, 2), "completion_length": round(
                metrics["completion_length"].mean(), 1), "verdicts": {
                v: int(metrics[f"verdict_{v}"].sum()) for v in ("AC", "WA", "TLE", "MLE", "RE", "CE", "no_code")},
            "run_wall_s": round(wall, 1)}, indent=1))
        print("reward share", "within" if share <= TARGET_REWARD_SHARE else "ABOVE", "the 20% target")


if __name__ == "__main__":
    main()
