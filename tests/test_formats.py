"""Benchmark formats found by name (ewa.formats): the built-ins, a researcher's own JSON Lines problems, and a
format from outside ewa, an installed package with an `ewa.formats` entry point built here, run through the
real CLIs from prepare to evaluate, its harness inside the real sandbox."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from helpers import ROOT, requires_bwrap
from test_sample import pico  # noqa: F401 (the session's pico model)

from ewa import formats
from ewa.config import ConfigError, validate
from ewa.problems import read_problems

pytestmark = pytest.mark.timeout(300)

BUILTIN_FILES = {  # every file that knows the format, and nothing else under src/ or rules/
    "humaneval": {"src/ewa/data/humaneval/__init__.py", "src/ewa/data/humaneval/harness.py"},
    "livecodebench": {"src/ewa/data/livecodebench/__init__.py", "src/ewa/data/livecodebench/judge.py",
                      "src/ewa/data/livecodebench/harness.py"},
    "codecontests": {"src/ewa/data/codecontests.py"},
    "mbpp": {"src/ewa/data/mbpp/__init__.py", "src/ewa/data/mbpp/harness.py"},
    "apps": {"src/ewa/data/apps/__init__.py", "src/ewa/data/apps/judge.py", "src/ewa/data/apps/harness.py"},
}


@pytest.mark.parametrize("name", sorted(BUILTIN_FILES))
def test_a_builtin_format_is_known_only_to_its_own_module_and_its_registration_line(name):
    listed = subprocess.run(["git", "grep", "-il", name, "--", "src", "rules"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.split()
    assert set(listed) == BUILTIN_FILES[name] | {"src/ewa/formats.py"}
    registry = (ROOT / "src/ewa/formats.py").read_text().lower()
    assert registry.count(name) == 2  # its name and its module, on one line
    assert formats.get(name).module == formats.BUILTIN[name]


def test_an_unknown_format_is_one_line_naming_the_known_ones():
    with pytest.raises(ConfigError) as e:
        validate({"benchmarks": {"mine": {"format": "lcb", "input": "x.jsonl"}}})
    line = str(e.value)
    assert "\n" not in line and "'benchmarks.mine.format'" in line and "unknown format 'lcb'" in line
    assert all(n in line for n in formats.BUILTIN) and "installed:" in line


def test_a_format_takes_its_own_keys_and_refuses_another_formats():
    assert validate({"benchmarks": {"m": {"format": "mini", "small_inputs": 0.5}}})["benchmarks"]["m"]["small_inputs"] == 0.5
    with pytest.raises(ConfigError, match=r"unknown key 'benchmarks.h.small_inputs' .*format humaneval takes no keys"):
        validate({"benchmarks": {"h": {"format": "humaneval", "small_inputs": 0.5}}})
    with pytest.raises(ConfigError, match=r"key 'benchmarks.m.small_inputs'.*maximum"):
        validate({"benchmarks": {"m": {"format": "mini", "small_inputs": 2}}})


# ---- your own problems: the jsonl format ------------------------------------------------------------------
OWN = [
    {"id": "sum/1", "statement": "Print the sum of the two integers.", "family": "sum",
     "tests": [{"input": "1 2\n", "output": "3\n", "public": True}, {"input": "5 7\n", "output": "12\n"}]},
    {"id": "sq/1", "statement": "Return the square of x.", "kind": "function", "function": "square",
     "tests": [{"args": [3], "expected": 9, "public": True}, {"args": [-4], "expected": 16}]},
    {"id": "rev/1", "statement": "Write rev(s): s reversed.", "kind": "assert", "function": "rev", "time_limit_s": 1,
     "tests": [{"code": "assert rev('ab') == 'ba'", "public": True}, {"code": "assert rev('') == ''\nassert rev('abc') == 'cba'"}]},
]


def write_lines(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def ewa(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).with_name("ewa")), *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=240)


def test_own_problems_report_every_bad_line_in_one_pass_and_write_nothing(tmp_path):
    bad = write_lines(tmp_path / "mine.jsonl", [
        {"id": "a", "statement": "x", "tests": [{"input": "1\n", "output": 1}]},
        {"id": "b", "statement": "x", "kind": "function", "tests": [{"args": [1], "expected": 1}]},
        "not json",
        {"id": "c", "statement": "x", "kind": "assert", "function": "f", "tests": [{"code": "assert f(1 == 1"}]},
        OWN[0], dict(OWN[0], statement="again"),
        {"id": "d", "statement": "x", "colour": "red", "tests": [{"input": "", "output": ""}]},
        # A data field is never run in the host: this one would write a file if it were.
        {"id": "e", "statement": "x", "kind": "function", "function": "f",
         "tests": [{"args": "__import__('os').system('touch HOSTRAN')", "expected": 0}]},
    ])
    out = tmp_path / "problems.jsonl"
    done = ewa("prepare", "--format", "jsonl", "--input", str(bad), "--out", str(out), cwd=tmp_path)
    assert done.returncode == 2 and not out.exists() and not (tmp_path / "HOSTRAN").exists()
    assert list(tmp_path.iterdir()) == [bad]  # nothing half-written beside it
    lines = done.stderr.strip().splitlines()
    assert "7 bad line(s), nothing written" in lines[0]
    assert lines[1:] == [
        f"{bad}:1: field 'tests[0].output': expected a string, got int",
        f"{bad}:2: field 'function': a function problem names the function the model writes, got None",
        f"{bad}:3: not valid JSON (Expecting value)",
        f"{bad}:4: field 'tests[0].code': not valid Python ('(' was never closed, line 1)",
        f"{bad}:6: field 'id': 'sum/1' is also the id of {bad}:5",
        f"{bad}:7: field 'colour': not a field of this format (expected: difficulty, family, float_tol, function, "
        "id, kind, memory_limit_mb, source, starter_code, statement, tests, time_limit_s)",
        f"{bad}:8: field 'tests[0].args': expected a list of arguments, got str",
    ]
    skipped = ewa("prepare", "--format", "jsonl", "--input", str(bad), "--out", str(out), "--skip-invalid")
    assert skipped.returncode == 0 and [p.id for p in read_problems(out)] == ["sum/1"]


@requires_bwrap
def test_own_problems_of_every_kind_are_judged_in_the_sandbox(tmp_path, sandbox):
    out = tmp_path / "problems.jsonl"
    done = ewa("prepare", "--format", "jsonl", "--input", str(write_lines(tmp_path / "mine.jsonl", OWN)), "--out",
               str(out))
    assert done.returncode == 0, done.stderr
    problems = {p.id: p for p in read_problems(out)}
    assert [(p.testtype, p.judge, p.family) for p in problems.values()] == [
        ("stdin", "jsonl", "sum"), ("functional", "jsonl", "sq/1"), ("testcode", "jsonl", "rev/1")]
    programs = {
        "sum/1": ("a, b = map(int, input().split())\nprint(a + b)", "print(3)", "while True: pass"),
        "sq/1": ("def square(x):\n    return x * x", "def square(x):\n    return x + x",
                 "def square(x):\n    raise ValueError"),
        # exiting before the asserts can run is not a pass: the asserts run in the checker
        "rev/1": ("def rev(s):\n    return s[::-1]", "def rev(s):\n    return s", "import sys\nsys.exit(0)"),
    }
    verdicts = {pid: [sandbox.judge(problems[pid], code).verdict for code in codes] for pid, codes in programs.items()}
    assert verdicts == {"sum/1": ["AC", "WA", "TLE"], "sq/1": ["AC", "WA", "RE"], "rev/1": ["AC", "WA", "RE"]}


# ---- a format from outside ewa --------------------------------------------------------------------------
LAB_FORMAT = '''
"""A lab's task set: tab-separated `id<TAB>statement<TAB>input<TAB>output` lines (\\\\n escaped), whose
programs may call read_ints(), which the lab's own harness provides."""
from pathlib import Path

