"""`ewa evaluate` end to end on the real bwrap sandbox: rows, carried columns, tiers, metadata,
bad input, and resuming a killed job."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from helpers import SUM_OK, requires_bwrap, sample_settings, sandbox_settings

from ewa.cli import main as ewa_main
from ewa.tiers import write_tiers
from ewa.io import write_jsonl
from ewa.problems import Problem, make_test, write_problems

pytestmark = [pytest.mark.timeout(300), requires_bwrap]


@pytest.fixture
def inputs(tmp_path):
    problems = [
        Problem(id="sum", source="t", difficulty="easy", statement="", testtype="stdin",
                tests=(make_test("1 2\n", "3\n"), make_test("10 20\n", "30\n"), make_test("100 200\n", "300\n"))),
        Problem(id="add", source="t", difficulty="easy", statement="", testtype="functional",
                tests=(make_test("1\n2", "3"),), func_name="add"),
    ]
    write_problems(problems, tmp_path / "problems.jsonl")
    samples = [
        {"problem_id": "sum", "sample_id": 0, "code": SUM_OK, "alpha": -0.5, "setting": "reasoning"},
        {"problem_id": "sum", "sample_id": 1, "completion": "Think.\n```python\nprint(3)\n```\n", "alpha": 0.5,
         "setting": "reasoning"},
        {"problem_id": "add", "sample_id": 0, "completion": "```python\ndef add(a, b):\n    return a + b\n```",
         "alpha": 1.5, "setting": "tools"},
        {"problem_id": "add", "sample_id": 1, "completion": "I cannot solve this.", "alpha": 1.5, "setting": "tools"},
    ]
    write_jsonl(tmp_path / "samples.jsonl", samples)
    write_tiers(problems, [{"name": "low", "fraction": 0.3}, {"name": "high", "fraction": 1.0}],
                tmp_path / "tiers.json")
    return tmp_path


def evaluate(d: Path, *extra: str, samples: str = "samples.jsonl") -> int:
    return ewa_main(["evaluate", "--problems", str(d / "problems.jsonl"), "--samples", str(d / samples),
                     "--out", str(d / "results.parquet"), "--workers", "2", "--time-factor", "1.0", *extra])


def test_one_row_per_sample_with_carried_columns_tiers_and_provenance(inputs):
    assert evaluate(inputs, "--tiers", str(inputs / "tiers.json"), "--no-early-stop") == 0  # every test runs
    out = inputs / "results.parquet"
    df = pq.read_table(out).to_pandas()
    assert list(df.verdict) == ["AC", "WA", "AC", "CE"]
    assert list(df.alpha) == [-0.5, 0.5, 1.5, 1.5] and list(df.setting) == ["reasoning", "reasoning", "tools", "tools"]
    wrong = df.iloc[1]  # prints 3: passes the smallest test (tier 0), fails the next (tier 1)
    assert (wrong.tests_passed, wrong.tests_total, wrong.first_failed_test, wrong.first_failed_tier) == (1, 3, 1, 1)
    assert [t["verdict"] for t in wrong.tests] == ["AC", "WA", "WA"] and [t["tier"] for t in wrong.tests] == [0, 1, 1]
    assert "code" not in df.columns and "completion" not in df.columns
    meta = json.loads(pq.read_schema(out).metadata[b"ewa"])
    assert meta["sandbox"]["backend"] == "bwrap" and meta["time_factor"] == 1.0 and "versions" in meta
    assert not (inputs / "results.parquet.partial").exists()


def test_unknown_problem_is_one_clear_error(inputs, capsys):
    with open(inputs / "samples.jsonl", "a") as f:
        f.write(json.dumps({"problem_id": "nope", "sample_id": 7, "code": "print(1)"}) + "\n")
    assert evaluate(inputs) == 2
    err = capsys.readouterr().err.strip()
    assert "samples.jsonl:5" in err and "'nope'" in err and len(err.splitlines()) == 1
    assert not (inputs / "results.parquet").exists()


def test_sample_without_code_field_is_an_error(inputs, capsys):
    write_jsonl(inputs / "bad.jsonl", [{"problem_id": "sum", "sample_id": 0, "text": "x"}])
    assert evaluate(inputs, samples="bad.jsonl") == 2
    assert "'code' or 'completion'" in capsys.readouterr().err


def test_null_code_is_ce_and_never_re_extracted(inputs):
    """`code: null` is the setting saying "no answer" (here: the tools setting, whose only program was
    inside a tool call): CE, even though the completion holds a program that would pass. A record with
    no `code` key at all (a plain external file) has its program extracted from the completion."""
    in_tool_call = f"<tool>\n```python\n{SUM_OK}```\n</tool>\n<output>\n3\n</output>\nDone."
    write_jsonl(inputs / "null.jsonl", [
        {"problem_id": "sum", "sample_id": 0, "code": None, "completion": in_tool_call, "setting": "tools"},
        {"problem_id": "sum", "sample_id": 1, "code": None, "completion": f"```python\n{SUM_OK}```\n"},
        {"problem_id": "sum", "sample_id": 2, "completion": f"```python\n{SUM_OK}```\n"},
        {"problem_id": "sum", "sample_id": 3, "code": None}])
    assert evaluate(inputs, samples="null.jsonl") == 0
    df = pq.read_table(inputs / "results.parquet").to_pandas()
    assert list(df.verdict) == ["CE", "CE", "AC", "CE"]
    assert list(df.tests_passed) == [0, 0, 3, 0] and list(df.tests_total) == [3, 3, 3, 3]


def test_a_tools_sample_whose_only_program_is_a_tool_call_is_ce(inputs):
    """The bug this guards: the tools setting excludes code inside tool calls from the submission, so a
    sample whose only program was a tool call has no answer; evaluation used to re-extract that program
    from the completion and judge it AC."""
    from ewa.problems import read_problems
    from ewa.sample.backends import Completion
    from ewa.sample.run import record
    from ewa.sample.settings import setting_class
    from ewa.sandbox import Sandbox

    from ewa.chat import add_response_parser
    from ewa.init.tiny import train_tokenizer

    call = {"name": "python", "arguments": {"code": f"```python\n{SUM_OK}```"}}
    script = ["Let me try it.\n<tool_call>\n" + json.dumps(call) + "\n</tool_call>", "It runs. Done."]

    class Scripted:
        context_length = 100_000

        def count_tokens(self, text):
            return len(text) // 4

        def generate(self, prompts, seeds, max_new_tokens, temperature, top_p, stop=()):
            return [Completion(script[p.count("<tool_response>")], 5, "stop") for p in prompts]

    tokenizer = add_response_parser(train_tokenizer(["print(1)"] * 3, 300))  # Qwen2.5's template

    problem = next(p for p in read_problems(inputs / "problems.jsonl") if p.id == "sum")
    cfg = sample_settings(n=1, tools={"max_tool_calls": 1})
    with Sandbox(sandbox_settings(), backend="bwrap", workers=1, time_factor=1.0) as sb:
        setting = setting_class("tools")(cfg, tokenizer, sb, workers=1)
        sample = setting.start(problem, 0)
        setting.run([sample], Scripted())
    assert sample.tool_calls == 1 and sample.code is None
    assert SUM_OK.replace("\n", "\\n") in sample.completion  # the program is in the transcript, in the call
    rec = record(sample, {"setting": "tools"})
    assert "code" in rec and rec["code"] is None
    write_jsonl(inputs / "tools.jsonl", [rec])
    assert evaluate(inputs, samples="tools.jsonl") == 0
    (verdict,) = pq.read_table(inputs / "results.parquet").to_pandas().verdict
    assert verdict == "CE"


def test_a_multi_turn_sample_has_its_first_attempt_judged_too(inputs):
    """agentic records list every turn's program: the first attempt gets its own verdict."""
    wrong = "print(0)\n"
    write_jsonl(inputs / "agentic.jsonl", [
        {"problem_id": "sum", "sample_id": 0, "code": SUM_OK, "turn_codes": [wrong, SUM_OK]},  # revised to AC
        {"problem_id": "sum", "sample_id": 1, "code": SUM_OK, "turn_codes": [SUM_OK]},  # one turn
        {"problem_id": "sum", "sample_id": 2, "code": wrong, "turn_codes": [None, wrong]},  # no program at first
    ])
    assert evaluate(inputs, samples="agentic.jsonl") == 0
    df = pq.read_table(inputs / "results.parquet").to_pandas()
    assert list(df.verdict) == ["AC", "AC", "WA"] and list(df.first_verdict) == ["WA", "AC", "CE"]


