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
    ("Print YES or NO. You may print any letter in any case.", None),  # one answer, in any case
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


# ---- what a statement allows: letters in any case, its own error bound ---------------------------
PARITY = "a, b = map(int, input().split())\nprint('{}' if (a + b) % 2 == 0 else '{}')\n"
MEAN = "a, b = map(float, input().split())\nprint((a + b) / 2 + {})\n"


def rule_record(name, description, outputs):
    """A record whose tests are (1 3), (2 5), (10 20), expecting `outputs`."""
    ins = ["1 3\n", "2 5\n", "10 20\n"]
    return record(name, [(PYTHON3, "")], description=description,
                  public_tests={"input": ins[:1], "output": outputs[:1]},
                  private_tests={"input": ins[1:], "output": outputs[1:]}, generated_tests={"input": [], "output": []})


ANY_CASE = ('Print YES if a+b is even, else NO. You can output the answer in any case (upper or lower). For example, '
            'the strings "yEs", "yes", "Yes", and "YES" will be recognized as positive responses.')
RULE_RECORDS = [
    rule_record("1001_A. Any case", ANY_CASE, ["YES\n", "NO\n", "YES\n"]),
    rule_record("1001_B. Exact case", "Print YES if a+b is even, else NO. Uppercase and lowercase letters are "
                "different. In any case, the answer is one word.", ["YES\n", "NO\n", "YES\n"]),
    rule_record("1001_C. Mean", "Print the mean of a and b. Your answer is considered correct if its absolute or "
                "relative error does not exceed $10^{-6}$.\n\nFormally, let your answer be $a$, and the jury's answer "
                "be $b$. Your answer is accepted if and only if $\\frac{|a - b|}{\\max{(1, |b|)}} \\le 10^{-6}$.",
                ["2.0\n", "3.5\n", "15.0\n"]),
    rule_record("1001_D. Tight mean", "Print the mean. The answer is accepted if its absolute error does not "
                "exceed 10 - 9.", ["2.0\n", "3.5\n", "15.0\n"]),
    rule_record("1001_E. Loose mean", "Print the mean. Вывод считается правильным, если абсолютная или "
                "относительная погрешность не превышает 10^{ - 4}.", ["2.0\n", "3.5\n", "15.0\n"]),
    rule_record("1001_F. Plain mean", "Print the mean. If there is an error in the input, print -1. In the worst "
                "case a+b is 10^{9}; the absolute value of a is small.", ["2.0\n", "3.5\n", "15.0\n"]),
]


@pytest.fixture(params=["jsonl", "parquet"])
def rule_source(request, tmp_path):
    path = tmp_path / f"rules.{request.param}"
    if request.param == "jsonl":
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in RULE_RECORDS))
    else:
        import pandas as pd
        pd.DataFrame(RULE_RECORDS).to_parquet(path)
    return str(path)


def test_statement_rules_are_read_counted_and_recorded_per_problem(rule_source, tmp_path):
    from ewa.cli import main as ewa_main
    out = tmp_path / "problems.jsonl"
    assert ewa_main(["prepare", "--format", "codecontests", "--input", rule_source, "--out", str(out)]) == 0
    meta = {p.id: p.meta for p in read_problems(out)}
    assert meta["cc/1001_A"]["any_case"] is True
    assert meta["cc/1001_A"]["rule_phrases"]["any_case"] == "output the answer in any case"
    assert [meta[f"cc/1001_{x}"].get("any_case") for x in "BCDEF"] == [None] * 5
    assert {pid: (m.get("float_tol"), m.get("float_error")) for pid, m in meta.items() if "float_tol" in m} == {
        "cc/1001_C": (1e-6, "absolute or relative"), "cc/1001_D": (1e-9, "absolute"),
        "cc/1001_E": (1e-4, "absolute or relative")}
    rules = json.loads(Path(str(out) + ".meta.json").read_text())["output_rules"]
    assert rules == {"any_case": 1, "float_tol": 3,
                     "float_tol_by_problem": {"cc/1001_C": 1e-6, "cc/1001_D": 1e-9, "cc/1001_E": 1e-4}}


@needs_bwrap
def test_the_judge_allows_what_the_statement_allows(sandbox):
    problems = {p.id: p for p in load("codecontests", _rules_jsonl()).problems}
    lower, upper = PARITY.format("yes", "no"), PARITY.format("YES", "NO")
    jobs = {
        ("cc/1001_A", "yes for YES"): (lower, "AC"), ("cc/1001_A", "YES"): (upper, "AC"),
        ("cc/1001_A", "wrong answer, any case"): (PARITY.format("no", "yes"), "WA"),
        ("cc/1001_B", "yes for YES"): (lower, "WA"), ("cc/1001_B", "YES"): (upper, "AC"),
        ("cc/1001_C", "off by 5e-7"): (MEAN.format(5e-7), "AC"), ("cc/1001_C", "off by 5e-6"): (MEAN.format(5e-6), "WA"),
        ("cc/1001_D", "off by 5e-10"): (MEAN.format(5e-10), "AC"),
        ("cc/1001_D", "off by 5e-9, inside float_tol"): (MEAN.format(5e-9), "WA"),
        ("cc/1001_E", "off by 5e-5, outside float_tol"): (MEAN.format(5e-5), "AC"),
        ("cc/1001_E", "off by 5e-4"): (MEAN.format(5e-4), "WA"),
        ("cc/1001_F", "off by 5e-7, the sandbox's float_tol"): (MEAN.format(5e-7), "AC"),
        ("cc/1001_F", "off by 5e-5"): (MEAN.format(5e-5), "WA"),
    }
    results = sandbox.judge_many([(problems[pid], code, None) for (pid, _), (code, _) in jobs.items()])
    got = {key: r.verdict for key, r in zip(jobs, results)}
    assert got == {key: verdict for key, (_, verdict) in jobs.items()}
    rules = {pid: r.output_rule for (pid, _), r in zip(jobs, results)}
    assert rules["cc/1001_A"] == {"float_tol": 1e-6, "float_error": None, "any_case": True}
    assert rules["cc/1001_D"] == {"float_tol": 1e-9, "float_error": "absolute", "any_case": False}


