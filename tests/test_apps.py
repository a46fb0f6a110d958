"""The APPS family (ewa.data.apps): its loader, and its two judge semantics against APPS's reference harness.

TABLE holds programs, references of problems written here in APPS's own fields, their mutants and edge cases,
each with its verdict under `apps` (the reference, hendrycks/apps eval/testing_util.py at 362aedc) and under
`apps-strict` (ewa's own comparison), and why. The `apps` column is the reference's pass/fail written as the
verdict ewa gives it (a failing test is WA for a wrong output, RE for an exception, TLE, CE). It was checked
against testing_util.run_test itself (numpy 2.4, pyext's RuntimeModule.from_string), run on each row of this
table as its test_one_solution.check_correctness runs it (a process per program): every row's pass/fail
agrees. DEVIATIONS holds what ewa judges differently from the reference on purpose (the package's docstring).
The table's limits are cut to 1 s, so that its TLE rows are quick; nothing here depends on the limit's value.
"""
from __future__ import annotations

import dataclasses
import json
import subprocess

import pytest

from helpers import BIN

from ewa.data import load
from ewa.data.apps import convert, records
from ewa.data.apps.judge import apps_stdout_match, apps_value_match
from ewa.errors import UserError
from ewa.problems import ProblemError, read_problems
from ewa.verdicts import AC, CE, RE, TLE, WA

pytestmark = pytest.mark.timeout(300)
EWA = str(BIN / "ewa")


def io(inputs, outputs, fn_name=None) -> str:
    data = {"inputs": inputs, "outputs": outputs}
    return json.dumps({**data, "fn_name": fn_name} if fn_name else data)


SUMS_OK = "n = int(input())\nfor _ in range(n):\n    a, b = map(int, input().split())\n    print(a + b)\n"
# Problems in APPS's own fields (the codeparrot/apps release: input_output and solutions are JSON strings).
PROBLEMS = {
    "sums": {"problem_id": 1, "question": "Print a + b for each of the n pairs.", "difficulty": "introductory",
             "starter_code": "", "solutions": json.dumps([SUMS_OK]), "url": "https://example.org/1",
             "input_output": io(["2\n1 2\n3 4\n", "1\n5 5\n", "2\n1 2\n2 1\n"], ["3\n7\n", "10\n", "3\n3\n"])},
    "sort": {"problem_id": 2, "question": "Print the n numbers in ascending order.", "difficulty": "introductory",
             "starter_code": "", "solutions": "[]",
             "input_output": io(["3\n3 1 2\n", "4\n9 8 7 1\n"], ["1 2 3\n", "1 7 8 9\n"])},
    "third": {"problem_id": 3, "question": "Print a / b.", "difficulty": "interview", "starter_code": "",
              "solutions": "[]", "input_output": io(["1 3\n"], ["0.333333333333\n"])},
    "add": {"problem_id": 4, "question": "Return a + b.", "difficulty": "introductory",
            "starter_code": "def add(a, b):\n", "solutions": "[]",
            "input_output": io([[1, 2], [3, 4]], [[3], [7]], "add")},
    "lc_add": {"problem_id": 5, "question": "Return a + b.", "difficulty": "interview",
               "starter_code": "class Solution:\n    def add(self, a: int, b: int) -> int:\n", "solutions": "[]",
               "input_output": io([[1, 2], [30, 4]], [[3], [34]], "add")},
    "pair": {"problem_id": 6, "question": "Return [min, max] of a and b.", "difficulty": "introductory",
             "starter_code": "def pair(a, b):\n", "solutions": "[]",
             "input_output": io([[2, 1], [3, 4]], [[[1, 2]], [[3, 4]]], "pair")},
    "pairs": {"problem_id": 7, "question": "Return the pairs [x, x + 1] for x in xs.", "difficulty": "introductory",
              "starter_code": "def pairs(xs):\n", "solutions": "[]",
              "input_output": io([[[1, 3]]], [[[[1, 2], [3, 4]]]], "pairs")},
    "weigh": {"problem_id": 8, "question": "Return the sum of key * count over the dict.", "difficulty": "interview",
              "starter_code": "def weigh(d):\n", "solutions": "[]",
              "input_output": io([[{"1": 2, "3": 4}]], [[14]], "weigh")},
    "invert": {"problem_id": 9, "question": "Return {count: key} for the dict's one pair.", "difficulty": "interview",
               "starter_code": "def invert(k, v):\n", "solutions": "[]",
               "input_output": io([[2, 1]], [[{"1": 2}]], "invert")},
}

