"""Verdicts: run a sample's tests on a worker and decide AC/WA/TLE/MLE/RE/CE for each in the host.

A program longer than the source limit is CE without being compiled; one whose compile exceeds the
test's memory or time limit is MLE or TLE (the fork server compiles it under them).

Precedence for one test: CE (does not compile) > TLE (CPU time over the limit, or the wall-clock
backstop hit) > MLE (an allocation failed under RLIMIT_AS, as the fork server's runner reports it, or
peak RSS at the limit; never what the program prints) > WA for output over the output limit > RE
(non-zero exit, signal, exception, no result) > WA (wrong output) > AC.

How the program is prepared, which tests decide its verdict and how its output is compared is the
problem's judge semantics (ewa.sandbox.semantics); stdout is compared under the problem's OutputRule
(its statement's tolerance and letter case, ewa.sandbox.checkers). Every SampleResult names both.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from ewa.problems import Problem
from ewa.sandbox.checkers import OutputRule, expected_value, output_rule
from ewa.sandbox.failures import explain
from ewa.sandbox.forkserver import GRACE_S, decode
from ewa.sandbox.pool import Worker, WorkerDied, WorkerTimeout
from ewa.sandbox.results import RunResult, SampleResult, TestResult
from ewa.sandbox.semantics import Semantics, semantics_for
from ewa.verdicts import AC, CE, MLE, RE, TLE, WA

MODES = {"stdin": "stdin", "functional": "call", "testcode": "testcode"}
COMPILE_LIMITS = {"memory": MLE, "cpu": TLE}  # the limit that ended a compile (forkserver.compile_failure)
FEEDBACK_CHARS = 2000
# The fork server answers by the wall backstop plus its checker grace (GRACE_S); past this margin on top,
# the host gives up on the worker.
HOST_MARGIN_S = 3.0


@dataclass(frozen=True)
class Limits:
    cpu_s: float  # the problem's limit times the calibration factor
    memory_mb: float
    output_bytes: int
    max_processes: int
    source_bytes: int | None = None  # longest program compiled; None: no limit
    wall_limit_s: float | None = None  # a wall-clock limit of the benchmark's own (Semantics.wall_limit)

    @property
    def wall_s(self) -> float:
        """Backstop for programs that sleep or block: CPU time alone would never end them."""
        return self.wall_limit_s if self.wall_limit_s is not None else 3 * self.cpu_s + 1

    def request(self) -> dict:
        return {"cpu": self.cpu_s, "wall": self.wall_s, "mem": int(self.memory_mb * (1 << 20)),
                "nproc": self.max_processes, "fsize": self.output_bytes, "out_cap": self.output_bytes}


def source_problem(code: str, limits: Limits) -> str | None:
    """Why `code` is not even compiled (one line), or None."""
    size = len(code.encode("utf-8", "surrogatepass"))
    if limits.source_bytes is not None and size > limits.source_bytes:
        return f"source is {size} bytes, over the {limits.source_bytes}-byte limit"
    return None


def call(worker: Worker, request: dict, limits: Limits) -> dict:
    """One request; a dead or stuck worker becomes a reply the verdict logic understands."""
    try:
        reply = worker.request(request, timeout=limits.wall_s + GRACE_S + HOST_MARGIN_S)
    except WorkerDied:
        return {"cand": None, "died": True}
    except WorkerTimeout:
        return {"cand": None, "stuck": True}
    if reply.get("cand") is None:  # the zygote was killed: this worker must start afresh
        worker.kill()
    return reply


def test_verdict(problem: Problem, index: int, reply: dict, limits: Limits, rule: OutputRule,
                 sem: Semantics | None = None) -> TestResult:
    sem = sem or semantics_for(problem)
    cand = reply.get("cand")
    if cand is None:
        if reply.get("stuck"):
            return TestResult(index, TLE, wall_time_s=limits.wall_s + GRACE_S + HOST_MARGIN_S,
                              error="the sandbox stopped answering", wall_backstop=True)
        return TestResult(index, RE, error="the sandbox worker died (the program killed its fork server?)")
    if "ce" in cand:
        return TestResult(index, COMPILE_LIMITS.get(cand.get("limit"), CE), cpu_time_s=cand.get("cpu", 0.0),
                          error=cand["ce"], wall_backstop=bool(cand.get("wall_backstop")))
    if "error" in cand:
        return TestResult(index, RE, error=cand["error"])
    test = problem.tests[index]
    result = TestResult(index, RE, cpu_time_s=cand["cpu"], wall_time_s=cand["wall"],
                        peak_memory_mb=cand["rss_kb"] / 1024, error=cand["stderr"][-FEEDBACK_CHARS:],
                        wall_backstop=bool(cand["timeout"]))
    if test.public:
        result.got = (cand["stdout"] if problem.testtype == "stdin" else cand["result"] or "")[:FEEDBACK_CHARS]
    check = reply.get("check") or {}
    crashed = cand["signal"] is not None or cand["exit"] != 0
    if resource := resource_verdict(cand, limits):
        result.verdict = resource
    elif cand["overflow"]:
        result.verdict, result.error = WA, "output limit exceeded"
    elif problem.testtype == "testcode":
        result.verdict = testcode_verdict(check, crashed)
        result.error = check.get("error", result.error)[-FEEDBACK_CHARS:]
    elif crashed:
        result.verdict = RE
    elif problem.testtype == "stdin":
        result.verdict = AC if sem.stdout_match(cand["stdout"], test.output, rule) else WA
    else:
        try:
            got = decode(json.loads(cand["result"]))
        except (TypeError, ValueError, RecursionError):
            result.error = "the function returned no readable value"
            return result
        expected = expected_value(problem, index, test)
        try:
            same = sem.value_match(got, expected, rule.tol)
        except Exception as e:  # e.g. a signalling-NaN Decimal: the reference's `==` raised too
            result.error = f"comparing the returned value raised {type(e).__name__}"
            return result
        result.verdict = AC if same else WA
    return result


def resource_verdict(cand: dict, limits: Limits) -> str | None:
    """TLE (CPU time over the limit, the CPU timer's kill, or the wall-clock backstop hit) before MLE (out
    of memory), or None: the one precedence of optimization failures, for judged tests and tool calls
    alike. MLE is resource use only: the runner saw an allocation fail under the address-space limit, or
    the peak RSS reached the limit; a program that merely prints "MemoryError" is not out of memory. A
    program that sends itself SIGPROF turns its own crash into a TLE, never into a pass."""
    if cand["timeout"] or cand.get("cpu_timer") or cand["cpu"] > limits.cpu_s:
        return TLE
    if cand.get("memory_error") or cand["rss_kb"] / 1024 >= limits.memory_mb:
        return MLE
    return None


def testcode_verdict(check: dict, crashed: bool) -> str:
    """Only the trusted checker's 'pass' (and a clean exit of the candidate) is AC."""
    outcome = check.get("outcome")
    if outcome == "pass":
        return RE if crashed else AC
    if outcome in ("assertion", "error"):  # a failed assert, or a value the test code can't use
        return WA
    return RE  # the candidate raised or died, or the checker never reported


