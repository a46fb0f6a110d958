"""Loaders: each turns one benchmark's native files into canonical Problems (see ewa.problems).

A loader module exposes `records(input, **options)`, yielding a Problem or a ProblemError per source
record (yielded, not raised, so `--skip-invalid` can count bad records and go on), or a `Dropped` for a
valid record it leaves out on purpose (counted by reason). `load()` applies the filters every benchmark
shares: difficulty, contest-date window, limit; and, with `verify_solutions`, for a format that ships
reference solutions (codecontests, VERIFIABLE), keeps only problems one of them passes in the sandbox
(ewa.data.verify).
"""
from __future__ import annotations

import importlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from ewa.data.verify import Dropped, verify
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
    filtered: int  # valid records dropped by the filters (difficulty, dates, limit)
    dropped: list[Dropped] = field(default_factory=list)  # valid records left out, each with its reason
    verification: dict | None = None  # verify_solutions' counts (None: not run)

    def dropped_counts(self) -> dict[str, int]:
        return dict(Counter(d.reason for d in self.dropped))


def load(fmt: str, input: str | None = None, *, split: str = "all", difficulty: list[str] | None = None,
         date_from: str | None = None, date_to: str | None = None, limit: int | None = None,
         skip_invalid: bool = False, seed: int = 0, verify_solutions: bool = False,
         sandbox: Callable | None = None, progress: bool = True, **options) -> LoadReport:
    """`verify_solutions` (formats with VERIFIABLE only; others have no solutions to run and ignore it):
    `sandbox` opens the Sandbox to run them in (default: the config schema's sandbox section); `limit`
    then counts verified problems."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r} (expected one of: {', '.join(FORMATS)})")
    module = importlib.import_module(FORMATS[fmt])
    if fmt == "mini":
        items = module.load(input, split=split, seed=seed, **options)
    else:
        items = module.records(input, **options)
    problems, skipped, dropped, filtered = [], [], [], 0
    wanted = {d.lower() for d in difficulty} if difficulty else None
    for item in items:
        if isinstance(item, ProblemError):
            if not skip_invalid:
                raise item
            skipped.append(str(item))
            continue
        if isinstance(item, Dropped):
            dropped.append(item)
            continue
        date = str(item.meta.get("contest_date", ""))[:10]
        if (wanted and item.difficulty.lower() not in wanted) or (date_from and date and date < date_from) \
                or (date_to and date and date > date_to):
            filtered += 1
            continue
        problems.append(item)
    verification = None
    if verify_solutions and getattr(module, "VERIFIABLE", False):
        kept, failed, verification = verify(problems, sandbox or _default_sandbox, limit, progress)
        dropped += failed
        filtered += verification["unchecked"]
        problems = kept
    if limit is not None:
        filtered += max(0, len(problems) - limit)
        problems = problems[:limit]
    return LoadReport(problems, skipped, filtered, dropped, verification)


def verifies(spec: dict) -> bool:
    """Whether loading this dataset entry (a config's train_data or benchmark) runs solutions in the
    sandbox: the workflow then gives its prepare job the sandbox section and the calibration."""
    return bool(spec.get("verify_solutions")) and spec.get("format") in FORMATS and \
        getattr(importlib.import_module(FORMATS[spec["format"]]), "VERIFIABLE", False)


def _default_sandbox():
    from ewa.config import section
    from ewa.sandbox import sandbox_from_config

    return sandbox_from_config(section("sandbox"))