ADD_OK = "def add(a, b):\n    return a + b\n"
# label: (problem, program, verdict under apps, verdict under apps-strict, why)
TABLE = {
    # ---- standard input ------------------------------------------------------------------------------------
    "stdin reference solution": ("sums", SUMS_OK, AC, AC, "prints each sum on its line"),
    "stdin lines in another order": (
        "sums", "n = int(input())\nr = [sum(map(int, input().split())) for _ in range(n)]\n"
                "print(*reversed(r), sep='\\n')\n",
        AC, WA, "the reference compares the set of lines: their order is not checked"),
    "stdin tokens in another order on a line": (
        "sort", "input()\nprint(*sorted(map(int, input().split()), reverse=True))\n", AC, WA,
        "each line is compared as a set of tokens: descending passes for ascending"),
    "stdin repeated lines printed once": (
        "sums", "n = int(input())\nseen = []\nfor _ in range(n):\n    s = sum(map(int, input().split()))\n"
                "    if s not in seen:\n        seen.append(s)\n        print(s)\n", AC, WA,
        "a set of lines: '3' once passes for '3\\n3'"),
    "stdin blank lines and trailing spaces": (
        "sums", "n = int(input())\nfor _ in range(n):\n    print(sum(map(int, input().split())), '')\n    print()\n",
        AC, AC, "the reference drops empty lines and reads each line as a real number; ewa compares tokens"),
    "stdin real within allclose": ("third", "a, b = map(int, input().split())\nprint(a / b)\n", AC, AC,
                                   "0.3333333333333333 is numpy.allclose to 0.333333333333, and within float_tol"),
    "stdin real equal only to 3 places": (
        "third", "print(0.3334)\n", AC, WA, "not allclose, but the last rule rounds every token to 3 places"),
    "stdin wrong answer": ("sums", SUMS_OK.replace("a + b", "a - b"), WA, WA, "a - b"),
    "stdin prints nothing": ("sums", "n = int(input())\n", WA, WA, "no output"),
    "stdin exception": ("sums", "int('x')\n", RE, RE, "ValueError"),
    "stdin does not compile": ("sums", "print(1\n", CE, CE, "a SyntaxError: the reference's compile error (-2)"),
    "stdin infinite loop": ("sums", "while True:\n    pass\n", TLE, TLE, "never ends"),
    "stdin exit() after the answer": (
        "sums", SUMS_OK + "exit()\n", RE, AC,
        "reliability_guard sets exit to None: calling it is a TypeError; as written it is SystemExit(None)"),
    "stdin sys.exit(0) after the answer": ("sums", "import sys\n" + SUMS_OK + "sys.exit(0)\n", AC, AC,
                                           "SystemExit is swallowed; the output so far is compared"),
    "stdin main guard": (
        "sums", "def main():\n" + "".join("    " + line + "\n" for line in SUMS_OK.splitlines())
                + "if __name__ == '__main__':\n    main()\n", WA, AC,
        "executed in a plain dict, `__name__` is 'builtins': main() never runs"),
    "stdin global statement": (
        "sums", "total = 0\ndef add(x):\n    global total\n    total += x\nn = int(input())\nfor _ in range(n):\n"
                "    add(sum(map(int, input().split())))\n    print(total)\n    total = 0\n", RE, AC,
        "the top level becomes code()'s locals: `global total` finds no module global (NameError)"),
    "stdin sys.stdin.buffer": (
        "sums", "import sys\ndata = sys.stdin.buffer.read().split()\nn = int(data[0])\n"
                "for i in range(n):\n    print(int(data[1 + 2 * i]) + int(data[2 + 2 * i]))\n", RE, AC,
        "sys.stdin is an io.StringIO, which has no buffer"),
    "stdin from sys import stdin": (
        "sums", "from sys import stdin\nn = int(stdin.readline())\nfor _ in range(n):\n"
                "    a, b = map(int, stdin.readline().split())\n    print(a + b)\n", AC, AC,
        "the stdin bound at load reads the input's lines (patched readline)"),
    "stdin open(0)": ("sums", "data = open(0).read().split()\nn = int(data[0])\nfor i in range(n):\n"
                              "    print(int(data[1 + 2 * i]) + int(data[2 + 2 * i]))\n", AC, AC,
                      "open is mock_open of the input there; fd 0 is the input as written"),
    "stdin names of the import header": (
        "sums", "n = int(input())\nfor _ in range(n):\n    print(list(accumulate(map(int, input().split())))[-1])\n",
        AC, RE, "the header imports accumulate; as written it is a NameError"),
    # ---- call-based ----------------------------------------------------------------------------------------
    "call reference solution": ("add", ADD_OK, AC, AC, "returns a + b"),
    "call answer wrapped in a list": ("add", "def add(a, b):\n    return [a + b]\n", AC, WA,
                                      "`output == expected` with the release's [answer]; strict expects the answer"),
    "call float for an int": ("add", "def add(a, b):\n    return float(a + b)\n", AC, AC, "3.0 == 3"),
    "call wrong type": ("add", "def add(a, b):\n    return str(a + b)\n", WA, WA, "'3' is not 3"),
    "call exception": ("add", "def add(a, b):\n    return a + c\n", RE, RE, "NameError"),
    "call infinite loop": ("add", "def add(a, b):\n    while True:\n        pass\n", TLE, TLE, "never returns"),
    "call missing function": ("add", "def plus(a, b):\n    return a + b\n", RE, RE, "no function add"),
    "call Solution class": ("lc_add", "class Solution:\n    def add(self, a, b):\n        return a + b\n", AC, AC,
                            "Solution().add"),
    "call 'class Solution' only in a comment": (
        "add", "# class Solution would be LeetCode's layout\n" + ADD_OK, RE, AC,
        "the text 'class Solution' makes the reference look for Solution(); ewa finds the function"),
    "call tuple for a list": ("pair", "def pair(a, b):\n    return (min(a, b), max(a, b))\n", AC, AC,
                              "a returned tuple becomes a list"),
    "call list of tuples": ("pairs", "def pairs(xs):\n    return [(x, x + 1) for x in xs]\n", AC, AC,
                            "its tuples made lists equal expected[0]; strict: tuples equal lists"),
    "call dict with int keys": ("invert", "def invert(k, v):\n    return {v: k}\n", AC, AC,
                                "the expected dict's keys are made ints; strict reads JSON's string keys as ints"),
    "call dict argument": (
        "weigh", "def weigh(d):\n    return sum(k * v for k, v in d.items())\n", AC, RE,
        "the reference makes a dict argument's keys ints; strict passes the JSON object as it is (string keys)"),
}

