"""The `ewa` command: one subcommand per pipeline stage, each implemented in its own module.

Each module exposes `add_arguments(parser)` and `run(args)`; it is imported only when its subcommand
runs, so `ewa prepare` does not pay for importing torch.
"""
from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = {
    "prepare": ("ewa.loaders.cli", "convert a benchmark into the canonical problems.jsonl"),
    "tiers": ("ewa.tiers_cli", "write the nested coverage tiers of a problems file"),
    "calibrate": ("ewa.sandbox.calibrate", "time a reference workload; write the time-limit factor"),
    "evaluate": ("ewa.evaluate", "judge a samples file in the sandbox; write verdicts as parquet"),
    "init": ("ewa.models.init_cli", "build the shared initial model (tiny, or a local HF directory)"),
    "train": ("ewa.train.grpo", "GRPO-train one coverage regime from the shared init"),
    "merge": ("ewa.merge", "theta(a) = (1-a)*theta_A + a*theta_B for one or many alphas"),
    "sample": ("ewa.sample.cli", "sample a model on a benchmark in one inference setting"),
    "metrics": ("ewa.metrics_cli", "pass@k, verdict mix and failure rates of evaluated samples"),
    "frontier": ("ewa.frontier", "aggregate the alpha grid into the frontier and ensembles"),
    "claims": ("ewa.claims", "test the study's four claims on one run's alpha grid, with bootstrap CIs"),
    "approaches": ("ewa.approaches", "per alpha: the approach each sample declares and its verdict mix"),
}


class UserError(ValueError):
    """Bad input from the user: printed as one line, exit code 2, no traceback."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ewa", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    argv = sys.argv[1:] if argv is None else argv
    wanted = next((a for a in argv if not a.startswith("-")), None)
    modules = {}
    for name, (module_name, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == wanted:  # import only the module that will run
            modules[name] = importlib.import_module(module_name)
            modules[name].add_arguments(p)
    args = parser.parse_args(argv)
    try:
        return modules[args.command].run(args) or 0
    except (ValueError, FileNotFoundError) as e:  # bad input (UserError included): one line, no traceback
        print(f"ewa {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
