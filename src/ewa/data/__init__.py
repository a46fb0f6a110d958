"""Loaders: each turns one benchmark's native files into canonical Problems (see ewa.problems).

A loader module exposes `records(input, **options)`, yielding a Problem or a ProblemError per source
record (yielded, not raised, so `--skip-invalid` can count bad records and go on). `load()` applies the
filters every benchmark shares: difficulty, contest-date window, limit.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

from ewa.problems import Problem, ProblemError

FORMATS = {
    "livecodebench": "ewa.data.livecodebench",
    "codecontests": "ewa.data.codecontests",
    "humaneval": "ewa.data.humaneval",
    "mini": "ewa.data.mini.loader",
}


@dataclass
class LoadReport:
    problems: list[Problem]
    skipped: list[str]  # one line per invalid record that was skipped
    filtered: int  # valid records dropped by the filters


def load(fmt: str, input: str | None = None, *, split: str = "all", difficulty: list[str] | None = None,
         date_from: str | None = None, date_to: str | None = None, limit: int | None = None,
         skip_invalid: bool = False, seed: int = 0, **options) -> LoadReport:
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r} (expected one of: {', '.join(FORMATS)})")
    module = importlib.import_module(FORMATS[fmt])
    if fmt == "mini":
        items = module.load(input, split=split, seed=seed, **options)
    else:
        items = module.records(input, **options)
    problems, skipped, filtered = [], [], 0
    wanted = {d.lower() for d in difficulty} if difficulty else None
    for item in items:
        if isinstance(item, ProblemError):
            if not skip_invalid:
                raise item
            skipped.append(str(item))
            continue
        date = str(item.meta.get("contest_date", ""))[:10]
        if (wanted and item.difficulty.lower() not in wanted) or (date_from and date and date < date_from) \
                or (date_to and date and date > date_to):
            filtered += 1
            continue
        problems.append(item)
    if limit is not None:
        filtered += max(0, len(problems) - limit)
        problems = problems[:limit]
    return LoadReport(problems, skipped, filtered)