# Where ewa departs from the reference on purpose: (problem, program, the reference passes it, ewa's verdict, why).
DEVIATIONS = {
    "numpy from the import header": (
        "sums", "n = int(input())\nfor _ in range(n):\n    print(int(np.sum(list(map(int, input().split())))))\n",
        True, RE, "the judge's lean interpreter has no numpy: the header imports it only where it can"),
}


def table_problem(name: str, semantics: str):
    problem = convert(PROBLEMS[name], "table:1: ", 0, semantics)
    return dataclasses.replace(problem, time_limit_s=1.0)


@pytest.mark.parametrize("semantics,column", [("reference", 2), ("strict", 3)])
def test_the_table_gets_the_verdicts_of_its_semantics(sandbox, semantics, column):
    labels = sorted(TABLE)
    results = sandbox.judge_many([(table_problem(TABLE[k][0], semantics), TABLE[k][1], None) for k in labels],
                                 early_stop=True)
    wrong = [(k, r.verdict, TABLE[k][column], r.tests[-1].error[-300:]) for k, r in zip(labels, results)
             if r.verdict != TABLE[k][column]]
    assert wrong == []
    assert {r.judge for r in results} == {"apps" if semantics == "reference" else "apps-strict"}


def test_the_deliberate_deviations_get_ewas_verdict(sandbox):
    labels = sorted(DEVIATIONS)
    results = sandbox.judge_many([(table_problem(DEVIATIONS[k][0], "reference"), DEVIATIONS[k][1], None)
                                  for k in labels])
    assert [(k, r.verdict) for k, r in zip(labels, results)] == [(k, DEVIATIONS[k][3]) for k in labels]
    assert all(passes != (verdict == AC) for _, _, passes, verdict, _ in DEVIATIONS.values())


def test_the_table_covers_both_kinds_every_verdict_and_the_leniency():
    assert {PROBLEMS[row[0]]["input_output"].count("fn_name") for row in TABLE.values()} == {0, 1}
    assert {row[2] for row in TABLE.values()} == {AC, WA, RE, TLE, CE}
    lenient = [k for k, row in TABLE.items() if row[2] == AC and row[3] == WA]
    assert len(lenient) >= 4


def test_a_line_in_another_token_order_passes_the_reference_and_not_strict(sandbox):
    """The leniency `strict` exists for: the reference reads each line as a set of tokens."""
    program = TABLE["stdin tokens in another order on a line"][1]
    assert sandbox.judge(table_problem("sort", "reference"), program).verdict == AC
    assert sandbox.judge(table_problem("sort", "strict"), program).verdict == WA
    correct = "input()\nprint(*sorted(map(int, input().split())))\n"
    assert {sandbox.judge(table_problem("sort", s), correct).verdict for s in ("reference", "strict")} == {AC}


