"""A problem family: one statement template, a seeded input generator by size, and reference programs.

An instance's parameter values are the first line of its input, and every reference program reads them
with one generic line right after its imports (`K=int(input())`), so all instances of a family share
one program text: a model that learned the family can solve an instance with unseen parameter values.
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
    brute: str  # program body; the line reading the params is inserted after its imports
    efficient: str
    wrong: tuple[str, ...]  # plausible efficient programs that pass the smallest test but not all
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


def param_reader(params: dict) -> str:
    """The line reading the parameters from the first input line: `T=int(input())`,
    `A,B=map(int,input().split())`, or `C=list(map(int,input().split()))` for one list-valued parameter."""
    names, values = list(params), list(params.values())
    if len(values) == 1 and isinstance(values[0], (list, tuple)):
        return f"{names[0]}=list(map(int,input().split()))"
    if not all(isinstance(v, int) for v in values):
        raise ValueError(f"mini: parameters must be ints or one list of ints, got {params!r}")
    if len(values) == 1:
        return f"{names[0]}=int(input())"
    return f"{','.join(names)}=map(int,input().split())"


def param_line(params: dict) -> str:
    """The first input line: the parameter values in the family's order, space-separated."""
    values = [x for v in params.values() for x in (v if isinstance(v, (list, tuple)) else [v])]
    return " ".join(map(str, values)) + "\n"


def param_sentence(params: dict) -> str:
    """The statement's note that the input starts with the parameters' line (the values, as they come)."""
    return f"The input starts with an extra line: {param_line(params).strip()}."


def with_reader(body: str, params: dict) -> str:
    """The program with the parameter-reading line after its leading import lines (the same text for
    every instance of a family)."""
    lines = body.strip("\n").split("\n")
    k = 0
    while k < len(lines) and lines[k].startswith(("import ", "from ")):
        k += 1
    return "\n".join(lines[:k] + [param_reader(params)] + lines[k:]) + "\n"


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
