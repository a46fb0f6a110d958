"""Data preparation streams: loaders read a file, a glob or a directory of shards one record at a time
(CodeContests parquet shards in the Hugging Face release's column layout), `ewa prepare` writes each
problem as it comes, and its peak memory does not grow with the number of problems."""
from __future__ import annotations

import json
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import BIN

from ewa.cli import main
from ewa.data import load, stream
from ewa.tiers import build_tiers, write_tiers
from ewa.problems import iter_problems, read_problems

EWA = str(BIN / "ewa")
TESTS = pa.struct([("input", pa.list_(pa.string())), ("output", pa.list_(pa.string()))])
SOLUTIONS = pa.struct([("language", pa.list_(pa.int64())), ("solution", pa.list_(pa.string()))])
# deepmind/code_contests as `datasets` exports it to parquet (data/{split}-0000K-of-0000N.parquet).
CODECONTESTS_SCHEMA = pa.schema([
    ("name", pa.string()), ("description", pa.string()), ("public_tests", TESTS), ("private_tests", TESTS),
    ("generated_tests", TESTS), ("source", pa.int64()), ("difficulty", pa.int64()), ("solutions", SOLUTIONS),
    ("incorrect_solutions", SOLUTIONS), ("cf_contest_id", pa.int64()), ("cf_index", pa.string()),
    ("cf_points", pa.float32()), ("cf_rating", pa.int64()), ("cf_tags", pa.list_(pa.string())),
    ("is_description_translated", pa.bool_()), ("untranslated_description", pa.string()),
    ("time_limit", pa.struct([("seconds", pa.int64()), ("nanos", pa.int64())])),
    ("memory_limit_bytes", pa.int64()), ("input_file", pa.string()), ("output_file", pa.string()),
])


