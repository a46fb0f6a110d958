"""The `ewa` command: one subcommand per pipeline step, each in its stage's `cli.py`.

Every subcommand takes `--config`: the experiment config, or the slice of it the step reads (inline JSON
or a YAML/JSON file), validated against the packaged schema with every default filled. The workflow
passes each job its slice this way; flags a person types (e.g. `--backend`) override it. A stage module
is imported only when its subcommand runs, so `ewa prepare` does not pay for importing torch.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

# name -> (stage module exposing COMMANDS[name] = (add_arguments, run), help)
COMMANDS = {
    "prepare": ("ewa.data.cli", "convert a benchmark into the canonical problems.jsonl"),
    "tiers": ("ewa.data.cli", "write the nested coverage tiers of a problems file"),
    "formats": ("ewa.data.cli", "list the benchmark formats (built-in and installed), their keys and judges"),
    "init": ("ewa.init.cli", "build the shared initial model (tiny, or a local HF directory)"),
    "train": ("ewa.train.cli", "GRPO-train one coverage regime from the shared init"),
    "signal": ("ewa.train.signal", "before GRPO: sample the init on training problems; share of groups with mixed rewards"),
    "merge": ("ewa.merge.cli", "theta(a) = (1-a)*theta_A + a*theta_B for one or many alphas"),
    "merge-point": ("ewa.merge.cli", "sum_i w_i * theta_i (weights summing to 1): a point of a merge family"),
    "sample": ("ewa.sample.cli", "sample a model on a benchmark in one inference setting"),
    "calibrate": ("ewa.evaluate.cli", "time a reference workload; write the time-limit factor"),
    "evaluate": ("ewa.evaluate.cli", "judge a samples file in the sandbox; write verdicts as parquet"),
    "frontier": ("ewa.analysis.cli", "aggregate the alpha grid into the frontier and ensembles"),
    "claims": ("ewa.analysis.cli", "test the study's four claims on one run's alpha grid, with bootstrap CIs"),
    "approaches": ("ewa.analysis.cli", "per alpha: the approach each sample declares and its verdict mix"),
    "science": ("ewa.analysis.cli", "combine several seeds' claims into one table and a seed-band plot"),
    "front": ("ewa.analysis.cli", "the report's front page: the study, this run's config and its claims"),
    "training": ("ewa.analysis.cli", "training curves: GRPO per regime and the warm start's loss, or over seeds"),
    "status": ("ewa.status", "a run in flight or ended: jobs per rule, running jobs' progress, failures, ETA"),
    "families": ("ewa.analysis.cli", "compare the merge families' fronts: hypervolumes with cluster-bootstrap CIs"),
    "plan": ("ewa.plan.cli", "GPUs, memory per GPU, hours and disk of every rule on a profile, before queueing"),
    "preflight": ("ewa.preflight", "check this node before queueing: sandbox, judge interpreter, GPU stack, free disk"),
    "gpu-check": ("ewa.gpucheck.cli", "a new GPU node's first check: merge, sampling, judge, GRPO, memory vs plan"),
    "stage": ("ewa.stage", "on a login node: download a config's Hugging Face models and data into the cache, pinned"),
}
# Commands that read a whole experiment (--configfile) rather than a stage's slice (--config).
WHOLE_EXPERIMENT = {"plan", "stage", "status"}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if os.environ.get("EWA_WORKER") == "1":  # a job of a local run: in a worker that imported torch once
        from ewa import worker

        if worker.wanted(argv) and (code := worker.run_in_worker(argv)) is not None:
            return code
    return run_command(argv)


def run_command(argv: list[str]) -> int:
    """`ewa argv` in this process."""
    parser = argparse.ArgumentParser(prog="ewa", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    wanted = next((a for a in argv if not a.startswith("-")), None)
    runners = {}
    for name, (module_name, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == wanted:  # import only the stage that will run
            add_arguments, runners[name] = importlib.import_module(module_name).COMMANDS[name]
            if name not in WHOLE_EXPERIMENT:
                p.add_argument("--config", default=None, metavar="JSON|FILE",
                               help="the experiment config or this step's slice of it (default: the schema's defaults)")
            add_arguments(p)
    args = parser.parse_args(argv)
    from ewa.config import from_arg

    try:
        return runners[args.command](args, from_arg(getattr(args, "config", None))) or 0
    except (ValueError, FileNotFoundError) as e:  # bad input (UserError included): one line, no traceback
        print(f"ewa {args.command}: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # a full or read-only disk is the operator's to fix, not a bug to trace
        from ewa.io import DISK_ERRNOS

        if e.errno not in DISK_ERRNOS:
            raise
        print(f"ewa {args.command}: error: {e.filename or 'writing output'}: {e.strerror.lower()}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
