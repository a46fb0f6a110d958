"""A problem family: one statement template, a seeded input generator by size, and reference programs.

Reference programs are short Python sources whose parameter values are spelled out on their own lines
(`K=3`) right after the imports, so a tiny model can copy them from the statement.
"""
from __future__ import annotations

import io
import random
import sys
from dataclasses import dataclass
from typing import Callable

LEVELS = 8  # tests per instance, from tiny (public) to large (brute force times out)
PUBLIC_LEVELS = 2
# Brute-force cost at level k relative to the largest test: the small half stays far below the time
# limit, the largest quarter far above it, so noise on a shared machine cannot flip a verdict.
COST_LADDER = (0.002, 0.008, 0.04, 0.15, 0.45, 1.0)  # levels 2..7; levels 0-1 are tiny fixed sizes


@dataclass(frozen=True)
class Family:
    name: str
    topic: str
    difficulty: str  # easy | medium | hard
    statement: str  # str.format template over the params
    brute: str  # program body; the param lines are inserted after its imports
    efficient: str
    wrong: tuple[str, ...]  # plausible efficient programs that pass the public tests but not all
    train: tuple[dict, ...]
    heldout: tuple[dict, ...]  # unseen parameter values of the same family
    sizes: Callable[[dict], list[int]]  # params -> the size knob n for each of the LEVELS tests
    gen: Callable[[random.Random, int, dict, int], str]  # (rng, n, params, level) -> stdin text
    complexity: tuple[str, str]  # (brute, efficient), for reports
    time_limit_s: float = 0.5
    memory_limit_mb: int = 256


def poly_sizes(n_big: int, p: float, tiny: tuple[int, int] = (3, 6)) -> list[int]:
    """Sizes for a brute force costing ~n^p: levels 2..7 follow COST_LADDER up to n_big."""
    return list(tiny) + [max(tiny[1] + 1, round(n_big * t ** (1 / p))) for t in COST_LADDER]


def cost_sizes(cost: Callable[[int], float], big: float, tiny: tuple[int, int], n_max: int = 10**6) -> list[int]:
    """Sizes for a brute force whose cost(n) is known (e.g. counted recursive calls): the smallest n
    reaching each rung of COST_LADDER times `big`."""
    sizes, n = list(tiny), tiny[1] + 1
    for t in COST_LADDER:
        while cost(n) < big * t and n < n_max:
            n += 1
        sizes.append(n)
        n += 1
    return sizes


def param_tag(params: dict) -> str:
    def fmt(v):
        return "-".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)
    return "_".join(f"{k}{fmt(v)}" for k, v in params.items())


def with_params(body: str, params: dict) -> str:
    """The program with one `NAME=value` line per parameter after its leading import lines."""
    lines = body.strip("\n").split("\n")
    k = 0
    while k < len(lines) and lines[k].startswith(("import ", "from ")):
        k += 1
    return "\n".join(lines[:k] + [f"{name}={value!r}" for name, value in params.items()] + lines[k:]) + "\n"


def run_source(source: str | object, stdin: str) -> str:
    """Run one of our own reference programs in this process (trusted code only: it is exec'd)."""
    code = compile(source, "<mini>", "exec") if isinstance(source, str) else source
    out, saved = io.StringIO(), (sys.stdin, sys.stdout)
    sys.stdin, sys.stdout = io.StringIO(stdin), out
    try:
        exec(code, {"__name__": "__main__"})
    finally:
        sys.stdin, sys.stdout = saved
    return out.getvalue()


def same_output(got: str, expected: str) -> bool:
    return got.split() == expected.split()


def arr(a) -> str:
    """The usual two-line input: n, then the n values."""
    return f"{len(a)}\n{' '.join(map(str, a))}\n"
