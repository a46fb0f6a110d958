"""The data path never runs code and names what is wrong in one line: LiveCodeBench's pickled tests are
decoded without executing anything, duplicate ids, bad bytes and empty problem files are refused naming
the file and line, and direct commands and `snakemake -n` refuse what the workflow refuses."""
from __future__ import annotations

import base64
import gzip
import json
import os
import pickle
import subprocess
import zlib

import pytest
import yaml

from helpers import BIN, ROOT

from ewa.cli import main
from ewa.errors import UserError
from ewa.io import read_jsonl
from ewa.problems import make_test, problems_by_id, Problem, write_problems

EWA = str(BIN / "ewa")
TESTS = [{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}]


def ewa(*args) -> subprocess.CompletedProcess:
    """The installed `ewa` command, in its own process."""
    return subprocess.run([EWA, *map(str, args)], capture_output=True, text=True, timeout=120)


@pytest.fixture
def run(capsys):
    """`ewa ARGS` through the CLI's main() in this process (no interpreter start): (exit code, stderr)."""
    def run(*args) -> subprocess.CompletedProcess:
        rc = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, rc, out, err)
    return run


def one_line(r: subprocess.CompletedProcess) -> str:
    """The single error line of a refused command (exit 2, no traceback)."""
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, (r.returncode, r.stderr)
    return lines[0]


def packed(obj) -> str:
    """LiveCodeBench's compressed form of a test-case field: base64(zlib(pickle(obj)))."""
    return base64.b64encode(zlib.compress(pickle.dumps(obj))).decode()


def lcb_record(qid: str, private: str = "") -> dict:
    return {"question_id": qid, "question_title": f"Q{qid}", "question_content": "Add two numbers.",
            "platform": "atcoder", "difficulty": "easy", "contest_date": "2024-09-01T00:00:00",
            "public_test_cases": json.dumps(TESTS), "private_test_cases": private, "metadata": "{}"}


def write_jsonl(path, records) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def prepare(src, out, *flags, run=ewa) -> subprocess.CompletedProcess:
    return run("prepare", "--format", "livecodebench", "--input", src, "--out", out, *flags)


class Opens:
    """Unpickles to open(path, "w"): loading it creates the file."""
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return open, (self.path, "w")


class Shell:
    """Unpickles to os.system("touch path")."""
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return os.system, (f"touch {self.path}",)


# --- 1. pickled tests are decoded without running anything ------------------------------------------

@pytest.mark.parametrize("payload, flags", [(Opens, ()), (Shell, ("--skip-invalid",))])
def test_a_pickle_that_would_run_code_is_refused_and_runs_nothing(tmp_path, payload, flags):
    victim = tmp_path / "pwned"
    src = write_jsonl(tmp_path / "lcb.jsonl", [lcb_record("ok", json.dumps(TESTS)),
                                               lcb_record("evil", packed(payload(str(victim))))])
    line = one_line(prepare(src, tmp_path / "out.jsonl", *flags))
    assert f"{src}:2: record 'evil'" in line and "private_test_cases" in line, line
    assert not victim.exists()  # nothing ran, even with --skip-invalid (a crafted record is not skipped)
    assert not (tmp_path / "out.jsonl").exists()


def test_a_pickle_of_anything_but_text_is_refused(run, tmp_path):
    src = write_jsonl(tmp_path / "lcb.jsonl", [lcb_record("lst", packed(TESTS))])  # a list, not the JSON text
    line = one_line(prepare(src, tmp_path / "out.jsonl", run=run))
    assert f"{src}:1: record 'lst'" in line and "str" in line, line


def test_plain_and_pickled_text_tests_still_decode(run, tmp_path):
    src = write_jsonl(tmp_path / "lcb.jsonl", [lcb_record("plain", json.dumps(TESTS * 2)),
                                               lcb_record("packed", packed(json.dumps(TESTS * 3)))])
    r = prepare(src, tmp_path / "out.jsonl", run=run)
    assert r.returncode == 0, r.stderr
    problems = problems_by_id(tmp_path / "out.jsonl")
    assert {pid: len(p.tests) for pid, p in problems.items()} == {"lcb/plain": 3, "lcb/packed": 4}


def test_tests_that_are_not_a_list_of_objects_are_an_invalid_record(run, tmp_path):
    src = write_jsonl(tmp_path / "lcb.jsonl", [lcb_record("num", "5"), lcb_record("ok", json.dumps(TESTS))])
    line = one_line(prepare(src, tmp_path / "out.jsonl", run=run))
    assert f"{src}:1: record 'num'" in line and "private_test_cases" in line, line
    r = prepare(src, tmp_path / "out.jsonl", "--skip-invalid", run=run)
    assert r.returncode == 0 and list(problems_by_id(tmp_path / "out.jsonl")) == ["lcb/ok"], r.stderr


# --- 2. duplicate ids -------------------------------------------------------------------------------

def test_prepare_refuses_duplicate_problem_ids_naming_both_records(run, tmp_path):
    src = write_jsonl(tmp_path / "lcb.jsonl", [lcb_record("a", json.dumps(TESTS)), lcb_record("b", json.dumps(TESTS)),
                                               lcb_record("a", json.dumps(TESTS))])
    line = one_line(prepare(src, tmp_path / "out.jsonl", run=run))
    assert "'lcb/a'" in line and f"{src}:3:" in line and f"first read at {src}:1)" in line, line
    assert not (tmp_path / "out.jsonl").exists()


# --- 3. bytes that are not UTF-8 --------------------------------------------------------------------

