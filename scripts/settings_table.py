"""Print the "what each setting measures" table of docs/settings.md: per setting and alpha, the mean over
seeds of each run's frontier.csv and behaviour.csv, plus, from the evaluations, the share of tools
samples with a call the sandbox ran (a well-formed call) and the share whose first attempt failed on
correctness (the most samples a second agentic turn can follow).

    python scripts/settings_table.py results 120 121 122 123 124 [--benchmark mini]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from ewa.verdicts import CORRECTNESS_FAILURES

SETTINGS = ("reasoning", "tools", "agentic")


def evaluation_shares(evals: Path) -> tuple[float, float]:
    """From one evaluation table: the share of samples with a call the sandbox ran (any outcome but a
    malformed call), and the share whose first attempt failed on correctness (a second agentic turn needs
    a failed public test, and a slow-but-correct attempt passes the small public examples)."""
    t = pd.read_parquet(evals, columns=["first_verdict", "tool_outcomes"])
    ran = t["tool_outcomes"].map(lambda o: o is not None and any(x != "malformed" for x in o)).mean()
    first_corr = t["first_verdict"].isin(CORRECTNESS_FAILURES).mean()
    return float(ran), float(first_corr)


def seed_table(run: Path, benchmark: str, setting: str) -> pd.DataFrame:
    frontier = pd.read_csv(run / "frontier" / benchmark / setting / "frontier.csv")
    behaviour = pd.read_csv(run / "frontier" / benchmark / setting / "behaviour.csv")
    t = frontier[["alpha", "ac_rate", "optimization_failure_rate", "correctness_failure_rate", "share_CE"]].merge(
        behaviour[["alpha", "tool_call_share", "tool_ran_share", "multi_turn_share", "first_ac_rate",
                   "tokens_per_sample"]], on="alpha")
    shares = [evaluation_shares(run / "evals" / f"alpha{a:+.2f}" / benchmark / f"{setting}.parquet")
              for a in t["alpha"]]
    t["call_ran"] = [ran if setting == "tools" else float("nan") for ran, _ in shares]
    t["first_corr"] = [first_corr for _, first_corr in shares]
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
