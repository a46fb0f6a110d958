"""A failed public test of a function-call benchmark in the benchmark's own terms, for feedback: the
failing assert (or call) and what the program's call returned or raised, as the sandbox saw it.

- functional (call-based problems): the test is a call with its arguments, compared
  with `==`; it reads `assert f(args) == expected`, and the returned value is the one the judge
  compared (rebuilt in the host from trusted types, ewa.sandbox.forkserver.decode), or the exception's
  last line from the program's traceback.
- testcode (check code, assert lists): the checker logs each call of the candidate while the check runs (the line of
  the test code, the arguments, what it returned or raised) and reports the line where the check
  failed; here that line becomes the test code's statement, with the candidate under its own name.

Nothing runs again to explain a failure, no program value is evaluated here (each arrives written out
or as plain data), and no verdict reads these records. stdin problems keep input/expected/output.
"""
from __future__ import annotations

import ast
import copy
import json
import re

from ewa.problems import Problem, Test
from ewa.sandbox.forkserver import decode, short_repr
from ewa.verdicts import RE

# What the checker reports instead of an exception when the candidate's process failed to answer.
NO_ANSWER = ("died", "BadReply")


def explain(problem: Problem, index: int, reply: dict, code: str | None, verdict: str) -> dict | None:
    """{"test": the failing assert or call, "calls": [{"call", and "returned", "raised" or "failed"}]}
    for a failed test of a function-call problem; None for stdin problems and for a program that did not
    compile (its feedback is the compiler's)."""
    cand = reply.get("cand") or {}
    if problem.testtype == "stdin" or "ce" in cand:
        return None
    test = problem.tests[index]
    if problem.testtype == "functional":
        return functional_failure(problem, test, cand, code or "", verdict)
    return testcode_failure(problem, test, (reply.get("check") or {}).get("failure"))


def functional_failure(problem: Problem, test: Test, cand: dict, code: str, verdict: str) -> dict | None:
    try:  # the arguments as the fork server reads them: one JSON value a line
        args = [json.loads(line) for line in test.input.split("\n") if line.strip()]
        expected = json.loads(test.output)
    except ValueError:
        return None
    from ewa.sandbox.semantics import semantics_for

    callee = problem.func_name  # the function the harness calls
    top_level = not semantics_for(problem).solution_first and re.search(rf"^def {re.escape(callee)}\b", code, re.M)
    if "class Solution" in code and not top_level:
        callee = f"Solution().{callee}"
    call = f"{callee}({', '.join(short_repr(a) for a in args)})"
    calls = []
    if cand.get("result"):
        try:
            calls.append({"call": call, "returned": short_repr(decode(json.loads(cand["result"])))})
        except (TypeError, ValueError, RecursionError):
            pass
    elif verdict == RE:  # the traceback's last line (the runner prints the program's own frames)
        lines = [line for line in (cand.get("stderr") or "").splitlines() if line.strip()]
        if lines:
            calls.append({"call": call, "raised": lines[-1].strip()})
    return {"test": f"assert {call} == {short_repr(expected)}", "calls": calls}


class _Rename(ast.NodeTransformer):
    def __init__(self, old: str, new: str):
        self.old, self.new = old, new

    def visit_Name(self, node):
        return ast.copy_location(ast.Name(self.new, node.ctx), node) if node.id == self.old else node


def testcode_failure(problem: Problem, test: Test, detail: dict | None) -> dict | None:
    """The statement of the check that failed (the whole check where the checker could not say, e.g. it
    timed out) and the calls of the candidate it made, as the checker logged them."""
    try:
        tree = ast.parse(test.input)
    except SyntaxError:
        return None
    check = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"), None)
    if check is None:
        return None
    param = check.args.args[0].arg if check.args.args else problem.func_name
    line = (detail or {}).get("line")
    spans = [n for n in ast.walk(tree) if isinstance(n, ast.stmt) and not isinstance(n, ast.FunctionDef)
             and isinstance(line, int) and n.lineno <= line <= (n.end_lineno or n.lineno)]
    statements = [min(spans, key=lambda n: (n.end_lineno or n.lineno) - n.lineno)] if spans else check.body
    rename = _Rename(param, problem.func_name)
    text = "\n".join(ast.unparse(rename.visit(copy.deepcopy(s))) for s in statements)
    calls = []
    if spans:
        first, last = statements[0].lineno, statements[0].end_lineno or statements[0].lineno
        made = sum(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in (param, problem.func_name)
                   for n in ast.walk(statements[0]))
        logged = (detail or {}).get("calls") or []
        trailing = []
        for c in reversed(logged):  # this statement's calls: the log's last ones made from its lines
            if not isinstance(c, dict) or not isinstance(c.get("line"), int) or not first <= c["line"] <= last:
                break
            trailing.insert(0, c)
        calls = [call_record(problem.func_name, c) for c in trailing[-made:]] if made else []
    return {"test": text, "calls": [c for c in calls if c]}


def call_record(name: str, c: dict) -> dict | None:
    args = [a for a in c.get("args") or [] if isinstance(a, str)]
    args += [f"{k}={v}" for k, v in c.get("kwargs") or [] if isinstance(k, str) and isinstance(v, str)]
    call = f"{name}({', '.join(args)})"
    if isinstance(c.get("returned"), str):
        return {"call": call, "returned": c["returned"]}
    if isinstance(c.get("raised"), str):
        kind, _, why = c["raised"].partition(": ")
        return {"call": call, "failed": why or kind} if kind in NO_ANSWER else {"call": call, "raised": c["raised"]}
    return None