# ---- the comparisons, without a sandbox ---------------------------------------------------------------------
@pytest.mark.parametrize("got,expected,ok", [
    ("3\n7\n", "3\n7\n", True),
    ("  3\n7  \n\n", "3\n7", True),  # stripped texts
    ("3 \n 7\n", "3\n7\n", True),  # each line stripped
    ("3\n\n7\n", "3\n7\n", True),  # empty lines dropped
    ("7\n3\n", "3\n7\n", True),  # lines as a set
    ("3\n", "3\n3\n", True),  # repeated lines once
    ("2 1\n", "1 2\n", True),  # tokens as a set
    ("1 1 2\n", "1 2\n", True),  # repeated tokens once
    ("1.0000001\n", "1\n", True),  # allclose
    ("0.3334\n", "0.333333\n", True),  # rounded to 3 places
    ("0.335\n", "0.333333\n", False),
    ("1 2\n3\n", "1\n2 3\n", False),  # the lines' token sets differ
    ("YES\n", "NO\n", False),
    ("", "", True),
    ("", "0\n", False),
    ("inf\n", "inf\n", True),
    ("nan\n", "nan\n", True),  # equal as text, before any number is read
    ("nan \n", " nan\n", True),
    ("1\n", "1\n  \n", True),  # a blank expected line is stripped away with the text's ends
    ("1\n2\n", "1\n  \n2\n", False),  # inside, it is a line without tokens: the sets differ
])
def test_apps_stdout_match(got, expected, ok):
    assert apps_stdout_match(got, expected) is ok


@pytest.mark.parametrize("got,expected,ok", [
    (3, [3], True), ([3], [3], True), (3, 3, True), (3.0, [3], True), (True, [1], True),
    ((1, 2), [[1, 2]], True), ([(1, 2), (3, 4)], [[[1, 2], [3, 4]]], True), ([(1, 2)], [[1, 2]], False),
    ({1: 2}, [{"1": 2}], True), ({1: 2}, {"1": 2}, True), ({"a": 1}, [{"a": 1}], True), ("3", [3], False),
    ([], [], True), (None, [None], True), ([1, 2], [1, 2], True), (1, [1, 2], True),
])
def test_apps_value_match(got, expected, ok):
    assert apps_value_match(got, expected) is ok


# ---- the loader ---------------------------------------------------------------------------------------------
def write_jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_apps_records_become_problems(tmp_path):
    src = write_jsonl(tmp_path / "test.jsonl", [PROBLEMS["sums"], PROBLEMS["add"]])
    sums, add = load("apps", src).problems
    assert (sums.id, sums.source, sums.judge, sums.testtype, sums.difficulty) == (
        "apps/1", "apps", "apps-strict", "stdin", "introductory")
    assert [(t.input, t.output, t.public) for t in sums.tests][:2] == [("2\n1 2\n3 4\n", "3\n7\n", True),
                                                                       ("1\n5 5\n", "10\n", False)]
    assert sums.meta["python_solutions"] == [SUMS_OK] and sums.meta["url"] == "https://example.org/1"
    assert (sums.time_limit_s, sums.memory_limit_mb) == (4.0, 2048)
    assert (add.testtype, add.func_name, add.starter_code) == ("functional", "add", "def add(a, b):\n")
    assert [(t.input, t.output) for t in add.tests] == [("1\n2", "3"), ("3\n4", "7")]  # answers unwrapped
    assert add.meta["answers_unwrapped"] is True
    ref = load("apps", src, semantics="reference").problems[1]
    assert ref.judge == "apps" and [t.output for t in ref.tests] == ["[3]", "[7]"]  # as the release has them


def test_answers_stay_wrapped_unless_every_one_is(tmp_path):
    mixed = dict(PROBLEMS["add"], input_output=io([[1, 2], [3, 4]], [[3], 7], "add"))
    problem = convert(mixed, "", 0, "strict")
    assert [t.output for t in problem.tests] == ["[3]", "7"] and problem.meta["answers_unwrapped"] is False


