"""The canonical problem format (JSON Lines, one problem a line) that every loader produces.

testtype:
  stdin       the program reads `input` on stdin; stdout is compared with `output` token by token.
  functional  `func_name` is called with the JSON values of `input` (one per line) as arguments;
              the return value is compared with the JSON value in `output`.
  testcode    `input` is test code defining `check(candidate)`; it passes if it returns.

judge: the benchmark whose judge semantics apply (how the program is prepared to run, how its output is
compared; ewa.sandbox.semantics): one of judges(), the semantics the formats define (ewa.formats), set by
each loader; absent, it follows `source`.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Sequence

from ewa.errors import UserError
from ewa.io import read_jsonl, write_jsonl

TESTTYPES = ("stdin", "functional", "testcode")


def judges() -> tuple[str, ...]:
    """Judge semantics by name: "plain" (the program run as written with ewa's own comparison, what any
    source no format names gets), then each format's (ewa.formats)."""
    from ewa.formats import judges as formats_judges

    return ("plain", *formats_judges())


def default_judge(source: str) -> str:
    """The semantics a problem of `source` gets when its record names none ("mylab/graphs" -> "mylab",
    where a format defines a judge of that name)."""
    name = source.split("/", 1)[0]
    return name if name in judges() else "plain"


class ProblemError(ValueError):
    """A malformed problem record; the message names the record id (or line) and the field."""


@dataclass(frozen=True)
class Test:
    __test__ = False  # not a pytest test class
    input: str
    output: str
    size: int  # input length in bytes: the key the coverage tiers are ordered by
    public: bool = False  # only public tests may reach a model (agentic feedback)


@dataclass(frozen=True)
class Problem:
    id: str
    source: str
    difficulty: str
    statement: str
    testtype: str
    tests: tuple[Test, ...]
    starter_code: str = ""
    func_name: str | None = None
    time_limit_s: float = 2.0
    memory_limit_mb: int = 256
    meta: dict = field(default_factory=dict, hash=False, compare=False)
    judge: str = ""  # one of judges(); empty: default_judge(source)

    def __post_init__(self):
        if not self.judge:
            object.__setattr__(self, "judge", default_judge(self.source))
        elif self.judge not in judges():
            raise ProblemError(f"problem {self.id!r}: field 'judge' must be one of {', '.join(judges())}, "
                               f"got {self.judge!r}")

    @property
    def family(self) -> str:
        """The family this problem is an instance of, where its format records one (meta["family"]: sibling
        instances that differ only in a parameter); a problem of a benchmark without families is its own."""
        return str(self.meta.get("family") or self.id)

    @property
    def public_tests(self) -> list[tuple[int, Test]]:
        return [(i, t) for i, t in enumerate(self.tests) if t.public]

    def to_record(self) -> dict:
        rec = dataclasses.asdict(self)
        rec["tests"] = [dataclasses.asdict(t) for t in self.tests]
        return rec

    @classmethod
    def from_record(cls, rec: dict, where: str = "") -> "Problem":
        """Validate and build; every error names the record and the field."""
        pid = rec.get("id")
        label = f"{where}problem {pid!r}" if pid is not None else f"{where}record without id"

        def fail(fieldname: str, why: str):
            raise ProblemError(f"{label}: field '{fieldname}' {why}")

        for name, typ in (("id", str), ("source", str), ("difficulty", str), ("statement", str),
                          ("testtype", str)):
            if not isinstance(rec.get(name), typ):
                fail(name, f"must be a {typ.__name__}, got {type(rec.get(name)).__name__}")
        if rec["testtype"] not in TESTTYPES:
            fail("testtype", f"must be one of {', '.join(TESTTYPES)}, got {rec['testtype']!r}")
        if rec["testtype"] in ("functional", "testcode") and not rec.get("func_name"):
            fail("func_name", f"is required for testtype {rec['testtype']}")
        tl, ml = rec.get("time_limit_s", 2.0), rec.get("memory_limit_mb", 256)
        if not isinstance(tl, (int, float)) or isinstance(tl, bool) or tl <= 0:
            fail("time_limit_s", f"must be a positive number, got {tl!r}")
        if not isinstance(ml, (int, float)) or isinstance(ml, bool) or ml <= 0:
            fail("memory_limit_mb", f"must be a positive number, got {ml!r}")
        raw_tests = rec.get("tests")
        if not isinstance(raw_tests, list) or not raw_tests:
            fail("tests", "must be a non-empty list")
        tests = []
        for i, t in enumerate(raw_tests):
            if not isinstance(t, dict) or not isinstance(t.get("input"), str) or not isinstance(t.get("output"), str):
                fail(f"tests[{i}]", "must be an object with string 'input' and 'output'")
            size = t.get("size", len(t["input"].encode()))
            if not isinstance(size, int) or size < 0:
                fail(f"tests[{i}].size", f"must be a non-negative integer, got {size!r}")
            tests.append(Test(t["input"], t["output"], size, bool(t.get("public", False))))
        starter = rec.get("starter_code") or ""
        if not isinstance(starter, str):
            fail("starter_code", "must be a string")
        judge = rec.get("judge") or ""
        if judge and judge not in judges():
            fail("judge", f"must be one of {', '.join(judges())}, got {judge!r}")
        return cls(
            id=rec["id"], source=rec["source"], difficulty=rec["difficulty"], statement=rec["statement"],
            testtype=rec["testtype"], tests=tuple(tests), starter_code=starter,
            func_name=rec.get("func_name") or None, time_limit_s=float(tl), memory_limit_mb=int(ml),
            meta=dict(rec.get("meta") or {}), judge=judge,
        )


def size_order(tests: Sequence[Test]) -> list[int]:
    """Test indices by input size, the coverage order; ties keep file order (sorted() is stable)."""
    return sorted(range(len(tests)), key=lambda i: tests[i].size)


def make_test(input: str, output: str, public: bool = False) -> Test:
    return Test(input=input, output=output, size=len(input.encode()), public=public)


def iter_problems(path: str | os.PathLike) -> Iterator[Problem]:
    """The problems of a problems file one at a time (only their ids are kept, to refuse a duplicate).
    A file without any is an error naming it, not something a later step blames on its own input."""
    seen = set()
    for lineno, rec in read_jsonl(path):
        p = Problem.from_record(rec, where=f"{path}:{lineno}: ")
        if p.id in seen:
            raise ProblemError(f"{path}:{lineno}: problem {p.id!r}: field 'id' is duplicated")
        seen.add(p.id)
        yield p
    if not seen:
        raise UserError(f"{path}: no problems")


def read_problems(path: str | os.PathLike) -> list[Problem]:
    return list(iter_problems(path))


def problems_by_id(path: str | os.PathLike) -> dict[str, Problem]:
    return {p.id: p for p in read_problems(path)}


def write_problems(problems: Iterable[Problem], path: str | os.PathLike) -> None:
    write_jsonl(path, (p.to_record() for p in problems))
