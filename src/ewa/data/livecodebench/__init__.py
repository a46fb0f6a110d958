"""LiveCodeBench `code_generation_lite` JSON Lines, read as published: one file, a glob (`test*.jsonl`, the
release's increments) or a directory of them, streamed (ewa.data.sources).

Judged as LiveCodeBench's reference harness judges (judge.py, the host's comparisons; harness.py, the
program's preparation inside the sandbox).

private_test_cases is either a JSON string or base64(zlib(pickle(JSON string))) — the compressed form
the release uses for large suites. The pickle is read without running anything: it may only hold that
string (see `TextUnpickler`).
"""
from __future__ import annotations

import base64
import io
import json
import pickle
import zlib
from typing import Iterator

from ewa.data.livecodebench.judge import HARNESS, SEMANTICS
from ewa.data.sources import converted, read_records
from ewa.errors import UserError
from ewa.formats import Format, PlanHints
from ewa.problems import Problem, ProblemError, make_test

DEFAULT_TIME_LIMIT_S = 6.0  # LiveCodeBench's own per-test timeout
DEFAULT_MEMORY_LIMIT_MB = 1024
REQUIRED_FIELDS = ("question_content", "difficulty", "platform", "public_test_cases", "private_test_cases")
# What convert() reads; a parquet export's other columns stay on disk.
COLUMNS = REQUIRED_FIELDS + ("question_id", "question_title", "metadata", "starter_code", "contest_date", "contest_id")


class UnsafePickle(UserError):
    """A test-case pickle holding anything but text: refused, even with --skip-invalid, since loading
    it as a pickle would have run code or built objects the release never contains."""


class TextUnpickler(pickle.Unpickler):
    """Unpickles plain data only. Every callable a pickle can run (a reduce, a class to build, an
    extension code) is looked up through find_class, so refusing every global runs nothing."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refused global {module}.{name}")


def unpickle_text(data: bytes) -> str:
    """The string a pickle holds; UnsafePickle (message without a location) for anything else."""
    try:
        value = TextUnpickler(io.BytesIO(data)).load()
    except pickle.UnpicklingError as e:
        raise UnsafePickle(f"the pickle is not plain text ({' '.join(str(e).split())})") from None
    if not isinstance(value, str):
        raise UnsafePickle(f"the pickle holds a {type(value).__name__}, not a str (JSON text)")
    return value


def decode_tests(field: str) -> list[dict]:
    """A test-case field: plain JSON, or base64 of zlib of pickle of a JSON string."""
    try:
        return json.loads(field)
    except json.JSONDecodeError:
        pass
    return json.loads(unpickle_text(zlib.decompress(base64.b64decode(field.encode()))))


def convert(rec: dict, where: str, time_limit_s: float, memory_limit_mb: int) -> Problem:
    pid = rec.get("question_id") or rec.get("question_title")
    label = f"{where}record {pid!r}"
    for name in REQUIRED_FIELDS:
        if not isinstance(rec.get(name), str):
            raise ProblemError(f"{label}: field '{name}' missing or not a string")
    if not pid:
        raise ProblemError(f"{where}record: field 'question_id' missing")
    try:
        public = json.loads(rec["public_test_cases"])
    except json.JSONDecodeError:
        raise ProblemError(f"{label}: field 'public_test_cases' is not JSON") from None
    try:
        private = decode_tests(rec["private_test_cases"]) if rec["private_test_cases"] else []
    except UnsafePickle as e:
        raise UnsafePickle(f"{label}: field 'private_test_cases': {e}") from None
    except Exception:
        raise ProblemError(f"{label}: field 'private_test_cases' is neither JSON nor base64/zlib/pickle JSON") from None
    for name, cases in (("public_test_cases", public), ("private_test_cases", private)):
        if not isinstance(cases, list) or not all(isinstance(c, dict) and isinstance(c.get("input"), str)
                                                  and isinstance(c.get("output"), str) for c in cases):
            raise ProblemError(f"{label}: field '{name}' must be a list of objects with string 'input' and 'output'")
    try:
        metadata = json.loads(rec.get("metadata") or "{}")
    except json.JSONDecodeError:
        raise ProblemError(f"{label}: field 'metadata' is not JSON") from None
    cases = [(c, True) for c in public] + [(c, False) for c in private]
    if not cases:
        raise ProblemError(f"{label}: field 'public_test_cases' and 'private_test_cases' hold no tests")
    testtypes = {c.get("testtype", "stdin") for c, _ in cases}
    if len(testtypes) != 1 or not testtypes <= {"stdin", "functional"}:
        raise ProblemError(f"{label}: field 'testtype' must be one of stdin/functional for all tests, got {sorted(testtypes)}")
    testtype = testtypes.pop()
    func_name = metadata.get("func_name")
    if testtype == "functional" and not func_name:
        raise ProblemError(f"{label}: field 'metadata.func_name' is required for functional problems")
    return Problem(
        id=f"lcb/{pid}", source=f"livecodebench/{rec['platform']}", difficulty=rec["difficulty"],
        statement=rec["question_content"], starter_code=rec.get("starter_code") or "", testtype=testtype,
        func_name=func_name, time_limit_s=time_limit_s, memory_limit_mb=memory_limit_mb,
        tests=tuple(make_test(c["input"], c["output"], public) for c, public in cases),
        meta={"contest_date": rec.get("contest_date", ""), "contest_id": rec.get("contest_id", ""),
              "title": rec.get("question_title", ""), "platform": rec["platform"]},
        judge="livecodebench",
    )


def records(input: str | None, time_limit_s: float = DEFAULT_TIME_LIMIT_S,
            memory_limit_mb: int = DEFAULT_MEMORY_LIMIT_MB, **_) -> Iterator[Problem | ProblemError]:
    if not input:
        raise UserError("livecodebench: --input is required (a local code_generation_lite .jsonl file, a glob "
                        "or a directory of them)")
    return converted(read_records(input, "livecodebench", COLUMNS, REQUIRED_FIELDS),
                     lambda rec, where: convert(rec, where, time_limit_s, memory_limit_mb))


FORMAT = Format(
    name="livecodebench",
    description="LiveCodeBench code_generation_lite JSON Lines (a file, a glob of the release's increments, a "
                "directory)",
    records=records,
    splits=("all",),  # one problem set: the file given is the split
    semantics=(SEMANTICS,),
    harnesses={"lcb": HARNESS},
    # Programs from current models use 3.10 syntax (`match`, `int | None` in annotations: CE or RE on 3.9).
    min_python=(3, 10),
    # The release_v6 increment (1,055 - 880 problems, its dataset card; a difficulty filter keeps fewer, so
    # this overestimates); its code_generation card says "over 59 [tests] on average" (the lite release
    # prunes them, so fewer).
    plan=PlanHints(problems=175, tests=59),
)
