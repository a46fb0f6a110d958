"""Brute force or efficient algorithm, read from how a program's cost grows over its size-ordered tests.

The judge runs a sample's tests smallest input first and records each test's CPU time and peak memory
(the `tests` column of an evaluation table); the problems file gives each test's input size in bytes.
That is enough to classify any model's program, plan line or not:

  brute      super-linear growth: CPU time (or memory) rises faster than the input, or the program
             went over the time (memory) limit on a test that linear growth from its completed tests
             would have finished well within it.
  efficient  near-linear growth measured over at least a doubling of input size, or no measurable
             growth at all through the test at which this problem's brute forces were already slow.
  unknown    not enough to tell: no test ran to completion (CE, a failure on the first test), the
             program stopped before its tests got large, it went over a limit without super-linear
             growth, its growth lies between the two, or no brute force of its problem says how
             large "large" is.

One sample, step by step (the thresholds are the constants below):
- Completed tests: AC or WA. They ran to the end, so their CPU time is the program's cost. An RE test's
  time is the crash's and is not used; a TLE (MLE) test only says "at least the limit".
- Floor: the smallest CPU time over the completed tests. The smallest tests are trivial, so this is the
  start-up cost (the fork server's children, a fresh interpreter, heavy imports). Work = CPU time minus
  the floor.
- Informative test: work >= noise = max(CPU_MARGIN_S, floor). CPU_MARGIN_S is several times the jitter
  of a trivial run; requiring the work to be at least the floor as well keeps a noisy start-up, or a
  smallest test that is not trivial, from bending the fit.
- Exponent: least-squares slope of log(work) on log(size) over the informative tests; none when their
  sizes span less than MIN_SPAN (a number-valued input whose bytes barely change).
- Excess: growth beyond linear from the first to the last informative test,
  (work_last / work_first) / (size_last / size_first): 1 for linear code, the size ratio for n^2.
- brute on growth: excess >= BRUTE_EXCESS and exponent >= BRUTE_EXPONENT (midway between the usual
  efficient/brute pair n and n^2; n log n fits 1.1 over these spans) or none (the cost rose while the
  size did not change). n^2 over a single doubling has an excess of exactly 2, so 2 would miss half of
  them; linear code reaches 1.5 together with a slope of 1.5 only if noise moves both ends by a quarter.
- brute on the time limit: the first TLE test j bounds the excess from every completed test i before it,
  ((limit - floor) / max(work_i, noise)) / (size_j / size_i), and the largest bound counts: >= 1.5 means
  linear growth from test i would have finished test j in two thirds of the limit. The limit is the
  problem's times the evaluation's calibration factor; a TLE's recorded CPU time (the kill's latency,
  or little at all when the wall-clock backstop fired under load) is never used.
- Memory the same way on peak RSS (no relative floor; informative from MEMORY_MARGIN_MB, above the
  variation of RSS between a program's tests; an MLE bounds at the memory limit): brute on
  super-linear memory growth or an MLE that linear growth would not have reached.
- efficient on measured growth: at least two informative tests spanning a size ratio >= LINEAR_SPAN
  with an exponent <= EFFICIENT_EXPONENT.
- efficient on no growth: small inputs cost any program nothing measurable, so "flat" alone says
  nothing. The problem's own brute forces say how large is large enough: its separating test is the
  median (rounded up), over the samples of the problem classified brute at any alpha, of the first
  test position at which each one's work reached SEPARATION times its noise or went over the time
  limit. A program whose work stayed below its noise through that test is there several times faster
  than a typical brute force: efficient. A problem without such a brute force has no separating test,
  and its flat samples stay unknown (an easy problem whose tests are all small, or a miniature instance
  built with small inputs only, where the brute force passes too).
- Otherwise unknown; `evidence` names which rule decided.

The classes are about growth, not about rank among a problem's solutions: an O(n^2) "efficient" program
against an O(n^3) brute force reads brute. Early stop (`evaluate.early_stop`) ends a sample at its first
failing test, and the classification uses what ran (a WA test still completed and counts). A program
that fails on correctness before its tests get large is therefore unknown: correctness failures gather
in the unknown class, and the brute and efficient classes hold, of the failing samples, those that
failed late. How the classes fare on the miniature's reference programs: docs/miniature.md.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from ewa.io import read_jsonl
from ewa.problems import Problem
from ewa.verdicts import AC, MLE, TLE, WA

CPU_MARGIN_S = 0.010  # least work (CPU time over the floor) a test needs to count
MEMORY_MARGIN_MB = 2.0  # least peak memory over the program's smallest a test needs to count
BRUTE_EXPONENT = 1.5  # fitted exponent from which growth is super-linear
BRUTE_EXCESS = 1.5  # least growth beyond linear (over the informative span, or implied by a limit)
EFFICIENT_EXPONENT = 1.3  # fitted exponent up to which measured growth is near-linear
LINEAR_SPAN = 2.0  # size ratio the informative tests must span to show near-linear growth
MIN_SPAN = 1.1  # size ratio below which no exponent is fitted
SEPARATION = 4.0  # work, in units of noise, at which a brute force counts as slow
THRESHOLDS = {name: globals()[name] for name in (
    "CPU_MARGIN_S", "MEMORY_MARGIN_MB", "BRUTE_EXPONENT", "BRUTE_EXCESS", "EFFICIENT_EXPONENT", "LINEAR_SPAN",
    "MIN_SPAN", "SEPARATION")}
CLASSES = ("brute", "efficient", "unknown")
COMPLETED = (AC, WA)  # verdicts of tests that ran to the end


@dataclass(frozen=True)
class Suite:
    """What growth needs of a problem: each test's input size (bytes, by test index), its position in
    the judge's size order (ewa.problems.size_order), and the limits."""
    sizes: tuple[int, ...]
    time_limit_s: float
    memory_limit_mb: float

    @cached_property
    def ranks(self) -> tuple[int, ...]:
        order = sorted(range(len(self.sizes)), key=self.sizes.__getitem__)  # stable: size_order's ties
        rank = [0] * len(order)
        for position, index in enumerate(order):
            rank[index] = position
        return tuple(rank)