def test_code_of_the_wrong_type_is_one_clear_error(inputs, capsys):
    write_jsonl(inputs / "bad.jsonl", [{"problem_id": "sum", "sample_id": 0, "code": 5, "completion": "x"}])
    assert evaluate(inputs, samples="bad.jsonl") == 2
    err = capsys.readouterr().err.strip()
    assert "bad.jsonl:1" in err and "field 'code' must be a string or null" in err and len(err.splitlines()) == 1


def test_a_killed_job_resumes_without_rejudging(inputs):
    burn = "import time\nwhile time.process_time() < 0.05:\n    pass\n" + SUM_OK
    # distinct programs (a comment apart), so every one is run rather than judged once for all
    write_jsonl(inputs / "slow.jsonl", [{"problem_id": "sum", "sample_id": i, "code": f"{burn}# {i}\n"}
                                        for i in range(16)])
    cmd = [sys.executable, "-m", "ewa.cli", "evaluate", "--problems", str(inputs / "problems.jsonl"),
           "--samples", str(inputs / "slow.jsonl"), "--out", str(inputs / "results.parquet"),
           "--workers", "2", "--time-factor", "1.0", "--chunk-size", "2"]
    job = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first_chunk = inputs / "results.parquet.partial" / "chunk-000000.parquet"
    deadline = time.monotonic() + 120
    while not first_chunk.exists() and time.monotonic() < deadline and job.poll() is None:
        time.sleep(0.05)
    os.kill(job.pid, signal.SIGKILL)
    job.wait()
    assert first_chunk.exists() and not (inputs / "results.parquet").exists()
    saved = pq.read_table(first_chunk).to_pandas()
    assert evaluate(inputs, "--chunk-size", "2", samples="slow.jsonl") == 0
    df = pq.read_table(inputs / "results.parquet").to_pandas()
    assert list(df.sample_id) == list(range(16)) and set(df.verdict) == {"AC"}
    # Samples judged before the kill keep their recorded measurements: they were not run again.
    for _, row in saved.iterrows():
        assert df.loc[df.sample_id == row.sample_id, "cpu_time_s"].item() == row.cpu_time_s


