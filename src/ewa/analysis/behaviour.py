"""How the samples of each alpha behaved in their inference setting, from the evaluation tables: answers
with no program (CE), tool calls made and run, turns taken, and first-attempt against final solve rates.
This is what shows whether `tools` and `agentic` measured anything beyond `reasoning`.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from ewa.verdicts import AC, CE

COLUMNS = ("alpha", "samples", "ce_share", "tool_call_share", "tool_ran_share", "tool_calls_per_sample",
           "multi_turn_share", "first_ac_rate", "final_ac_rate", "revised_share", "tokens_per_sample")


def behaviour_row(alpha: float, path) -> dict:
    names = set(pq.read_schema(path).names)
    wanted = [c for c in ("verdict", "first_verdict", "turns", "tool_calls", "tool_outcomes", "tokens_generated")
              if c in names]
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
