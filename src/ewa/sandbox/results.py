"""Result records of the judge (verdicts themselves live in ewa.verdicts); shared by rewards, sampling
feedback and evaluation."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TestResult:
    index: int  # position of the test in problem.tests
    verdict: str
    cpu_time_s: float = 0.0
    wall_time_s: float = 0.0
    peak_memory_mb: float = 0.0
    got: str = ""  # head of the program's output (feedback on public tests only)
    error: str = ""  # tail of stderr / the exception
    tier: int | None = None  # coverage tier of the test, when the caller gave the tiers
    # Ended by the wall-clock backstop (or the host gave up on a stuck worker), not by the CPU-time limit:
    # the one way machine load can decide a verdict, so it is counted apart.
    wall_backstop: bool = False
    # A failed public test of a function-call problem in its own terms (ewa.sandbox.failures.explain): the
    # failing assert and what the call returned or raised. Feedback only; None for stdin problems.
    failure: dict | None = None


@dataclass
class SampleResult:
    verdict: str  # AC, or the verdict of the first failing test
    tests_passed: int
    tests_total: int
    first_failed_test: int | None = None
    first_failed_tier: int | None = None
    cpu_time_s: float = 0.0  # summed over the tests run
    peak_memory_mb: float = 0.0  # max over the tests run
    tests: list[TestResult] = field(default_factory=list)
    backstop_kills: int = 0  # tests run that the wall-clock backstop ended (TestResult.wall_backstop)
    judge: str = ""  # the judge semantics the tests ran under (ewa.sandbox.semantics)
    # How output was compared (checkers.OutputRule.record: float_tol, float_error, any_case); None where
    # the semantics has no such rule (Semantics.tolerant false, testcode).
    output_rule: dict | None = None


@dataclass
class RunResult:
    """One free-form execution (a tool call): no expected output, just what happened."""
    status: str  # "ok", TLE, MLE, RE
    stdout: str
    stderr: str
    exit_code: int | None
    cpu_time_s: float
    peak_memory_mb: float
