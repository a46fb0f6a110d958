"""What kind of program each alpha writes, and how each kind fails.

Each judged sample's approach is classified two ways:
- growth (ewa.analysis.growth): brute, efficient or unknown, from how its CPU time and memory grow
  over its size-ordered tests. It needs only the evaluation table and the problems file, so it works
  for any model: the main table (approaches.csv) uses it.
- declared: the plan line the tiny model's answers open with (`Approach: brute force.` /
  `Approach: efficient algorithm.`, see ewa.prompts.PLANS); an answer without one (any real model's)
  is "unstated". On the miniature it is the ground truth the growth classes are checked against.

Claim 2 of the study (correctness failures rise with coverage) needs efficient attempts to fail on
correctness more often than brute-force ones; the tables show, per alpha, the share of each approach
and the verdict mix within it. Evaluation stops at a sample's first failing test by default, so most
early correctness failures leave too little growth to read and land in `unknown` (see
ewa.analysis.growth): compare the declared table where plan lines exist.

Files of `ewa approaches` (write_approaches):
  approaches.csv     per (alpha, approach): n, share, verdict shares, opt (TLE+MLE), corr (WA+RE+CE), and
                     `classified_by` ("growth"; "plan line" when no problems file was given)
  declared.csv       the same table by plan line
  premise.csv        per alpha, by plan line: the study's premise (an efficient algorithm is harder to get
                     right than a brute force): brute-force attempts' AC share on the problems where a
                     brute force suffices, and each kind's correctness-failure share (premise_table)
  agreement.csv      per alpha: samples per (declared, growth) pair (`brute_as_unknown`: declared brute,
                     classified unknown), `agreement` (share of samples with both known where the two
                     agree) and `coverage` (share of samples with a plan line that growth classifies)
  classified.parquet every sample: alpha, ids, verdict, declared, growth, evidence, the growth measures
  provenance.json    inputs with their hashes, the thresholds
Without the problems file (test sizes) growth cannot be measured: approaches.csv is then the plan-line
table and only declared.csv, premise.csv and provenance.json join it.
"""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from ewa.analysis.growth import CLASSES, THRESHOLDS, classified, profiles, read_suites
from ewa.io import atomic_path, provenance, read_jsonl, sha256_file, write_json
from ewa.prompts import PLANS
from ewa.verdicts import FAILURE_VERDICTS, VERDICTS

APPROACH_OF_PLAN = {plan: kind for kind, plan in PLANS.items()}
PLAN_LINE = re.compile(r"^\s*(Approach: [^\n]*?\.)", re.MULTILINE)
GROUPS = {"opt": FAILURE_VERDICTS["optimization"], "corr": FAILURE_VERDICTS["correctness"]}
DECLARED = ("brute", "efficient", "unstated")


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
    return pd.DataFrame(rows, columns=["problem_id", "sample_id", "declared"])


def joined(alpha: float, evals: Path, samples: Path) -> pd.DataFrame:
    """One row per judged sample: its verdict and declared approach."""
    verdicts = pd.read_parquet(evals, columns=["problem_id", "sample_id", "verdict"])
    table = verdicts.merge(read_approaches(samples), on=["problem_id", "sample_id"], how="left")
    unmatched = int(table["declared"].isna().sum())
    if unmatched:
        raise ValueError(f"{samples}: {unmatched} judged sample(s) of {evals} are not in it")
    return table.assign(alpha=alpha)


def approach_table(judged: pd.DataFrame, by: str = "growth") -> pd.DataFrame:
    """Per (alpha, approach in column `by`): sample count, share of the alpha's samples, verdict shares
    within it."""
    counts = pd.crosstab([judged["alpha"], judged[by].rename("approach")], judged["verdict"])
    counts = counts.reindex(columns=list(VERDICTS), fill_value=0)
    n = counts.sum(axis=1)
    out = counts.div(n, axis=0)
    for group, verdicts in GROUPS.items():
        out[group] = out[sorted(verdicts)].sum(axis=1)
    out.insert(0, "n", n)
    out.insert(1, "share", n / n.groupby(level="alpha").transform("sum"))
    return out.reset_index()


def agreement_table(judged: pd.DataFrame) -> pd.DataFrame:
    """Per alpha: how the growth class meets the declared plan line (see the module docstring)."""
    rows = []
    for alpha, g in judged.groupby("alpha", sort=True):
        pairs = pd.crosstab(g["declared"], g["growth"]).reindex(index=DECLARED, columns=CLASSES, fill_value=0)
        stated = g[g["declared"] != "unstated"]
        both = stated[stated["growth"] != "unknown"]
        rows.append({"alpha": alpha, "n": len(g), "stated": len(stated), "both_known": len(both),
                     "agreement": (both["declared"] == both["growth"]).mean() if len(both) else float("nan"),
                     "coverage": len(both) / len(stated) if len(stated) else float("nan"),
                     **{f"{d}_as_{c}": int(pairs.loc[d, c]) for d in DECLARED for c in CLASSES}})
    return pd.DataFrame(rows)


