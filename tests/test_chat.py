"""One chat path for every model: the chat templates TRL ships (Qwen2.5, Qwen3, Llama 3.1/3.2) render the
python tool and its calls, `parse_turn` reads the calls back with the tokenizer's response parser, bad
calls become an error the conversation can report, and reasoning blocks never hold the submission."""
from __future__ import annotations

import pytest
from trl.chat_template_utils import (llama3_1_chat_template, llama3_2_chat_template, llama3_chat_template,
                                     qwen2_5_chat_template, qwen3_chat_template)

from ewa.chat import PYTHON_TOOL, ToolCall, Turn, add_response_parser, parse_turn, render, supports_tools
from ewa.init.tiny import train_tokenizer
from ewa.sandbox.extract import extract_code, strip_reasoning

TOOL_TEMPLATES = {"qwen2.5": qwen2_5_chat_template, "qwen3": qwen3_chat_template,
                  "llama3.1": llama3_1_chat_template, "llama3.2": llama3_2_chat_template}
OPENING = [{"role": "system", "content": "Solve it."}, {"role": "user", "content": "Print the sum."}]
CALL = ToolCall("python", {"code": "import sys\nprint(sum(map(int, sys.stdin.read().split())))\n",
                           "stdin": "1 2\n"})


def tokenizer_with(template: str):
    tok = train_tokenizer(["def f(x): return x", "print('hello world')"] * 3, 300)
    tok.chat_template = template
    return add_response_parser(tok)


def generated(tok, prompt: str, turn: Turn) -> str:
    """What a model following its template writes for `turn`: the rendered turn after the prompt."""
    full = render(tok, OPENING + [turn.message()], add_generation_prompt=False, tools=[PYTHON_TOOL])
    assert full.startswith(prompt)
    return full[len(prompt):]


@pytest.mark.parametrize("name", TOOL_TEMPLATES)
def test_tool_calls_render_and_parse_back(name):
    tok = tokenizer_with(TOOL_TEMPLATES[name])
    assert supports_tools(tok)
    prompt = render(tok, OPENING, tools=[PYTHON_TOOL])
    assert '"name": "python"' in prompt and '"stdin"' in prompt  # the schema reaches the model
    turn = parse_turn(tok, prompt, generated(tok, prompt, Turn("Let me run it.", [CALL])))
    assert turn.tool_calls == [CALL] and not turn.error
    answer = "Done.\n```python\nprint(3)\n```"
    final = parse_turn(tok, prompt, answer)
    assert final.tool_calls == [] and extract_code(final.content) == "print(3)\n"


@pytest.mark.parametrize("name", TOOL_TEMPLATES)
def test_tool_results_are_rendered_by_the_template(name):
    tok = tokenizer_with(TOOL_TEMPLATES[name])
    messages = OPENING + [Turn("", [CALL]).message(), {"role": "tool", "name": "python", "content": "3"}]
    text = render(tok, messages, tools=[PYTHON_TOOL])
    assert text.index("Print the sum.") < text.rindex("3")


def test_a_malformed_call_is_an_error_not_a_crash():
    tok = tokenizer_with(qwen2_5_chat_template)
    prompt = render(tok, OPENING, tools=[PYTHON_TOOL])
    broken = '<tool_call>\n{"name": "python", "arguments": {"code": "print(1)"\n</tool_call>'
    turn = parse_turn(tok, prompt, broken)
    assert turn.tool_calls == [] and "could not parse the tool call" in turn.error
    cut = parse_turn(tok, prompt, 'x\n<tool_call>\n{"name": "python", "argu')  # budget ran out mid-call
    assert cut.error


def test_two_calls_in_one_turn():
    tok = tokenizer_with(qwen3_chat_template)
    prompt = render(tok, OPENING, tools=[PYTHON_TOOL])
    other = ToolCall("python", {"code": "print(2)"})
    turn = parse_turn(tok, prompt, generated(tok, prompt, Turn("", [CALL, other])))
    assert turn.tool_calls == [CALL, other]


def test_a_template_without_tools_is_refused_for_the_tools_setting():
    tok = tokenizer_with(llama3_chat_template)  # Llama 3.0: no tool calling
    assert not supports_tools(tok)


def test_an_unknown_template_with_hermes_tool_tags_gets_a_parser():
    tok = tokenizer_with(qwen2_5_chat_template.replace("You are Qwen", "You are Coder"))  # not TRL's exact text
    assert supports_tools(tok)
    prompt = render(tok, OPENING, tools=[PYTHON_TOOL])
    assert parse_turn(tok, prompt, generated(tok, prompt, Turn("", [CALL]))).tool_calls == [CALL]


def test_reasoning_blocks_are_stripped_before_extraction():
    draft = "<think>\nfirst try:\n```python\nprint('draft')\n```\n</think>\n"
    assert extract_code(draft + "```python\nprint('final')\n```") == "print('final')\n"
    assert extract_code(draft) is None  # a draft inside the reasoning is never the submission
    # DeepSeek-R1 opens the block in the prompt: only the close is generated
    assert extract_code("```python\nprint('draft')\n```\n</think>\n```python\nprint(1)\n```") == "print(1)\n"
    # cut off while thinking: no answer
    assert extract_code("<think>\n```python\nprint('draft')\n```") is None
    assert strip_reasoning("no reasoning here") == "no reasoning here"
