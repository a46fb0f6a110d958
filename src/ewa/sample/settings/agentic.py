"""`agentic`: multi-turn. Each turn's submission runs on the problem's PUBLIC tests only; a failure
comes back as a user turn of feedback, up to agentic.max_turns submissions, stopping once every
public test passes. The last submission is the sample. Hidden tests never reach a prompt.
"""
from __future__ import annotations

from ewa.prompts import reasoning_messages
from ewa.sample.chat import render
from ewa.sample.settings import Setting, with_system
from ewa.sandbox.extract import extract_code
from ewa.verdicts import AC, CE, MLE, RE, TLE, WA

FIELD_CHARS = 300  # per input/output shown; the tiny model's whole context is ~1k tokens
SYSTEM = ("Your program will be run on the public example tests. If it fails one, you will be shown "
          "the failure and can answer with a corrected program.")
WHAT = {WA: "gave a wrong answer", TLE: "took too long (time limit {time} s)",
        MLE: "used too much memory (limit {memory} MB)", RE: "crashed with a runtime error",
        CE: "did not compile"}
NO_CODE = "Your answer has no ```python code block. Answer with the complete program in one ```python block."


def clip(text: str, limit: int = FIELD_CHARS) -> str:
    text = text.rstrip("\n")
    return text if len(text) <= limit else text[:limit] + "...(truncated)"


def feedback(problem, result) -> str | None:
    """The user turn for a failed public run, built only from public tests; None if all passed."""
    public = [i for i, _ in problem.public_tests]
    failed = [t for t in result.tests if t.verdict != AC and t.index in public]
    if not failed:
        return None
    t = failed[0]
    test = problem.tests[t.index]
    what = WHAT.get(t.verdict, t.verdict).format(time=f"{problem.time_limit_s:g}", memory=problem.memory_limit_mb)
    lines = [f"Your program passed {len(public) - len(failed)} of {len(public)} public tests. "
             f"On public test {public.index(t.index) + 1} it {what}.",
             f"Input:\n{clip(test.input)}", f"Expected output:\n{clip(test.output)}"]
    if t.verdict == WA or t.got:
        lines.append(f"Your output:\n{clip(t.got) or '(nothing)'}")
    if t.error.strip() and t.verdict != WA:
        lines.append("Error (last lines):\n" + clip("\n".join(t.error.strip().splitlines()[-5:])))
    lines.append("Fix the program and answer with the complete corrected program in one ```python block.")
    return "\n\n".join(lines)


class Agentic(Setting):
    name = "agentic"
    uses_sandbox = True

    def messages(self, problem):
        return with_system(reasoning_messages(problem), SYSTEM)

    def run(self, samples, backend):
        for s in samples:
            s.extra["opening"] = render(self.tokenizer, s.messages, add_generation_prompt=False)
            s.extra["opening_messages"] = len(s.messages)
        while active := [s for s in samples if not s.done]:
            for s in active:
                s.assistant = self.config.assistant_prefix
            submitted = []
            for s, c in self.generate(active, backend):
                text = s.assistant + c.text
                s.messages.append({"role": "assistant", "content": text})
                s.assistant, s.turns = "", s.turns + 1
                code = extract_code(text)
                s.code = code if code is not None else s.code  # the last submission is the sample
                submitted.append((s, code))
            judged = [(s, code) for s, code in submitted
                      if code is not None and s.turns < self.config.agentic.max_turns and s.problem.public_tests]
            results = self.map_sandbox(lambda sc: self._judge_public(*sc), judged)
            notes = {id(s): feedback(s.problem, r) for (s, _), r in zip(judged, results)}
            for s, code in submitted:
                if s.turns >= self.config.agentic.max_turns or (code is not None and not s.problem.public_tests):
                    s.done = True
                    continue
                note = NO_CODE if code is None else notes[id(s)]
                if note is None:
                    s.done = True  # every public test passes
                else:
                    s.messages.append({"role": "user", "content": note})
        for s in samples:
            s.completion = self._transcript(s)

    def _judge_public(self, s, code):
        return self.sandbox.judge(s.problem, code, tests=[i for i, _ in s.problem.public_tests], early_stop=False)

    def _transcript(self, s) -> str:
        """Every turn after the opening prompt, as the model saw it."""
        full = render(self.tokenizer, s.messages, add_generation_prompt=False)
        opening = s.extra["opening"]
        if full.startswith(opening):
            return full[len(opening):]
        return "".join(f"{m['role']}: {m['content']}\n\n" for m in s.messages[s.extra["opening_messages"]:])
