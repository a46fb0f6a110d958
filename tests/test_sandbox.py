"""Verdicts, checkers, limits and backends of the sandbox, on the real bwrap backend."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from helpers import SUM_OK, sandbox_settings

from ewa.cli import main as ewa_main
from ewa.problems import Problem, ProblemError, make_test
from ewa.sandbox import Sandbox, default_backend
from ewa.sandbox.backends import BACKENDS, Bwrap, Docker
from ewa.sandbox.calibrate import read_calibration
from ewa.sandbox.checkers import tokens_match, values_match
from ewa.sandbox.extract import extract_code
from ewa.sandbox.forkserver import decode, encode
from ewa.verdicts import AC, CE, MLE, RE, TLE, WA

pytestmark = pytest.mark.timeout(300)


def problem(testtype, tests, func_name=None, time_limit_s=0.5, memory_limit_mb=128, pid="p"):
    return Problem(id=pid, source="t", difficulty="easy", statement="", testtype=testtype,
                   tests=tuple(make_test(i, o) for i, o in tests), func_name=func_name,
                   time_limit_s=time_limit_s, memory_limit_mb=memory_limit_mb)


SUM = problem("stdin", [("1 2\n", "3\n"), ("10 20\n", "30\n"), ("100 200\n", "300\n")])
ADD = problem("functional", [("1\n2", "3"), ("[1, 2]\n[3]", "[1, 2, 3]")], func_name="add")
# Verdict programs for both problem kinds: (stdin code, functional code, verdict).
VERDICTS = [
    (SUM_OK, "def add(a, b):\n    return a + b\n", AC),
    ("print(0)\n", "def add(a, b):\n    return 0\n", WA),
    ("while True:\n    pass\n", "def add(a, b):\n    while True:\n        pass\n", TLE),
    ("x = bytearray(1 << 30)\n", "def add(a, b):\n    return len(bytearray(1 << 30))\n", MLE),
    ("raise ValueError('boom')\n", "def add(a, b):\n    return a / 0\n", RE),
    ("print(\n", "def add(a, b)\n    return a + b\n", CE),
]


@pytest.mark.parametrize("stdin_code,functional_code,verdict", VERDICTS, ids=[v[2] for v in VERDICTS])
def test_each_verdict_on_stdin_and_functional(sandbox, stdin_code, functional_code, verdict):
    for prob, code in ((SUM, stdin_code), (ADD, functional_code)):
        r = sandbox.judge(prob, code, early_stop=True)
        assert r.verdict == verdict, (prob.testtype, r)
        assert r.tests_total == len(prob.tests) and len(r.tests) == (len(prob.tests) if verdict == AC else 1)
        assert r.tests_passed == (len(prob.tests) if verdict == AC else 0)
        assert r.first_failed_test == (None if verdict == AC else r.tests[0].index)


def test_compile_error_stops_after_one_test_and_names_the_error(sandbox):
    r = sandbox.judge(SUM, "print(\n")
    assert [t.verdict for t in r.tests] == [CE] and "SyntaxError" in r.tests[0].error
    assert sandbox.judge(SUM, None).verdict == CE  # no code extracted from the completion


@pytest.mark.serial  # the load is the test's own three spinners, not the suite's other workers too
def test_tle_is_decided_on_cpu_time_so_load_does_not_flip_verdicts(sandbox):
    prob = problem("stdin", [("", "ok")], time_limit_s=0.6)
    burn = "import time\nwhile time.process_time() < {}:\n    pass\nprint('ok')\n"
    load = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(3)]
    try:
        time.sleep(0.2)
        under = [sandbox.judge(prob, burn.format(0.3)) for _ in range(2)]
        over = [sandbox.judge(prob, burn.format(1.2)) for _ in range(2)]
    finally:
        for p in load:
            p.kill()
            p.wait()
    assert [r.verdict for r in under] == [AC, AC], under
    assert [r.verdict for r in over] == [TLE, TLE], over
    assert all(0.3 <= r.cpu_time_s < 0.6 for r in under)


@pytest.mark.parametrize("limit", [0.97, 0.99, 1.98])
def test_a_limit_just_under_a_whole_second_still_ends_in_tle(sandbox, limit):
    """The CPU rlimit counts whole seconds and the compile's CPU; whichever of it and the timer ends a
    looping program, the verdict is TLE."""
    prob = problem("stdin", [("", "ok")], time_limit_s=limit)
    # a long literal makes the compile cost CPU time, which the rlimit counts and the verdict does not
    slow_compile = "data = [" + ",".join(map(str, range(60_000))) + "]\nx = 0\nwhile True:\n    x += 1\n"
    verdicts = [sandbox.judge(prob, slow_compile).verdict for _ in range(2)]
    assert verdicts == [TLE, TLE]


@pytest.mark.serial  # a wall-clock bound: measured while nothing else runs
def test_a_looping_program_is_ended_just_past_its_cpu_limit_not_at_the_next_second(sandbox):
    prob = problem("stdin", [("", "ok")], time_limit_s=0.3)
    looping = sandbox.judge(prob, "while True:\n    pass\n")
    assert looping.verdict == TLE and 0.3 < looping.tests[0].cpu_time_s < 0.6, looping
    # a program that ignores the profiling timer still meets the whole-second rlimit
    stubborn = sandbox.judge(prob, "import signal\nsignal.signal(signal.SIGPROF, signal.SIG_IGN)\nwhile True:\n    pass\n")
    assert stubborn.verdict == TLE and stubborn.tests[0].cpu_time_s >= 0.9, stubborn
    assert sandbox.run_code("while True: pass", time_limit_s=0.3).cpu_time_s < 0.6
    # The timer's clock runs ahead of the rusage at times (4 of 40 kills at a 0.5 s limit read 0.44-0.5 s):
    # the kill is read from the signal, so it is a TLE, never a crash under the limit.
    assert {sandbox.run_code("x = 0\nwhile True: x += 1", time_limit_s=0.3).status for _ in range(12)} == {TLE}
    assert sandbox.run_code("import os, signal\nos.kill(os.getpid(), signal.SIGPROF)", time_limit_s=0.3).status == TLE


def test_sleeping_ends_at_the_wall_backstop(sandbox):
    start = time.monotonic()
    r = sandbox.judge(problem("stdin", [("", "")], time_limit_s=0.2), "import time\ntime.sleep(30)\n")
    assert r.verdict == TLE and r.cpu_time_s < 0.2 and 1.6 <= time.monotonic() - start < 5


def test_whitespace_and_float_tolerance(sandbox):
    assert sandbox.judge(problem("stdin", [("", "1 2\n3\n")]), "print(' 1   2 \\n\\n 3 ')").verdict == AC
    assert sandbox.judge(problem("stdin", [("", "1 2 3\n")]), "print('1 2')").verdict == WA
    third = problem("stdin", [("", "0.333333\n")])
    assert sandbox.judge(third, "print(1 / 3)").verdict == AC
    assert sandbox.judge(third, "print(0.3334)").verdict == WA
    assert sandbox.judge(problem("stdin", [("", "3\n")]), "print(3.0000001)").verdict == WA  # integers are exact
    ratio = problem("functional", [("1\n3", "0.3333333333")], func_name="div")
    assert sandbox.judge(ratio, "def div(a, b):\n    return a / b\n").verdict == AC
    assert sandbox.judge(ratio, "def div(a, b):\n    return 0.3334\n").verdict == WA


def test_exact_compare_when_tolerance_is_zero(sandbox_factory):
    exact = sandbox_factory(workers=1, float_tol=0.0)
    assert exact.judge(problem("stdin", [("", "0.333333\n")]), "print(1 / 3)").verdict == WA


def test_functional_leetcode_solution_class_and_tuples(sandbox):
    two_sum = problem("functional", [("[2, 7, 11, 15]\n9", "[0, 1]"), ("[3, 3]\n6", "[0, 1]")],
                      func_name="twoSum")
    code = ("class Solution:\n    def twoSum(self, nums, target):\n        seen = {}\n"
            "        for i, x in enumerate(nums):\n            if target - x in seen:\n"
            "                return (seen[target - x], i)\n            seen[x] = i\n")
    assert sandbox.judge(two_sum, code).verdict == AC
    assert sandbox.judge(two_sum, code.replace("return (seen[target - x], i)", "return [i]")).verdict == WA


def test_functional_output_must_be_json(sandbox):
    with pytest.raises(ProblemError, match=r"tests\[0\]\.output"):
        sandbox.judge(problem("functional", [("1", "not json")], func_name="f"), "def f(x):\n    return x\n")


def test_testcode_checks_run_outside_the_candidate(sandbox):
    tc = problem("testcode", [("def check(candidate):\n    assert candidate([3, 1, 2]) == [1, 2, 3]\n"
                               "    try:\n        candidate(None)\n    except ValueError:\n        pass\n"
                               "    else:\n        assert False\n", "")], func_name="srt")
    ok = "def srt(xs):\n    if xs is None:\n        raise ValueError('none')\n    return sorted(xs)\n"
    assert sandbox.judge(tc, ok).verdict == AC  # a candidate's exception reaches the test code, catchable
    assert sandbox.judge(tc, ok.replace("sorted(xs)", "xs")).verdict == WA
    assert sandbox.judge(tc, "def srt(xs):\n    return sorted(xs)\n").verdict == RE  # TypeError on None
    assert sandbox.judge(tc, "def srt(xs):\n    return iter(sorted(xs))\n").verdict == RE  # not a plain value


def test_early_stop_order_and_tiers(sandbox):
    # File order is not size order: the smallest input runs first.
    prob = problem("stdin", [("100 200\n", "300\n"), ("1 2\n", "3\n"), ("10 20\n", "31\n")])
    full = sandbox.judge(prob, SUM_OK, test_tiers=[1, 0, 0])
    assert [t.index for t in full.tests] == [1, 2, 0]
    assert (full.verdict, full.tests_passed, full.first_failed_test, full.first_failed_tier) == (WA, 2, 2, 0)
    stopped = sandbox.judge(prob, "print(3)\n", early_stop=True)
    assert [t.index for t in stopped.tests] == [1, 2] and stopped.tests_total == 3
    chosen = sandbox.judge(prob, SUM_OK, tests=[0, 1])
    assert chosen.verdict == AC and [t.index for t in chosen.tests] == [0, 1] and chosen.tests_total == 2


def test_judge_many_keeps_order(sandbox):
    items = [(SUM, SUM_OK if i % 3 else "print(0)", None) for i in range(12)]
    assert [r.verdict for r in sandbox.judge_many(items)] == [WA if i % 3 == 0 else AC for i in range(12)]


def test_peak_memory_and_cpu_are_measured(sandbox):
    r = sandbox.judge(problem("stdin", [("", "")], memory_limit_mb=256),
                 "x = bytearray(80 << 20)\nx[::4096] = b'1' * len(x[::4096])\n")
    assert r.verdict == AC and 80 <= r.peak_memory_mb < 128


def test_run_code_statuses(sandbox):
    ok = sandbox.run_code("print(input()[::-1])", stdin="abc")
    assert (ok.status, ok.stdout, ok.exit_code) == ("ok", "cba\n", 0)
    assert sandbox.run_code("import sys\nsys.exit(3)").exit_code == 3
    assert sandbox.run_code("import sys\nsys.exit(3)").status == RE
    assert sandbox.run_code("while True: pass", time_limit_s=0.2).status == TLE
    assert sandbox.run_code("x = bytearray(1 << 30)", memory_limit_mb=64).status == MLE
    ce = sandbox.run_code("def f(:")
    assert ce.status == RE and "SyntaxError" in ce.stderr


def test_time_factor_scales_limits(tmp_path, sandbox_factory):
    calibration = tmp_path / "calibration.json"
    calibration.write_text(json.dumps({"time_factor": 4.0}))
    prob = problem("stdin", [("", "ok")], time_limit_s=0.2)
    code = "import time\nwhile time.process_time() < 0.4:\n    pass\nprint('ok')\n"
    with Sandbox(sandbox_settings(), backend="bwrap", workers=1, calibration_path=str(calibration)) as slow_machine:
        assert slow_machine.time_factor == 4.0 and slow_machine.judge(prob, code).verdict == AC
        assert slow_machine.info()["calibration"]["source"] == str(calibration)
    assert sandbox_factory(workers=1).judge(prob, code).verdict == TLE  # nominal limits


def test_calibrate_cli_writes_a_factor(tmp_path):
    out = tmp_path / "calibration.json"
    assert ewa_main(["calibrate", "--out", str(out), "--repeats", "2"]) == 0
    record = read_calibration(out)
    assert 0.2 < record["time_factor"] < 5 and record["backend"] == "bwrap" and "provenance" in record
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="time_factor"):
        read_calibration(tmp_path / "bad.json")


def test_backend_registry_and_commands():
    assert set(BACKENDS) >= {"bwrap", "docker", "process"} and default_backend(sandbox_settings()) == "bwrap"
    with pytest.raises(ValueError, match="sandbox.backend"):
        Sandbox(sandbox_settings(), backend="nope", time_factor=1.0)
    settings = sandbox_settings(docker_image="ewa/sandbox:1", docker_memory_mb=1024, docker_pids_limit=99, uid=65534)
    cmd = Docker(settings).command(1)
    for flag in (["run", "-i"], ["--network", "none"], ["--memory", "1024m"], ["--pids-limit", "99"],
                 ["--cap-drop", "ALL"], ["--user", "65533:65533"]):
        assert any(cmd[i:i + len(flag)] == flag for i in range(len(cmd))), flag
    assert "--read-only" in cmd and cmd[cmd.index("ewa/sandbox:1") + 1] == settings.docker_python
    bwrap = Bwrap(sandbox_settings(uid=65534)).command(0)
    private = {bwrap[i + 1] for i, a in enumerate(bwrap) if a == "--tmpfs"}
    shown = {bwrap[i + 1] for i, a in enumerate(bwrap) if a == "--ro-bind"}
    assert "/tmp" in private and "/usr/lib" in shown and not shown & {"/", "/usr", "/root", "/home", "/opt", "/var"}
    assert "--die-with-parent" in bwrap and "--unshare-net" in bwrap and "--reuid=65534" in bwrap


def test_extract_code_takes_the_last_python_block():
    text = "plan\n```python\nprint(1)\n```\nbetter:\n```python\nprint(2)\n```\n```text\nout\n```\n"
    assert extract_code(text) == "print(2)\n"
    assert extract_code("```\nprint(3)\n```") == "print(3)\n"
    assert extract_code("no code here") is None
    assert extract_code("```python\nprint(4)\n") is None  # unterminated: the model ran out of tokens


def test_checkers_and_codec():
    assert tokens_match("1\n2  3 \n", "1 2 3") and not tokens_match("1 2", "1 2 3")
    assert tokens_match("0.1000001", "0.1", 1e-6) and not tokens_match("0.1000001", "0.1", 0)
    assert values_match((0, 1), [0, 1]) and not values_match(1, True) and not values_match([1], [1, 2])
    assert values_match({"a": 1.0000000001}, {"a": 1.0}, 1e-9) and not values_match(None, 0)
    value = {(1, "x"): {1, 2}, "f": [float("inf"), b"\x00", 2 ** 3000, 1j, frozenset()]}
    assert decode(json.loads(json.dumps(encode(value)))) == value
    with pytest.raises(TypeError):
        encode(object())


def test_concurrent_sandbox_processes_get_disjoint_uids():
    """RLIMIT_NPROC counts per uid across the host: two jobs' sandboxes must not share uids."""
    import subprocess
    import sys
    probe = "from ewa.sandbox.backends import claim_uid_block; import time; print(claim_uid_block(), flush=True); time.sleep(3)"
    procs = [subprocess.Popen([sys.executable, "-c", probe], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    tops = [int(p.stdout.readline()) for p in procs]
    for p in procs:
        p.wait()
    assert tops[0] != tops[1] and abs(tops[0] - tops[1]) >= 128
