"""Problems a loader drops on purpose, and the check that a problem's bundled solution passes here.

A loader yields `Dropped` for a well-formed record it will not use (a statement that admits
several outputs, file I/O); `ewa.data.load` counts them by reason. `verified` runs each problem's
reference Python solutions (`meta.python_solutions`, in order) in the sandbox on all of its tests,
the same judge and time limits the RL reward uses, and keeps a problem only if one of them passes: a
training problem whose known-good solution fails here (tests that need a checker, a time limit too
tight for Python, a broken record) would only ever give a reward of 0, or reward a wrong program.
"""
from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

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


def verified(problems: Iterable[Problem], sandbox: Callable, counts: dict, dropped: list[Dropped],
             limit: int | None = None, progress: bool = True) -> Iterator[Problem]:
    """Yield, in order, the problems one of whose `meta.python_solutions` passes every test in the sandbox;
    each other one goes to `dropped`. Kept problems record the index of the solution that passed in
    `meta.verified_solution`.

    Problems stream through: only a window of them (enough to keep every worker busy) is held at a time.
    `sandbox`: a callable that opens the Sandbox (a context manager), called when the first problem with
    a solution arrives. With `limit`, problems are checked in order until `limit` are kept; the rest are
    only read, to count them as unchecked. `counts` fills in as the problems are consumed.
    """
    from ewa.progress import Progress

    counts.update({"checked": 0, "kept": 0, NO_PYTHON_SOLUTION: 0, SOLUTION_FAILS: 0, "unchecked": 0, "sandbox": None})
    source = iter(problems)
    pending: deque[tuple[Problem, Future | None]] = deque()  # read, attempts under way, not yet counted
    stop = threading.Event()
    with contextlib.ExitStack() as stack:
        opened = stack.enter_context(contextlib.ExitStack())  # the sandbox, closed after everything below
        sb = None
        bar = stack.enter_context(Progress("prepare", None, "problems", label="ewa prepare: verify solutions")) \
            if progress else None
        stack.callback(lambda: [f.cancel() for _, f in pending if f is not None])
        stack.callback(stop.set)  # runs first: problems started past the limit submit no further attempts

        def read_ahead() -> None:
            nonlocal sb
            window = 2 * max(1, getattr(sb, "workers", 1))  # problems in flight: every worker busy
            while len(pending) < window and (p := next(source, None)) is not None:
                solutions = p.meta.get("python_solutions")
                if solutions and sb is None:
                    sb = opened.enter_context(sandbox())
                pending.append((p, _attempts(sb, p, list(solutions), stop) if solutions else None))

        read_ahead()
        while pending and (limit is None or counts["kept"] < limit):
            p, attempt = pending.popleft()
            read_ahead()
            counts["checked"] += 1
            if bar is not None:
                bar.update(1)
            if attempt is None:
                dropped.append(Dropped(p.id, NO_PYTHON_SOLUTION, "the record has no Python 3 solution"))
                counts[NO_PYTHON_SOLUTION] += 1
                continue
            passed, verdicts = attempt.result()
            if passed is None:
                dropped.append(Dropped(p.id, SOLUTION_FAILS,
                                       f"Python 3 solution(s) judged {', '.join(verdicts)} in this sandbox"))
                counts[SOLUTION_FAILS] += 1
                continue
            counts["kept"] += 1
            yield dataclasses.replace(p, meta={**p.meta, "verified_solution": passed})
        counts["sandbox"] = sb.info() if sb is not None else None
    counts["unchecked"] = len(pending) + sum(1 for _ in source)  # past the limit: read, never run
