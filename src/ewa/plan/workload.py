"""How much work each job has: problems per benchmark, tokens per sample in each inference setting, and
programs the sandbox runs. A format that can count its problems without running anything (a bundled set:
ewa.formats.PlanHints.count) is counted exactly; a benchmark read from a file that is not at hand is
counted from --problems or the format's stated assumption (PlanHints)."""
from __future__ import annotations

from dataclasses import dataclass

# Prompt tokens of one problem in ewa.prompts' chat template (assumed: competitive-programming statements
# run 300-1,500 tokens; --prompt-tokens overrides).
PROMPT_TOKENS = 1024
# Public tests an agentic turn is checked on (assumed: statements show 2-3 examples).
PUBLIC_TESTS = 3
# Mean CPU seconds of one program on one test in the sandbox, timeouts included (assumed; a real run's
# results/seed*/benchmarks/evaluate/*.tsv gives the measured figure).
CPU_S_PER_TEST = 0.1
# Bytes a sample record takes per generated token (text ~4 characters per token, plus JSON; assumed).
SAMPLE_BYTES_PER_TOKEN = 5
EVAL_BYTES_PER_SAMPLE = 200  # one parquet row: ids, verdict, tier, counts (assumed, compressed)


@dataclass(frozen=True)
class Benchmark:
    name: str
    problems: int
    tests: float  # hidden tests per problem
    counted: bool  # False: assumed, not counted


def benchmark(name: str, entry: dict, seed: int, given: dict[str, int]) -> Benchmark:
    from ewa.formats import get

    hints = get(entry["format"]).plan
    if hints.count is not None and not entry.get("input"):
        problems, tests = hints.count(entry, seed)
        return Benchmark(name, problems, tests, counted=True)
    if name in given:
        return Benchmark(name, given[name], hints.tests, counted=True)
    problems = hints.problems
    if entry.get("limit"):
        problems = min(problems, entry["limit"])
    return Benchmark(name, problems, hints.tests, counted=False)


def generation_calls(setting: str, sample: dict) -> int:
    """Generation calls of at most max_new_tokens each per sample: tools resume after every tool call,
    agentic after every failed submission (the most each can take)."""
    if setting == "tools":
        return sample["tools"]["max_tool_calls"] + 1
    if setting == "agentic":
        return sample["agentic"]["max_turns"]
    return 1


def generated_tokens(setting: str, sample: dict) -> int:
    """The most tokens one sample generates: every call at its cap, within the per-sample total."""
    return min(sample["max_new_tokens"] * generation_calls(setting, sample), sample["max_total_tokens"])


def sampling_runs(setting: str, sample: dict) -> int:
    """Programs the sandbox runs while sampling one sample: tool calls, or public-test feedback."""
    if setting == "tools":
        return sample["tools"]["max_tool_calls"]
    if setting == "agentic":
        return (sample["agentic"]["max_turns"] - 1) * PUBLIC_TESTS
    return 0


def constants() -> dict:
    from ewa import formats

    hints = {f.name: f.plan for f in formats.formats()}
    return {"prompt_tokens": PROMPT_TOKENS, "assumed_problems": {n: h.problems for n, h in hints.items()},
            "assumed_tests": {n: h.tests for n, h in hints.items()}, "public_tests": PUBLIC_TESTS, "cpu_s_per_test": CPU_S_PER_TEST,
            "sample_bytes_per_token": SAMPLE_BYTES_PER_TOKEN, "eval_bytes_per_sample": EVAL_BYTES_PER_SAMPLE}
