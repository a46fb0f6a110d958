"""What a model's chat template can do, checked against what each inference setting will send it before
anything runs: the workflow refuses at plan time (rules/common.smk) and `ewa preflight` on the node, in one
line naming the setting and `sample.settings`, a setting the template cannot render or parse.

The checks are the samplers' own. Each setting is built as `ewa sample` builds it, so the tools setting's
refusal of a template without tool calls is that class's check (ewa.chat.supports_tools), word for word;
its conversations are rendered as Setting.generate renders them, and a python call the template writes is
parsed back as the tools setting parses a generated one. Only the tokenizer's files are read, no weights.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ewa.chat import PYTHON_TOOL, ToolCall, Turn, parse_turn, render
from ewa.problems import Problem, Test

FIX = "remove it from sample.settings, or point model.init at a model whose chat template supports it"
SFT_FIX = ("set model.sft.steps: 0 (the model is then used as it is), or point model.init at a model whose chat "
           "template marks the assistant's turns with {% generation %} ... {% endgeneration %}")
# One small stdin problem stands in for every problem: the prompts differ only in their text.
PROBE = Problem(id="capabilities/probe", source="capabilities", difficulty="easy", testtype="stdin",
                statement="Read two integers and print their sum.",
                tests=(Test(input="1 2\n", output="3\n", size=4, public=True),))
PROGRAM = "a, b = map(int, input().split())\nprint(a + b)\n"
CALL = ToolCall(name=PYTHON_TOOL["function"]["name"], arguments={"code": PROGRAM, "stdin": "1 2\n"})
# The turns after the opening that each setting renders for its next generate call.
FOLLOW_UPS = {
    "tools": [Turn(content="", tool_calls=[CALL]).message(), {"role": "tool", "name": CALL.name, "content": "3"}],
    "agentic": [Turn(content=f"```python\n{PROGRAM}```").message(),
                {"role": "user", "content": "Your program passed 0 of 1 public tests. Fix the program."}],
}
NOT_STARTED = object()  # stands in for the sandbox: building a setting starts none


def first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def setting_problem(tokenizer, name: str, sample) -> str | None:
    """Why setting `name` cannot sample a model with this tokenizer (a phrase starting "setting NAME: "),
    or None. `sample`: the SampleConfig `ewa sample` would build."""
    from ewa.sample.settings import setting_class

    try:
        setting = setting_class(name)(sample, tokenizer, sandbox=NOT_STARTED)
    except ValueError as e:  # the setting's own refusal, as `ewa sample` would print it
        return str(e)
    opening = setting.messages(PROBE)
    try:
        prompt = render(tokenizer, opening, tools=setting.tools)
        closed = render(tokenizer, opening, add_generation_prompt=False, tools=setting.tools)
        render(tokenizer, opening + FOLLOW_UPS.get(name, []), tools=setting.tools)
    except Exception as e:  # jinja2's TemplateError (a template's raise_exception), or the template's own bug
        return f"setting {name}: this model's chat template cannot render the setting's conversation ({first_line(e)})"
    system = next((m["content"] for m in opening if m["role"] == "system"), "")
    if any(line.strip() not in prompt for line in system.splitlines()):
        return (f"setting {name}: this model's chat template drops the system message, which holds the "
                f"answer format and the setting's instructions")
    if prompt == closed:
        return (f"setting {name}: this model's chat template ignores add_generation_prompt, so the model "
                f"would continue the user's turn instead of answering")
    if setting.tools:
        return tool_call_problem(tokenizer, name, opening, prompt, setting.tools)
    return None


def tool_call_problem(tokenizer, name: str, opening: list[dict], prompt: str, tools: list[dict]) -> str | None:
    """Whether the model is shown the python tool, and whether a python call written in the template's own
    format parses back into that call (what every generated call goes through)."""
    if PYTHON_TOOL["function"]["description"] not in prompt:
        return f"setting {name}: this model's chat template does not show the python tool in the prompt"
    written = render(tokenizer, opening + FOLLOW_UPS["tools"][:1], add_generation_prompt=False, tools=tools)
    if not written.startswith(prompt):  # the template rewrites earlier turns: the call cannot be cut out
        return None
    turn = parse_turn(tokenizer, prompt, written[len(prompt):])
    if [(c.name, c.arguments.get("code")) for c in turn.tool_calls] != [(CALL.name, PROGRAM)]:
        why = turn.error or f"it parses as {[c.name for c in turn.tool_calls] or 'no tool call'}"
        return (f"setting {name}: a python call in this model's own chat format does not parse back into "
                f"that call ({why})")
    return None


def read_tokenizer(path: Path):
    """The model's tokenizer, as far as its chat format goes. The sampler's loader (ewa.chat.load_tokenizer)
    imports torch through AutoTokenizer, and TRL (for a response template) imports it too: seconds on every
    plan. The template, its rendering and the response parser are the base class's whichever class loads
    them, so a tokenizer.json is read as it is; and a template that never renders tools needs no response
    parser (ewa.chat.supports_tools refuses it tools either way). A template that renders tools (Qwen2.5's)
    still needs one, so it pays TRL's import (with torch's) on every plan: ~7 s on 2 cores against ~2 s
    without. Anything else goes through the sampler's loader, with its errors."""
    from ewa.chat import add_response_parser, load_tokenizer

    if not ((path / "config.json").is_file() and (path / "tokenizer.json").is_file()):
        return load_tokenizer(str(path))
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(path))
    return add_response_parser(tokenizer) if "tools" in (tokenizer.chat_template or "") else tokenizer