def read_suites(path: str | Path) -> dict[str, Suite]:
    """Every problem's Suite, read one line at a time (test inputs are not kept)."""
    suites = {}
    for line, rec in read_jsonl(path):
        p = Problem.from_record(rec, where=f"{path}:{line}: ")
        suites[p.id] = Suite(tuple(t.size for t in p.tests), p.time_limit_s, float(p.memory_limit_mb))
    return suites


@dataclass(frozen=True)
class Curve:
    """One resource's growth over a sample's tests (see the module docstring)."""
    points: int  # informative tests (completed ones: a test over the limit only bounds limit_excess)
    span: float  # size ratio from the first to the last point (nan: fewer than 2)
    exponent: float  # fitted slope of log(work) on log(size) (nan: fewer than 2 points or span < MIN_SPAN)
    excess: float  # growth beyond linear from the first to the last point (nan: fewer than 2)
    limit_excess: float  # excess implied by the first test over the limit (nan: none, or nothing before it)

    @property
    def fitted_superlinear(self) -> bool:
        """Measured growth is super-linear: a NaN exponent with an excess means the cost rose at one size."""
        return self.excess >= BRUTE_EXCESS and (math.isnan(self.exponent) or self.exponent >= BRUTE_EXPONENT)

    @property
    def superlinear(self) -> bool:
        return self.fitted_superlinear or self.limit_excess >= BRUTE_EXCESS