@pytest.mark.parametrize("gz", [False, True])
def test_a_benchmark_file_with_bad_bytes_names_file_and_line(run, tmp_path, gz):
    good = json.dumps(lcb_record("ok", json.dumps(TESTS))).encode() + b"\n"
    data = good + b'{"question_id": "caf\xe9"}\n' + good
    src = tmp_path / ("lcb.jsonl.gz" if gz else "lcb.jsonl")
    src.write_bytes(gzip.compress(data) if gz else data)
    line = one_line(prepare(src, tmp_path / "out.jsonl", run=run))
    assert f"{src}:2:" in line and "UTF-8" in line, line


def test_a_problems_file_with_bad_bytes_names_file_and_line(run, tmp_path):
    problems = tmp_path / "problems.jsonl"
    write_problems([Problem("p1", "mini", "easy", "s", "stdin", (make_test("1\n", "1\n"),))], problems)
    problems.write_bytes(problems.read_bytes() + b'{"id": "\xff"}\n')
    line = one_line(run("tiers", "--problems", problems, "--out", tmp_path / "tiers.json"))
    assert f"{problems}:2:" in line and "UTF-8" in line, line
    with pytest.raises(ValueError, match=f"{problems}:2: not valid UTF-8"):
        list(read_jsonl(problems))  # the samples file of `ewa evaluate` is read the same way


# --- 4. an empty problems file is blamed on itself ---------------------------------------------------

def test_an_empty_problems_file_is_named_not_the_samples(run, tmp_path):
    problems, samples = tmp_path / "problems.jsonl", tmp_path / "samples.jsonl"
    problems.write_text("\n")
    samples.write_text(json.dumps({"problem_id": "p1", "sample_id": 0, "code": "print(1)"}) + "\n")
    line = one_line(run("evaluate", "--problems", problems, "--samples", samples, "--out", tmp_path / "e.parquet"))
    assert line.endswith(f"{problems}: no problems"), line
    line = one_line(run("tiers", "--problems", problems, "--out", tmp_path / "tiers.json"))
    assert line.endswith(f"{problems}: no problems") and not (tmp_path / "tiers.json").exists(), line
    with pytest.raises(UserError, match="no problems"):
        problems_by_id(problems)


# --- 5 and 6. direct commands and the plan refuse what the workflow refuses --------------------------

def snakemake_dry_run(config: dict, tmp_path) -> subprocess.CompletedProcess:
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(config))
    return subprocess.run([str(BIN / "snakemake"), "-n", "--configfile", str(path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_ewa_train_refuses_regimes_that_are_not_nested_like_snakemake(run, tmp_path):
    config = {"regimes": [{"name": "high", "fraction": 1.0}, {"name": "low", "fraction": 0.5}]}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    line = one_line(run("train", "--config", tmp_path / "config.yaml", "--init", tmp_path / "init",
                        "--problems", tmp_path / "problems.jsonl", "--regime", "high", "--out", tmp_path / "ckpt"))
    message = line.removeprefix("ewa train: error: ")
    assert message.startswith("config: key regimes: must be listed from low to high coverage"), line
    planned = snakemake_dry_run(config, tmp_path)
    assert planned.returncode != 0 and message in (planned.stdout + planned.stderr).splitlines(), planned.stdout
    assert not (tmp_path / "ckpt").exists()


def test_snakemake_dry_run_stops_on_a_model_init_that_does_not_exist(tmp_path):
    missing = tmp_path / "models" / "x"
    r = snakemake_dry_run({"model": {"init": str(missing)}}, tmp_path)
    assert r.returncode != 0
    assert f"config: key 'model.init': {missing}: no such directory" in (r.stdout + r.stderr).splitlines(), r.stdout + r.stderr


def test_snakemake_dry_run_stops_on_a_benchmark_input_that_does_not_exist(tmp_path):
    model = tmp_path / "model"
    model.mkdir()  # exists: the benchmark is what is missing
    missing = tmp_path / "lcb" / "test6.jsonl"
    config = {"model": {"init": str(model)},
              "benchmarks": {"mini": {"format": "mini"}, "lcb": {"format": "livecodebench", "input": str(missing)}}}
    r = snakemake_dry_run(config, tmp_path)
    assert r.returncode != 0
    assert f"config: key 'benchmarks.lcb.input': {missing}: no such file" in (r.stdout + r.stderr).splitlines(), r.stdout + r.stderr


def test_an_input_is_a_file_a_directory_of_shards_or_a_matching_glob(tmp_path):
    from ewa.data import input_error

    (tmp_path / "shards").mkdir()
    (tmp_path / "empty").mkdir()
    (tmp_path / "shards" / "test-0.parquet").write_bytes(b"")
    found = [str(tmp_path / "shards" / "test-0.parquet"), str(tmp_path / "shards"), str(tmp_path / "shards" / "test-*.parquet")]
    assert [input_error({"format": "codecontests", "input": path}) for path in found] == [None] * 3
    assert input_error({"format": "codecontests", "input": str(tmp_path / "shards" / "train-*.parquet")}).endswith(
        "train-*.parquet: the pattern matches no file")
    assert "holds no shard" in input_error({"format": "codecontests", "input": str(tmp_path / "empty")})
    assert input_error({"format": "livecodebench", "input": None}) == \
        "format livecodebench needs a local file, glob or directory"
    assert input_error({"format": "humaneval", "input": None}) is None  # the wheel's file
    assert input_error({"format": "mini", "input": None}) is None
