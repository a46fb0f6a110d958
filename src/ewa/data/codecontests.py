"""DeepMind CodeContests records (JSON Lines or parquet as exported by `datasets`): one file, a glob or a
directory of shards (the Hugging Face release's `data/test-*.parquet`), streamed (ewa.data.sources).

Public tests are visible to the model; private and generated tests are hidden. Time and memory limits
come from the record.

Hygiene (the record layout is DeepMind's `contest_problem.proto`; it has no checker or special-judge
field, so the judge compares every problem's output token by token, reals within a tolerance):
- A problem whose statement admits several correct outputs ("If there are multiple answers, print any
  of them", "print the elements in any order") is dropped (reason `several_answers`, the phrase
  named): the judge would mark correct programs wrong. The English description is read, and for a
  translated problem (`is_description_translated`) the original one (`untranslated_description`) too.
- A problem that reads or writes named files (`input_file` / `output_file`) is dropped (reason
  `file_io`): the sandbox judges stdin/stdout.
- What the statement allows, the judge allows (ewa.data.statement): "print YES/NO in any case" sets
  `meta.any_case` (tokens compare case-insensitively); "absolute or relative error does not exceed
  10^{-6}" sets `meta.float_tol` and `meta.float_error` (reals within it, as Codeforces' checkers
  compare); `meta.rule_phrases` keeps the phrases they were read from.
- Its first VERIFY_ATTEMPTS Python 3 solutions (`solutions`, language PYTHON3 = 3) are kept in
  `meta.python_solutions`; the dataset option `verify_solutions` (on for train_data) runs them in the
  sandbox and keeps only problems one of them passes (see ewa.data.verify).
"""
from __future__ import annotations

import re
from typing import Iterator

from ewa.data.sources import converted, read_records
from ewa.data.statement import output_rules
from ewa.data.verify import Dropped
from ewa.errors import UserError
from ewa.formats import Format, PlanHints
from ewa.problems import Problem, ProblemError, make_test
from ewa.sandbox.semantics import own

DIFFICULTY = {0: "unknown", 1: "easy", 2: "medium", 3: "hard", 4: "harder", 5: "hardest", 6: "external"}
PYTHON3 = 3  # Solution.Language in contest_problem.proto (1 is Python 2, which python3 cannot run)
VERIFIABLE = True  # ships reference solutions in meta.python_solutions for verify_solutions
VERIFY_ATTEMPTS = 3  # Python 3 solutions tried (in record order) before a problem counts as failing
# The columns convert() reads (the release's other columns, incorrect_solutions the largest, stay on
# disk), and those a parquet shard must have: without them no record converts.
COLUMNS = ("name", "description", "public_tests", "private_tests", "generated_tests", "source", "difficulty",
           "cf_rating", "solutions", "time_limit", "memory_limit_bytes", "input_file", "output_file",
           "is_description_translated", "untranslated_description")
REQUIRED_COLUMNS = ("name", "description", "public_tests", "private_tests", "generated_tests")

# Phrases that say a problem accepts several outputs. Each ties "any" to what is printed, so a unique
# answer chosen among several ("if there are multiple answers, print the lexicographically smallest"),
# "do not print any spaces", "for any i" or "the edges are given in any order" do not match.
_PRINT = r"(?<!not )(?<!n't )(?<!never )\b(?:print|output|write|display)"
SEVERAL_ANSWERS = [re.compile(p, re.IGNORECASE) for p in (
    r"\b(?:several|multiple|more than one)\s+(?:possible\s+|correct\s+|valid\s+|optimal\s+|suitable\s+)?"
    r"(?:answers?|solutions?|outputs?)\b[^.\n]{0,80}?\b(?:any|arbitrary)\b",
    _PRINT + r"\s+(?:out\s+)?(?:any|an\s+arbitrary|arbitrary)\b(?!\s+(?:letter|character|case)\b)",
    _PRINT + r"\b[^.\n]{0,80}?\bin\s+(?:any|an\s+arbitrary|arbitrary)\s+order\b",
    r"\banswers?\s+(?:is\s+not|are\s+not|isn't|aren't|may\s+not\s+be|might\s+not\s+be|can\s+be\s+not|may\s+be\s+not)"
    r"\s+unique\b",
    r"\bany\s+(?:of\s+them|one\s+of\s+them|such\s+\w+|valid\s+\w+|correct\s+\w+|of\s+the\s+\w+)\s+"
    r"(?:will\s+be|is|would\s+be)\s+(?:accepted|considered\s+correct)\b",
    r"(?:выведите|вывести|выведи|выводите)\s+(?:любой|любое|любую|любые)\b",  # untranslated (Russian) statements
)]


def _statements(rec: dict) -> list[str]:
    """The English description, and for a translated problem the original one too."""
    texts = [str(rec.get("description") or "")]
    if rec.get("is_description_translated"):
        texts.append(str(rec.get("untranslated_description") or ""))
    return texts


def several_answers(rec: dict) -> str | None:
    """The phrase of the record's statement that admits several correct outputs, or None."""
    for text in _statements(rec):
        flat = " ".join(text.split())
        for pattern in SEVERAL_ANSWERS:
            m = pattern.search(flat)
            if m:
                return m.group(0)
    return None


