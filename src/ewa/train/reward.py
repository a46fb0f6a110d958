"""The coverage reward: a TRL reward function that judges each completion's code in the sandbox on the
tests one coverage regime requires (the only thing that differs between the regimes' GRPO runs).
"""
from __future__ import annotations

import hashlib
import time
from collections import Counter
from typing import Mapping

from ewa.problems import Problem
from ewa.verdicts import AC, CE, VERDICTS
from ewa.tiers import regime_tests

REWARDS = ("binary", "fraction")


def completion_text(completion) -> str:
    """TRL passes conversational completions as message lists and plain ones as strings."""
    if isinstance(completion, str):
        return completion
    return "".join(m.get("content") or "" for m in completion if m.get("role", "assistant") == "assistant")


class CoverageReward:
    """`(completions, problem_id, **columns) -> list[float]`, TRL's reward signature.

    binary:   1.0 when every test of the regime passes within the limits, else 0.0 (the paper's
              setting); judged with early_stop, smallest tests first, so a failing program stops early.
    fraction: the share of the regime's tests that pass (every test is run).

    >>> from ewa.config import section
    >>> from ewa.problems import Problem, make_test
    >>> from ewa.sandbox import sandbox_from_config
    >>> tests = (make_test("2\\n", "4\\n"), make_test("30\\n", "900\\n"))
    >>> problems = {"sq": Problem("sq", "toy", "easy", "Print n squared.", "stdin", tests)}
    >>> answers = [[{"role": "assistant", "content": f"```python\\n{code}\\n```"}]
    ...            for code in ("print(int(input()) ** 2)", "print(2 * int(input()))")]
    >>> answers.append([{"role": "assistant", "content": "no code"}])  # nothing to run: scored as CE
    >>> with sandbox_from_config(section("sandbox"), workers=1, time_factor=1.0) as sandbox:
    ...     reward = CoverageReward(problems, {"name": "low", "fraction": 0.5}, sandbox)
    ...     reward(answers, problem_id=["sq"] * 3)
    [1.0, 1.0, 0.0]
    >>> reward.history[-1]["verdicts/AC"], reward.history[-1]["verdicts/CE"]
    (2, 1)
    """

    def __init__(self, problems: Mapping[str, Problem], regime: dict, sandbox, reward: str = "binary",
                 cache_size: int = 100_000):
        if reward not in REWARDS:
            raise ValueError(f"grpo.reward: must be one of {', '.join(REWARDS)}, got {reward!r}")
        self.problems = dict(problems)
        self.regime = regime
        self.tests = {pid: regime_tests(p, regime) for pid, p in self.problems.items()}
        self.sandbox = sandbox
        self.reward = reward
        self.__name__ = f"coverage_{regime['name']}"  # TRL logs rewards/<__name__>/mean
        self.history: list[dict] = []  # one record per call: verdict counts and seconds spent judging
        # A verdict is a function of (problem, code, tests): a group of samples, and later steps, repeat
        # programs often (an SFT'd init reproduces its references verbatim), and a repeated too-slow
        # program would otherwise cost the full time limit every time.
        self.cache: dict[tuple[str, str], tuple[str, int]] = {}
        self.cache_size = cache_size

    def __call__(self, completions, problem_id, log_metric=None, **columns) -> list[float]:
        from ewa.sandbox.extract import extract_code

        start = time.perf_counter()
        keys = []
        for pid, completion in zip(problem_id, completions, strict=True):
            code = extract_code(completion_text(completion))
            keys.append(None if code is None else (pid, hashlib.sha256(code.encode()).hexdigest(), code))
        needed = {key[:2]: key for key in keys if key is not None}
        known = {k: self.cache[k] for k in needed if k in self.cache}
        todo = [k for k in needed if k not in known]
        jobs = [(self.problems[needed[k][0]], needed[k][2], self.tests[needed[k][0]]) for k in todo]
        results = self.sandbox.judge_many(jobs, early_stop=self.reward == "binary") if jobs else []
        for k, result in zip(todo, results, strict=True):
            known[k] = (result.verdict, result.tests_passed)
            if len(self.cache) >= self.cache_size:
                self.cache.pop(next(iter(self.cache)))  # oldest first
            self.cache[k] = known[k]
        rewards, verdicts = [], Counter()
        for pid, key in zip(problem_id, keys):
            if key is None:  # no fenced block: nothing to run, scored like code that does not compile
                verdicts[CE] += 1
                verdicts["no_code"] += 1
                rewards.append(0.0)
                continue
            verdict, passed = known[key[:2]]
            verdicts[verdict] += 1
            if self.reward == "binary":
                rewards.append(1.0 if verdict == AC else 0.0)
            else:
                rewards.append(passed / len(self.tests[pid]))
        seconds = time.perf_counter() - start
        record = {f"verdicts/{v}": verdicts[v] for v in (*VERDICTS, "no_code")}
        record.update({"completions_judged": len(completions), "programs_run": len(jobs), "reward_time_s": seconds})
        self.history.append(record)
        if log_metric is not None:  # GRPOTrainer hands reward functions a per-step metric logger
            for name, value in record.items():
                log_metric(name, float(value))
        return rewards