def _rules_jsonl() -> str:
    import tempfile
    path = Path(tempfile.mkdtemp(prefix="ewa-rules-")) / "rules.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in RULE_RECORDS))
    return str(path)


@needs_bwrap
@pytest.mark.timeout(300)
def test_the_evaluation_record_shows_each_problems_rule(tmp_path):
    from ewa.cli import main as ewa_main
    from ewa.io import write_jsonl
    import pyarrow.parquet as pq
    problems = tmp_path / "problems.jsonl"
    assert ewa_main(["prepare", "--format", "codecontests", "--input", _rules_jsonl(), "--out", str(problems)]) == 0
    write_jsonl(tmp_path / "samples.jsonl", [
        {"problem_id": "cc/1001_A", "sample_id": 0, "code": PARITY.format("Yes", "No")},
        {"problem_id": "cc/1001_D", "sample_id": 0, "code": MEAN.format(0)},
        {"problem_id": "cc/1001_F", "sample_id": 0, "code": MEAN.format(0)}])
    out = tmp_path / "results.parquet"
    assert ewa_main(["evaluate", "--problems", str(problems), "--samples", str(tmp_path / "samples.jsonl"),
                     "--out", str(out), "--workers", "2", "--time-factor", "1.0", "--backend", "bwrap"]) == 0
    rows = pq.read_table(out, columns=["problem_id", "verdict", "float_tol", "float_error", "any_case"]).to_pylist()
    assert rows == [
        {"problem_id": "cc/1001_A", "verdict": "AC", "float_tol": 1e-6, "float_error": None, "any_case": True},
        {"problem_id": "cc/1001_D", "verdict": "AC", "float_tol": 1e-9, "float_error": "absolute", "any_case": False},
        {"problem_id": "cc/1001_F", "verdict": "AC", "float_tol": 1e-6, "float_error": None, "any_case": False}]


@pytest.mark.parametrize("statement, any_case", [
    (ANY_CASE, True),
    ("Each letter can be printed in arbitrary case.", True),
    ("You may print every letter in any case you want (so, for example, the strings yEs, yes, Yes and YES will "
     "all be recognized as positive answer).", True),
    ('You can output "YES" and "NO" in any case (for example, strings yEs, yes, Yes will be recognized as a '
     "positive response).", True),
    ("You can output the answer in any case (uppercase or lowercase).", True),
    ("The checker is case-insensitive.", True),
    ("Вы можете выводить каждую букву в любом регистре.", True),
    ("In any case, the answer does not exceed 10^9.", False),
    ("Print the answer; in any case, it fits in a 64-bit integer.", False),
    ("Uppercase and lowercase letters are considered different. Print the answer in lowercase letters.", False),
    ("The first line contains the number of test cases. In the first test case, print 5.", False),
    ("The string consists of lowercase and uppercase Latin letters.", False),
    ("Compare the strings case-insensitively and print -1, 0 or 1.", False),
])
def test_which_statements_allow_any_case(statement, any_case):
    from ewa.data.statement import output_rules
    assert output_rules([statement]).get("any_case", False) is any_case


@pytest.mark.parametrize("statement, bound", [
    ("Your answer is considered correct if its absolute or relative error does not exceed $10^{-6}$.",
     (1e-6, "absolute or relative")),
    ("Your answer will be considered correct if its absolute or relative error does not exceed 10^{ - 6}.",
     (1e-6, "absolute or relative")),
    ("You answer will be considered correct if its absolute or relative error does not exceed 10 - 6.",
     (1e-6, "absolute or relative")),
    ("The answer will be considered correct if the absolute or relative error does not exceed 10- 4.",
     (1e-4, "absolute or relative")),
    ("The answer is accepted if the relative or absolute error doesn't exceed 1e-9.", (1e-9, "absolute or relative")),
    ("Formally, let your answer be a, and the jury's answer be b. Your answer is accepted if and only if "
     "\\frac{|a - b|}{\\max{(1, |b|)}} \\le 10^{-4}.", (1e-4, "absolute or relative")),
    ("Your answer will be considered correct if its absolute error does not exceed 10^{-6}.", (1e-6, "absolute")),
    ("Your answer is correct if it differs from the jury's answer by at most 2·10^{-7}.",
     (2e-7, "absolute or relative")),
    ("Answers with an absolute error of at most 0.000001 are accepted.", (1e-6, "absolute")),
    ("Your answer is considered correct if its absolute or relative error does not exceed $0.5$.",
     (0.5, "absolute or relative")),
    ("Find the minimum possible absolute error. 1 ≤ n ≤ 10^5.", None),
    ("If there is an error in the input, print -1. 0.5 ≤ x ≤ 10.", None),
    ("Print the absolute difference of the two sums; it is at most 10^{18}.", None),
    ("The relative order of the elements does not matter; n ≤ 10^{6}.", None),
])
def test_which_statements_state_an_error_bound(statement, bound):
    from ewa.data.statement import output_rules
    rules = output_rules([statement])
    assert ((rules["float_tol"], rules["float_error"]) if "float_tol" in rules else None) == bound
