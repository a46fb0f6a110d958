"""`reasoning`: one turn; the model may think in text, then answers; its last fenced python block is
the submission.
"""
from __future__ import annotations

from ewa.prompts import reasoning_messages
from ewa.sample.settings import Setting
from ewa.sandbox.extract import extract_code


class Reasoning(Setting):
    name = "reasoning"

    def messages(self, problem):
        return reasoning_messages(problem)

    def run(self, samples, backend):
        for s in samples:
            s.assistant = self.config.assistant_prefix
        for s, c in self.generate(samples, backend):
            s.assistant += c.text
        for s in samples:
            s.turns, s.done = 1, True
            s.completion = s.assistant
            s.code = extract_code(s.assistant)
            s.submitted = "answer" if s.code is not None else None
            s.turn_codes = [s.code]
