"""DeepMind CodeContests records (JSON Lines or parquet as exported by `datasets`).

Public tests are visible to the model; private and generated tests are hidden. Time and memory limits
come from the record.
"""
from __future__ import annotations

from typing import Iterator

from ewa.io import read_jsonl
from ewa.problems import Problem, ProblemError, make_test

DIFFICULTY = {0: "unknown", 1: "easy", 2: "medium", 3: "hard", 4: "harder", 5: "hardest", 6: "external"}


def _difficulty(value) -> str:
    if isinstance(value, str):
        return value.lower()
    if isinstance(value, int) and value >= 7:  # Codeforces problem letters A.. follow the named levels
        return chr(ord("A") + value - 7)
    return DIFFICULTY.get(value, "unknown")


def _tests(rec: dict, name: str, label: str, public: bool) -> list:
    block = rec.get(name) or {"input": [], "output": []}
    ins, outs = block.get("input"), block.get("output")
    ins, outs = (list(x) if hasattr(x, "tolist") else x for x in (ins, outs))  # parquet gives arrays
    if not isinstance(ins, list) or not isinstance(outs, list) or len(ins) != len(outs):
        raise ProblemError(f"{label}: field '{name}' must hold equal-length 'input' and 'output' lists")
    return [make_test(str(i), str(o), public) for i, o in zip(ins, outs)]


def convert(rec: dict, where: str) -> Problem:
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
    return Problem(
        id=f"cc/{name.split('.')[0].strip().replace(' ', '_')}", source="codecontests",
        difficulty=_difficulty(rec.get("difficulty", 0)), statement=rec["description"], testtype="stdin",
        time_limit_s=float(seconds) or 2.0, memory_limit_mb=int(memory // 2**20) or 256, tests=tuple(tests),
        meta={"name": name, "cf_rating": rec.get("cf_rating"), "source_id": rec.get("source")},
        judge="codecontests",
    )


def _rows(input: str):
    if input.endswith(".parquet"):
        import pandas as pd
        for i, row in enumerate(pd.read_parquet(input).to_dict("records"), 1):
            yield i, row
    else:
        yield from read_jsonl(input)


def records(input: str | None) -> Iterator[Problem | ProblemError]:
    if not input:
        raise ValueError("codecontests: --input is required (a local .jsonl or .parquet export)")
    for lineno, rec in _rows(input):
        try:
            yield convert(rec, f"{input}:{lineno}: ")
        except ProblemError as e:
            yield e
