"""`ewa approaches`: what kind of program each alpha writes, and how each kind fails.

    ewa approaches --evals alpha=A:EVALS.parquet ... --samples alpha=A:SAMPLES.jsonl ... --out approaches.csv

The tiny model's answers open with a plan line (`Approach: brute force.` / `Approach: efficient
algorithm.`, see ewa.prompts.PLANS), so a sample's intended approach is on record. Claim 2 of the study
(correctness failures rise with coverage) needs efficient attempts to fail on correctness more often
than brute-force ones; this table shows, per alpha, the share of each approach and the verdict mix
within it. Answers without a plan line (any real model) count as "unstated".
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import pandas as pd

from ewa.frontier import parse_eval_spec
from ewa.io import atomic_path, provenance, read_jsonl, sha256_file, write_json
from ewa.merge import alpha_tag
from ewa.prompts import PLANS
from ewa.sandbox.types import CORRECTNESS_FAILURES, OPTIMIZATION_FAILURES, VERDICTS

APPROACH_OF_PLAN = {plan: kind for kind, plan in PLANS.items()}
PLAN_LINE = re.compile(r"^\s*(Approach: [^\n]*?\.)", re.MULTILINE)
GROUPS = {"opt": OPTIMIZATION_FAILURES, "corr": CORRECTNESS_FAILURES}


def approach_of(completion: str) -> str:
    """The approach a completion's first plan line declares: brute, efficient, or unstated."""
    match = PLAN_LINE.search(completion or "")
    return APPROACH_OF_PLAN.get(match[1], "unstated") if match else "unstated"


def read_approaches(path: Path) -> pd.DataFrame:
    rows = []
    for line, rec in read_jsonl(path):
        if "problem_id" not in rec or "sample_id" not in rec:
            raise ValueError(f"{path}:{line}: a sample needs 'problem_id' and 'sample_id'")
        rows.append((rec["problem_id"], rec["sample_id"], approach_of(rec.get("completion") or rec.get("code", ""))))
    return pd.DataFrame(rows, columns=["problem_id", "sample_id", "approach"])


def joined(alpha: float, evals: Path, samples: Path) -> pd.DataFrame:
    """One row per judged sample: its verdict and declared approach."""
    verdicts = pd.read_parquet(evals, columns=["problem_id", "sample_id", "verdict"])
    table = verdicts.merge(read_approaches(samples), on=["problem_id", "sample_id"], how="left")
    unmatched = int(table["approach"].isna().sum())
    if unmatched:
        raise ValueError(f"{samples}: {unmatched} judged sample(s) of {evals} are not in it")
    return table.assign(alpha=alpha)


def approach_table(judged: pd.DataFrame) -> pd.DataFrame:
    """Per (alpha, approach): sample count, share of the alpha's samples, verdict shares within it."""
    counts = pd.crosstab([judged["alpha"], judged["approach"]], judged["verdict"])
    counts = counts.reindex(columns=list(VERDICTS), fill_value=0)
    n = counts.sum(axis=1)
    out = counts.div(n, axis=0)
    for group, verdicts in GROUPS.items():
        out[group] = out[sorted(verdicts)].sum(axis=1)
    out.insert(0, "n", n)
    out.insert(1, "share", n / n.groupby(level="alpha").transform("sum"))
    return out.reset_index()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--evals", nargs="+", required=True, help="alpha=A:PATH evaluation tables")
    parser.add_argument("--samples", nargs="+", required=True, help="alpha=A:PATH sample files, one per alpha of --evals")
    parser.add_argument("--out", required=True, help="approaches.csv (a provenance record is written beside it)")


def run(args: argparse.Namespace) -> None:
    evals = dict((alpha_tag(a), (a, p)) for a, p in map(parse_eval_spec, args.evals))
    samples = dict((alpha_tag(a), p) for a, p in map(parse_eval_spec, args.samples))
    if set(evals) != set(samples):
        raise ValueError(f"--samples alphas {sorted(samples)} differ from --evals alphas {sorted(evals)}")
    judged = pd.concat([joined(a, p, samples[tag]) for tag, (a, p) in sorted(evals.items(), key=lambda t: t[1][0])])
    table = approach_table(judged)
    out = Path(args.out)
    with atomic_path(out) as tmp:
        table.to_csv(tmp, index=False, float_format="%.4f")
    write_json(out.with_suffix(".provenance.json"), provenance(
        {"evals": {str(p): sha256_file(p) for _, p in evals.values()},
         "samples": {str(p): sha256_file(p) for p in samples.values()}}))
    for r in table.itertuples():
        print(f"alpha {r.alpha:+.2f} {r.approach:>9}: share {r.share:.3f}, AC {r.AC:.3f}, "
              f"TLE+MLE {r.opt:.3f}, WA+RE+CE {r.corr:.3f} (n={r.n})")