@dataclass(frozen=True)
class Refusal:
    key: str  # the config key to change
    why: str
    fix: str = ""

    def line(self) -> str:
        return f"config: key '{self.key}': {self.why}" + (f"; {self.fix}" if self.fix else "")


def refusal(init: str, settings: list[str], sample: dict, staged_ok: bool = False) -> Refusal | None:
    """Why the model `init` (the config's model.init) cannot be sampled in the first of `settings` it
    cannot do, naming the setting and `sample.settings` (or model.init, when its tokenizer cannot be read);
    None if it can do them all. `sample`: the validated `sample` section. staged_ok: a directory without a
    config.json or tokenizer files yet (staged, its files still to come) is not refused; the jobs that
    read it name what is missing.

    The tiny init's template is the pipeline's own (ewa.init.tiny.CHAT_TEMPLATE, with TRL's response
    template): nothing to read before it is built, and tests/test_capabilities.py checks it does all three.
    """
    if init == "tiny":
        return None
    from ewa.chat import TOKENIZER_FILES
    from ewa.sample.config import SampleConfig

    path = Path(init)
    if staged_ok and not ((path / "config.json").is_file() and any((path / f).is_file() for f in TOKENIZER_FILES)):
        return None
    try:
        tokenizer = read_tokenizer(path)
    except (ValueError, OSError) as e:
        return Refusal("model.init", first_line(e).removeprefix("--model "))
    config = SampleConfig.from_dict(sample, seed=0, stream="")
    for name in settings:
        if why := setting_problem(tokenizer, name, config):
            return Refusal("sample.settings", f"model.init {init}: {why}", FIX)
    return None


def warm_start_refusal(init: str, sft: dict, staged_ok: bool = False) -> Refusal | None:
    """Why model.sft cannot warm-start the model directory `init` (None if it can, or if nothing is
    warm-started), naming model.sft. The warm start trains the assistant's turns only (ewa.init.sft: TRL's
    assistant_only_loss, not the prompts nor the tool outputs between turns), so TRL needs the chat template's
    {% generation %} markers: it brings a training version of the templates it knows (Qwen2.5's, Llama 3's,
    ...) and refuses any other, after the traces were built. This is TRL's own check
    (trl.chat_template_utils.get_training_chat_template), on the tokenizer files alone. ewa refuses rather than
    train the whole sequence instead: that would teach the model to write the prompts and the sandbox's
    replies too, a different warm start from the one the config asks for. staged_ok: as for `refusal`."""
    if init == "tiny" or not sft["steps"]:
        return None
    from ewa.chat import TOKENIZER_FILES

    path = Path(init)
    if staged_ok and not any((path / f).is_file() for f in TOKENIZER_FILES):
        return None
    try:
        tokenizer = read_tokenizer(path)
    except (ValueError, OSError) as e:
        return Refusal("model.init", first_line(e).removeprefix("--model "))
    from trl.chat_template_utils import get_training_chat_template, has_generation_markers

    if has_generation_markers(tokenizer.chat_template):  # TRL trains it as it is (SFTTrainer asks no more)
        return None
    try:
        get_training_chat_template(tokenizer)
    except (ValueError, TypeError):
        return Refusal("model.sft", f"model.init {init}: its chat template has no {{% generation %}} markers and TRL "
                       f"ships no training version of it, so the warm start ({sft['steps']} steps), which trains "
                       f"the assistant's turns only, cannot mask its loss (TRL: not training-compatible)", SFT_FIX)
    return None