def curve(completed: Sequence[tuple[int, int, float]], over: tuple[int, int, float] | None,
          margin: float, relative: bool) -> tuple[Curve, float, float]:
    """The Curve of (rank, size, measure) of completed tests (in rank order) and of the first test over
    the limit (rank, size, limit), with the floor and the noise level used. Noise is `margin`, or with
    `relative` the larger of margin and the floor."""
    floor = min(m for _, _, m in completed)
    noise = max(margin, floor) if relative else margin
    limit_excess = math.nan
    if over is not None:  # every completed test before it bounds the excess; the tightest bound wins
        rank, size, limit = over
        bounds = [((limit - floor) / max(m - floor, noise)) / (max(size, 1) / max(s, 1))
                  for r, s, m in completed if r < rank]
        limit_excess = max(bounds, default=math.nan)
    points = [(max(s, 1), m - floor) for _, s, m in completed if m - floor >= noise]
    if len(points) < 2:
        return Curve(len(points), math.nan, math.nan, math.nan, limit_excess), floor, noise
    (s0, w0), (s1, w1) = points[0], points[-1]
    sizes = np.log([s for s, _ in points])
    exponent = float(np.polyfit(sizes, np.log([w for _, w in points]), 1)[0]) \
        if np.ptp(sizes) >= math.log(MIN_SPAN) else math.nan
    return Curve(len(points), s1 / s0, exponent, (w1 / w0) / (s1 / s0), limit_excess), floor, noise


@dataclass(frozen=True)
class Profile:
    """A sample's growth before its problem's separating test is known."""
    completed: int  # tests that ran to the end (AC or WA)
    floor_s: float  # smallest CPU time over them (nan: none)
    noise_s: float  # work below this is not measured
    exponent: float  # CPU-time growth (Curve.exponent)
    excess: float  # CPU-time growth beyond linear (Curve.excess)
    points: int  # informative CPU-time points
    span: float
    time_limit_excess: float  # Curve.limit_excess of CPU time
    memory_excess: float  # max of memory's fitted and limit excess, for the record
    brute: str  # why it is brute ("" if it is not): "cpu growth", "time limit", "memory growth", "memory limit"
    over_limit: bool  # some test went over the time or memory limit
    reached: int  # position of the largest completed test (-1: none)
    flat_through: int  # last test position up to which every completed test's work was below noise (-1: none)
    slow_at: int  # first test position with work >= SEPARATION x noise, or over the time limit (-1: none)


def profile(tests: Iterable[dict], suite: Suite, time_factor: float = 1.0) -> Profile:
    """The growth of one judged sample: its `tests` records (ewa.evaluate.run) against its problem's Suite."""
    ranks = suite.ranks
    tests = sorted(tests, key=lambda t: ranks[t["index"]])
    done = [(ranks[t["index"]], suite.sizes[t["index"]], t) for t in tests if t["verdict"] in COMPLETED]
    first = {v: next(((ranks[t["index"]], suite.sizes[t["index"]]) for t in tests if t["verdict"] == v), None)
             for v in (TLE, MLE)}
    over_limit = first[TLE] is not None or first[MLE] is not None
    if not done:
        return Profile(0, math.nan, math.nan, math.nan, math.nan, 0, math.nan, math.nan, math.nan, "", over_limit,
                       -1, -1, first[TLE][0] if first[TLE] else -1)
    over_time = (*first[TLE], suite.time_limit_s * time_factor) if first[TLE] else None
    over_memory = (*first[MLE], suite.memory_limit_mb) if first[MLE] else None
    cpu, floor, noise = curve([(r, s, t["cpu_time_s"]) for r, s, t in done], over_time, CPU_MARGIN_S, relative=True)
    memory, _, _ = curve([(r, s, t["peak_memory_mb"]) for r, s, t in done], over_memory, MEMORY_MARGIN_MB,
                         relative=False)
    brute = ("cpu growth" if cpu.fitted_superlinear else "time limit") if cpu.superlinear else \
        ("memory growth" if memory.fitted_superlinear else "memory limit") if memory.superlinear else ""
    flat_through = -1
    for r, _, t in done:
        if t["cpu_time_s"] - floor >= noise:
            break
        flat_through = r
    slow = [r for r, _, t in done if t["cpu_time_s"] - floor >= SEPARATION * noise]
    slow_at = min(slow + ([first[TLE][0]] if first[TLE] else []), default=-1)
    return Profile(len(done), floor, noise, cpu.exponent, cpu.excess, cpu.points, cpu.span, cpu.limit_excess,
                   float(np.nanmax([memory.excess, memory.limit_excess, -math.inf])), brute, over_limit,
                   done[-1][0], flat_through, slow_at)


