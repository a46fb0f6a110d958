"""`tools`: the model may run Python mid-answer, through its chat template's native tool calling.

The `python` tool (ewa.chat.PYTHON_TOOL: `code`, optional `stdin`) is passed as `tools=`; each generated
turn is parsed with the tokenizer's response parser, every call's code runs in the sandbox
(tools.time_limit_s) and its output comes back as a `tool` message the template renders. A malformed or
unknown call gets a `tool` message saying so. The sample ends with the first turn that calls no tool
(or when its token budget, tools.max_tool_calls + 1 turns, or the context runs out); its submission is
the last fenced python block the model wrote outside tool calls (`submitted: restated`).

A model may run its program and then only say that it works. With tools.submit `restated` that sample
has no submission (CE, no_answer in evaluation); with `last_run` it submits the last program the sandbox
ran for a call (`submitted: last_run`), whatever its outcome, when no block was written after that call.
A block written after the last run is the submission in both modes.
"""
from __future__ import annotations

from ewa.chat import PYTHON_TOOL, ToolCall, parse_turn, supports_tools
from ewa.prompts import TOOL_CALLS_USED_UP, tool_output, tools_messages
from ewa.sample.settings import Setting
from ewa.sandbox.extract import extract_code

def call_problem(call: ToolCall) -> str | None:
    """Why `call` cannot run (a message for the model), or None when it can."""
    if call.name != PYTHON_TOOL["function"]["name"]:
        return f"error: unknown tool {call.name!r}; the only tool is python"
    if not isinstance(call.arguments.get("code"), str) or not call.arguments["code"].strip():
        return "error: the python tool needs a non-empty string argument 'code'"
    if not isinstance(call.arguments.get("stdin", ""), str):
        return "error: the python tool's argument 'stdin' must be a string"
    return None


class Tools(Setting):
    name = "tools"
    uses_sandbox = True
    tools = [PYTHON_TOOL]

    def __init__(self, config, tokenizer, sandbox=None, workers: int = 1):
        super().__init__(config, tokenizer, sandbox, workers)
        if not supports_tools(tokenizer):
            raise ValueError("setting tools: this model's chat template does not render tools or its responses "
                             "cannot be parsed into tool calls (no response template); sample it in reasoning "
                             "or agentic")

    def messages(self, problem):
        return tools_messages(problem)

    def run(self, samples, backend):
        max_turns = self.config.tools.max_tool_calls + 1
        while active := [s for s in samples if not s.done]:
            for s in active:
                s.assistant = self.config.assistant_prefix
            pending = []  # (sample, tool messages to answer with) for turns that called a tool
            for s, c in self.generate(active, backend):
                turn = parse_turn(self.tokenizer, s.prompt, s.assistant + c.text)
                s.messages.append(turn.message())
                s.turns += 1
                code = extract_code(turn.content)
                if code is not None:
                    s.code, s.submitted = code, "restated"  # the last program written outside tool calls
                    s.extra["restated_turn"] = s.turns
                if not turn.tool_calls and not turn.error:
                    s.done = True  # a final answer
                elif s.turns >= max_turns or (turn.error and c.finish_reason == "length"):
                    s.done = True  # out of turns, or a call cut off by the budget
                else:
                    pending.append((s, turn))
            replies = self.map_sandbox(self._answer_calls, pending)
            for (s, _), messages in zip(pending, replies):
                s.messages += messages
        for s in samples:
            if self.config.tools.submit == "last_run":
                self._submit_last_run(s)
            s.turn_codes = [s.code]
            s.completion = self.transcript(s)

    @staticmethod
    def _submit_last_run(s) -> None:
        """The last program the tool ran becomes the submission when no block was written after its call.

        A turn's calls follow its text, so a call of the turn that wrote the last block came after it; a run
        of that very program (up to surrounding whitespace) leaves the submission restated.
        """
        if "last_run" not in s.extra:
            return
        turn, code = s.extra["last_run"]
        if turn >= s.extra.get("restated_turn", 0) and code.strip() != (s.code or "").strip():
            s.code, s.submitted = code, "last_run"

    def _answer_calls(self, item) -> list[dict]:
        """The `tool` messages answering a turn's calls (each one that can run runs in the sandbox)."""
        s, turn = item
        if turn.error:
            s.tool_calls += 1
            s.tool_outcomes.append("malformed")
            return [{"role": "tool", "content": f"error: {turn.error}"}]
        replies = []
        for call in turn.tool_calls:
            s.tool_calls += 1
            problem = call_problem(call)
            if s.tool_calls > self.config.tools.max_tool_calls:
                outcome, text = "over_limit", TOOL_CALLS_USED_UP
            elif problem:
                outcome, text = "invalid", problem
            else:
                # a function-call problem's program is tested with asserts: a failed one says what its calls returned
                result = self.sandbox.run_code(call.arguments["code"], stdin=call.arguments.get("stdin", ""),
                                               time_limit_s=self.config.tools.time_limit_s,
                                               memory_limit_mb=s.problem.memory_limit_mb,
                                               note_asserts=s.problem.testtype != "stdin")
                outcome, text = result.status, tool_output(result, self.config.tools.time_limit_s)
                s.extra["last_run"] = (s.turns, call.arguments["code"])  # whatever its outcome: it ran
            s.tool_outcomes.append(outcome)
            replies.append({"role": "tool", "name": call.name, "content": text})
        return replies
