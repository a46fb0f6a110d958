"""What kind of program each alpha writes, and how each kind fails.

The tiny model's answers open with a plan line (`Approach: brute force.` / `Approach: efficient
algorithm.`, see ewa.prompts.PLANS), so a sample's intended approach is on record. Claim 2 of the study
(correctness failures rise with coverage) needs efficient attempts to fail on correctness more often
than brute-force ones; this table shows, per alpha, the share of each approach and the verdict mix
within it. Answers without a plan line (any real model) count as "unstated".
"""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from ewa.io import read_jsonl
from ewa.prompts import PLANS
from ewa.verdicts import FAILURE_VERDICTS, VERDICTS

APPROACH_OF_PLAN = {plan: kind for kind, plan in PLANS.items()}
PLAN_LINE = re.compile(r"^\s*(Approach: [^\n]*?\.)", re.MULTILINE)
GROUPS = {"opt": FAILURE_VERDICTS["optimization"], "corr": FAILURE_VERDICTS["correctness"]}


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
