"""Judge semantics `livecodebench`: the reference harness, lcb_runner's evaluation/testing_util.py as LiveCodeBench
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
The in-sandbox half is harness.py (lcb_stdio_source, the stdin mocks, lcb_resolve).
"""
from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from ewa.sandbox.semantics import Semantics

_MODULES = ("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random",
            "statistics", "itertools", "functools", "operator", "io", "sys", "json")
# lcb_runner's import_string, character for character.
LCB_PRELUDE = "".join(f"from {m} import *\n" for m in _MODULES + ("builtins", "typing")) \
    + "".join(f"import {m}\n" for m in _MODULES) + "sys.setrecursionlimit(50000)\n"


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


SEMANTICS = Semantics(
    "livecodebench", "2",
    "lcb_runner evaluation/testing_util.py (LiveCodeBench@28fef95, stdin as of 16de2a1): "
    "reliability_guard; import prelude with sys.setrecursionlimit(50000); stdin programs "
    "unwrapped from a last __main__ guard and run as wrapped_function() on MockStdinWithBuffer "
    "stdin and StringIO stdout; stripped lines, else Decimal tokens; functional results == "
    "expected after tuple->list (Decimal, Fraction, deque compared as themselves)",
    "lcb", LCB_PRELUDE, lambda got, expected, rule: lcb_stdout_match(got, expected), lcb_value_match,
    ("stdin", "functional"), tolerant=False, solution_first=True)
HARNESS = str(Path(__file__).with_name("harness.py"))
