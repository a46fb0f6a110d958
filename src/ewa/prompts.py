"""Chat prompts: the one place a Problem becomes the opening messages of each inference setting, shared by
the SFT warm start (whose traces are in these exact formats), GRPO and sampling.
"""
from __future__ import annotations

from ewa.formats import defining
from ewa.problems import Problem
from ewa.verdicts import AC, CE, MLE, RE, TLE, WA

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
    """The user turn that poses `problem`: its format's own (ewa.formats.Format.prompt), else the statement,
    the starter code and how the program is run."""
    own = defining(problem.judge)
    if own is not None and own.prompt is not None:
        return own.prompt(problem)
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


# No call limit in the prompt: the same SFT traces then fit any tools.max_tool_calls, which a `tool`
# message enforces when the calls are used up.
TOOLS_SYSTEM = ("You can run Python with the python tool to test your program on a small input before you "
                "answer. End with the complete program in one ```python block.")
AGENTIC_SYSTEM = ("Your program will be run on the public example tests. If it fails one, you will be shown "
                  "the failure and can answer with a corrected program.")


def with_system(messages: list[dict], extra: str) -> list[dict]:
    """`messages` with `extra` appended to the system message (one is added if there is none)."""
    out = [dict(m) for m in messages]
    if out and out[0]["role"] == "system":
        out[0]["content"] = out[0]["content"].rstrip() + "\n" + extra
    else:
        out.insert(0, {"role": "system", "content": extra})
    return out


def tools_messages(problem: Problem) -> list[dict]:
    """The `tools` opening: the reasoning prompt plus how to use the python tool (passed as `tools=`)."""
    return with_system(reasoning_messages(problem), TOOLS_SYSTEM)


def agentic_messages(problem: Problem) -> list[dict]:
    """The `agentic` opening: the reasoning prompt plus the promise of public-test feedback."""
    return with_system(reasoning_messages(problem), AGENTIC_SYSTEM)


TOOL_OUTPUT_CHARS = 1000  # a tool's output is context the model pays for on every later token
TOOL_CALLS_USED_UP = "error: no tool calls left; answer with the complete program in one ```python block."


def tool_output(result, time_limit_s: float) -> str:
    """The `tool` message answering a python call: its stdout, the end of stderr, and why it stopped."""
    text = result.stdout
    # Whatever a timed-out program wrote to stderr, the kill cut at a point that depends on the machine's
    # speed (a traceback half printed): leaving it out keeps the message, and SFT traces, reproducible.
    if result.status != TLE and (result.status != "ok" or result.stderr.strip()):
        text += "\n".join(result.stderr.strip().splitlines()[-5:])
    if result.status == TLE:
        text += f"\n(stopped: took longer than {time_limit_s:g} s)"
    elif result.status == MLE:
        text += "\n(stopped: used too much memory)"
    text = text.strip("\n")
    if len(text) > TOOL_OUTPUT_CHARS:
        text = text[:TOOL_OUTPUT_CHARS] + "\n...(truncated)"
    return text or "(no output)"


FIELD_CHARS = 300  # per input/output shown; the tiny model's whole context is ~1k tokens
WHAT = {WA: "gave a wrong answer", TLE: "took too long (time limit {time} s)",
        MLE: "used too much memory (limit {memory} MB)", RE: "crashed with a runtime error",
        CE: "did not compile"}
NO_CODE = "Your answer has no ```python code block. Answer with the complete program in one ```python block."


def clip(text: str, limit: int = FIELD_CHARS) -> str:
    text = text.rstrip("\n")
    return text if len(text) <= limit else text[:limit] + "...(truncated)"


def feedback(problem, result) -> str | None:
    """The user turn for a failed public run, built only from public tests; None if all passed. A format
    may show failures in its own terms (ewa.formats.Format.feedback)."""
    own = defining(problem.judge)
    if own is not None and own.feedback is not None:
        return own.feedback(problem, result)
    public = [i for i, _ in problem.public_tests]
    failed = [t for t in result.tests if t.verdict != AC and t.index in public]
    if not failed:
        return None
    t = failed[0]
    test = problem.tests[t.index]
    what = WHAT.get(t.verdict, t.verdict).format(time=f"{problem.time_limit_s:g}", memory=problem.memory_limit_mb)
    # a program that does not compile has one result for the whole suite: count passes, not failures
    passed = sum(r.verdict == AC and r.index in public for r in result.tests)
    lines = [f"Your program passed {passed} of {len(public)} public tests. "
             f"On public test {public.index(t.index) + 1} it {what}."]
    if problem.testtype == "stdin":
        lines += [f"Input:\n{clip(test.input)}", f"Expected output:\n{clip(test.output)}"]
        if t.verdict == WA or t.got:
            lines.append(f"Your output:\n{clip(t.got) or '(nothing)'}")
        shown = False
    else:
        explained, shown = call_failure(t.failure)
        lines += [explained] if explained else []
    # a timed-out program's stderr: see tool_output; a one-line exception already shown by its call: once
    if t.error.strip() and t.verdict not in (WA, TLE) and not (shown and len(t.error.strip().splitlines()) == 1):
        lines.append("Error (last lines):\n" + clip("\n".join(t.error.strip().splitlines()[-5:])))
    lines.append("Fix the program and answer with the complete corrected program in one ```python block.")
    return "\n\n".join(lines)


def call_failure(failure: dict | None) -> tuple[str, bool]:
    """A function-call test's failure as a unit test's (ewa.sandbox.failures): the failing assert, then
    what each of its calls returned or raised; and whether an exception is among them."""
    if not failure:
        return "", False
    lines = [f"Failed: {clip(failure['test'])}"]
    for c in failure["calls"]:
        if "returned" in c:
            lines.append(f"{clip(c['call'])} returned {c['returned']}")
        elif "raised" in c:
            lines.append(f"{clip(c['call'])} raised {clip(c['raised'])}")
        else:
            lines.append(f"{clip(c['call'])} did not return: {clip(c['failed'])}")
    return "\n".join(lines), any("raised" in c for c in failure["calls"])


def code_answer(code: str, kind: str | None = None) -> str:
    """An assistant answer: an optional plan line, then the code in one ```python block.

    Wrong variants are efficient attempts that fail, so they carry the efficient plan: the init cannot
    tell them apart from correct efficient code by the plan it writes.
    """
    plan = PLANS.get("efficient" if kind == "wrong" else kind or "", "")
    block = f"```python\n{code.strip()}\n```"
    return f"{plan}\n{block}" if plan else block
