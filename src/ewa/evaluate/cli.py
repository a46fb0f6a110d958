"""`ewa calibrate`: measure this machine's time-limit factor; `ewa evaluate`: judge a samples file in the
sandbox. Both open the sandbox the config's `sandbox` section describes; flags override it."""
from __future__ import annotations

import argparse

from ewa.io import provenance, write_json


def sandbox_section(args: argparse.Namespace, config: dict) -> dict:
    overrides = {"backend": args.backend, "python": args.python}
    return {**config["sandbox"], **{k: v for k, v in overrides.items() if v is not None}}


def add_sandbox_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", "--sandbox-backend", dest="backend", default=None,
                        help="sandbox backend (default: the config's sandbox.backend)")
    parser.add_argument("--python", default=None, help="the sandbox interpreter (default: sandbox.python)")


def add_calibrate_arguments(parser: argparse.ArgumentParser) -> None:
    add_sandbox_arguments(parser)
    parser.add_argument("--out", required=True, help="where to write calibration.json")
    parser.add_argument("--repeats", type=int, default=None, help="runs of the workload; the fastest counts")


def calibrate(args: argparse.Namespace, config: dict) -> int:
    from ewa.sandbox import sandbox_from_config
    from ewa.sandbox.calibrate import NOMINAL_CPU_S, REPEATS, measure

    sandbox = sandbox_section(args, config)
    with sandbox_from_config(sandbox, workers=1, time_factor=1.0) as sb:
        record = measure(sb, args.repeats or REPEATS)
    write_json(args.out, {**record, "provenance": provenance({"sandbox": sandbox, "repeats": args.repeats})})
    print(f"time factor {record['time_factor']:.3f} (reference workload {record['reference_cpu_s']:.3f} s CPU, "
          f"nominal {NOMINAL_CPU_S} s) -> {args.out}")
    return 0


def add_evaluate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--problems", required=True, help="canonical problems.jsonl")
    parser.add_argument("--samples", required=True,
                        help="JSON Lines: problem_id, sample_id, and code (null: no answer, CE) or, with no code "
                             "key, a completion to extract it from (+ any columns to carry)")
    parser.add_argument("--out", required=True, help="results.parquet")
    add_sandbox_arguments(parser)
    parser.add_argument("--workers", type=int, default=0, help="fork servers (default: the CPUs granted, by affinity and cgroup quota)")
    parser.add_argument("--tiers", default=None, help="tiers.json: records each failing test's tier")
    parser.add_argument("--calibration", default=None, help="calibration.json (default: measure now)")
    parser.add_argument("--time-factor", type=float, default=None, help="use this time factor instead")
    parser.add_argument("--early-stop", action=argparse.BooleanOptionalAction, default=None,
                        help="stop a sample at its first failing test (default: evaluate.early_stop)")
    parser.add_argument("--judge-duplicates", action=argparse.BooleanOptionalAction, default=None,
                        help="run every copy of a program sampled twice for a problem (default: evaluate.judge_duplicates)")
    parser.add_argument("--verdict-cache", default=None, metavar="DIR",
                        help="reuse verdicts other evaluations judged (default: evaluate.verdict_cache)")
    parser.add_argument("--chunk-size", type=int, default=None, help="samples per resumable chunk")


def evaluate(args: argparse.Namespace, config: dict) -> int:
    from ewa.evaluate.run import CHUNK, evaluate_file

    flags = {"early_stop": args.early_stop, "judge_duplicates": args.judge_duplicates,
             "verdict_cache": args.verdict_cache}
    settings = {**config["evaluate"], **{k: v for k, v in flags.items() if v is not None}}
    evaluate_file(args.problems, args.samples, args.out, sandbox_section(args, config),
                  {k: settings[k] for k in ("early_stop", "judge_duplicates", "verdict_cache")}, tiers_path=args.tiers,
                  calibration=args.calibration, time_factor=args.time_factor, workers=args.workers or None,
                  chunk_size=args.chunk_size or CHUNK)
    return 0


COMMANDS = {"calibrate": (add_calibrate_arguments, calibrate), "evaluate": (add_evaluate_arguments, evaluate)}
