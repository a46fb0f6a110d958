"""SFT traces of all three inference settings, built from the train problems' reference programs in the
chat template's own format (the same opening messages, tool schema and feedback text sampling uses).

- reasoning: the prompt, then a plan line and the program.
- tools: the model calls the python tool on its candidate with the first public input, reads the output
  (a `tool` message), then answers with the program. Recovery traces show the real traceback of a call
  that crashes, then answer with the correct program: a call whose program does not compile (a syntax
  slip, see ewa.init.mutants), and a call of the correct program on a misread input (`input_slips`),
  answered with the same program. Most of a small model's calls crash, mostly on an input it wrote from
  memory; an answer written after a traceback it never saw in training is noise, and one trained only
  to change the program after any traceback rewrites programs that were right.
- agentic: the first turn answered like a reasoning prompt, per kind; and a first attempt with a slip
  (a wrong variant of the efficient program that a public test catches, else the first generic mutant
  of the reference program that fails a public test, else a sibling instance's differing program; then
  the first that crashes, and a syntax slip), the real public-test feedback, then the corrected
  program. Only attempts that fail a public test give a feedback trace.

Every row is a TRL conversational prompt-completion example. The loss falls on the assistant turns of
the completion only (completion- and assistant-only loss): never on tool outputs or feedback, and never
on an agentic trace's wrong first attempt, which sits in the prompt. Candidates run in the sandbox,
exactly as they would when sampled.
"""
from __future__ import annotations

import json
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from typing import Iterator, Sequence


from ewa.chat import PYTHON_TOOL
from ewa.init.mutants import input_slips, mutants, syntax_slips
from ewa.problems import Problem
from ewa.verdicts import RE
from ewa.progress import Progress
from ewa.prompts import agentic_messages, code_answer, feedback, reasoning_messages, tool_output, tools_messages

NO_TOOLS = json.dumps(None)  # TRL reads a `tools` column as JSON; null renders no tool block
TOOLS = json.dumps([PYTHON_TOOL])
PLAN_CALL = "Let me run it on the first example."
MAX_MUTANTS = 40  # mutants tried per kind before falling back to a sibling's program
CRASH_TRIES = 12  # candidates (programs or misread inputs) run per kind looking for a crash; each run costs init time


def solution_variants(problem: Problem) -> list[tuple[str, str]]:
    """(kind, source) for every reference solution a problem ships in meta['solutions']."""
    solutions = problem.meta.get("solutions") or {}
    out = [(kind, solutions[kind]) for kind in ("brute", "efficient") if solutions.get(kind)]
    out += [("wrong", src) for src in solutions.get("wrong") or []]
    return out


def row(prompt: list[dict], completion: list[dict], kind: str, problem: Problem, setting: str,
        tools: str = NO_TOOLS) -> dict:
    return {"prompt": prompt, "completion": completion, "tools": tools, "kind": kind, "setting": setting,
            "problem_id": problem.id}


def answer_rows(problem: Problem, opening: list[dict], setting: str) -> list[dict]:
    """`opening` answered directly with each reference program, under its kind's plan line."""
    return [row(opening, [{"role": "assistant", "content": code_answer(src, kind)}], kind, problem, setting)
            for kind, src in solution_variants(problem)]


def reasoning_rows(problem: Problem) -> list[dict]:
    return answer_rows(problem, reasoning_messages(problem), "reasoning")


def agentic_first_turn_rows(problem: Problem) -> list[dict]:
    """The agentic opening answered like a reasoning prompt: left to transfer from reasoning, an untrained
    first turn can collapse (docs/miniature.md#the-chat-formats-tokens)."""
    return answer_rows(problem, agentic_messages(problem), "agentic")


def tool_call(kind: str, code: str, stdin: str) -> dict:
    plan = code_answer("", kind).split("\n")[0]
    return {"role": "assistant", "content": f"{plan} {PLAN_CALL}",
            "tool_calls": [{"type": "function", "function": {"name": "python",
                                                             "arguments": {"code": code, "stdin": stdin}}}]}


def run_tool(sandbox, problem: Problem, code: str, stdin: str):
    """The sandbox result of a python call, and the `tool` message that answers it."""
    result = sandbox.run_code(code, stdin=stdin, time_limit_s=max(problem.time_limit_s, 1.0),
                              memory_limit_mb=problem.memory_limit_mb)
    return result, {"role": "tool", "name": "python", "content": tool_output(result, problem.time_limit_s)}


