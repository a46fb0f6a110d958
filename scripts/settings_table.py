"""Print the README's "what each setting measures" table: per setting and alpha, the mean over seeds of
each run's frontier.csv and behaviour.csv, plus the share of tools samples with a call the sandbox ran
(a well-formed call, from the sample files) and the share whose first attempt failed on correctness (from
the evaluations: the most samples a second agentic turn can follow).

    python scripts/settings_table.py results 110 111 112 113 114 [--benchmark mini]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

SETTINGS = ("reasoning", "tools", "agentic")


def tool_ran_share(samples: Path) -> float:
    """Share of samples with at least one call the sandbox ran (anything but a malformed call)."""
    rows = [json.loads(line) for line in samples.read_text().splitlines() if line.strip()]
    return sum(any(o != "malformed" for o in r.get("tool_outcomes") or []) for r in rows) / len(rows)


def first_correctness_failures(evals: Path) -> float:
    """Share of samples whose first attempt failed on correctness (WA/RE/CE): a second agentic turn needs a
    failed public test, and a slow-but-correct attempt passes the small public examples."""
    first = pd.read_parquet(evals, columns=["first_verdict"])["first_verdict"]
    return float(first.isin(["WA", "RE", "CE"]).mean())


def seed_table(run: Path, benchmark: str, setting: str) -> pd.DataFrame:
    frontier = pd.read_csv(run / "frontier" / benchmark / setting / "frontier.csv")
    behaviour = pd.read_csv(run / "frontier" / benchmark / setting / "behaviour.csv")
    t = frontier[["alpha", "ac_rate", "optimization_failure_rate", "correctness_failure_rate", "share_CE"]].merge(
        behaviour[["alpha", "tool_call_share", "tool_ran_share", "multi_turn_share", "first_ac_rate",
                   "tokens_per_sample"]], on="alpha")
    t["call_ran"] = [tool_ran_share(run / "samples" / f"alpha{a:+.2f}" / benchmark / f"{setting}.jsonl")
                     if setting == "tools" else float("nan") for a in t["alpha"]]
    t["first_corr"] = [first_correctness_failures(run / "evals" / f"alpha{a:+.2f}" / benchmark / f"{setting}.parquet")
                       for a in t["alpha"]]
    return t


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", type=Path)
    p.add_argument("seeds", type=int, nargs="+")
    p.add_argument("--benchmark", default="mini")
    args = p.parse_args()
    print("| setting | alpha | AC | TLE+MLE | WA+RE+CE | of which CE | made a tool call | a call the sandbox ran "
          "| a call ran to a normal exit | took >1 turn | first attempt WA+RE+CE | first-attempt AC | tokens/sample |")
    print("|" + "---|" * 13)
    for setting in SETTINGS:
        runs = [seed_table(args.results / f"seed{s}", args.benchmark, setting) for s in args.seeds]
        mean = pd.concat(runs).groupby("alpha").mean()
        for alpha, r in mean.iterrows():
            ran = "–" if pd.isna(r.call_ran) else f"{r.call_ran:.3f}"
            print(f"| {setting} | {alpha:+.2f} | {r.ac_rate:.3f} | {r.optimization_failure_rate:.3f} | "
                  f"{r.correctness_failure_rate:.3f} | {r.share_CE:.3f} | {r.tool_call_share:.3f} | {ran} | "
                  f"{r.tool_ran_share:.3f} | {r.multi_turn_share:.3f} | {r.first_corr:.3f} | {r.first_ac_rate:.3f} | "
                  f"{r.tokens_per_sample:.0f} |")


if __name__ == "__main__":
    main()
