"""Nested unit-test coverage tiers: a regime's tests are a prefix of the tests ordered by input size.

A regime is `{name, fraction}` (share of the suite, rounded up, at least one test) or
`{name, max_size}` (every test whose input has at most that many bytes). Because every regime is a
prefix of the same order, tier k's tests are a subset of tier k+1's whenever the regimes are listed
from low to high coverage, which `check_regimes` enforces.
"""
from __future__ import annotations

import json
import math
import os
from typing import Iterable, Sequence

from ewa.errors import UserError
from ewa.io import atomic_path
from ewa.problems import Problem, Test, size_order


class TierError(UserError):
    pass


def prefix_length(tests: Sequence[Test], regime: dict) -> int:
    order = size_order(tests)
    if "fraction" in regime:
        return max(1, math.ceil(regime["fraction"] * len(tests) - 1e-9))
    limit = regime["max_size"]
    return sum(1 for i in order if tests[i].size <= limit)


def regime_tests(problem: Problem, regime: dict) -> list[int]:
    """Indices of the tests a reward under `regime` requires, smallest inputs first."""
    n = prefix_length(problem.tests, regime)
    if n == 0:
        raise TierError(f"regime {regime['name']!r} selects no tests of problem {problem.id!r}")
    return size_order(problem.tests)[:n]


def check_regimes(regimes: Sequence[dict]) -> None:
    """Regimes must have unique names and be listed from low to high coverage, all of one kind."""
    names = [r["name"] for r in regimes]
    if len(set(names)) != len(names):
        raise TierError(f"regimes: duplicate name in {names}")
    kinds = {"fraction" if "fraction" in r else "max_size" for r in regimes}
    if len(kinds) > 1:
        raise TierError("regimes: use either 'fraction' or 'max_size' for all regimes, not both")
    (kind,) = kinds
    values = [r[kind] for r in regimes]
    if values != sorted(values):
        raise TierError(f"regimes: must be listed from low to high coverage by {kind}, got {values}")


def tier_of_tests(problem: Problem, regimes: Sequence[dict]) -> list[int]:
    """For each test, the index of the lowest regime that requires it (len(regimes) if none does)."""
    tier = [len(regimes)] * len(problem.tests)
    for k in reversed(range(len(regimes))):
        for i in regime_tests(problem, regimes[k]):
            tier[i] = k
    return tier


def problem_tiers(problem: Problem, regimes: Sequence[dict]) -> dict:
    """One problem's entry of the tier file: each regime's test indices and each test's tier."""
    return {"regime_tests": {r["name"]: regime_tests(problem, r) for r in regimes},
            "test_tier": tier_of_tests(problem, regimes)}


def build_tiers(problems: Iterable[Problem], regimes: Sequence[dict]) -> dict:
    """The tier file of a benchmark, as a dict: its regimes, and per problem its problem_tiers."""
    check_regimes(regimes)
    return {"regimes": [dict(r) for r in regimes], "problems": {p.id: problem_tiers(p, regimes) for p in problems}}


def write_tiers(problems: Iterable[Problem], regimes: Sequence[dict], path: str | os.PathLike) -> None:
    """build_tiers' JSON, written a problem (a line) at a time as the problems come, so that memory stays
    flat in their number; renamed onto `path` once complete."""
    check_regimes(regimes)
    with atomic_path(path) as tmp, open(tmp, "w") as f:
        f.write('{"regimes": ' + json.dumps([dict(r) for r in regimes], sort_keys=True) + ',\n "problems": {')
        for i, p in enumerate(problems):
            entry = json.dumps(problem_tiers(p, regimes), sort_keys=True)
            f.write(("," if i else "") + f"\n  {json.dumps(p.id)}: {entry}")
        f.write("\n }\n}\n")