def test_a_program_sampled_twice_is_run_once_unless_asked(inputs, capsys):
    burn = "import time\nwhile time.process_time() < 0.02:\n    pass\n" + SUM_OK
    write_jsonl(inputs / "twins.jsonl", [{"problem_id": "sum", "sample_id": 0, "code": burn},
                                         {"problem_id": "sum", "sample_id": 1, "code": SUM_OK},
                                         {"problem_id": "sum", "sample_id": 2, "code": burn},
                                         {"problem_id": "add", "sample_id": 0, "code": burn}])  # other problem
    assert evaluate(inputs, samples="twins.jsonl") == 0
    assert "4 samples to judge, 3 distinct programs run" in capsys.readouterr().out
    df = pq.read_table(inputs / "results.parquet").to_pandas()
    assert df.duplicate_of.isna().tolist() == [True, True, False, True] and df.duplicate_of[2] == 0
    twin, first = df.iloc[2], df.iloc[0]
    assert (twin.verdict, twin.cpu_time_s, twin.tests_passed) == (first.verdict, first.cpu_time_s, first.tests_passed)
    assert evaluate(inputs, "--judge-duplicates", samples="twins.jsonl") == 0
    assert "4 samples to judge, 4 distinct programs run" in capsys.readouterr().out
    df = pq.read_table(inputs / "results.parquet").to_pandas()
    assert df.duplicate_of.isna().all() and list(df.verdict) == ["AC", "AC", "AC", "RE"]


