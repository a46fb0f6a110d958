"""The APPS family: APPS (hendrycks/apps, the `codeparrot/apps` release), TACO (`BAAI/TACO`) and DeepCoder's
taco and primeintellect subsets (`agentica-org/DeepCoder-Preview-Dataset`), as JSON Lines or parquet exports, a
glob or a directory of shards, read as ewa.data.sources reads them.

Records:
- APPS and TACO: `question`, `solutions` (a JSON list of programs), `starter_code`, `difficulty`, `problem_id`
  (APPS; a TACO row has none and is numbered by its position in the input) and `input_output`: JSON, or for
  some TACO rows a Python literal (read with ast.literal_eval, never evaluated), holding `inputs`, `outputs` and,
  for a call-based problem, `fn_name`. TACO's `time_limit` / `memory_limit` texts are kept in `meta`.
- DeepCoder: `problem`, `solutions`, `starter_code`, `metadata` and `tests` (a JSON string): for its taco
  subset the same {inputs, outputs, fn_name} object, for primeintellect a list of {input, output, and `type`
  ("stdin_stdout" / "function_call") or `testtype` ("stdin" / "functional"), fn_name}; a function call's
  input is its list of arguments and its output the value returned (a string input is read as JSON values,
  one per line, the canonical functional layout).
A standard-input test's input and output may be lists of lines (joined with "\\n", as the reference does). A
record without tests is dropped (reason `no_tests`); APPS keeps no public/private split, so the first test,
usually the statement's example, is the public one (feedback shows only it); a verdict uses every test. The
record's first three programs go to `meta.python_solutions` (`verify_solutions` runs them). The split is the
file given (APPS publishes train and test as separate files): `split` must be `all`.

Limits: 4 s a test (testing_util's timeout) and 2048 MB (the reference sets no memory limit), whatever the
semantics; TACO's own time and memory limits are only recorded (`meta.stated_time_limit`,
`meta.stated_memory_limit`).

Two judge semantics, chosen per dataset by the format's key `semantics` (judge.py):
- `strict` (judge `apps-strict`), the default: ewa's own comparison, the program run as written (as __main__
  on stdin, or its function called: a top-level function, else Solution().<fn_name>); stdout compared token by
  token, real numbers within float_tol; a returned value compared structurally with the expected one. The
  release wraps each call-based answer in a one-element list (`[[1, 2]]` for the answer `[1, 2]`); where every
  answer of a problem is so wrapped the loader unwraps them, else they stay as they are. A reward or a score
  under `strict` cannot be won by what only the reference's leniencies accept. Training data should use it.
- `reference` (judge `apps`): hendrycks/apps eval/testing_util.py at commit 362aedc (June 2024), reproduced;
  use it to compare with published APPS numbers. TACO's copy (FlagOpen/TACO@245eba3 metrics/testing_util.py)
  and DeepCoder's (agentica-project/rllm@874daa4 rllm/rewards/code_utils/taco.py) run a standard-input program
  as a script in a subprocess and apply the cascade to its stdout as one string, not to its lines: their
  real-number step then reads characters and their set step compares the character sets of tokens, so they
  accept less (`2 1` for `1 2` fails there); DeepCoder's reward also keeps only the 15 tests with the longest
  inputs, 12 s each. ewa reproduces APPS's own. What the reference does:
  * every program is preceded by its import header (sys, time, itertools, collections, functools.lru_cache,
    math's functions, fractions, typing's List and Tuple, numpy as np, random, heapq; judge.APPS_PRELUDE) and
    runs under reliability_guard (exit, quit, os.kill, os.getcwd, subprocess.Popen, ... set to None), executed
    in a plain dict (pyext's RuntimeModule.from_string), so `__name__` is "builtins": an `if __name__ ==
    "__main__":` block never runs;
  * standard input: every line not starting with "from " or "import " is indented by a tab into `def code():`
    (harness.apps_stdio_source), which is called once per test with sys.stdin an io.StringIO of the input (so
    `sys.stdin.buffer` is an AttributeError), builtins.open a mock_open of it and sys.stdout captured; `stdin`
    and `stdout` (bound before code() to the harness's own streams), and `from sys import stdin`, read the
    input's lines without their newlines and write where no one reads; SystemExit ends the program normally;
  * its output (str.splitlines of what was printed) passes a test by the first rule that holds
    (judge.apps_stdout_match): the stripped texts equal; the lines equal the expected non-empty lines,
    stripped; each line one real number, numpy.allclose (rtol 1e-5, atol 1e-8); **the lines as a set of sets
    of tokens**: lines in any order, tokens in any order within a line, repeats ignored, so `2 1` passes for
    `1 2` and `YES` for `YES\\nYES`; the same with every token a real number rounded to 3 decimals;
  * call-based: Solution().<fn_name> when the source contains "class Solution", else the module's function;
    a first argument that is a dict gets int keys (and stands for all the arguments); the result, a tuple made a
    list, passes if `== expected`, `== expected[0]`, or (a list of tuples) with its tuples as lists
    `== expected[0]` (judge.apps_value_match).
  Deviations: numpy is imported only where the judge's interpreter has it (the lean one has not: a program
  using `np` fails here); a fork per test, where the reference loads the program once per problem (state kept
  between tests in a module or a Solution instance does not carry over); the returned value is rebuilt in the
  host from trusted types and compared there (an object of the program's own class with an `__eq__` of its own
  equals nothing here); TLE on CPU time against 4 s times the calibration factor, where the reference's
  4 s alarm is wall-clock (and test_one_solution's 11 s watchdog ends a problem's whole run); the stack is the reference
  process's usual 8 MB; ewa's six verdicts, where the reference knows pass, fail, runtime error (-1) and
  compile error (-2: a program that does not load, here CE or RE).
tests/test_apps.py holds the table of programs this was checked on (verdicts from testing_util itself).
"""
from __future__ import annotations

