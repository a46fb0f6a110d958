"""Problems a loader drops on purpose, and the check that a problem's bundled solution passes here.

A loader yields `Dropped` for a well-formed record it will not use (a CodeContests statement that
admits several outputs, file I/O); `ewa.data.load` counts them by reason. `verify` runs each problem's
reference Python solutions (`meta.python_solutions`, in order) in the sandbox on all of its tests,
the same judge and time limits the RL reward uses, and keeps a problem only if one of them passes: a
training problem whose known-good solution fails here (tests that need a checker, a time limit too
tight for Python, a broken record) would only ever give a reward of 0, or reward a wrong program.
"""
from __future__ import annotations

import contextlib
import dataclasses
import sys
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Callable, Sequence

from ewa.problems import Problem
from ewa.verdicts import AC

NO_PYTHON_SOLUTION, SOLUTION_FAILS = "no_python_solution", "solution_fails"


@dataclass(frozen=True)
class Dropped:
    """A valid record a loader (or the verification) leaves out, and why."""
    id: str
    reason: str  # a short key, counted: several_answers, file_io, no_python_solution, solution_fails
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.id}: {self.reason}" + (f" ({self.detail})" if self.detail else "")


def _attempts(sb, problem: Problem, solutions: list[str], stop: threading.Event) -> Future:
    """A future of (index of the first solution that passes or None, verdict of each one run); the
    next solution is submitted only when the previous one failed."""
    done: Future = Future()
    verdicts: list[str] = []

    def run(k: int) -> None:
        if stop.is_set():
            done.cancel()
            return
        try:
            sb.submit(problem, solutions[k], early_stop=True).add_done_callback(lambda f: judged(k, f))
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
            done.set_exception(e)

    def judged(k: int, f: Future) -> None:
        try:
            result = f.result()
        except BaseException as e:  # noqa: BLE001
            done.set_exception(e)
            return
        verdicts.append(result.verdict)
        if result.verdict == AC:
            done.set_result((k, verdicts))
        elif k + 1 < len(solutions):
            run(k + 1)
        else:
            done.set_result((None, verdicts))

    run(0)
    return done


def verify(problems: Sequence[Problem], sandbox: Callable, limit: int | None = None,
           progress: bool = True) -> tuple[list[Problem], list[Dropped], dict]:
    """Keep the problems one of whose `meta.python_solutions` passes every test in the sandbox.

    `sandbox`: a callable that opens the Sandbox (a context manager), called only if some problem has a
    solution to run. With `limit`, problems are checked in order until `limit` are kept; the rest are
    left unchecked. Returns (kept, dropped, counts); the kept problems record the index of the solution
    that passed in `meta.verified_solution`.
    """
    from tqdm import tqdm

    kept: list[Problem] = []
    dropped: list[Dropped] = []
    counts = {"checked": 0, "kept": 0, NO_PYTHON_SOLUTION: 0, SOLUTION_FAILS: 0, "unchecked": 0}
    stop = threading.Event()
    with contextlib.ExitStack() as stack:
        sb = stack.enter_context(sandbox()) if any(p.meta.get("python_solutions") for p in problems) else None
        window = 2 * max(1, getattr(sb, "workers", 1))  # problems in flight: enough to keep every worker busy
        futures: dict[int, Future] = {}
        started = 0
        bar = stack.enter_context(tqdm(total=len(problems), desc="verify solutions", unit="problem",
                                       file=sys.stderr, mininterval=2.0, disable=not progress))
        stack.callback(lambda: [f.cancel() for f in futures.values()])
        stack.callback(stop.set)  # runs first: problems started past the limit submit no further attempts
        for i, p in enumerate(problems):
            if limit is not None and len(kept) >= limit:
                break
            while sb is not None and started < min(i + window, len(problems)):
                solutions = problems[started].meta.get("python_solutions")
                if solutions:
                    futures[started] = _attempts(sb, problems[started], list(solutions), stop)
                started += 1
            counts["checked"] += 1
            bar.update(1)
            if i not in futures:
                dropped.append(Dropped(p.id, NO_PYTHON_SOLUTION, "the record has no Python 3 solution"))
                counts[NO_PYTHON_SOLUTION] += 1
                continue
            passed, verdicts = futures.pop(i).result()
            if passed is None:
                dropped.append(Dropped(p.id, SOLUTION_FAILS,
                                       f"Python 3 solution(s) judged {', '.join(verdicts)} in this sandbox"))
                counts[SOLUTION_FAILS] += 1
            else:
                kept.append(dataclasses.replace(p, meta={**p.meta, "verified_solution": passed}))
        counts["sandbox"] = sb.info() if sb is not None else None
    counts["kept"] = len(kept)
    counts["unchecked"] = len(problems) - counts["checked"]
    return kept, dropped, counts
