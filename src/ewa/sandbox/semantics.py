"""Judge semantics: how a program is prepared to run, and how its output is compared.

Every problem names its semantics in `Problem.judge` (its loader sets it; by default it follows the
problem's `source`). A semantics belongs to the format that defines it (ewa.formats; each format's module
documents its own, with its deviations from the benchmark's reference harness) and has two halves:
- the *harness* and *prelude* travel with each request to the fork server, which prepares and runs the
  program inside the sandbox: the harness's code is fork-server source of the format's own (never run in
  the host), the prelude part of the candidate's own source;
- the comparison of stdout or of a returned value happens here, in the host.

`plain`, ewa's own, is what any problem gets that names no other: the program run as written, as __main__
on stdin or as a module called by function name; stdout compared token by token and returned values
structurally, real numbers within the problem's stated tolerance else `float_tol`, and letters in any case
where its statement allows it (ewa.sandbox.checkers.OutputRule). Plain testcode runs test code the checker
holds, the starter as trusted helpers, and carries only plain values out of the candidate. A format that
judges as ewa does makes its own name for it with `own()`, so its problems' verdicts record that name.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ewa.problems import TESTTYPES, Problem, ProblemError, size_order
from ewa.sandbox.checkers import OutputRule, rule_match, values_match


@dataclass(frozen=True)
class Semantics:
    name: str
    version: str  # bumped whenever a verdict under this semantics could change
    description: str
    harness: str  # how the fork server runs the program: "plain", or a format's (ewa.formats.Format.harnesses)
    prelude: str  # source run before the program, as part of it
    stdout_match: Callable[[str, str, OutputRule], bool]  # (got, expected, the problem's rule)
    value_match: Callable[[object, object, float], bool]  # (returned, expected JSON value, float_tol)
    testtypes: tuple[str, ...] = TESTTYPES
    hidden_only: bool = False  # a verdict uses only the hidden tests (public ones are feedback)
    wall_limit: bool = False  # the time limit is also a wall-clock limit (the reference's timeout)
    tolerant: bool = True  # compares under the problem's OutputRule (real tolerance, letter case)
    # The harness calls Solution().<func_name> whenever the source contains "class Solution" (else a
    # top-level function first); feedback names the callee as the harness does (ewa.sandbox.failures).
    solution_first: bool = False

    def request(self) -> dict:
        """The fields of a fork-server request that prepare the program."""
        return {"harness": self.harness, "prelude": self.prelude}

    def record(self) -> dict:
        """What provenance keeps about it."""
        return {"version": self.version, "description": self.description}

    def verdict_tests(self, problem: Problem) -> list[int]:
        """The tests a verdict is decided on, smallest input first."""
        order = size_order(problem.tests)
        if not self.hidden_only:
            return order
        hidden = [i for i in order if not problem.tests[i].public]
        if not hidden:
            raise ProblemError(f"problem {problem.id!r}: field 'tests' holds no hidden test for judge {self.name!r}")
        return hidden


def own(name: str, version: str, description: str, **kwargs) -> Semantics:
    """A semantics that runs the program as written and compares as ewa does (plain's), under its own name."""
    return Semantics(name, version, description, "plain", "", rule_match, values_match, **kwargs)


PLAIN = own("plain", "1", "program as written; stdout tokens, returned values structurally, real numbers within "
                          "float_tol")


def registered() -> dict[str, Semantics]:
    """Every judge semantics by name: plain, then the formats' (ewa.formats)."""
    from ewa.formats import judges

    return {"plain": PLAIN, **judges()}


def semantics_for(problem: Problem) -> Semantics:
    sem = registered()[problem.judge]
    if problem.testtype not in sem.testtypes:
        raise ProblemError(f"problem {problem.id!r}: judge {sem.name!r} has no {problem.testtype} tests "
                           f"(it judges {', '.join(sem.testtypes)})")
    return sem


def provenance(names) -> dict:
    """{name: {version, description}} for the semantics `names` (e.g. every judge of a problems file)."""
    known = registered()
    return {n: known[n].record() for n in sorted(set(names))}


__all__ = ["PLAIN", "Semantics", "own", "registered", "semantics_for", "provenance"]