import ast
import json
from typing import Iterator

from ewa.data.apps.judge import HARNESS, SEMANTICS, STRICT
from ewa.data.sources import converted, read_records
from ewa.data.verify import Dropped
from ewa.errors import UserError
from ewa.formats import Format, PlanHints
from ewa.problems import Problem, ProblemError, make_test

TIME_LIMIT_S = 4.0  # testing_util's timeout
MEMORY_LIMIT_MB = 2048  # the reference sets none
VERIFY_ATTEMPTS = 3  # reference programs kept for verify_solutions
JUDGES = {"strict": STRICT.name, "reference": SEMANTICS.name}
# What convert() reads of a parquet export (APPS, TACO and DeepCoder columns).
COLUMNS = ("problem_id", "id", "uid", "question", "problem", "solutions", "input_output", "tests", "starter_code",
           "difficulty", "url", "source", "name", "time_limit", "memory_limit", "metadata", "raw_tags",
           "skill_types")
TACO_FIELDS = ("time_limit", "memory_limit", "raw_tags", "skill_types")
STDIN_KINDS = {"stdin", "stdin_stdout"}
CALL_KINDS = {"functional", "function_call", "call_based"}


def literal(text: str, label: str, name: str):
    """A field holding JSON, or (TACO) a Python literal; never evaluated as code."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise ProblemError(f"{label}: field '{name}' is neither JSON nor a Python literal") from None


def _listed(x):
    return x.tolist() if hasattr(x, "tolist") else x


def _text(value, label: str, where: str) -> str:
    """A standard-input test's input or output: text, or a list of lines joined with "\\n"."""
    value = _listed(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    if isinstance(value, str):
        return value
    raise ProblemError(f"{label}: field '{where}' must be text or a list of lines, got {type(value).__name__}")


def _args(value, label: str, where: str) -> str:
    """A call's arguments as ewa's functional tests hold them: one JSON value a line."""
    value = _listed(value)
    if isinstance(value, tuple):  # a TACO literal's
        value = list(value)
    if isinstance(value, str):  # the canonical functional layout: JSON values, one a line
        try:
            value = [json.loads(line) for line in value.split("\n") if line.strip()]
        except ValueError:
            raise ProblemError(f"{label}: field '{where}' is text that is not JSON values, one a line") from None
    if not isinstance(value, list):
        raise ProblemError(f"{label}: field '{where}' must be the list of a call's arguments, got "
                           f"{type(value).__name__}")
    try:
        return "\n".join(json.dumps(v) for v in value)
    except (TypeError, ValueError):
        raise ProblemError(f"{label}: field '{where}' holds a value JSON cannot carry") from None


def _value(value, label: str, where: str) -> str:
    try:
        return json.dumps(_listed(value))
    except (TypeError, ValueError):
        raise ProblemError(f"{label}: field '{where}' holds a value JSON cannot carry") from None


def cases(rec: dict, label: str) -> tuple[str | None, list[tuple], str]:
    """(fn_name or None, [(input, expected, input's name, expected's name)], the field they came from), as the
    record lays them out."""
    field = "tests" if rec.get("tests") is not None else "input_output"
    raw = rec.get(field)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None, [], field
    data = literal(raw, label, field) if isinstance(raw, str) else _listed(raw)
    if isinstance(data, dict):
        ins, outs = _listed(data.get("inputs")), _listed(data.get("outputs"))
        if not isinstance(ins, list) or not isinstance(outs, list) or len(ins) != len(outs):
            raise ProblemError(f"{label}: field '{field}' must hold equal-length 'inputs' and 'outputs' lists")
        fn = data.get("fn_name")
        if fn is not None and not isinstance(fn, str):
            raise ProblemError(f"{label}: field '{field}.fn_name' must be a string")
        return fn or None, [(i, o, f"{field}.inputs[{k}]", f"{field}.outputs[{k}]")
                            for k, (i, o) in enumerate(zip(ins, outs))], field
    if isinstance(data, list):  # DeepCoder's primeintellect: one object per test
        kinds, fns, pairs = set(), set(), []
        for i, t in enumerate(data):
            if not isinstance(t, dict) or "input" not in t or "output" not in t:
                raise ProblemError(f"{label}: field '{field}[{i}]' must be an object with 'input' and 'output'")
            kind = t.get("type", t.get("testtype"))
            extra = t.get("metadata")
            fn = t.get("fn_name") or (extra.get("func_name") if isinstance(extra, dict) else None)
            kinds.add("call" if kind in CALL_KINDS or (kind is None and fn) else
                      "stdin" if kind in STDIN_KINDS or kind is None else str(kind))
            fns.add(fn)
            pairs.append((t["input"], t["output"], f"{field}[{i}].input", f"{field}[{i}].output"))
        if len(kinds) > 1 or not kinds <= {"call", "stdin"}:
            raise ProblemError(f"{label}: field '{field}' mixes or names unknown test types ({sorted(kinds)}); "
                               "expected stdin_stdout/stdin or function_call/functional")
        fn = next(iter(fns - {None}), None) if kinds == {"call"} else None
        if kinds == {"call"} and (fn is None or len(fns - {None}) > 1):
            raise ProblemError(f"{label}: field '{field}' needs one fn_name for its function-call tests")
        return fn, pairs, field
    raise ProblemError(f"{label}: field '{field}' must be an object with inputs and outputs, or a list of tests")


def _solutions(rec: dict, label: str) -> list[str]:
    raw = _listed(rec.get("solutions"))
    if raw is None or raw == "":
        return []
    if isinstance(raw, str):
        raw = literal(raw, label, "solutions")
    if not isinstance(raw, list):
        raise ProblemError(f"{label}: field 'solutions' must be a list of programs")
    return [s for s in raw if isinstance(s, str) and s.strip()][:VERIFY_ATTEMPTS]


def _unwrapped(outputs: list) -> list:
    """The release's one-element answer lists unwrapped, where every answer of the problem is one."""
    if outputs and all(isinstance(o, list) and len(o) == 1 for o in outputs):
        return [o[0] for o in outputs]
    return outputs


def _flavour(rec: dict) -> str:
    if rec.get("tests") is not None:
        return "deepcoder"
    return "taco" if any(k in rec for k in TACO_FIELDS) else "apps"


def convert(rec: dict, where: str, index: int, semantics: str) -> Problem | Dropped:
    flavour = _flavour(rec)
    pid = next((rec[k] for k in ("problem_id", "id", "uid") if rec.get(k) not in (None, "")), index)
    label = f"{where}record {pid!r}"
    statement = rec.get("question", rec.get("problem"))
    if not isinstance(statement, str):
        raise ProblemError(f"{label}: field 'question' (DeepCoder: 'problem') missing or not a string")
    starter = rec.get("starter_code") or ""
    if not isinstance(starter, str):
        raise ProblemError(f"{label}: field 'starter_code' must be a string")
    fn, pairs, field = cases(rec, label)
    problem_id = f"{flavour}/{pid}"
    if not pairs:
        return Dropped(problem_id, "no_tests", f"field '{field}' holds no test")
    if fn is None:
        tests = [(_text(i, label, in_name), _text(o, label, out_name)) for i, o, in_name, out_name in pairs]
    else:
        answers = [_listed(o) for _, o, _, _ in pairs]
        outputs = _unwrapped(answers) if semantics == "strict" else answers
        tests = [(_args(i, label, in_name), _value(o, label, out_name))
                 for (i, _, in_name, out_name), o in zip(pairs, outputs)]
    difficulty = rec.get("difficulty")
    meta = {"flavour": flavour, "python_solutions": _solutions(rec, label)}
    for key, name in (("url", "url"), ("source", "source"), ("name", "name")):
        if isinstance(rec.get(key), str) and rec[key]:
            meta[name] = rec[key]
    for key in ("time_limit", "memory_limit"):
        if rec.get(key) not in (None, ""):
            meta[f"stated_{key}"] = str(rec[key])
    if fn is not None and semantics == "strict":
        meta["answers_unwrapped"] = outputs is not answers
    return Problem(
        id=problem_id, source=flavour, difficulty=str(difficulty).lower() if difficulty else "unknown",
        statement=statement, starter_code=starter, testtype="functional" if fn else "stdin", func_name=fn,
        time_limit_s=TIME_LIMIT_S, memory_limit_mb=MEMORY_LIMIT_MB,
        tests=tuple(make_test(i, o, public=k == 0) for k, (i, o) in enumerate(tests)),
        meta=meta, judge=JUDGES[semantics],
    )


def records(input: str | None, split: str = "all", semantics: str = "strict", **_
            ) -> Iterator[Problem | Dropped | ProblemError]:
    if not input:
        raise UserError("apps: --input is required (a local APPS, TACO or DeepCoder .jsonl/.parquet export, a glob "
                        "or a directory of shards)")
    if split != "all":
        raise UserError(f"apps: split {split!r}: the split is the file given (APPS publishes train and test as "
                        "separate files); leave split at 'all'")
    if semantics not in JUDGES:
        raise UserError(f"apps: semantics {semantics!r} is not one of {', '.join(JUDGES)}")
    position = [0]  # of the record being converted, among all the input's records: a TACO row has no id

    def rows():
        for i, row in enumerate(read_records(input, "apps", COLUMNS)):
            position[0] = i
            yield row

    return converted(rows(), lambda rec, where: convert(rec, where, position[0], semantics))


FORMAT = Format(
    name="apps",
    description="APPS / TACO / DeepCoder (taco, primeintellect) records with input_output or tests; judged "
                "strictly, or as APPS's testing_util",
    records=records, splits=("all",),
    options={"semantics": {
        "enum": list(JUDGES), "default": "strict",
        "description": "strict (judge apps-strict): ewa's token and value comparison, for training and for scores a "
                       "lenient comparison cannot inflate; reference (judge apps): APPS's testing_util cascade "
                       "(lines as sets of tokens, ...), to compare with published APPS numbers."}},
    semantics=(SEMANTICS, STRICT),
    harnesses={"apps": HARNESS},
    verifiable=True,  # the records' `solutions`
    min_python=(3, 10),  # programs from current models use 3.10 syntax (`match`, `int | None`)
    # APPS's test split: 5,000 problems, 21.2 tests on average (its paper).
    plan=PlanHints(problems=5000, tests=21.2),
)