def _difficulty(value) -> str:
    if isinstance(value, str):
        return value.lower()
    if isinstance(value, int) and value >= 7:  # Codeforces problem letters A.. follow the named levels
        return chr(ord("A") + value - 7)
    return DIFFICULTY.get(value, "unknown")


def _listed(x):
    return list(x) if hasattr(x, "tolist") else x  # parquet gives arrays


def _tests(rec: dict, name: str, label: str, public: bool) -> list:
    block = rec.get(name) or {"input": [], "output": []}
    ins, outs = _listed(block.get("input")), _listed(block.get("output"))
    if not isinstance(ins, list) or not isinstance(outs, list) or len(ins) != len(outs):
        raise ProblemError(f"{label}: field '{name}' must hold equal-length 'input' and 'output' lists")
    return [make_test(str(i), str(o), public) for i, o in zip(ins, outs)]


def python_solutions(rec: dict, label: str) -> list[str]:
    """The record's Python 3 solutions in order: `solutions` as `datasets` exports it
    ({language: [...], solution: [...]}) or as the proto's JSON (a list of {language, solution});
    a language is the enum number (3) or its name ("PYTHON3")."""
    block = rec.get("solutions")
    if block is None:
        return []
    if isinstance(block, dict):
        langs, sols = _listed(block.get("language")), _listed(block.get("solution"))
        if not isinstance(langs, list) or not isinstance(sols, list) or len(langs) != len(sols):
            raise ProblemError(f"{label}: field 'solutions' must hold equal-length 'language' and 'solution' lists")
        pairs = zip(langs, sols)
    elif isinstance(_listed(block), list):
        pairs = [((s or {}).get("language"), (s or {}).get("solution")) for s in _listed(block)]
    else:
        raise ProblemError(f"{label}: field 'solutions' must be {{language: [...], solution: [...]}}")
    return [s for lang, s in pairs if lang in (PYTHON3, "PYTHON3") and isinstance(s, str) and s.strip()]


def convert(rec: dict, where: str) -> Problem | Dropped:
    name = rec.get("name")
    label = f"{where}record {name!r}"
    if not isinstance(name, str) or not name:
        raise ProblemError(f"{where}record: field 'name' missing")
    if not isinstance(rec.get("description"), str):
        raise ProblemError(f"{label}: field 'description' missing or not a string")
    tests = _tests(rec, "public_tests", label, True) + _tests(rec, "private_tests", label, False) \
        + _tests(rec, "generated_tests", label, False)
    if not tests:
        raise ProblemError(f"{label}: field 'private_tests' (and public/generated) hold no tests")
    tl = rec.get("time_limit") or {}
    seconds = (tl.get("seconds") or 0) + (tl.get("nanos") or 0) / 1e9 if isinstance(tl, dict) else tl
    if not isinstance(seconds, (int, float)) or seconds < 0:
        raise ProblemError(f"{label}: field 'time_limit' must be {{seconds, nanos}}")
    memory = rec.get("memory_limit_bytes") or 0
    solutions = python_solutions(rec, label)
    pid = f"cc/{name.split('.')[0].strip().replace(' ', '_')}"
    files = [f"{k}={rec[k]!r}" for k in ("input_file", "output_file") if rec.get(k)]
    if files:
        return Dropped(pid, "file_io", f"reads/writes named files ({', '.join(files)}), not stdin/stdout")
    phrase = several_answers(rec)
    if phrase:
        return Dropped(pid, "several_answers", f"several correct outputs and no checker ({phrase!r})")
    rules = output_rules(_statements(rec))
    return Problem(
        id=pid, source="codecontests",
        difficulty=_difficulty(rec.get("difficulty", 0)), statement=rec["description"], testtype="stdin",
        time_limit_s=float(seconds) or 2.0, memory_limit_mb=int(memory // 2**20) or 256, tests=tuple(tests),
        meta={"name": name, "cf_rating": rec.get("cf_rating"), "source_id": rec.get("source"),
              "python_solutions": solutions[:VERIFY_ATTEMPTS], **rules},
        judge="codecontests",
    )


def records(input: str | None, **_) -> Iterator[Problem | Dropped | ProblemError]:
    if not input:
        raise UserError("codecontests: --input is required (a local .jsonl or .parquet export, a glob or a "
                        "directory of shards)")
    return converted(read_records(input, "codecontests", COLUMNS, REQUIRED_COLUMNS), convert)


FORMAT = Format(
    name="codecontests",
    description="CodeContests (deepmind/code_contests) as published: .jsonl or .parquet exports, a glob, a "
                "directory of shards",
    records=records,
    splits=("all",),  # one problem set: the file given is the split
    semantics=(own("codecontests", "2", "program as written; stdout tokens, real numbers within the statement's "
                                        "absolute/relative error else float_tol, letters in any case where the "
                                        "statement allows it"),),
    verifiable=VERIFIABLE,
    min_python=(3, 10),  # programs from current models use 3.10 syntax (`match`, `int | None`)
    # The test split (165 problems, its dataset card); private + generated tests per problem (assumed 100).
    plan=PlanHints(problems=165, tests=100),
)
