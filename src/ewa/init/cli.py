"""`ewa init`: build the shared initial model from the config's `model` section."""
from __future__ import annotations

import argparse
import json
import logging

from ewa.runtime import configure_cpu


def add_init_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--init", help="'tiny' or a local HF model directory (default: the config's model.init)")
    parser.add_argument("--problems", required=True, help="train problems (canonical JSONL)")
    parser.add_argument("--out", required=True, help="output HF model directory")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (1: tiny models lose more to thread sync than they gain)")


def init_model(args: argparse.Namespace, config: dict) -> dict:
    """The validated `model` section to build. With --init naming another model, the section as given is
    validated again for that model: the tiny init's SFT defaults never fine-tune a model directory."""
    if not args.init or args.init == config["model"]["init"]:
        return config["model"]
    from ewa.config import read_arg, section

    return section("model", {**(read_arg(args.config).get("model") or {}), "init": args.init})


def init(args: argparse.Namespace, config: dict) -> int:
    from ewa.init.build import build_init

    model = init_model(args, config)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    configure_cpu(args.threads)
    from ewa.progress import Progress

    # the warm start's steps (none for a model used as it is): lines and the job's progress file
    with Progress("init", None, "steps", out=args.out, label="ewa init"):
        record = build_init(model, args.problems, args.out, seed=config["seed"], sandbox=config["sandbox"])
    print(json.dumps({k: record[k] for k in ("init", "seed", "n_problems") if k in record}))
    return 0


COMMANDS = {"init": (add_init_arguments, init)}
