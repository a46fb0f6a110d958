"""The model's own chat format, for every model: prompts rendered by the tokenizer's chat template (the
tiny model carries Qwen2.5's, as TRL ships it), tools passed as `tools=` JSON schemas, and generations
parsed back into content + tool calls by `tokenizer.parse_response`. The miniature and a 7B run go
through exactly this code.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")
# End-of-turn tokens of the chat formats the field uses; a completion ends at any of them.
END_OF_TURN = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>")

# The one tool of the `tools` setting, as the JSON schema `apply_chat_template(tools=...)` renders.
PYTHON_TOOL = {
    "type": "function",
    "function": {
        "name": "python",
        "description": "Run a Python program in a sandbox and return what it prints (stdout, then the last "
                       "lines of stderr).",
        "parameters": {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "The Python program to run."},
                "stdin": {"type": "string", "description": "Text the program reads from standard input."},
            },
            "required": ["code"],
        },
    },
}


def load_tokenizer(model_dir: str):
    """The model's own tokenizer, able to parse its responses; a directory without one is a user error."""
    from transformers import AutoTokenizer

    path = Path(model_dir)
    if not path.is_dir():
        raise ValueError(f"--model {model_dir}: not a directory")
    if not (path / "config.json").is_file():
        raise ValueError(f"--model {model_dir}: no config.json (not a Hugging Face model directory)")
    if not any((path / f).is_file() for f in TOKENIZER_FILES):
        raise ValueError(f"--model {model_dir}: no tokenizer (expected one of {', '.join(TOKENIZER_FILES)})")
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return add_response_parser(tokenizer)


def add_response_parser(tokenizer):
    """Give `tokenizer` a response template for `parse_response`: its own if it ships one, TRL's for a
    template TRL knows, else one chosen by the template's tool-call family (Hermes/Qwen `<tool_call>`
    JSON or Llama 3 JSON). A template with no tool calls at all gets none (`supports_tools` says so).
    """
    template = getattr(tokenizer, "chat_template", None)
    if not template or getattr(tokenizer, "response_template", None) or getattr(tokenizer, "response_schema", None):
        return tokenizer
    # Importing TRL takes seconds: a tokenizer saved with its response template (the tiny init's) skips it.
    from trl.chat_template_utils import add_response_schema, llama3_template, qwen3_template

    try:
        return add_response_schema(tokenizer)
    except ValueError:  # a template TRL does not know by its exact text
        pass
    if "<tool_call>" in template:
        tokenizer.response_template = qwen3_template
    elif "<|eot_id|>" in template and "tools" in template:
        tokenizer.response_template = llama3_template
    return tokenizer


def supports_tools(tokenizer) -> bool:
    """Whether the chat template renders `tools` and its responses can be parsed into tool calls."""
    template = getattr(tokenizer, "chat_template", None) or ""
    return "tools" in template and bool(getattr(tokenizer, "response_template", None)
                                        or getattr(tokenizer, "response_schema", None))


def render(tokenizer, messages: list[dict], add_generation_prompt: bool = True, tools: list[dict] | None = None) -> str:
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tools=tools or None, tokenize=False,
                                             add_generation_prompt=add_generation_prompt)
    if tools:
        raise ValueError("this model has no chat template, so it cannot be offered tools")
    # A base model without a template: label turns in plain text.
    text = "".join(f"{m['role'].capitalize()}: {m['content']}\n\n" for m in messages)
    return text + ("Assistant: " if add_generation_prompt else "")


@dataclass
class ToolCall:
    name: str
    arguments: dict


@dataclass
class Turn:
    """One generated assistant turn, parsed: what the model said and the tools it called."""
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning: str = ""
    error: str = ""  # why the tool calls could not be parsed ("" when they could)

    def message(self) -> dict:
        """The turn as a chat message, to render back into the conversation."""
        msg = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = [{"type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                                 for c in self.tool_calls]
        return msg


def parse_turn(tokenizer, prompt: str, text: str) -> Turn:
    """Parse a generated turn (`text`, continuing `prompt`) with the tokenizer's response parser.

    A turn the parser rejects (malformed tool-call JSON, a call cut off by the budget) keeps its text as
    content and says why in `error`, so the conversation can tell the model.
    """
    try:
        parsed = tokenizer.parse_response(text, prefix=prompt)
    except Exception as exc:  # the parser raises ValueError for bad JSON, but also others for odd input
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return Turn(content=text, error=f"could not parse the tool call: {reason}")
    calls = []
    for call in parsed.get("tool_calls") or []:
        fn = call.get("function", call)
        args = fn.get("arguments")
        if isinstance(args, str):  # some parsers leave arguments as a JSON string
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                args = {"_raw": args}
        calls.append(ToolCall(name=str(fn.get("name", "")), arguments=args if isinstance(args, dict) else {}))
    return Turn(content=parsed.get("content") or "", tool_calls=calls,
                reasoning=parsed.get("reasoning_content") or "")


def stop_token_ids(tokenizer, model_eos=None) -> list[int]:
    """Token ids that end an assistant turn: the model's eos ids plus known end-of-turn tokens."""
    ids = set()
    for eos in (model_eos, tokenizer.eos_token_id):
        if eos is not None:
            ids.update(eos if isinstance(eos, (list, tuple)) else [eos])
    vocab = tokenizer.get_vocab()
    ids.update(vocab[t] for t in END_OF_TURN if t in vocab and t in tokenizer.all_special_tokens)
    return sorted(ids)
