"""How the samples of each alpha behaved in their inference setting, from the evaluation tables: CE and
how much of it is samples with no program at all, tool calls made and run, turns taken, and
first-attempt against final solve rates. This is what shows whether `tools` and `agentic` measured
anything beyond `reasoning`.

`no_answer_share` is the share of samples with no program (CE with `ce_kind` no_answer: in `tools`, a
model that ran its program and never restated it), part of `ce_share`; `last_run_share` the share whose
submission is the last program the tool ran (`sample.tools.submit: last_run`). Both are NaN (unknown)
for evaluation files written before those columns existed.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from ewa.verdicts import AC, CE, NO_ANSWER

# Values the evaluation rows and sample records hold (ewa.evaluate.run's `ce_kind`, the tools setting's
# `submitted`), spelled here so the analysis does not import the stages.
LAST_RUN = "last_run"  # a sample record's `submitted` when it submits the last program its tool ran

COLUMNS = ("alpha", "samples", "ce_share", "no_answer_share", "last_run_share", "tool_call_share", "tool_ran_share",
           "tool_calls_per_sample", "multi_turn_share", "first_ac_rate", "final_ac_rate", "revised_share", "tokens_per_sample")


def share(t: pd.DataFrame, column: str, value: str) -> float:
    """The share of rows whose `column` is `value`; NaN when the table has no such column (an older file)."""
    return float((t[column] == value).mean()) if column in t else float("nan")


def behaviour_row(alpha: float, path) -> dict:
    names = set(pq.read_schema(path).names)
    wanted = [c for c in ("verdict", "ce_kind", "submitted", "first_verdict", "turns", "tool_calls", "tool_outcomes",
                          "tokens_generated") if c in names]
    t = pq.read_table(path, columns=wanted).to_pandas()
    n = len(t)
    if not n:
        return {"alpha": alpha, "samples": 0}
    final = t["verdict"] == AC
    first = t["first_verdict"] == AC if "first_verdict" in t else final
    outcomes = t["tool_outcomes"] if "tool_outcomes" in t else pd.Series([[]] * n)
    calls = t["tool_calls"] if "tool_calls" in t else pd.Series(np.zeros(n))
    turns = t["turns"] if "turns" in t else pd.Series(np.ones(n))
    return {
        "alpha": alpha, "samples": n,
        "ce_share": float((t["verdict"] == CE).mean()),
        "no_answer_share": share(t, "ce_kind", NO_ANSWER),
        "last_run_share": share(t, "submitted", LAST_RUN),
        "tool_call_share": float((calls > 0).mean()),
        # a call "runs" when the sandbox ran its code to a normal exit
        "tool_ran_share": float(outcomes.map(lambda o: o is not None and "ok" in list(o)).mean()),
        "tool_calls_per_sample": float(calls.mean()),
        "multi_turn_share": float((turns > 1).mean()),
        "first_ac_rate": float(first.mean()),
        "final_ac_rate": float(final.mean()),
        "revised_share": float((first != final).mean()),  # samples whose later turns changed the verdict's AC-ness
        "tokens_per_sample": float(t["tokens_generated"].mean()) if "tokens_generated" in t else float("nan"),
    }


def behaviour_table(alphas, sources) -> pd.DataFrame:
    """One row per alpha (ascending, as the grid holds them); none for a grid not read from tables."""
    rows = [behaviour_row(float(a), p) for a, p in zip(alphas, sources or [])]
    return pd.DataFrame(rows, columns=list(COLUMNS))