# --- integrity: one writer per output, complete results only, nothing left behind ----------------------

def evaluate_command(d: Path, samples: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "ewa.cli", "evaluate", "--problems", str(d / "problems.jsonl"),
            "--samples", str(d / samples), "--out", str(d / "results.parquet"), "--workers", "2",
            "--time-factor", "1.0", *extra]


def write_slow_samples(d: Path, n: int, cpu_s: float = 0.01) -> str:
    burn = f"import time\nwhile time.process_time() < {cpu_s}:\n    pass\n" + SUM_OK
    write_jsonl(d / "slow.jsonl", [{"problem_id": "sum", "sample_id": i, "code": f"{burn}# {i}\n"} for i in range(n)])
    return "slow.jsonl"


def wait_for(path: Path, job: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists() and time.monotonic() < deadline and job.poll() is None:
        time.sleep(0.02)
    assert path.exists(), f"{path} never appeared"


def left_behind(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.startswith(".") or p.name.endswith(".partial"))


def test_a_program_another_evaluation_judged_is_read_from_the_verdict_cache(inputs, capsys):
    burn = "import time\nwhile time.process_time() < 0.02:\n    pass\n" + SUM_OK
    loop = "while True:\n    pass\n"
    write_jsonl(inputs / "a.jsonl", [{"problem_id": "sum", "sample_id": 0, "code": burn},
                                     {"problem_id": "sum", "sample_id": 1, "code": loop}])
    write_jsonl(inputs / "b.jsonl", [{"problem_id": "sum", "sample_id": 0, "code": loop},  # judged in a.jsonl
                                     {"problem_id": "sum", "sample_id": 1, "code": SUM_OK},  # new
                                     {"problem_id": "add", "sample_id": 0, "code": loop},  # another problem
                                     {"problem_id": "sum", "sample_id": 2, "code": burn}])
    cache = inputs / "verdicts"
    assert evaluate(inputs, "--verdict-cache", str(cache), samples="a.jsonl") == 0
    first = pq.read_table(inputs / "results.parquet").to_pandas()
    assert first.cached_from.isna().all() and list(first.verdict) == ["AC", "TLE"]
    capsys.readouterr()
    assert evaluate(inputs, "--verdict-cache", str(cache), samples="b.jsonl") == 0
    assert "4 samples to judge, 4 distinct programs run, 2 of them judged before" in capsys.readouterr().out
    table = pq.read_table(inputs / "results.parquet")
    df = table.to_pandas()
    assert list(df.verdict) == ["TLE", "AC", "TLE", "AC"]
    # the two programs a.jsonl judged are its measurements, not new ones; the rest were run here
    assert df.cached_from.notna().tolist() == [True, False, False, True]
    assert "(problem sum, sample 1)" in df.cached_from[0] and "(problem sum, sample 0)" in df.cached_from[3]
    for mine, theirs in ((0, 1), (3, 0)):
        assert df.cpu_time_s[mine] == first.cpu_time_s[theirs] and df.tests_passed[mine] == first.tests_passed[theirs]
    assert json.loads(table.schema.metadata[b"ewa"])["verdict_cache"] == {"dir": str(cache), "reused": 2, "judged": 2}
    # another time factor scales the limits the verdicts were judged under: nothing is read
    assert evaluate(inputs, "--verdict-cache", str(cache), "--time-factor", "2.0", samples="b.jsonl") == 0
    assert "2 of them judged before" not in capsys.readouterr().out
    assert pq.read_table(inputs / "results.parquet").to_pandas().cached_from.isna().all()
    assert not list(cache.rglob("*.tmp"))  # entries are renamed into place whole


def test_a_second_writer_of_the_same_output_refuses_and_the_first_completes(inputs):
    samples = write_slow_samples(inputs, 200)
    first = subprocess.Popen(evaluate_command(inputs, samples, "--chunk-size", "8"), stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    wait_for(inputs / "results.parquet.partial" / "chunk-000000.parquet", first)
    second = subprocess.run(evaluate_command(inputs, samples), capture_output=True, text=True, timeout=120)
    assert first.wait(timeout=300) == 0, first.stderr.read()
    assert second.returncode == 2
    err = second.stderr.strip()
    assert len(err.splitlines()) == 1 and "another run is writing it" in err and f"pid {first.pid}" in err
    df = pq.read_table(inputs / "results.parquet").to_pandas()
    assert sorted(df.sample_id) == list(range(200)) and set(df.verdict) == {"AC"}
    assert left_behind(inputs) == []


def test_a_requeue_after_a_kill_clears_what_the_killed_run_left_and_completes(inputs):
    samples = write_slow_samples(inputs, 24, cpu_s=0.03)
    job = subprocess.Popen(evaluate_command(inputs, samples, "--chunk-size", "2"), stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    partial = inputs / "results.parquet.partial"
    wait_for(partial / "chunk-000001.parquet", job)
    os.kill(job.pid, signal.SIGKILL)
    job.wait()
    # What a kill in mid-write leaves: a lock file nobody holds, temporaries of a chunk and of the result.
    assert (inputs / ".results.parquet.lock").exists()
    (partial / ".chunk-000002.parquet.k1ll3d00.tmp").mkdir()
    (inputs / ".results.parquet.k1ll3d00.tmp").mkdir()
    requeue = subprocess.run(evaluate_command(inputs, samples, "--chunk-size", "2"), capture_output=True,
                             text=True, timeout=300)
    assert requeue.returncode == 0, requeue.stderr
    assert "removed 1 stale temporary of" in requeue.stdout
    df = pq.read_table(inputs / "results.parquet").to_pandas()
    assert sorted(df.sample_id) == list(range(24))
    assert left_behind(inputs) == []


def test_a_partial_result_from_other_samples_is_set_aside(inputs, capsys):
    samples = write_slow_samples(inputs, 12, cpu_s=0.03)
    job = subprocess.Popen(evaluate_command(inputs, samples, "--chunk-size", "2"), stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    wait_for(inputs / "results.parquet.partial" / "chunk-000000.parquet", job)
    os.kill(job.pid, signal.SIGKILL)
    job.wait()
    wrong = "print(0)\n"  # the samples file is regenerated with other programs, same ids
    write_jsonl(inputs / samples, [{"problem_id": "sum", "sample_id": i, "code": wrong} for i in range(12)])
    assert evaluate(inputs, samples=samples) == 0
    assert "was made from other inputs; set aside" in capsys.readouterr().out
    df = pq.read_table(inputs / "results.parquet").to_pandas()
    assert list(df.sample_id) == list(range(12)) and set(df.verdict) == {"WA"}  # none of the old AC rows


def test_a_full_disk_is_one_line_and_leaves_nothing(inputs, tmp_path_factory, capsys):
    disk = tmp_path_factory.mktemp("full")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(disk)],
                      capture_output=True).returncode:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        noisy = "import sys\nsys.stderr.write('x' * 400 + str(__import__('random').random()))\nraise SystemExit(1)\n"
        write_jsonl(inputs / "noisy.jsonl", [{"problem_id": "sum", "sample_id": i, "code": f"{noisy}# {i}\n"}
                                             for i in range(64)])
        rc = ewa_main(["evaluate", "--problems", str(inputs / "problems.jsonl"), "--samples",
                       str(inputs / "noisy.jsonl"), "--out", str(disk / "e.parquet"), "--workers", "2",
                       "--time-factor", "1.0", "--chunk-size", "4"])
        err = capsys.readouterr().err
        errors = [line for line in err.splitlines() if "error:" in line]  # the rest is the progress bar
        assert rc == 2 and "Traceback" not in err and len(errors) == 1
        assert "no space left on device" in errors[0] and "e.parquet" in errors[0]
        assert list(disk.iterdir()) == []
    finally:
        subprocess.run(["umount", str(disk)], check=True)