def brute_suffices(path: Path | None) -> dict[str, bool]:
    """Problem id -> whether a brute force passes its whole suite. Only the miniature says: its builder
    marks every instance `meta.inputs` ("small": small inputs only, see ewa.data.mini.build). Other
    benchmarks (or no problems file) give {}, read no further than their first problem: a benchmark's
    file holds its hidden tests, and read_suites has already parsed it once."""
    if path is None:
        return {}
    marked = {}
    for _, rec in read_jsonl(path):
        inputs = (rec.get("meta") or {}).get("inputs")
        if inputs is None:
            return {}
        marked[rec["id"]] = inputs == "small"
    return marked if any(marked.values()) else {}


def premise_table(judged: pd.DataFrame, suffices: dict[str, bool]) -> pd.DataFrame:
    """Per alpha, from the plan lines: the premise the study's claim 2 rests on.

    brute_ac_where_suffices  AC share of brute-force attempts on the problems where a brute force
                             suffices (nan: no such problem is known, or no brute-force attempt on one)
    problems_mostly_brute_ac share of those problems (with a brute-force attempt) where most are AC
    brute_corr, efficient_corr  WA+RE+CE share among each kind's attempts, all problems
    corr_ratio               efficient_corr / brute_corr (the premise: well above 1)
    """
    rows = []
    for alpha, g in judged.groupby("alpha", sort=True):
        ok = g["verdict"] == "AC"
        wrong = g["verdict"].isin(GROUPS["corr"])
        brute, efficient = g["declared"] == "brute", g["declared"] == "efficient"
        there = brute & g["problem_id"].map(lambda pid: suffices.get(pid, False)).astype(bool)
        per_problem = ok[there].groupby(g.loc[there, "problem_id"]).mean()
        corr = {kind: wrong[mask].mean() if mask.any() else float("nan")
                for kind, mask in (("brute", brute), ("efficient", efficient))}
        rows.append({"alpha": alpha, "brute_suffices_problems": sum(suffices.values()),
                     "brute_attempts_there": int(there.sum()),
                     "brute_ac_where_suffices": ok[there].mean() if there.any() else float("nan"),
                     "problems_mostly_brute_ac": (per_problem > 0.5).mean() if len(per_problem) else float("nan"),
                     "brute_attempts": int(brute.sum()), "efficient_attempts": int(efficient.sum()),
                     "brute_corr": corr["brute"], "efficient_corr": corr["efficient"],
                     "corr_ratio": corr["efficient"] / corr["brute"] if corr["brute"] else float("nan")})
    return pd.DataFrame(rows)


def classify_grid(evals: list[tuple[float, Path]], samples: dict[float, Path], problems: Path | None) -> pd.DataFrame:
    """Every judged sample of every alpha with its declared approach and (given the problems file) its
    growth class; a problem's separating test comes from its brute forces at all alphas."""
    judged = pd.concat([joined(a, p, samples[a]) for a, p in evals], ignore_index=True)
    if problems is None:
        return judged
    suites = read_suites(problems)
    measured = classified(pd.concat([profiles(p, suites).assign(alpha=a) for a, p in evals], ignore_index=True))
    return judged.merge(measured, on=["alpha", "problem_id", "sample_id"], how="left", validate="one_to_one")


def write_approaches(evals: list[tuple[float, Path]], samples: dict[float, Path], problems: Path | None,
                     out_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Write the directory of `ewa approaches`; returns (approaches table, agreement table or None)."""
    judged = classify_grid(evals, samples, problems)
    by = "growth" if problems is not None else "declared"
    table = approach_table(judged, by).assign(classified_by="growth" if problems is not None else "plan line")
    agreement = agreement_table(judged) if problems is not None else None
    with atomic_path(out_dir) as tmp:
        tmp.mkdir()
        table.to_csv(tmp / "approaches.csv", index=False, float_format="%.4f")
        approach_table(judged, "declared").to_csv(tmp / "declared.csv", index=False, float_format="%.4f")
        premise_table(judged, brute_suffices(problems)).to_csv(tmp / "premise.csv", index=False, float_format="%.4f")
        if agreement is not None:
            agreement.to_csv(tmp / "agreement.csv", index=False, float_format="%.4f")
            judged.to_parquet(tmp / "classified.parquet", index=False)
        write_json(tmp / "provenance.json", provenance(
            {"evals": {str(p): sha256_file(p) for _, p in evals},
             "samples": {str(p): sha256_file(p) for p in samples.values()},
             "problems": {str(problems): sha256_file(problems)} if problems is not None else None,
             "classified_by": by, "thresholds": THRESHOLDS}))
    return table, agreement
