"""CodeContests hygiene: problems that admit several outputs or use files are dropped with a reason,
and (train_data's default) only problems whose bundled Python 3 solution passes in the real sandbox
are kept, from JSON Lines and parquet alike."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from helpers import sandbox_settings

from ewa.config import validate
from ewa.data import load, verifies
from ewa.data.codecontests import several_answers
from ewa.problems import read_problems
from ewa.sandbox import Sandbox, default_backend

ROOT = Path(__file__).resolve().parents[1]
EWA = str(ROOT / ".venv/bin/ewa")
CPP, PYTHON2, PYTHON3 = 2, 1, 3
SUM = "a, b = map(int, input().split())\nprint(a + b)\n"
OFF_BY_ONE = "a, b = map(int, input().split())\nprint(a + b + 1)\n"

needs_bwrap = pytest.mark.skipif(default_backend(sandbox_settings()) != "bwrap", reason="bubblewrap is not usable here")


def record(name, solutions, description="Print the sum of a and b.", **extra):
    """A record as `datasets` exports CodeContests: every field present, tests and solutions as
    parallel lists."""
    rec = {"name": name, "description": description, "source": 2, "difficulty": 7, "cf_rating": 800,
           "public_tests": {"input": ["1 2\n"], "output": ["3\n"]},
           "private_tests": {"input": ["10 20\n", "5 5\n"], "output": ["30\n", "10\n"]},
           "generated_tests": {"input": ["100 200\n"], "output": ["300\n"]},
           "solutions": {"language": [lang for lang, _ in solutions], "solution": [src for _, src in solutions]},
           "incorrect_solutions": {"language": [PYTHON3], "solution": [OFF_BY_ONE]},
           "time_limit": {"seconds": 2, "nanos": 0}, "memory_limit_bytes": 256 << 20,
           "input_file": "", "output_file": "", "is_description_translated": False, "untranslated_description": ""}
    rec.update(extra)
    return rec


RECORDS = [
    record("1000_A. Passes", [(CPP, "int main(){}"), (PYTHON3, SUM)]),
    record("1000_B. Fails", [(PYTHON3, OFF_BY_ONE), (PYTHON3, "print(3)\n")]),
    record("1000_C. No Python", [(CPP, "int main(){}"), (PYTHON2, "print 3\n")]),
    record("1000_D. Print any", [(PYTHON3, SUM)],
           description="Print two numbers whose sum is a+b. If there are multiple answers, print any of them."),
    record("1000_E. Second passes", [(PYTHON3, OFF_BY_ONE), (PYTHON3, SUM)]),
    record("1000_F. Files", [(PYTHON3, SUM)], input_file="input.txt", output_file="output.txt"),
    record("1000_G. Translated", [(PYTHON3, SUM)], is_description_translated=True,
           untranslated_description="Выведите два числа. Если ответов несколько, выведите любой из них."),
]


@pytest.fixture(params=["jsonl", "parquet"])
def source(request, tmp_path):
    if request.param == "jsonl":
        path = tmp_path / "train.jsonl"
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in RECORDS))
    else:
        import pandas as pd
        path = tmp_path / "train.parquet"
        pd.DataFrame(RECORDS).to_parquet(path)
    return str(path)


def sandbox():
    return Sandbox(sandbox_settings(), backend="bwrap", workers=2, time_factor=1.0)


def test_several_answers_and_file_io_are_dropped_with_their_reason(source):
    report = load("codecontests", source)
    assert [p.id for p in report.problems] == ["cc/1000_A", "cc/1000_B", "cc/1000_C", "cc/1000_E"]
    assert report.dropped_counts() == {"file_io": 1, "several_answers": 2}
    why = {d.id: d for d in report.dropped}
    assert "print any" in why["cc/1000_D"].detail and "выведите любой" in why["cc/1000_G"].detail
    assert "input.txt" in why["cc/1000_F"].detail
    assert report.verification is None  # not asked for: nothing runs
    solutions = {p.id: p.meta["python_solutions"] for p in report.problems}
    assert solutions == {"cc/1000_A": [SUM], "cc/1000_B": [OFF_BY_ONE, "print(3)\n"], "cc/1000_C": [],
                         "cc/1000_E": [OFF_BY_ONE, SUM]}


@pytest.mark.parametrize("statement, phrase", [
    ("If there are multiple answers, print any of them.", "multiple answers, print any"),
    ("If there is more than one answer, you may output any.", "more than one answer, you may output any"),
    ("Print the indices in any order.", "Print the indices in any order"),
    ("Note that the answer is not unique.", "answer is not unique"),
    ("If there are many answers, any of them will be accepted.", "any of them will be accepted"),
    ("If there are multiple answers, print the lexicographically smallest one.", None),
    ("Do not print any extra spaces. Print either YES or NO.", None),
    ("The edges are given in any order. For any i, a_i is positive.", None),
    ("Print how many solutions exist. The values are not necessarily unique.", None),
    ("Your answer is correct if its absolute or relative error does not exceed 10^{-6}.", None),
])
def test_which_statements_admit_several_answers(statement, phrase):
    assert several_answers({"description": statement}) == phrase


@needs_bwrap
@pytest.mark.timeout(300)
def test_verify_keeps_problems_whose_python_solution_passes_in_the_sandbox(source):
    report = load("codecontests", source, verify_solutions=True, sandbox=sandbox, progress=False)
    assert [p.id for p in report.problems] == ["cc/1000_A", "cc/1000_E"]
    assert [p.meta["verified_solution"] for p in report.problems] == [0, 1]  # E: the second one passes
    v = report.verification
    assert (v["checked"], v["kept"], v["no_python_solution"], v["solution_fails"], v["unchecked"]) == (4, 2, 1, 1, 0)
    assert v["sandbox"]["backend"] == "bwrap"
    assert report.dropped_counts() == {"file_io": 1, "several_answers": 2, "no_python_solution": 1,
                                       "solution_fails": 1}
    fails = next(d for d in report.dropped if d.reason == "solution_fails")
    assert fails.id == "cc/1000_B" and "WA, WA" in fails.detail


@needs_bwrap
@pytest.mark.timeout(300)
def test_verify_with_a_limit_stops_once_enough_problems_pass(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    report = load("codecontests", str(path), verify_solutions=True, sandbox=sandbox, progress=False, limit=1)
    assert [p.id for p in report.problems] == ["cc/1000_A"]
    assert report.verification["checked"] == 1 and report.verification["unchecked"] == 3
    assert report.filtered == 3


def test_verify_solutions_is_on_for_train_data_only():
    config = validate({"train_data": {"format": "codecontests", "input": "x.jsonl"},
                       "benchmarks": {"cc": {"format": "codecontests", "input": "y.jsonl"},
                                      "mini": {"format": "mini"}}}, partial=True)
    assert config["train_data"]["verify_solutions"] is True
    assert "verify_solutions" not in config["benchmarks"]["cc"]
    assert verifies(config["train_data"]) and not verifies(config["benchmarks"]["cc"])
    assert not verifies(validate({}, partial=True)["train_data"])  # the miniature's mini ships none to run


@needs_bwrap
@pytest.mark.timeout(300)
def test_prepare_reports_the_counts_on_stderr_and_in_the_meta(tmp_path):
    src = tmp_path / "train.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    config = json.dumps({"train_data": {"format": "codecontests", "input": str(src)},
                         "benchmarks": {"cc": {"format": "codecontests", "input": str(src)}},
                         "sandbox": {"backend": "bwrap", "calibrate": False}})
    out = tmp_path / "train" / "problems.jsonl"
    run = subprocess.run([EWA, "prepare", "--config", config, "--dataset", "train_data", "--workers", "2",
                          "--out", str(out)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert ("verify_solutions: 4 problems checked in the sandbox: 2 kept, 1 dropped with no Python 3 solution, "
            "1 dropped because it fails here") in run.stderr
    assert "5 dropped: 1 file_io, 1 no_python_solution, 2 several_answers, 1 solution_fails" in run.stderr
    assert [p.id for p in read_problems(out)] == ["cc/1000_A", "cc/1000_E"]
    meta = json.loads(Path(str(out) + ".meta.json").read_text())
    assert meta["verification"]["kept"] == 2 and meta["verification"]["sandbox"]["time_factor"] == 1.0
    assert meta["dropped"] == {"file_io": 1, "several_answers": 2, "no_python_solution": 1, "solution_fails": 1}
    assert any(line.startswith("cc/1000_D: several_answers") for line in meta["dropped_problems"])
    # a benchmark is not verified (its problem set is the benchmark's), nor is a run that opts out
    for extra in (["--dataset", "cc"], ["--dataset", "train_data", "--no-verify-solutions"]):
        bench = tmp_path / extra[-1].strip("-") / "problems.jsonl"
        run = subprocess.run([EWA, "prepare", "--config", config, *extra, "--out", str(bench)],
                             capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        assert "verify_solutions" not in run.stderr
        assert [p.id for p in read_problems(bench)] == ["cc/1000_A", "cc/1000_B", "cc/1000_C", "cc/1000_E"]
        assert json.loads(Path(str(bench) + ".meta.json").read_text())["verification"] is None