def judge_sample(worker: Worker, problem: Problem, code: str | None, tests: list[int] | None,
                 early_stop: bool, test_tiers: list[int] | None, limits: Limits, tol: float) -> SampleResult:
    sem = semantics_for(problem)
    order = list(tests) if tests is not None else sem.verdict_tests(problem)
    rule = output_rule(problem, tol)
    if sem.wall_limit:
        limits = dataclasses.replace(limits, wall_limit_s=limits.cpu_s)
    if problem.testtype == "functional":  # a malformed expected value is the problem's fault: fail now
        for i in order:
            expected_value(problem, i, problem.tests[i])
    results: list[TestResult] = []
    refused = "no code found in the completion" if code is None else source_problem(code, limits)
    if refused:
        results.append(TestResult(order[0] if order else 0, CE, error=refused))
    for i in order if not refused else ():
        request = {"mode": MODES[problem.testtype], "code": code, "input": problem.tests[i].input,
                   "func": problem.func_name, **limits.request(), **sem.request()}
        if problem.testtype == "testcode":
            request["starter"] = problem.starter_code  # plain: the checker's trusted helpers; check_correctness: the prompt
            request["explain"] = problem.tests[i].public  # log the candidate's calls, for feedback
        reply = call(worker, request, limits)
        r = test_verdict(problem, i, reply, limits, rule, sem)
        if problem.tests[i].public and r.verdict != AC:
            r.failure = explain(problem, i, reply, code, r.verdict)
        if test_tiers is not None:
            r.tier = test_tiers[i]
        results.append(r)
        if "ce" in (reply.get("cand") or {}) or (early_stop and r.verdict != AC):
            break  # a failed compile fails every test the same way
    compared = sem.tolerant and problem.testtype != "testcode"
    return summarize(results, len(order), sem.name, rule if compared else None)


def summarize(results: list[TestResult], total: int, judge: str = "", rule: OutputRule | None = None
              ) -> SampleResult:
    failed = next((r for r in results if r.verdict != AC), None)
    return SampleResult(
        verdict=failed.verdict if failed else AC,
        tests_passed=sum(r.verdict == AC for r in results),
        tests_total=total,
        first_failed_test=failed.index if failed else None,
        first_failed_tier=failed.tier if failed else None,
        cpu_time_s=sum(r.cpu_time_s for r in results),
        peak_memory_mb=max((r.peak_memory_mb for r in results), default=0.0),
        tests=results,
        backstop_kills=sum(r.wall_backstop for r in results),
        judge=judge,
        output_rule=rule.record() if rule else None,
    )


def run_free(worker: Worker, code: str, stdin: str, limits: Limits, note_asserts: bool = False) -> RunResult:
    """A tool call: run code on stdin and report what happened, with no expected output. `note_asserts`:
    a failed assert of the program also says what its calls returned (stderr's last lines)."""
    if refused := source_problem(code, limits):
        return RunResult(RE, "", refused, None, 0.0, 0.0)
    request = {"mode": "stdin", "code": code, "input": stdin, **limits.request()}
    if note_asserts:
        request["note_asserts"] = True
    reply = call(worker, request, limits)
    cand = reply.get("cand")
    if cand is None:
        status = TLE if reply.get("stuck") else RE
        return RunResult(status, "", "the sandbox worker died", None, 0.0, 0.0)
    if "ce" in cand or "error" in cand:
        status = COMPILE_LIMITS.get(cand.get("limit"), RE)
        return RunResult(status, "", cand.get("ce") or cand["error"], None, cand.get("cpu", 0.0), 0.0)
    peak = cand["rss_kb"] / 1024
    crashed = cand["signal"] is not None or cand["exit"] != 0
    if resource := resource_verdict(cand, limits):
        status = resource
    elif crashed or cand["overflow"]:
        status = RE
    else:
        status = "ok"
    exit_code = cand["exit"] if cand["exit"] is not None else -cand["signal"]
    return RunResult(status, cand["stdout"], cand["stderr"], exit_code, cand["cpu"], peak)
