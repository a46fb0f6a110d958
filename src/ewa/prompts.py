"""Chat prompts for the `reasoning` setting: the one place a Problem becomes messages, shared by the SFT
warm start, GRPO and sampling (which adds the tools/agentic variants on top).
"""
from __future__ import annotations

from ewa.problems import Problem

# Short on purpose: the tiny model's context is ~1k tokens and every prompt token is paid per sample.
SYSTEM_PROMPT = (
    "You are a careful Python programmer. Solve the task with a correct and efficient program. "
    "Answer with exactly one ```python code block."
)

IO_INSTRUCTIONS = {
    "stdin": "Read the input from standard input and print the answer to standard output.",
    "functional": "Implement the function `{func_name}`; it is called with the arguments and must return the answer.",
    "testcode": "Complete the function `{func_name}`; it is called by hidden tests.",
}

# The one-line plan before the code: names the kind of solution, so a sampled completion shows its intent.
PLANS = {"brute": "Approach: brute force.", "efficient": "Approach: efficient algorithm."}


def user_message(problem: Problem) -> str:
    parts = [problem.statement.strip()]
    if problem.starter_code.strip():
        parts.append(f"Starter code:\n```python\n{problem.starter_code.rstrip()}\n```")
    parts.append(IO_INSTRUCTIONS[problem.testtype].format(func_name=problem.func_name))
    return "\n\n".join(parts)


def reasoning_messages(problem: Problem) -> list[dict]:
    """System + user messages asking for one fenced python block that solves `problem`."""
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": user_message(problem)},
    ]


def code_answer(code: str, kind: str | None = None) -> str:
    """An assistant answer: an optional plan line, then the code in one ```python block.

    Wrong variants are efficient attempts that fail, so they carry the efficient plan: the init cannot
    tell them apart from correct efficient code by the plan it writes.
    """
    plan = PLANS.get("efficient" if kind == "wrong" else kind or "", "")
    block = f"```python\n{code.strip()}\n```"
    return f"{plan}\n{block}" if plan else block
