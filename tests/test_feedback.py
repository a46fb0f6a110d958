"""Feedback in each benchmark's own terms, from the real sandbox: a failed public test of a function-call
problem reads as a unit-test failure (the failing assert, what the call returned or raised), a stdin
problem's as input / expected / output; a tool run's failed assert says what its calls returned. Every
value shown is one the sandbox reported; explaining a test changes no verdict. The agentic and tools
settings' own tests of this are in tests/test_sample.py."""
from __future__ import annotations

from ewa.data import load
from ewa.problems import Problem, make_test
from ewa.prompts import feedback, tool_output
from ewa.verdicts import AC, RE, TLE, WA


def public(problem):
    return [i for i, _ in problem.public_tests]


def test_humaneval_feedback_shows_the_failing_assert_and_the_returned_value(sandbox):
    problem = next(p for p in load("humaneval").problems if p.id == "humaneval/0")
    assert problem.tests[public(problem)[0]].input == (
        "def check(candidate):\n    assert candidate([1.0, 2.0, 3.0], 0.5) == False\n")
    wrong = sandbox.judge(problem, problem.starter_code + "    return True\n", tests=public(problem))
    assert [t.verdict for t in wrong.tests] == [WA, AC]
    note = feedback(problem, wrong)
    assert ("On public test 1 it gave a wrong answer.\n\n"
            "Failed: assert has_close_elements([1.0, 2.0, 3.0], 0.5) == False\n"
            "has_close_elements([1.0, 2.0, 3.0], 0.5) returned True\n\nFix the program") in note
    assert "Input:" not in note and "Expected output:" not in note and "Your output:" not in note
    crashing = problem.starter_code + "    return 1 / 0\n"
    crash = feedback(problem, sandbox.judge(problem, crashing, tests=public(problem)))
    assert "has_close_elements([1.0, 2.0, 3.0], 0.5) raised ZeroDivisionError: division by zero" in crash
    assert "crashed with a runtime error" in crash and "Error (last lines)" not in crash  # said once
    # The verdict itself is the hidden check's, unexplained, as before.
    verdict = sandbox.judge(problem, problem.starter_code + "    return True\n")
    assert verdict.verdict == WA and verdict.tests[0].failure is None


def checked(test_code: str, public_test: bool = True) -> Problem:
    return Problem("sq", "toy", "easy", "Implement sq(x).", "testcode",
                   (make_test(test_code, "", public=public_test),), func_name="sq")


def test_a_check_is_explained_at_the_statement_that_failed_with_the_calls_it_made(sandbox):
    loop = checked("def check(candidate):\n    for x in [1, 2, 3]:\n        assert candidate(x) == x * x\n"
                   "    assert candidate(2) + candidate(3) == 14\n")
    third = sandbox.judge(loop, "def sq(x):\n    return x * x if x < 3 else 0\n").tests[0]
    assert third.failure == {"test": "assert sq(x) == x * x", "calls": [{"call": "sq(3)", "returned": "0"}]}
    both = sandbox.judge(loop, "def sq(x):\n    return x * x\n").tests[0]
    assert both.failure == {"test": "assert sq(2) + sq(3) == 14", "calls": [
        {"call": "sq(2)", "returned": "4"}, {"call": "sq(3)", "returned": "9"}]}
    # A long value is cut; a call that never returned is named as such.
    assert sandbox.judge(loop, "def sq(x):\n    return list(range(10 ** 5))\n").tests[0].failure["calls"][0][
        "returned"].endswith("...")
    slow = Problem(**{**loop.__dict__, "time_limit_s": 0.3})
    timed_out = sandbox.judge(slow, "def sq(x):\n    while True:\n        pass\n").tests[0]
    assert timed_out.verdict == TLE and timed_out.failure["test"] == "assert sq(x) == x * x"
    assert [(c["call"], "failed" in c) for c in timed_out.failure["calls"]] == [("sq(1)", True)]


def test_explaining_a_test_changes_no_verdict(sandbox):
    test_code = "def check(candidate):\n    assert candidate(3) == 9\n    assert candidate(-1) == 1\n"
    programs = ["def sq(x):\n    return x * x\n", "def sq(x):\n    return 9\n", "def sq(x):\n    return 1 // (x - 3)\n",
                "def sq(x):\n    return {}[x]\n", "import sys\ndef sq(x):\n    sys.exit(0)\n", "sq = 9\n"]
    for code in programs:
        shown, hidden = (sandbox.judge(checked(test_code, flag), code).tests[0] for flag in (True, False))
        assert (shown.verdict, shown.error) == (hidden.verdict, hidden.error), code
        assert hidden.failure is None and (shown.failure is None) == (shown.verdict == AC), code


def test_livecodebench_call_based_feedback_is_the_call_and_its_value(sandbox):
    top = Problem("top", "livecodebench/leetcode", "easy", "Return the k largest.", "functional",
                  (make_test("[5, 1, 4]\n2", "[5, 4]", public=True), make_test("[1]\n1", "[1]")), func_name="top")
    method = "class Solution:\n    def top(self, nums, k):\n        return sorted(nums)[:k]\n"
    wrong = feedback(top, sandbox.judge(top, method, tests=[0]))
    assert ("Failed: assert Solution().top([5, 1, 4], 2) == [5, 4]\n"
            "Solution().top([5, 1, 4], 2) returned [1, 4]") in wrong
    crash = feedback(top, sandbox.judge(top, "def top(nums, k):\n    return nums[k * 10]\n", tests=[0]))
    assert "top([5, 1, 4], 2) raised IndexError: list index out of range" in crash
    assert "Error (last lines):\nTraceback" in crash and "return nums[k * 10]" in crash  # where, in the program
    assert "Input:" not in wrong + crash


def test_stdin_feedback_keeps_input_expected_and_output(sandbox):
    add = Problem("add", "toy", "easy", "Print the sum.", "stdin",
                  (make_test("1 2\n", "3\n", public=True), make_test("5 5\n", "10\n")))
    result = sandbox.judge(add, "print(input())", tests=[0])
    assert result.tests[0].failure is None
    assert feedback(add, result) == (
        "Your program passed 0 of 1 public tests. On public test 1 it gave a wrong answer.\n\nInput:\n1 2\n\n"
        "Expected output:\n3\n\nYour output:\n1 2\n\n"
        "Fix the program and answer with the complete corrected program in one ```python block.")


def test_a_tool_run_of_a_function_says_what_its_failed_assert_called(sandbox):
    code = ("def f(xs):\n    return sum(xs) + 1\n\nfor case, want in [([1], 2), ([1, 2], 3)]:\n"
            "    assert sorted([f(case)]) == [want], 'case'\n")
    noted, plain = (sandbox.run_code(code, note_asserts=flag) for flag in (True, False))
    assert noted.status == plain.status == RE and noted.stdout == plain.stdout == ""
    assert tool_output(noted, 2).endswith("AssertionError: case\nf(case) returned 4\nsorted([f(case)]) returned [4]")
    assert tool_output(plain, 2).endswith("AssertionError: case")
    # the program's own objects are named, not run (their repr is the program's code)
    odd = sandbox.run_code("class P:\n    def __repr__(self):\n        raise SystemExit(0)\n"
                           "def f():\n    return P()\nassert f() == 1\n", note_asserts=True)
    assert odd.status == RE and tool_output(odd, 2).endswith("f() returned <P object>")
    # a passing program runs as it would unnoted
    fine = sandbox.run_code("def f(x):\n    return x\nassert f(1) == 1\nprint(f(2))\n", note_asserts=True)
    assert fine.status == "ok" and fine.stdout == "2\n"
