"""Your own problems: a documented JSON Lines format (format `jsonl`), one problem a line, for a lab's own
task set; docs/own-benchmark.md is its reference, with a complete example.

    {"id": "sum-pairs/1", "statement": "Print the sum of the numbers on the line.", "kind": "stdin",
     "tests": [{"input": "1 2\\n", "output": "3\\n", "public": true}, {"input": "5 7\\n", "output": "12\\n"}]}

Fields (only id, statement and tests are required):
- `id` (string, unique in the file), `statement` (string: what the model is shown), `difficulty` (string),
  `family` (string: problems that are instances of one task; the bootstrap resamples them together),
  `starter_code` (string, shown to the model), `time_limit_s` (number > 0, default 2), `memory_limit_mb`
  (number > 0, default 256), `source` (string; default "jsonl").
- `kind`: how the tests run. `stdin` (the default): each test is {"input": str, "output": str}, the
  program reads input on stdin and its stdout is compared token by token (reals within the sandbox's
  float_tol, or the problem's `float_tol`). `function`: each test is {"args": [JSON values...],
  "expected": JSON value}, the program's `function` (field, required) is called with the arguments and
  its return value compared structurally. `assert`: each test is {"code": "assert f(1) == 2"}: Python
  statements that call the program's functions by name (`function` names the one the model writes);
  the test passes if they run to the end. The asserts run in the sandbox's checker process, never in the
  host; the host only parses them (ast.parse) to report a syntax error against its line.
- Every test may carry "public": true (shown to the model as an example: agentic feedback and the
  prompt may use it; every test, public or not, decides the verdict) and "size" (an integer: the key the
  coverage tiers order tests by; default the input's length in bytes, or the assert's).
- `float_tol` (number >= 0): a tolerance for reals of this problem's output, instead of the sandbox's.

Judged by ewa's own semantics (`jsonl`: the program as written; strict comparisons), so a reward cannot be
won by a lenient comparison. The whole file is checked before a problem is written: every bad line is
reported in one pass (file, line, field, what was expected), and nothing is written for a bad file.
"""
from __future__ import annotations

import ast
import json
import textwrap
from typing import Iterator

from ewa.data.sources import read_records
from ewa.errors import UserError
from ewa.formats import Format, PlanHints
from ewa.problems import Problem, ProblemError, Test
from ewa.sandbox.semantics import own

KINDS = {"stdin": "stdin", "function": "functional", "assert": "testcode"}
OPTIONAL_STRINGS = ("difficulty", "family", "starter_code", "source")
KNOWN_FIELDS = {"id", "statement", "kind", "function", "tests", "time_limit_s", "memory_limit_mb", "float_tol",
                *OPTIONAL_STRINGS}
TEST_FIELDS = {"stdin": {"input", "output"}, "function": {"args", "expected"}, "assert": {"code"}}


class BadField(ValueError):
    """One field of one record that is not as documented."""


def _type_name(value) -> str:
    return "null" if value is None else type(value).__name__