def test_taco_rows_read_python_literals_without_evaluating_them(tmp_path):
    taco = {"question": "Add.", "solutions": json.dumps([ADD_OK]), "starter_code": "", "difficulty": "EASY",
            "raw_tags": "['Math']", "source": "codewars", "time_limit": "1 second", "memory_limit": "256 megabytes",
            "input_output": "{'inputs': [[1, 2], (3, 4)], 'outputs': [[3], [7]], 'fn_name': 'add'}"}
    src = write_jsonl(tmp_path / "taco.jsonl", [taco, {**taco, "input_output": str({"inputs": ["1\n"],
                                                                                      "outputs": ["1\n"]})}])
    first, second = load("apps", src).problems
    assert (first.id, first.source, first.difficulty, first.func_name) == ("taco/0", "taco", "easy", "add")
    assert [t.input for t in first.tests] == ["1\n2", "3\n4"]  # a tuple of arguments as JSON
    assert first.meta["stated_time_limit"] == "1 second" and first.meta["stated_memory_limit"] == "256 megabytes"
    assert second.id == "taco/1" and second.testtype == "stdin"
    code = {**taco, "input_output": "{'inputs': __import__('os').system('touch " + str(tmp_path / "ran") + "')}"}
    with pytest.raises(ProblemError, match=r"bad\.jsonl:1: record 0: field 'input_output' is neither JSON nor a "
                                           r"Python literal"):
        load("apps", write_jsonl(tmp_path / "bad.jsonl", [code]))
    assert not (tmp_path / "ran").exists()


def test_deepcoder_rows(tmp_path):
    prime = {"problem": "Add.", "solutions": [ADD_OK], "tests": json.dumps([
        {"type": "function_call", "fn_name": "add", "input": [1, 2], "output": 3},
        {"type": "function_call", "fn_name": "add", "input": [3, 4], "output": 7}])}
    stdin = {"problem": "Echo.", "tests": json.dumps([{"type": "stdin_stdout", "input": "1\n", "output": "1\n"}])}
    taco = {"problem": "Echo.", "tests": json.dumps({"inputs": ["2\n"], "outputs": ["2\n"]}), "metadata": "{}"}
    problems = load("apps", write_jsonl(tmp_path / "dc.jsonl", [prime, stdin, taco])).problems
    assert [(p.id, p.testtype, p.func_name) for p in problems] == [
        ("deepcoder/0", "functional", "add"), ("deepcoder/1", "stdin", None), ("deepcoder/2", "stdin", None)]
    assert [(t.input, t.output) for t in problems[0].tests] == [("1\n2", "3"), ("3\n4", "7")]
    assert problems[0].meta["python_solutions"] == [ADD_OK]


@pytest.mark.parametrize("change,field", [
    ({"input_output": "{'inputs': [1], 'outputs': []}"}, "input_output"),
    ({"input_output": json.dumps({"inputs": [["1"]], "outputs": [["2", 3]]})}, "input_output.outputs[0]"),
    ({"question": None}, "question"),
    ({"solutions": "[unclosed"}, "solutions"),
    ({"input_output": io([1], [2], "f")}, "input_output.inputs[0]"),
    ({"tests": json.dumps([{"input": "1"}])}, "tests[0]"),
])
def test_a_bad_record_is_one_line_naming_file_line_and_field(tmp_path, change, field):
    src = write_jsonl(tmp_path / "apps.jsonl", [PROBLEMS["sums"], {**PROBLEMS["sums"], "problem_id": 9, **change}])
    with pytest.raises(ProblemError) as e:
        load("apps", src)
    assert str(e.value).startswith(f"{src}:2: record 9: field '{field}'") and "\n" not in str(e.value)


def test_records_without_tests_are_dropped_and_the_split_is_the_file(tmp_path):
    src = write_jsonl(tmp_path / "train.jsonl", [PROBLEMS["sums"], {**PROBLEMS["sort"], "input_output": ""}])
    report = load("apps", src)
    assert [p.id for p in report.problems] == ["apps/1"]
    assert [(d.id, d.reason) for d in report.dropped] == [("apps/2", "no_tests")]
    with pytest.raises(UserError, match="split 'test'"):
        list(records(src, split="test"))


def test_prepare_through_the_cli(tmp_path):
    src = write_jsonl(tmp_path / "test.jsonl", [PROBLEMS["sums"], PROBLEMS["add"], {**PROBLEMS["sort"],
                                                                                     "input_output": ""}])
    out = tmp_path / "problems.jsonl"
    run = subprocess.run([EWA, "prepare", "--format", "apps", "--input", src, "--out", str(out)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "2 problems" in run.stderr and "1 dropped: 1 no_tests" in run.stderr
    assert [(p.id, p.judge) for p in read_problems(out)] == [("apps/1", "apps-strict"), ("apps/4", "apps-strict")]
    meta = json.loads((tmp_path / "problems.jsonl.meta.json").read_text())
    assert meta["dropped_problems"] == ["apps/2: no_tests (field 'input_output' holds no test)"]
