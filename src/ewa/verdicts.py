"""The judge's verdicts and the study's two failure classes, in one place for every stage.

An optimization failure (TLE, MLE) is a program that is too slow or too large on some test; a
correctness failure (WA, RE, CE) is a program that is wrong, crashes, or does not compile.

>>> failure_class("TLE"), failure_class("CE"), failure_class("AC")
('optimization', 'correctness', None)
>>> FAILURE_VERDICTS["optimization"]
('TLE', 'MLE')
"""
from __future__ import annotations

AC, WA, TLE, MLE, RE, CE = "AC", "WA", "TLE", "MLE", "RE", "CE"
VERDICTS = (AC, WA, TLE, MLE, RE, CE)  # the column order of every verdict-count array
FAILURE_VERDICTS = {"optimization": (TLE, MLE), "correctness": (WA, RE, CE)}
OPTIMIZATION_FAILURES = frozenset(FAILURE_VERDICTS["optimization"])
CORRECTNESS_FAILURES = frozenset(FAILURE_VERDICTS["correctness"])
# The two kinds of CE an evaluation row tells apart (`ce_kind`): no program was submitted at all, or the
# program did not compile. Both are correctness failures; the study reports how much of CE is each.
NO_ANSWER, COMPILE = "no_answer", "compile"


def failure_class(verdict: str) -> str | None:
    """'optimization', 'correctness', or None for AC; an unknown verdict is an error."""
    if verdict not in VERDICTS:
        raise ValueError(f"unknown verdict {verdict!r} (expected one of {', '.join(VERDICTS)})")
    return next((name for name, members in FAILURE_VERDICTS.items() if verdict in members), None)


def columns(verdicts) -> list[int]:
    """Positions of `verdicts` in VERDICTS, for summing the columns of a verdict-count array."""
    return [VERDICTS.index(v) for v in verdicts]