def _number(rec: dict, name: str, default: float, minimum_excluded: bool = True) -> float:
    value = rec.get(name, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0 or (minimum_excluded and value == 0):
        bound = "> 0" if minimum_excluded else ">= 0"
        raise BadField(f"field '{name}': expected a number {bound}, got {value!r}")
    return value


def _test(kind: str, i: int, raw) -> Test:
    where = f"tests[{i}]"
    if not isinstance(raw, dict):
        raise BadField(f"field '{where}': expected an object, got {_type_name(raw)}")
    unknown = sorted(set(raw) - TEST_FIELDS[kind] - {"public", "size"})
    if unknown:
        raise BadField(f"field '{where}.{unknown[0]}': not a field of a {kind} test (expected: "
                       f"{', '.join(sorted(TEST_FIELDS[kind]))}, public, size)")
    missing = sorted(TEST_FIELDS[kind] - set(raw))
    if missing:
        raise BadField(f"field '{where}.{missing[0]}': required for a {kind} test")
    if not isinstance(raw.get("public", False), bool):
        raise BadField(f"field '{where}.public': expected true or false, got {raw['public']!r}")
    if kind == "stdin":
        for name in ("input", "output"):
            if not isinstance(raw[name], str):
                raise BadField(f"field '{where}.{name}': expected a string, got {_type_name(raw[name])}")
        text, expected = raw["input"], raw["output"]
    elif kind == "function":
        if not isinstance(raw["args"], list):
            raise BadField(f"field '{where}.args': expected a list of arguments, got {_type_name(raw['args'])}")
        text, expected = "\n".join(json.dumps(a) for a in raw["args"]), json.dumps(raw["expected"])
    else:
        code = raw["code"]
        if not isinstance(code, str) or not code.strip():
            raise BadField(f"field '{where}.code': expected Python statements as a string, got {code!r}")
        try:
            ast.parse(code)  # parsed, never run, in the host
        except SyntaxError as e:
            raise BadField(f"field '{where}.code': not valid Python ({e.msg}, line {e.lineno})") from None
        text, expected = "def check(candidate):\n" + textwrap.indent(code.strip("\n"), "    ") + "\n", ""
    size = raw.get("size", len((raw["code"] if kind == "assert" else text).encode()))
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise BadField(f"field '{where}.size': expected a non-negative integer, got {size!r}")
    return Test(text, expected, size, raw.get("public", False))


def convert(rec: dict) -> Problem:
    """One record as a Problem; BadField names the first field that is not as documented."""
    unknown = sorted(set(rec) - KNOWN_FIELDS)
    if unknown:
        raise BadField(f"field '{unknown[0]}': not a field of this format (expected: {', '.join(sorted(KNOWN_FIELDS))})")
    for name in ("id", "statement"):
        if not isinstance(rec.get(name), str) or not rec[name].strip():
            raise BadField(f"field '{name}': expected a non-empty string, got {rec.get(name)!r}")
    for name in OPTIONAL_STRINGS:
        if not isinstance(rec.get(name, ""), str):
            raise BadField(f"field '{name}': expected a string, got {_type_name(rec[name])}")
    kind = rec.get("kind", "stdin")
    if kind not in KINDS:
        raise BadField(f"field 'kind': expected one of {', '.join(KINDS)}, got {kind!r}")
    function = rec.get("function")
    if kind != "stdin" and (not isinstance(function, str) or not function.isidentifier()):
        raise BadField(f"field 'function': a {kind} problem names the function the model writes, got {function!r}")
    tests = rec.get("tests")
    if not isinstance(tests, list) or not tests:
        raise BadField(f"field 'tests': expected a non-empty list, got {tests!r:.60}")
    meta = {"family": rec["family"]} if rec.get("family") else {}
    if "float_tol" in rec:
        meta["float_tol"] = _number(rec, "float_tol", 0.0, minimum_excluded=False)
    return Problem(
        id=rec["id"], source=rec.get("source") or "jsonl", difficulty=rec.get("difficulty", ""),
        statement=rec["statement"], testtype=KINDS[kind], tests=tuple(_test(kind, i, t) for i, t in enumerate(tests)),
        starter_code=rec.get("starter_code", ""), func_name=function if kind != "stdin" else None,
        time_limit_s=float(_number(rec, "time_limit_s", 2.0)), memory_limit_mb=int(_number(rec, "memory_limit_mb", 256)),
        meta=meta, judge="jsonl")


MAX_LISTED = 50


def check_file(input: str) -> list[str]:
    """Every bad line of the file, one message each ("FILE:LINE: field 'F': what was expected"), in one
    pass; only ids are kept in memory. Empty: every line is a valid problem."""
    errors, seen = [], {}
    for where, rec in read_records(input, "jsonl"):
        if isinstance(rec, ProblemError):
            errors.append(str(rec))
            continue
        try:
            problem = convert(rec)
        except BadField as e:
            errors.append(f"{where}{e}")
            continue
        if problem.id in seen:
            errors.append(f"{where}field 'id': {problem.id!r} is also the id of {seen[problem.id]}")
        else:
            seen[problem.id] = where.strip().rstrip(":")
    return errors


def records(input: str | None, skip_invalid: bool = False, **_) -> Iterator[Problem | ProblemError]:
    if not input:
        raise UserError("jsonl: input is required (a .jsonl file of your problems, a glob or a directory)")
    errors = check_file(input)
    if errors and not skip_invalid:
        listed = "\n".join(errors[:MAX_LISTED])
        more = f"\n(and {len(errors) - MAX_LISTED} more)" if len(errors) > MAX_LISTED else ""
        raise UserError(f"{input}: {len(errors)} bad line(s), nothing written (docs/own-benchmark.md):\n"
                        f"{listed}{more}")
    return _problems(input)


def _problems(input: str) -> Iterator[Problem | ProblemError]:
    seen = set()
    for where, rec in read_records(input, "jsonl"):
        if isinstance(rec, ProblemError):
            yield rec
            continue
        try:
            problem = convert(rec)
        except BadField as e:
            yield ProblemError(f"{where}{e}")
            continue
        if problem.id in seen:
            yield ProblemError(f"{where}field 'id': {problem.id!r} is duplicated")
            continue
        seen.add(problem.id)
        yield problem


FORMAT = Format(
    name="jsonl",
    description="your own problems: ewa's documented JSON Lines (stdin, function-call or assert tests)",
    records=records,
    splits=("all",),  # one problem set: the file given is the split
    semantics=(own("jsonl", "1", "program as written; stdout tokens, returned values structurally, real numbers "
                                "within the problem's float_tol else the sandbox's; asserts in the checker"),),
    min_python=(3, 8),
    plan=PlanHints(problems=100, tests=10),
)
