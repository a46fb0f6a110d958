"""`agentic`: multi-turn. Each turn's submission runs on the problem's PUBLIC tests only; a failure
comes back as a user turn of feedback, up to agentic.max_turns submissions, stopping once every
public test passes. The last submission is the sample; the record keeps every turn's program
(`turn_codes`), so the first attempt can be judged too. Hidden tests never reach a prompt.
"""
from __future__ import annotations

from ewa.prompts import NO_CODE, agentic_messages, feedback
from ewa.sample.settings import Setting
from ewa.sandbox.extract import extract_code

class Agentic(Setting):
    name = "agentic"
    uses_sandbox = True

    def messages(self, problem):
        return agentic_messages(problem)

    def run(self, samples, backend):
        while active := [s for s in samples if not s.done]:
            for s in active:
                s.assistant = self.config.assistant_prefix
            submitted = []
            for s, c in self.generate(active, backend):
                text = s.assistant + c.text
                s.messages.append({"role": "assistant", "content": text})
                s.assistant, s.turns = "", s.turns + 1
                code = extract_code(text)
                s.turn_codes.append(code)
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
            s.submitted = "answer" if s.code is not None else None
            s.completion = self.transcript(s)

    def _judge_public(self, s, code):
        return self.sandbox.judge(s.problem, code, tests=[i for i, _ in s.problem.public_tests], early_stop=False)
