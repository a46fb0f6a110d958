import base64
import json
import pickle
import subprocess
import zlib

import pytest

from helpers import BIN

from ewa.data import load
from ewa.problems import ProblemError, read_problems

EWA = str(BIN / "ewa")


def lcb_record(qid, difficulty="hard", date="2024-09-01T00:00:00", compressed=True, functional=False):
    kind = "functional" if functional else "stdin"
    public = [{"input": "1 2\n", "output": "3\n", "testtype": kind}]
    private = [{"input": "10 20\n", "output": "30\n", "testtype": kind},
               {"input": "100 200\n" * 5, "output": "300\n", "testtype": kind}]
    private_field = json.dumps(private)
    if compressed:  # the release's form: base64(zlib(pickle(json string)))
        private_field = base64.b64encode(zlib.compress(pickle.dumps(private_field))).decode()
    return {
        "question_title": f"Q{qid}", "question_content": "Add two numbers.", "platform": "atcoder",
        "question_id": qid, "contest_id": "abc1", "contest_date": date,
        "starter_code": "class Solution:\n    def add(self, a, b):\n" if functional else "",
        "difficulty": difficulty, "public_test_cases": json.dumps(public),
        "private_test_cases": private_field,
        "metadata": json.dumps({"func_name": "add"} if functional else {}),
    }


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def test_livecodebench_decodes_compressed_private_tests(tmp_path):
    src = write_jsonl(tmp_path / "lcb.jsonl", [lcb_record("a1"), lcb_record("a2", compressed=False)])
    problems = load("livecodebench", src).problems
    assert [p.id for p in problems] == ["lcb/a1", "lcb/a2"]
    for p in problems:
        assert p.testtype == "stdin"
        assert [t.public for t in p.tests] == [True, False, False]
        assert p.tests[2].input == "100 200\n" * 5 and p.tests[2].size == len("100 200\n" * 5)
        assert p.source == "livecodebench/atcoder"


def test_livecodebench_functional_needs_func_name_and_filters_difficulty_and_dates(tmp_path):
    recs = [lcb_record("f1", functional=True), lcb_record("e1", difficulty="easy"),
            lcb_record("old", date="2023-01-05T00:00:00")]
    src = write_jsonl(tmp_path / "lcb.jsonl", recs)
    report = load("livecodebench", src, difficulty=["hard"], date_from="2024-08-01", date_to="2025-01-31")
    assert [p.id for p in report.problems] == ["lcb/f1"]
    assert report.filtered == 2
    assert report.problems[0].testtype == "functional" and report.problems[0].func_name == "add"


def test_malformed_record_names_record_and_field(tmp_path):
    bad = lcb_record("b1")
    bad["private_test_cases"] = "!!not base64 nor json!!"
    broken = lcb_record("b2", functional=True)
    broken["metadata"] = "{}"
    src = write_jsonl(tmp_path / "lcb.jsonl", [lcb_record("ok"), bad, broken])
    with pytest.raises(ProblemError, match=r"record 'b1': field 'private_test_cases'"):
        load("livecodebench", src)
    report = load("livecodebench", src, skip_invalid=True)
    assert [p.id for p in report.problems] == ["lcb/ok"]
    assert len(report.skipped) == 2 and "metadata.func_name" in report.skipped[1]


def test_prepare_cli_skip_invalid_counts_and_writes_atomically(tmp_path):
    bad = lcb_record("b1")
    del bad["question_content"]
    src = write_jsonl(tmp_path / "lcb.jsonl", [lcb_record("ok"), bad])
    out = tmp_path / "problems.jsonl"
    failed = subprocess.run([EWA, "prepare", "--format", "livecodebench", "--input", src, "--out", str(out)],
                            capture_output=True, text=True)
    assert failed.returncode == 2
    assert failed.stderr.strip().count("\n") == 0 and "field 'question_content'" in failed.stderr
    assert not out.exists() and not list(tmp_path.glob(".problems*"))  # nothing half-written
    ok = subprocess.run([EWA, "prepare", "--format", "livecodebench", "--input", src, "--out", str(out),
                         "--skip-invalid"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert "1 invalid skipped" in ok.stderr
    assert [p.id for p in read_problems(out)] == ["lcb/ok"]


def test_codecontests_limits_and_test_visibility(tmp_path):
    rec = {"name": "1548_A. Weak Link", "description": "Solve it.", "difficulty": 8, "source": 2,
           "public_tests": {"input": ["1\n"], "output": ["1\n"]},
           "private_tests": {"input": ["2\n", "3\n"], "output": ["2\n", "3\n"]},
           "generated_tests": {"input": ["44\n"], "output": ["44\n"]},
           "time_limit": {"seconds": 2, "nanos": 500000000}, "memory_limit_bytes": 268435456}
    bad = dict(rec, name="x", private_tests={"input": ["1"], "output": []})
    src = write_jsonl(tmp_path / "cc.jsonl", [rec, bad])
    with pytest.raises(ProblemError, match=r"record 'x': field 'private_tests'"):
        load("codecontests", src)
    (p,) = load("codecontests", src, skip_invalid=True).problems
    assert p.id == "cc/1548_A" and p.difficulty == "B"
    assert p.time_limit_s == 2.5 and p.memory_limit_mb == 256
    assert [t.public for t in p.tests] == [True, False, False, False]


def test_codecontests_reads_parquet(tmp_path):
    import pandas as pd
    rec = {"name": "A. P", "description": "d", "difficulty": 1,
           "public_tests": {"input": ["1\n"], "output": ["1\n"]},
           "private_tests": {"input": ["2\n"], "output": ["2\n"]},
           "generated_tests": {"input": [], "output": []},
           "time_limit": {"seconds": 1, "nanos": 0}, "memory_limit_bytes": 0}
    path = tmp_path / "cc.parquet"
    pd.DataFrame([rec]).to_parquet(path)
    (p,) = load("codecontests", str(path)).problems
    assert p.difficulty == "easy" and len(p.tests) == 2 and p.memory_limit_mb == 256


def test_humaneval_ships_164_problems_with_hidden_check_code():
    problems = load("humaneval").problems
    assert len(problems) == 164
    for p in problems:
        assert p.testtype == "testcode" and p.func_name
        hidden = [t for t in p.tests if not t.public]
        assert len(hidden) == 1 and "def check(candidate)" in hidden[0].input
    assert sum(len(p.public_tests) for p in problems) > 164  # docstring examples made public


def test_unknown_format_is_one_clear_error():
    with pytest.raises(ValueError, match="unknown format 'ds1000'"):
        load("ds1000")