def classify(p: Profile, separating: int | None) -> tuple[str, str]:
    """(approach, evidence) of a profiled sample, given its problem's separating test position (None:
    no brute force of the problem to compare with)."""
    if p.brute:
        return "brute", p.brute
    if not p.completed:
        return "unknown", "no completed test"
    if p.over_limit:
        return "unknown", "over a limit without super-linear growth"
    measured = p.points >= 2 and p.span >= LINEAR_SPAN
    if measured and p.exponent <= EFFICIENT_EXPONENT:
        return "efficient", "linear growth"
    if separating is not None and p.flat_through >= separating:
        return "efficient", "flat past the separating test"
    if measured:
        return "unknown", "ambiguous growth"
    if separating is None:
        return "unknown", "no brute force to compare"
    if p.reached < separating:
        return "unknown", "stopped before the separating test"
    return "unknown", "too few informative tests"


def separating_test(slow_at: Sequence[int]) -> int | None:
    """The problem's separating test position: the median (rounded up) of where its brute forces got slow."""
    slow = [r for r in slow_at if r >= 0]
    return int(math.ceil(np.median(slow))) if slow else None


def profiles(evals: str | Path, suites: dict[str, Suite], batch: int = 2048) -> pd.DataFrame:
    """One Profile row per sample of an evaluation table (problem_id, sample_id, then Profile's fields),
    read in batches so a large table's per-test records are never all in memory."""
    record = pq.read_schema(evals).metadata or {}
    time_factor = time_factor_of(record)
    table = pq.ParquetFile(evals)
    if "tests" not in table.schema_arrow.names:
        raise ValueError(f"{evals}: no 'tests' column (per-test records of `ewa evaluate`)")
    rows = []
    for chunk in table.iter_batches(batch_size=batch, columns=["problem_id", "sample_id", "tests"]):
        for pid, sid, tests in zip(*(chunk.column(c).to_pylist() for c in ("problem_id", "sample_id", "tests"))):
            suite = suites.get(pid)
            if suite is None:
                raise ValueError(f"{evals}: problem {pid!r} is not in the problems file")
            if any(t["index"] >= len(suite.sizes) for t in tests or ()):
                raise ValueError(f"{evals}: sample ({pid!r}, {sid!r}) names a test problem {pid!r} does not have "
                                 f"({len(suite.sizes)} tests): not the problems file it was judged on")
            rows.append({"problem_id": pid, "sample_id": sid, **asdict(profile(tests or (), suite, time_factor))})
    return pd.DataFrame(rows, columns=["problem_id", "sample_id", *Profile.__dataclass_fields__])


def time_factor_of(metadata: dict) -> float:
    """The calibration factor an evaluation table's time limits were scaled by (its `ewa` record); 1
    for a table without one (made by hand)."""
    raw = metadata.get(b"ewa")
    return float((json.loads(raw) if raw else {}).get("time_factor") or 1.0)


def classified(profiled: pd.DataFrame) -> pd.DataFrame:
    """`profiled` (rows of any alphas) with `growth`, `evidence` and `separating_test` (-1: none); each
    problem's separating test comes from its brute forces over all the rows given."""
    brute = profiled[profiled["brute"] != ""]
    separating = {pid: separating_test(g["slow_at"].tolist()) for pid, g in brute.groupby("problem_id")}
    classes = [classify(Profile(**{f: row[f] for f in Profile.__dataclass_fields__}), separating.get(row["problem_id"]))
               for row in profiled.to_dict("records")]
    out = profiled.copy()
    out["growth"] = [c for c, _ in classes]
    out["evidence"] = [e for _, e in classes]
    out["separating_test"] = [separating.get(pid, -1) for pid in out["problem_id"]]
    return out
