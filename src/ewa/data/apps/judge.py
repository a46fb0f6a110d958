"""The two judge semantics of the APPS family: `apps`, APPS's reference harness (hendrycks/apps
eval/testing_util.py at 362aedc, June 2024), and `apps-strict`, ewa's own comparison. This file holds the host's
half (the comparisons); harness.py the program's preparation inside the sandbox. What each reproduces and
where it departs: the package's docstring.
"""
from __future__ import annotations

import math
from pathlib import Path

from ewa.sandbox.checkers import values_match
from ewa.sandbox.semantics import Semantics, own

# testing_util.run_test's `sol` header, every program's first lines there, character for character but for
# numpy: the sandbox's interpreter may lack it, so it is imported only where it can be (a program that uses
# `np` without importing it then fails here where it passes there).
APPS_PRELUDE = (
    "import sys\nimport time\nimport itertools\nfrom itertools import accumulate, product, permutations, "
    "combinations\nimport collections\nfrom collections import Counter, OrderedDict, deque, defaultdict, ChainMap\n"
    "from functools import lru_cache\nimport math\nfrom math import sqrt, sin, cos, tan, ceil, fabs, floor, gcd, "
    "exp, log, log2\nimport fractions\nfrom typing import List, Tuple\n"
    "try:\n    import numpy as np\nexcept ImportError:\n    pass\n"
    "import random\nimport heapq\nfrom heapq import *\n")
RTOL, ATOL = 1e-05, 1e-08  # numpy.allclose's defaults


def _allclose(got: list[float], expected: list[float]) -> bool:
    """numpy.allclose(got, expected) for two equally long lists: |a - b| <= atol + rtol * |b|; an infinity equals
    only itself, NaN nothing."""
    for a, b in zip(got, expected):
        if math.isfinite(a) and math.isfinite(b):
            if not abs(a - b) <= ATOL + RTOL * abs(b):
                return False
        elif a != b:
            return False
    return True


def _rounded_sets(lines: list[set]) -> set:
    return {frozenset(round(float(t), 3) for t in s) for s in lines}


def apps_stdout_match(got: str, expected: str) -> bool:
    """APPS's cascade for standard-input problems, in its order; the first that holds passes the test:
    1. the output, its lines joined by "\\n" (each line stripped, or not), equals the expected text, both
       stripped at the ends;
    2. the output is one line equal to the expected text;
    3. the output's lines equal the expected text's non-empty lines, each stripped (the output's lines as
       printed: first with, then without its empty lines);
    4. every non-empty line of each is one real number, and the two lists are numpy.allclose (rtol 1e-5, atol
       1e-8);
    5. the set of lines, each line the set of its whitespace-separated tokens, is the same for both: lines in
       any order, tokens in any order within a line, repeated lines or tokens counted once;
    6. as 5, every token a real number rounded to 3 decimals.
    The expected text is the record's output (a list of lines joined by "\\n"); `got` is what the program
    printed to sys.stdout, split into lines by str.splitlines as the reference's capture does."""
    output = got.splitlines()
    if "\n".join(output).strip() == expected.strip() \
            or "\n".join(line.strip() for line in output).strip() == expected.strip():
        return True
    if output == [expected]:
        return True
    gt = [line.strip() for line in expected.split("\n") if line]  # filtered on length before the strip
    if output == gt:
        return True
    output = [line for line in output if line]
    if output == gt:
        return True
    try:
        got_floats, gt_floats = [float(e) for e in output], [float(e) for e in gt]
        if len(got_floats) == len(gt_floats) and _allclose(got_floats, gt_floats):
            return True
    except ValueError:
        pass
    gt_sets = [set(line.split()) for line in gt]  # (its `output == gt_sets` holds only where `output == gt` did)
    out_sets = [set(tokens) for tokens in (line.split() for line in output) if tokens]
    if {frozenset(s) for s in out_sets} == {frozenset(s) for s in gt_sets}:
        return True
    try:
        return _rounded_sets(out_sets) == _rounded_sets(gt_sets)
    except (ValueError, OverflowError):
        return False


def _int_keyed(value):
    """A dict with string keys made int-keyed, wrapped in a list, as the reference converts an expected dict
    (JSON keys are strings); unchanged where a key is not an integer."""
    try:
        if isinstance(value, dict):
            value = [{int(k): v for k, v in value.items()}]
    except (TypeError, ValueError):
        pass
    try:
        if isinstance(value[0], dict):
            value = [{int(k): v for k, v in value[0].items()}]
    except (TypeError, ValueError, KeyError, IndexError):
        pass
    return value


def apps_value_match(got, expected, tol: float = 0.0) -> bool:
    """APPS's call-based comparison: a returned tuple becomes a list, then `output == expected`, or
    `output == expected[0]` (the release wraps each answer in a one-element list), or, where the output's
    first element is a tuple, the output with every element made a list `== expected[0]`. An expected dict
    compares with int keys (JSON's are strings). `got` is what forkserver.decode rebuilt from trusted types,
    so every `==` is a trusted type's; `tol` is not used."""
    expected = _int_keyed(expected)
    if isinstance(got, tuple):
        got = list(got)
    if got == expected:
        return True
    if isinstance(expected, list) and expected and got == expected[0]:
        return True
    try:
        if isinstance(got[0], tuple) and [list(x) for x in got] == expected[0]:
            return True
    except Exception:  # as the reference's bare except: no first element, not iterable
        pass
    return False


def strict_value_match(got, expected, tol: float) -> bool:
    """ewa's own structural comparison (the loader has already unwrapped the release's one-element lists)."""
    return values_match(got, expected, tol)


HARNESS = str(Path(__file__).with_name("harness.py"))
SEMANTICS = Semantics(
    "apps", "1",
    "APPS eval/testing_util.py (hendrycks/apps@362aedc): reliability_guard; its import header; stdin programs "
    "wrapped into code() with sys.stdin a StringIO of the input and stdout captured; the output compared by its "
    "cascade (stripped text, lines, numpy.allclose reals, lines as sets of tokens in any order, reals rounded "
    "to 3 places); call-based results == expected after tuple->list, or == expected[0]",
    "apps", APPS_PRELUDE, lambda got, expected, rule: apps_stdout_match(got, expected), apps_value_match,
    ("stdin", "functional"), tolerant=False, solution_first=True)
STRICT = own("apps-strict", "1", "program as written; stdout tokens, real numbers within float_tol; returned values "
                                 "structurally (the release's one-element answer lists unwrapped by the loader)",
             testtypes=("stdin", "functional"))
