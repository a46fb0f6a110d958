"""`tools`: the model may run Python mid-answer. A `<tool: python>\\n...\\n</tool>` block stops
generation; the code runs in the sandbox (tools.time_limit_s) and `<output>\\n...\\n</output>` is
appended before generation continues, at most tools.max_tool_calls times. The last fenced python
block outside tool calls and outputs is the submission.
"""
from __future__ import annotations

import re

from ewa.prompts import reasoning_messages
from ewa.sample.settings import Setting, with_system
from ewa.sandbox.extract import extract_code
from ewa.sandbox.results import RunResult
from ewa.verdicts import MLE, TLE

TOOL_OPEN, TOOL_CLOSE = "<tool: python>", "</tool>"
TOOL_CALL = re.compile(re.escape(TOOL_OPEN) + r".*?" + re.escape(TOOL_CLOSE), re.DOTALL)
OUTPUT_CHARS = 1000  # a tool's output is context the model pays for on every later token
SYSTEM = ("You may run Python while you work: write\n" + TOOL_OPEN + "\ncode\n" + TOOL_CLOSE +
          "\nand its output appears as <output>...</output>. At most {calls} calls. "
          "End with the full program in one ```python block.")


def tool_code(assistant: str) -> str:
    """The code of the tool call that `assistant` ends with ('' if no call was opened)."""
    body = assistant[:-len(TOOL_CLOSE)]
    at = body.rfind(TOOL_OPEN)
    if at < 0 or "</output>" in body[at:]:
        return ""
    code = body[at + len(TOOL_OPEN):].strip("\n")
    fenced = extract_code(code + "\n")  # models often fence the code inside the tag
    return fenced if fenced is not None else code + "\n"


def format_output(result, time_limit_s: float) -> str:
    text = result.stdout
    if result.status != "ok" or result.stderr.strip():
        text += "\n".join(result.stderr.strip().splitlines()[-5:])
    if result.status == TLE:
        text += f"\n(stopped: took longer than {time_limit_s:g} s)"
    elif result.status == MLE:
        text += "\n(stopped: used too much memory)"
    text = text.strip("\n")
    if len(text) > OUTPUT_CHARS:
        text = text[:OUTPUT_CHARS] + "\n...(truncated)"
    return f"\n<output>\n{text}\n</output>\n"


class Tools(Setting):
    name = "tools"
    uses_sandbox = True

    def messages(self, problem):
        return with_system(reasoning_messages(problem), SYSTEM.format(calls=self.config.tools.max_tool_calls))

    def run(self, samples, backend):
        limit = self.config.tools.max_tool_calls
        for s in samples:
            s.assistant = self.config.assistant_prefix
            s.extra["outputs"] = []  # (start, end) of the tool outputs inside s.assistant
        calling = [s for s in samples if limit and s.assistant.endswith(TOOL_CLOSE)]  # a prefix may call
        while True:
            self._call_tools(calling)
            active = [s for s in samples if not s.done]
            if not active:
                break
            calling = []
            # once a sample's calls are used up, </tool> is plain text and no longer stops it
            for group, stop in (([s for s in active if s.tool_calls < limit], [TOOL_CLOSE]),
                                ([s for s in active if s.tool_calls >= limit], [])):
                for s, c in self.generate(group, backend, stop):
                    s.assistant += c.text
                    if stop and c.finish_reason == "stop" and c.text.endswith(TOOL_CLOSE):
                        calling.append(s)
                    else:
                        s.done = True
        for s in samples:
            s.turns, s.completion = 1, s.assistant
            s.code = extract_code(self._answer_text(s))

    def _call_tools(self, samples):
        limits = self.config.tools

        def call(s):
            code = tool_code(s.assistant)
            if not code.strip():
                return RunResult("RE", "", f"error: no code between {TOOL_OPEN} and {TOOL_CLOSE}", None, 0.0, 0.0)
            return self.sandbox.run_code(code, stdin="", time_limit_s=limits.time_limit_s,
                                         memory_limit_mb=s.problem.memory_limit_mb)

        results = self.map_sandbox(call, samples)
        for s, result in zip(samples, results):
            out = format_output(result, limits.time_limit_s)
            s.extra["outputs"].append((len(s.assistant), len(s.assistant) + len(out)))
            s.assistant += out
            s.tool_calls += 1

    @staticmethod
    def _answer_text(s) -> str:
        """The model's own words: tool outputs and tool calls removed, so neither can be the submission."""
        text, last = "", 0
        for start, end in s.extra["outputs"]:
            text += s.assistant[last:start]
            last = end
        return TOOL_CALL.sub("", text + s.assistant[last:])
