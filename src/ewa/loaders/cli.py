"""`ewa prepare`: convert a benchmark into the canonical problems.jsonl."""
from __future__ import annotations

import argparse
import sys

from ewa.io import json_object_arg, provenance, write_json
from ewa.loaders import FORMATS, load
from ewa.problems import write_problems


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--spec", help="a config dataset entry as JSON (format, input, split, ...); "
                   "the pipeline passes this instead of the flags below")
    p.add_argument("--format", choices=sorted(FORMATS))
    p.add_argument("--input", help="source file (optional for mini and humaneval, which ship their own)")
    p.add_argument("--out", required=True, help="problems.jsonl to write")
    p.add_argument("--split", default="all", help="mini: train | heldout | all")
    p.add_argument("--difficulty", nargs="*", help="keep only these difficulties")
    p.add_argument("--date-from", help="first contest date kept (YYYY-MM-DD)")
    p.add_argument("--date-to", help="last contest date kept (YYYY-MM-DD)")
    p.add_argument("--limit", type=int, help="keep the first N problems")
    p.add_argument("--seed", type=int, default=0, help="mini: generator seed")
    p.add_argument("--skip-invalid", action="store_true", help="skip malformed records, count them")
    p.add_argument("--options", default="{}", help="extra loader options as JSON (e.g. time_limit_s)")


SPEC_KEYS = ("format", "input", "split", "difficulty", "date_from", "date_to", "limit", "seed")


def run(args: argparse.Namespace) -> int:
    options = json_object_arg(args.options, "--options")
    if args.spec:
        spec = json_object_arg(args.spec, "--spec")
        for key in SPEC_KEYS:
            if key in spec:
                setattr(args, key, spec.pop(key))
        options.update(spec)
    if not args.format:
        raise ValueError("prepare: --format (or --spec with 'format') is required")
    report = load(args.format, args.input, split=args.split, difficulty=args.difficulty,
                  date_from=args.date_from, date_to=args.date_to, limit=args.limit,
                  skip_invalid=args.skip_invalid, seed=args.seed, **options)
    if not report.problems:
        raise ValueError(f"{args.format}: no problems left after filtering ({report.filtered} filtered, "
                         f"{len(report.skipped)} invalid)")
    write_problems(report.problems, args.out)
    write_json(args.out + ".meta.json", provenance(
        vars(args), problems=len(report.problems), skipped=report.skipped, filtered=report.filtered))
    for line in report.skipped:
        print(f"skipped: {line}", file=sys.stderr)
    print(f"{args.out}: {len(report.problems)} problems ({len(report.skipped)} invalid skipped, "
          f"{report.filtered} filtered)", file=sys.stderr)
    return 0