from ewa.errors import UserError
from ewa.formats import Format, PlanHints
from ewa.problems import Problem, ProblemError, make_test
from ewa.sandbox.semantics import Semantics, own


def records(input, **_):
    if not input:
        raise UserError("labtasks: input is required")
    with open(input) as f:
        for lineno, line in enumerate(f, 1):
            fields = line.rstrip("\\n").split("\\t")
            if len(fields) != 4:
                yield ProblemError(f"{input}:{lineno}: field 'output': expected 4 tab-separated fields, got {len(fields)}")
                continue
            pid, statement, stdin, stdout = (x.replace("\\\\n", "\\n") for x in fields)
            yield Problem(id=pid, source="labtasks", difficulty="", statement=statement, testtype="stdin",
                          tests=(make_test(stdin, stdout, public=True), make_test(stdin * 2, stdout)),
                          judge="labtasks")


SEMANTICS = Semantics("labtasks", "1", "read_ints() provided; stdout compared exactly after rstrip", "labio", "",
                      lambda got, expected, rule: got.rstrip() == expected.rstrip(), lambda got, exp, tol: got == exp,
                      ("stdin",))
FORMAT = Format(name="labtasks", description="the lab's tab-separated tasks", records=records,
                semantics=(SEMANTICS,), harnesses={"labio": str(Path(__file__).with_name("harness.py"))},
                plan=PlanHints(problems=3, tests=2),
                prompt=lambda problem: f"Lab task {problem.id}: {problem.statement} Use read_ints().")
