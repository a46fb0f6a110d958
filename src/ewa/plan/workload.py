"""How much work each job has: problems per benchmark, tokens per sample in each inference setting, and
programs the sandbox runs. The bundled sets (mini, humaneval) are counted exactly; a benchmark read from
a file that is not at hand is counted from --problems or a stated assumption."""
from __future__ import annotations

from dataclasses import dataclass

# Prompt tokens of one problem in ewa.prompts' chat template (assumed: competitive-programming statements
# run 300-1,500 tokens; --prompt-tokens overrides).
PROMPT_TOKENS = 1024
# Problems when a benchmark's file is not at hand and the config sets no limit: the LiveCodeBench
# release_v6 increment (1,055 - 880 problems, its dataset card; a difficulty filter keeps fewer, so this
# overestimates) and the CodeContests test split (165, its dataset card).
ASSUMED_PROBLEMS = {"livecodebench": 175, "codecontests": 165}
# Hidden tests per problem: LiveCodeBench's code_generation card says "over 59 on average" (the lite
# release prunes them, so fewer); CodeContests' private + generated tests (assumed 100); bundled sets are
# counted.
ASSUMED_TESTS = {"livecodebench": 59, "codecontests": 100}
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


def bundled(entry: dict, seed: int) -> tuple[int, float]:
    if entry["format"] == "mini":  # counted from the family definitions: nothing is generated or run
        from ewa.data.mini.build import test_counts

        wanted = {d.lower() for d in entry.get("difficulty") or ()}
        counts = [tests for difficulty, tests in test_counts(entry["split"], None, entry.get("small_inputs", 0.0))
                  if not wanted or difficulty.lower() in wanted][:entry.get("limit")]
        return len(counts), sum(counts) / max(1, len(counts))
    from ewa.data import load

    options = {"small_inputs": entry["small_inputs"]} if "small_inputs" in entry else {}
    problems = load(entry["format"], entry.get("input"), split=entry["split"], difficulty=entry.get("difficulty"),
                    limit=entry.get("limit"), seed=seed, progress=False, **options).problems
    return len(problems), sum(len(p.tests) for p in problems) / max(1, len(problems))


def benchmark(name: str, entry: dict, seed: int, given: dict[str, int]) -> Benchmark:
    if entry["format"] in ("mini", "humaneval") and not entry.get("input"):
        problems, tests = bundled(entry, seed)
        return Benchmark(name, problems, tests, counted=True)
    tests = ASSUMED_TESTS.get(entry["format"], ASSUMED_TESTS["codecontests"])
    if name in given:
        return Benchmark(name, given[name], tests, counted=True)
    problems = ASSUMED_PROBLEMS.get(entry["format"], ASSUMED_PROBLEMS["codecontests"])
    if entry.get("limit"):
        problems = min(problems, entry["limit"])
    return Benchmark(name, problems, tests, counted=False)


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
    return {"prompt_tokens": PROMPT_TOKENS, "assumed_problems": ASSUMED_PROBLEMS, "assumed_tests": ASSUMED_TESTS,
            "public_tests": PUBLIC_TESTS, "cpu_s_per_test": CPU_S_PER_TEST,
            "sample_bytes_per_token": SAMPLE_BYTES_PER_TOKEN, "eval_bytes_per_sample": EVAL_BYTES_PER_SAMPLE}
