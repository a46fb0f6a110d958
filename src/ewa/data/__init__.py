"""Loading a dataset: its format's loader (ewa.formats: one module per benchmark format, here or in an
installed package) turns the benchmark's native files into canonical Problems (see ewa.problems), one at a
time: `stream()` hands them out as the source is read (one file, a glob or a directory of shards:
ewa.data.sources), so `ewa prepare` holds one problem at a time, whatever the dataset's size.

A format's `records(input, **options)` yields a Problem or a ProblemError per source record (yielded, not
raised, so `--skip-invalid` can count bad records and go on), or a `Dropped` for a valid record it leaves
out on purpose (counted by reason). `stream()` applies the filters every benchmark shares: difficulty,
contest-date window, limit; and, with `verify_solutions`, for a format that ships reference solutions
(Format.verifiable), keeps only problems one of them passes in the sandbox (ewa.data.verify). `load()` is
the same with every problem in a list.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterator

from ewa import formats
from ewa.data.verify import Dropped, verified
from ewa.problems import Problem, ProblemError


@dataclass
class LoadReport:
    """What loading a dataset kept and left out; `stream` fills it in as its problems are consumed."""
    problems: list[Problem] = field(default_factory=list)  # load() only: stream() hands them out one by one
    kept: int = 0
    skipped: list[str] = field(default_factory=list)  # one line per invalid record that was skipped
    filtered: int = 0  # valid records dropped by the filters (difficulty, dates, limit)
    dropped: list[Dropped] = field(default_factory=list)  # valid records left out, each with its reason
    verification: dict | None = None  # verify_solutions' counts (None: not run)
    # Statement rules of the kept problems (ewa.data.statement): how many compare letters in any case, how
    # many have an error bound of their own, and each one's bound.
    output_rules: dict = field(default_factory=lambda: {"any_case": 0, "float_tol": 0, "float_tol_by_problem": {}})

    def dropped_counts(self) -> dict[str, int]:
        return dict(Counter(d.reason for d in self.dropped))

    def count_rules(self, problem: Problem) -> None:
        rules = self.output_rules
        rules["any_case"] += bool(problem.meta.get("any_case"))
        if problem.meta.get("float_tol") is not None:
            rules["float_tol"] += 1
            rules["float_tol_by_problem"][problem.id] = problem.meta["float_tol"]


def load(fmt: str, input: str | None = None, **options) -> LoadReport:
    """Every problem at once, in `report.problems` (small sets, tests); `ewa prepare` streams instead."""
    problems, report = stream(fmt, input, **options)
    report.problems = list(problems)
    return report


def stream(fmt: str, input: str | None = None, *, split: str = "all", difficulty: list[str] | None = None,
           date_from: str | None = None, date_to: str | None = None, limit: int | None = None,
           skip_invalid: bool = False, seed: int = 0, verify_solutions: bool = False,
           sandbox: Callable | None = None, progress: bool = True, **options) -> tuple[Iterator[Problem], LoadReport]:
    """The dataset's problems one at a time, in source order, and the report their consumption fills in.
    Nothing is read before the first problem is asked for, and memory stays flat in the number of problems.

    `verify_solutions` (verifiable formats only; others have no solutions to run and ignore it):
    `sandbox` opens the Sandbox to run them in (the caller builds it from the config); `limit` then
    counts verified problems. Problems past the limit are still read, to count them."""
    format = formats.get(fmt)
    items = format.records(input, split=split, seed=seed, skip_invalid=skip_invalid, **options)
    report = LoadReport()
    problems = _selected(items, report, skip_invalid, difficulty, date_from, date_to)
    if verify_solutions and format.verifiable:
        if sandbox is None:
            raise ValueError(f"{fmt}: verify_solutions needs a sandbox to run the solutions in")
        report.verification = {}
        problems = verified(problems, sandbox, report.verification, report.dropped, limit, progress)
    return _limited(problems, report, limit), report


def _selected(items, report: LoadReport, skip_invalid: bool, difficulty, date_from, date_to) -> Iterator[Problem]:
    """The valid problems the difficulty and date filters keep; the rest counted in `report`."""
    wanted = {d.lower() for d in difficulty} if difficulty else None
    for item in items:
        if isinstance(item, ProblemError):
            if not skip_invalid:
                raise item
            report.skipped.append(str(item))
            continue
        if isinstance(item, Dropped):
            report.dropped.append(item)
            continue
        date = str(item.meta.get("contest_date", ""))[:10]
        if (wanted and item.difficulty.lower() not in wanted) or (date_from and date and date < date_from) \
                or (date_to and date and date > date_to):
            report.filtered += 1
            continue
        yield item


def _limited(problems: Iterator[Problem], report: LoadReport, limit: int | None) -> Iterator[Problem]:
    """The first `limit` problems; the rest are read to the end (counted as filtered, and every invalid
    or dropped record among them reported as for the others)."""
    problems = iter(problems)
    for problem in problems:
        if limit is not None and report.kept >= limit:
            report.filtered += 1 + sum(1 for _ in problems)
            break
        report.kept += 1
        report.count_rules(problem)
        yield problem
    if report.verification:
        report.filtered += report.verification["unchecked"]


def verifies(spec: dict) -> bool:
    """Whether loading this dataset entry (a config's train_data or benchmark) runs solutions in the
    sandbox: the workflow then gives its prepare job the sandbox section and the calibration."""
    return bool(spec.get("verify_solutions")) and spec.get("format") in formats.names() and \
        formats.get(spec["format"]).verifiable


def input_error(spec: dict) -> str | None:
    """What is wrong with a dataset entry's local `input` ("PATH: no such file"), or None; the workflow
    checks it when it plans, so a wrong path stops the plan, not a prepare job later in the run."""
    from ewa.data.sources import unreadable_input

    path = spec.get("input")
    format = formats.get(spec["format"])
    if not path:
        return f"format {spec['format']} needs a local file, glob or directory" if format.needs_input() else None
    if format.input == "none":
        return f"format {spec['format']} takes no input (its problems are generated from code)"
    why = unreadable_input(path)
    return f"{path}: {why}" if why else None
