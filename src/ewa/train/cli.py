"""`ewa train`: GRPO-train one coverage regime from the shared init (the config's `grpo`, `sandbox` and
`regimes` sections); relaunches itself under `accelerate launch` when the job has GPUs."""
from __future__ import annotations

import argparse
import json
import logging
import subprocess

from ewa.errors import UserError
from ewa.runtime import configure_cpu


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--init", required=True, help="the shared init (HF model directory from `ewa init`)")
    parser.add_argument("--problems", required=True, help="train problems (canonical JSONL)")
    parser.add_argument("--regime", required=True, help="name of the coverage regime (in the config's regimes) this run rewards")
    parser.add_argument("--calibration", default=None, help="calibration.json of `ewa calibrate` (default: measure now)")
    parser.add_argument("--gpus", type=int, default=0, help="GPUs to train on (with grpo.accelerate_config)")
    parser.add_argument("--out", required=True, help="output directory: results/seed<N>/checkpoints/<regime>")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (1: tiny models lose more to thread sync than they gain)")


def regime_named(config: dict, name: str) -> dict:
    by_name = {r["name"]: r for r in config["regimes"]}
    if name not in by_name:
        raise UserError(f"--regime: unknown regime {name!r} (the config has {', '.join(by_name)})")
    return by_name[name]


def train_argv(args: argparse.Namespace) -> list[str]:
    """The namespace back as `ewa train` flags, for the processes accelerate launches."""
    argv = ["--config", args.config or "{}"]
    for name in ("init", "problems", "regime", "calibration", "gpus", "out", "threads"):
        if getattr(args, name) is not None:
            argv += [f"--{name}", str(getattr(args, name))]
    return argv


def train(args: argparse.Namespace, config: dict) -> int:
    from ewa.train.grpo import check_init, train_regime
    from ewa.train.launch import launch_command, under_launcher

    regime = regime_named(config, args.regime)
    settings = config["grpo"]
    if args.gpus > 0 and settings["accelerate_config"] and not under_launcher():
        check_init(args.init)  # fail before paying for a multi-process launch
        return subprocess.call(launch_command(train_argv(args), settings, args.gpus))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    configure_cpu(args.threads)
    record = train_regime(args.init, args.problems, regime, settings, args.out, config["seed"],
                          config["sandbox"], args.calibration)
    if record:
        print(json.dumps({"regime": regime["name"], "global_step": record["global_step"],
                          "weights_changed": record["weights_changed"]}))
    return 0


COMMANDS = {"train": (add_train_arguments, train)}
