"""`ewa prepare`: convert a benchmark into the canonical problems.jsonl; `ewa tiers`: its nested coverage
tiers. In the workflow the dataset comes from the config (`--dataset NAME` picks `train_data` or a
benchmark); by hand, the flags describe it."""
from __future__ import annotations

import argparse
import json
import sys

from ewa.errors import UserError
from ewa.io import atomic_path, provenance, write_json
from ewa.problems import iter_problems

SPEC_FLAGS = ("format", "input", "split", "difficulty", "date_from", "date_to", "limit", "verify_solutions")


def add_prepare_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", help="take the dataset from the config: 'train_data' or a benchmark name")
    p.add_argument("--format", help="the benchmark's format (`ewa formats` lists them)")
    p.add_argument("--input", help="source file, glob or directory (optional for formats that ship their own)")
    p.add_argument("--out", required=True, help="problems.jsonl to write (and <out>.meta.json)")
    p.add_argument("--split", help="the split, for a format that has several")
    p.add_argument("--difficulty", nargs="*", help="keep only these difficulties")
    p.add_argument("--date-from", help="first contest date kept (YYYY-MM-DD)")
    p.add_argument("--date-to", help="last contest date kept (YYYY-MM-DD)")
    p.add_argument("--limit", type=int, help="keep the first N problems")
    p.add_argument("--seed", type=int, help="seed of a format that generates or samples its problems (default: the "
                                            "config's seed)")
    p.add_argument("--skip-invalid", action="store_true", help="skip malformed records, count them")
    p.add_argument("--verify-solutions", action=argparse.BooleanOptionalAction, default=None,
                   help="a format that ships solutions: keep only problems one of whose solutions passes in the "
                        "sandbox (default: the dataset's verify_solutions; on for train_data)")
    p.add_argument("--calibration", help="calibration.json for the sandbox's time limits (default: measure now)")
    p.add_argument("--workers", type=int, help="sandbox workers verifying solutions (default: one per core)")


def dataset_spec(args: argparse.Namespace, config: dict) -> dict:
    """The dataset entry to load: the config's (`--dataset`), with any flag given on top."""
    if args.dataset == "train_data":
        spec = dict(config["train_data"])
    elif args.dataset is not None:
        if args.dataset not in config["benchmarks"]:
            raise UserError(f"--dataset: {args.dataset!r} is neither train_data nor one of the config's "
                            f"benchmarks ({', '.join(config['benchmarks'])})")
        spec = dict(config["benchmarks"][args.dataset])
    else:
        spec = {}
    spec.update({k: getattr(args, k) for k in SPEC_FLAGS if getattr(args, k) is not None})
    if "format" not in spec:
        raise UserError("prepare: --format (or --dataset naming a dataset of the config) is required")
    from ewa.config import validate

    validate({"benchmarks": {"dataset": spec}}, partial=True)  # flags are checked like config entries
    return spec


def prepare(args: argparse.Namespace, config: dict) -> int:
    from ewa.data import stream

    spec = dataset_spec(args, config)
    seed = args.seed if args.seed is not None else config["seed"]
    options = {k: v for k, v in spec.items() if k not in ("format", "input")}

    def sandbox():
        from ewa.sandbox import sandbox_from_config
        return sandbox_from_config(config["sandbox"], calibration=args.calibration, workers=args.workers)

    problems, report = stream(spec["format"], spec.get("input"), skip_invalid=args.skip_invalid, seed=seed,
                              sandbox=sandbox, **options)
    # Each problem is written as it comes; the file appears under its name only once all are written.
    with atomic_path(args.out) as tmp:
        with open(tmp, "w") as f:
            for problem in problems:
                f.write(json.dumps(problem.to_record(), ensure_ascii=False) + "\n")
        dropped = report.dropped_counts()
        _print_skipped_and_verified(report)
        if not report.kept:
            raise UserError(f"{spec['format']}: no problems left after filtering ({report.filtered} filtered, "
                            f"{len(report.skipped)} invalid, {len(report.dropped)} dropped: {_counts(dropped)})")
    write_json(args.out + ".meta.json", provenance(
        {**spec, "seed": seed}, problems=report.kept, skipped=report.skipped, filtered=report.filtered,
        dropped=dropped, dropped_problems=[str(d) for d in report.dropped], verification=report.verification,
        output_rules=report.output_rules))
    print(f"{args.out}: {report.kept} problems ({len(report.skipped)} invalid skipped, "
          f"{report.filtered} filtered, {len(report.dropped)} dropped" + (f": {_counts(dropped)}; each named in "
                                                                          f"{args.out}.meta.json" if dropped else "")
          + ")", file=sys.stderr)
    return 0


def _print_skipped_and_verified(report) -> None:
    for line in report.skipped:
        print(f"skipped: {line}", file=sys.stderr)
    if report.verification is not None:
        v = report.verification
        print(f"verify_solutions: {v['checked']} problems checked in the sandbox: {v['kept']} kept, "
              f"{v['no_python_solution']} dropped with no Python 3 solution, {v['solution_fails']} dropped "
              f"because it fails here" + (f" ({v['unchecked']} left unchecked past the limit)" if v["unchecked"] else ""),
              file=sys.stderr)


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items())) or "none"


def add_tiers_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--problems", required=True)
    p.add_argument("--out", required=True)


def tiers(args: argparse.Namespace, config: dict) -> int:
    from ewa.tiers import write_tiers

    write_tiers(iter_problems(args.problems), config["regimes"], args.out)  # one problem in memory at a time
    return 0


def add_formats_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="one JSON object per format")


def list_formats(args: argparse.Namespace, config: dict) -> int:
    from ewa import formats

    for name in formats.names():
        fmt = formats.get(name)
        row = {"name": fmt.name, "module": fmt.module, "description": fmt.description, "input": fmt.input,
               "options": sorted(fmt.options), "splits": list(fmt.splits or ()), "judges": [s.name for s in fmt.semantics],
               "harnesses": sorted(fmt.harnesses), "verifiable": fmt.verifiable,
               "min_python": ".".join(map(str, fmt.min_python))}
        if args.json:
            print(json.dumps(row))
            continue
        extras = [f"input {fmt.input}", f"judges {', '.join(row['judges']) or 'plain'}",
                  f"Python >= {row['min_python']}"]
        extras += [f"splits {', '.join(row['splits'])}"] if len(row["splits"]) > 1 else []
        extras += [f"keys {', '.join(row['options'])}"] if row["options"] else []
        extras += ["verifiable"] if fmt.verifiable else []
        print(f"{name:<14} {fmt.description}\n{'':<14} {fmt.module}; {'; '.join(extras)}")
    return 0


COMMANDS = {"prepare": (add_prepare_arguments, prepare), "tiers": (add_tiers_arguments, tiers),
            "formats": (add_formats_arguments, list_formats)}