'''
LAB_HARNESS = '''
class LabHarness(Harness):
    """Programs get read_ints() in their namespace: the ints of stdin's next line."""
    name = "labio"

    def namespace(self, job):
        ns = super().namespace(job)
        ns["read_ints"] = lambda: [int(x) for x in sys.stdin.readline().split()]
        return ns


register(LabHarness())
'''


@pytest.fixture(scope="module")
def lab_package(tmp_path_factory) -> Path:
    """labtasks, an ordinary Python package with an `ewa.formats` entry point, installed by pip (no index, no
    build isolation) into a directory of its own: on PYTHONPATH, it is installed for every `ewa` command."""
    src = tmp_path_factory.mktemp("labtasks")
    (src / "pyproject.toml").write_text(textwrap.dedent('''
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "labtasks"
        version = "0.1"
        [project.entry-points."ewa.formats"]
        labtasks = "labtasks.ewa_format"
        [tool.setuptools.package-data]
        labtasks = ["harness.py"]
    '''))
    (src / "src" / "labtasks").mkdir(parents=True)
    (src / "src" / "labtasks" / "__init__.py").write_text("")
    (src / "src" / "labtasks" / "ewa_format.py").write_text(LAB_FORMAT)
    (src / "src" / "labtasks" / "harness.py").write_text(LAB_HARNESS)
    site = src / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                           "--no-build-isolation", "--target", str(site), str(src)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return site


def with_package(site: Path, **extra: str) -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]), **extra}


@requires_bwrap
def test_an_installed_format_runs_prepare_to_evaluate_with_no_change_to_ewa(lab_package, pico, tmp_path):  # noqa: F811
    env = with_package(lab_package)
    listed = ewa("formats", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    lab = [json.loads(line) for line in listed.stdout.splitlines() if '"labtasks"' in line]
    assert lab and lab[0]["module"] == "labtasks.ewa_format" and lab[0]["harnesses"] == ["labio"]

    source = tmp_path / "tasks.tsv"
    source.write_text("add\tAdd the two numbers.\t1 2\\n\t3\\n\nneg\tNegate the number.\t5\\n\t-5\\n\n")
    config = json.dumps({"seed": 0, "benchmarks": {"lab": {"format": "labtasks", "input": str(source)}},
                         "regimes": [{"name": "low", "fraction": 0.5}, {"name": "high", "fraction": 1.0}]})
    problems, tiers = tmp_path / "problems.jsonl", tmp_path / "tiers.json"
    for args in (["prepare", "--config", config, "--dataset", "lab", "--out", str(problems)],
                 ["tiers", "--config", config, "--problems", str(problems), "--out", str(tiers)]):
        done = ewa(*args, env=env)
        assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in problems.read_text().splitlines()]  # this process has no labtasks
    assert [(r["id"], r["judge"]) for r in rows] == [("add", "labtasks"), ("neg", "labtasks")]
    assert json.loads((tmp_path / "problems.jsonl.meta.json").read_text())["config"]["format"] == "labtasks"

    # The model's answer is forced to a program that only runs under the lab's harness (read_ints).
    program = "xs = read_ints()\nprint(sum(xs) if len(xs) > 1 else -xs[0])\n"
    sample = {"n": 2, "max_new_tokens": 4, "backend": "hf", "settings": ["reasoning"],
              "assistant_prefix": f"```python\n{program}```\n"}
    samples, evals = tmp_path / "samples.jsonl", tmp_path / "evals.parquet"
    done = ewa("sample", "--model", pico, "--problems", str(problems), "--setting", "reasoning", "--config",
               json.dumps({"sample": sample, "seed": 0}), "--out", str(samples), env=env)
    assert done.returncode == 0, done.stderr
    sandbox = json.dumps({"sandbox": {"backend": "bwrap", "calibrate": False}})
    done = ewa("evaluate", "--config", sandbox, "--problems", str(problems), "--samples", str(samples), "--tiers",
               str(tiers), "--out", str(evals), "--workers", "1", "--time-factor", "1.0", env=env)
    assert done.returncode == 0, done.stderr
    rows = pq.read_table(evals).to_pandas()
    assert list(rows.verdict) == ["AC"] * 4 and set(rows.judge) == {"labtasks"}

    # Without the package, ewa does not know the format: one line naming it and the known ones.
    done = ewa("prepare", "--format", "labtasks", "--input", str(source), "--out", str(tmp_path / "x.jsonl"))
    assert done.returncode == 2 and "unknown format 'labtasks' (built-in: mini," in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "x.jsonl").exists()


def test_an_installed_format_frames_its_problems_for_the_model(lab_package, monkeypatch):
    from ewa.problems import Problem, make_test
    from ewa.prompts import reasoning_messages

    problem = Problem("add", "labtasks", "", "Add the two numbers.", "stdin", (make_test("1 2\n", "3\n"),))
    assert problem.judge == "plain"  # not installed: nothing names the judge
    monkeypatch.syspath_prepend(str(lab_package))
    formats.refresh()
    try:
        problem = Problem("add", "labtasks", "", "Add the two numbers.", "stdin", (make_test("1 2\n", "3\n"),))
        assert problem.judge == "labtasks"  # the format's judge, from the problem's source
        assert reasoning_messages(problem)[1]["content"] == "Lab task add: Add the two numbers. Use read_ints()."
    finally:
        monkeypatch.undo()
        formats.refresh()
    assert "labtasks" not in formats.names()


def test_a_format_package_that_fails_to_import_is_one_line_naming_it(lab_package, tmp_path):
    broken = tmp_path / "site"
    subprocess.run(["cp", "-r", str(lab_package), str(broken)], check=True)
    (broken / "labtasks" / "ewa_format.py").write_text("import labtasks_dependency_missing\n")
    done = ewa("formats", env=with_package(broken))
    assert done.returncode == 2
    assert done.stderr.strip() == ("ewa formats: error: format 'labtasks': entry point 'labtasks.ewa_format' (package "
                                   "labtasks) does not load: ModuleNotFoundError: No module named "
                                   "'labtasks_dependency_missing'")