def cc_record(i: int, test_bytes: int = 40) -> dict:
    """Problem i: add two numbers, with one public, two private and three generated tests."""
    def tests(k, kind):
        return {"input": [f"{i} {j}\n" + f"# {kind}\n" * (test_bytes // 8) for j in range(k)],
                "output": [f"{i + j}\n" for j in range(k)]}
    return {"name": f"{1000 + i}_A. Sum {i}", "description": f"Print the sum of a and b (problem {i}).",
            "public_tests": tests(1, "public"), "private_tests": tests(2, "private"),
            "generated_tests": tests(3, "generated"), "source": 2, "difficulty": 7,
            "solutions": {"language": [3], "solution": ["print(sum(map(int, input().split())))\n"]},
            "incorrect_solutions": {"language": [3], "solution": ["print(0)\n"]}, "cf_contest_id": 1000 + i,
            "cf_index": "A", "cf_points": 500.0, "cf_rating": 800, "cf_tags": ["math"],
            "is_description_translated": False, "untranslated_description": "",
            "time_limit": {"seconds": 2, "nanos": 0}, "memory_limit_bytes": 256 << 20, "input_file": "",
            "output_file": ""}


def write_shards(directory, n: int, shards: int, rows_per_group: int = 500, test_bytes: int = 40,
                 schema: pa.Schema = CODECONTESTS_SCHEMA) -> list[str]:
    """n problems over `shards` parquet files named as the release names them, each in row groups."""
    directory.mkdir(parents=True, exist_ok=True)
    paths, per_shard = [], -(-n // shards)
    for k in range(shards):
        path = directory / f"test-{k:05d}-of-{shards:05d}.parquet"
        with pq.ParquetWriter(path, schema) as writer:
            end = min(n, (k + 1) * per_shard)
            for start in range(k * per_shard, end, rows_per_group):
                rows = [cc_record(i, test_bytes) for i in range(start, min(end, start + rows_per_group))]
                writer.write_table(pa.Table.from_pylist(rows, schema=schema))
        paths.append(str(path))
    return paths


def prepare(*args) -> int:
    return main(["prepare", "--format", "codecontests", *map(str, args)])


def test_codecontests_reads_a_glob_of_parquet_shards_in_order(tmp_path):
    write_shards(tmp_path / "data", 7, shards=3, rows_per_group=2)
    problems = load("codecontests", str(tmp_path / "data" / "test-*.parquet")).problems
    assert [p.id for p in problems] == [f"cc/{1000 + i}_A" for i in range(7)]
    p = problems[3]
    assert [t.public for t in p.tests] == [True, False, False, False, False, False]
    assert p.tests[0].input.startswith("3 0\n") and p.tests[0].output == "3\n"
    assert (p.difficulty, p.time_limit_s, p.memory_limit_mb) == ("A", 2.0, 256)  # Codeforces letter from 7
    assert p.meta["python_solutions"] == ["print(sum(map(int, input().split())))\n"]


def test_a_directory_of_shards_is_read_whole_and_streamed(tmp_path):
    data = tmp_path / "data"
    write_shards(data, 5, shards=2)
    (data / "README.md").write_text("not a shard")
    (data / "test-00002-of-00003.jsonl").write_text(json.dumps(cc_record(5)) + "\n")  # JSON Lines shards mix in
    problems, report = stream("codecontests", str(data))
    assert report.kept == 0  # nothing is read before a problem is asked for
    first = next(problems)
    assert first.id == "cc/1000_A" and report.kept == 1
    assert [p.id for p in problems] == [f"cc/{1000 + i}_A" for i in range(1, 6)] and report.kept == 6


def test_livecodebench_reads_a_glob_of_release_increments(tmp_path):
    def lcb(qid):
        case = json.dumps([{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}])
        return {"question_id": qid, "question_title": qid, "question_content": "Add.", "platform": "atcoder",
                "difficulty": "hard", "contest_date": "2025-01-02T00:00:00", "public_test_cases": case,
                "private_test_cases": case, "metadata": "{}"}
    for k, ids in (("", ["a1", "a2"]), ("2", ["b1"])):
        (tmp_path / f"test{k}.jsonl").write_text("".join(json.dumps(lcb(q)) + "\n" for q in ids))
    problems = load("livecodebench", str(tmp_path / "test*.jsonl")).problems
    assert [p.id for p in problems] == ["lcb/a1", "lcb/a2", "lcb/b1"]


def test_prepare_writes_the_shards_problems_and_counts(tmp_path):
    write_shards(tmp_path / "data", 30, shards=3, rows_per_group=4)
    out = tmp_path / "out" / "problems.jsonl"
    assert prepare("--input", tmp_path / "data" / "test-*.parquet", "--limit", 20, "--out", out) == 0
    assert [p.id for p in read_problems(out)] == [f"cc/{1000 + i}_A" for i in range(20)]
    meta = json.loads((tmp_path / "out" / "problems.jsonl.meta.json").read_text())
    assert (meta["problems"], meta["filtered"]) == (20, 10)  # the rest are read to count them


@pytest.mark.parametrize("bad, message", [
    ("nothing-*.parquet", "--input {tmp}/nothing-*.parquet: the pattern matches no file"),
    ("empty", "--input {tmp}/empty: directory holds no shard"),
    ("missing.parquet", "{tmp}/missing.parquet: no such file"),
    ("no-tests/*.parquet", "{tmp}/no-tests/test-00001-of-00002.parquet: missing column(s) private_tests, "
                           "generated_tests"),
])
def test_bad_input_is_one_line_naming_the_file(tmp_path, capsys, bad, message):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("")
    good = write_shards(tmp_path / "no-tests", 4, shards=2)
    # the second shard lacks two test columns (an export of another dataset, say)
    table = pq.read_table(good[1]).drop_columns(["private_tests", "generated_tests"])
    pq.write_table(table, good[1])
    out = tmp_path / "out" / "problems.jsonl"
    assert prepare("--input", tmp_path / bad, "--out", out) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message.format(tmp=tmp_path) in err, err
    assert not out.exists() and not list((tmp_path / "out").glob(".problems*"))  # nothing half-written


def test_tiers_are_written_a_problem_at_a_time_and_read_back_whole(tmp_path):
    write_shards(tmp_path / "data", 6, shards=1)
    src, out = tmp_path / "problems.jsonl", tmp_path / "tiers.json"
    assert prepare("--input", tmp_path / "data", "--out", src) == 0
    regimes = [{"name": "low", "fraction": 0.5}, {"name": "high", "fraction": 1.0}]
    write_tiers(iter_problems(src), regimes, out)
    assert json.loads(out.read_text()) == build_tiers(read_problems(src), regimes)
    assert len(out.read_text().splitlines()) == 6 + 4  # a line per problem


class InstantSandbox:
    """Stands in for the Sandbox: one worker; a solution passes unless it prints 0."""
    workers = 1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def submit(self, problem, code, early_stop=True):
        from concurrent.futures import Future
        from types import SimpleNamespace
        done = Future()
        done.set_result(SimpleNamespace(verdict="WA" if "print(0)" in code else "AC"))
        return done

    def info(self):
        return {"backend": "instant"}


def test_verification_reads_only_a_window_ahead_of_what_it_hands_out():
    from ewa.data.codecontests import convert
    from ewa.data.verify import verified

    read = []

    def source():
        for i in range(100):
            read.append(i)
            rec = cc_record(i)
            if i % 3 == 2:  # every third problem's only solution fails
                rec["solutions"] = {"language": [3], "solution": ["print(0)\n"]}
            yield convert(rec, "")

    counts, dropped = {}, []
    kept = verified(source(), InstantSandbox, counts, dropped, limit=10, progress=False)
    first = next(kept)
    assert first.meta["verified_solution"] == 0 and len(read) <= 1 + 2  # a window of 2 x 1 worker
    assert len([first, *kept]) == 10
    assert (counts["checked"], counts["kept"], counts["solution_fails"]) == (14, 10, 4)
    assert counts["unchecked"] == 100 - 14 and len(read) == 100  # the rest read, to count it, never run
    assert counts["sandbox"] == {"backend": "instant"} and len(dropped) == 4


# Peak RSS of one `ewa prepare` run: a fresh interpreter per measurement, so RUSAGE_CHILDREN sees that
# run alone (not this test process's earlier children).
PEAK_RSS = """
import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)  # KiB on Linux
"""


def peak_rss_mb(*command) -> float:
    out = subprocess.run([sys.executable, "-c", PEAK_RSS, *map(str, command)], capture_output=True, text=True,
                         check=True).stdout
    return int(out) / 1024


@pytest.mark.timeout(120)
def test_prepare_memory_stays_flat_from_2000_to_20000_problems(tmp_path):
    """20,000 problems of ~4 KB each are ~80 MB of text (several times that as Python objects): held at
    once they would raise the peak far past the margin. One file in row groups, so a reader that takes
    a whole file at once is caught too."""
    peaks = {}
    for n in (2_000, 20_000):
        (source,) = write_shards(tmp_path / f"cc{n}", n, shards=1, test_bytes=600)
        out = tmp_path / f"out{n}" / "problems.jsonl"
        peaks[n] = peak_rss_mb(EWA, "prepare", "--format", "codecontests", "--input", source, "--out", out)
        assert sum(1 for _ in iter_problems(out)) == n
    print(f"peak RSS of ewa prepare: {peaks[2_000]:.0f} MB for 2,000 problems, {peaks[20_000]:.0f} MB for 20,000")
    assert peaks[20_000] <= peaks[2_000] + 30, peaks