def tool_rows(problem: Problem, sandbox) -> list[dict]:
    """One row per reference program (the tool call, its output, and the answer), and per correct program
    two recovery rows, each in the prompt with its real output: a call of a slip that does not compile,
    answered with the correct program, and a call of the correct program on the first misreading of the
    input that crashes it (`input_slips`), answered with that same program."""
    public = problem.public_tests
    if not public:
        return []
    stdin = public[0][1].input
    opening = tools_messages(problem)
    rows = []
    for kind, src in solution_variants(problem):
        _, output = run_tool(sandbox, problem, src, stdin)
        answer = {"role": "assistant", "content": code_answer(src, kind)}
        rows.append(row(opening, [tool_call(kind, src, stdin), output, answer], kind, problem, "tools", TOOLS))
    for kind, src in solution_variants(problem):
        if kind == "wrong":
            continue
        crashes = [(slip, stdin) for _, slip in islice(syntax_slips(src), 1)]
        crashes += [(src, misread) for misread in islice(input_slips(stdin), CRASH_TRIES)]
        answer = {"role": "assistant", "content": code_answer(src, kind)}
        recovered = 0
        for code, call_stdin in crashes:
            result, output = run_tool(sandbox, problem, code, call_stdin)
            if result.status == "ok":
                continue
            rows.append(row(opening + [tool_call(kind, code, call_stdin), output], [answer], kind, problem,
                            "tools", TOOLS))
            recovered += 1
            if recovered == 2:
                break
    return rows


def siblings(problem: Problem, family: list[Problem]) -> list[Problem]:
    """The other instances of the family, starting after `problem` (so each is someone's first pick)."""
    at = next(i for i, p in enumerate(family) if p.id == problem.id)
    return family[at + 1:] + family[:at]




def first_attempts(problem: Problem, family: list[Problem], kind: str) -> Iterator[str]:
    """Candidate failing first attempts of `kind`: for the efficient kind the family's wrong variants (the
    pitfall; a public test shows it for some families), then this problem's own reference program's
    mutants (a slip a model that learned the family makes), then the siblings' programs (different when
    the family's parameters live in the code)."""
    solutions = problem.meta.get("solutions") or {}
    own = solutions.get(kind)
    if kind == "efficient":  # a wrong variant is an efficient attempt with the family's pitfall
        yield from solutions.get("wrong") or []
    if own:
        yield from islice((m for _, m in mutants(own)), MAX_MUTANTS)
    for other in siblings(problem, family):
        attempt = (other.meta.get("solutions") or {}).get(kind)
        if attempt and attempt != own:
            yield attempt


def agentic_rows(problem: Problem, family: list[Problem], sandbox) -> list[dict]:
    """Per kind (brute force, efficient), up to three first attempts, each with the real feedback and this
    problem's own program (the only turn trained on): the first candidate (`first_attempts`) that fails a
    public test, the first of its mutants that crashes, and a syntax slip (feedback: did not compile)."""
    public = [i for i, _ in problem.public_tests]
    fixes = dict(solution_variants(problem))
    opening = agentic_messages(problem)
    rows = []
    for kind in ("brute", "efficient"):
        if not public or kind not in fixes:
            continue
        attempts = []  # (program, feedback): the first that fails, then the first that crashes
        for tries, attempt in enumerate(first_attempts(problem, family, kind)):
            if attempts and tries >= CRASH_TRIES:
                break
            result = sandbox.judge(problem, attempt, tests=public, early_stop=False)
            note = feedback(problem, result)
            crashed = any(t.verdict == RE for t in result.tests)
            if note is None or (attempts and not crashed):
                continue  # it passes the public tests (no feedback to learn from), or is one more failure
            attempts.append((attempt, note))
            if crashed:
                break
        slip = next((s for _, s in syntax_slips(fixes[kind])), None)
        if slip is not None:
            attempts.append((slip, feedback(problem, sandbox.judge(problem, slip, tests=public))))
        for attempt, note in attempts:
            first = {"role": "assistant", "content": code_answer(attempt, kind)}
            fix = {"role": "assistant", "content": code_answer(fixes[kind], kind)}
            rows.append(row(opening + [first, {"role": "user", "content": note}], [fix], kind, problem, "agentic"))
    return rows


def sft_examples(problems: Sequence[Problem], mix: dict, sandbox=None) -> list[dict]:
    """Every row of the warm start, repeated per `mix` (reasoning rows and, when mix['agentic'] > 0, agentic
    first turns per kind; tools and agentic rows per trace), in a fixed order: the trainer shuffles by
    seed. `sandbox` runs the tools and agentic candidates; without one there are no traces."""
    rows = []
    for problem in problems:
        first_turns = agentic_first_turn_rows(problem) if mix.get("agentic") else []
        for r in reasoning_rows(problem) + first_turns:
            rows += [r] * int(mix[r["kind"]])
    if sandbox is None or not (mix.get("tools") or mix.get("agentic")):
        return rows
    families = defaultdict(list)
    for p in problems:
        families[p.meta.get("family", p.id)].append(p)

    def traces(problem: Problem) -> list[dict]:
        out = []
        if mix.get("tools"):
            out += [r for r in tool_rows(problem, sandbox) for _ in range(int(mix["tools"]))]
        if mix.get("agentic"):
            family = families[problem.meta.get("family", problem.id)]
            out += [r for r in agentic_rows(problem, family, sandbox) for _ in range(int(mix["agentic"]))]
        return out

    # As many problems in flight as the sandbox has workers; map keeps the problems' order.
    with ThreadPoolExecutor(max(1, getattr(sandbox, "workers", 1))) as pool, \
            Progress("init", len(problems), "problems", label="ewa init: sft traces") as progress:
        for out in pool.map(traces, problems):
            rows += out
            progress.update(1)
    return rows
