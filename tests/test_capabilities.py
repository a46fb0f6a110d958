"""A user's model directory, as the workflow meets it: used as it is (no SFT unless the config turns it
on), and a setting its chat template cannot render or parse refused when the workflow plans and by
`ewa preflight`, in one line naming the setting and `sample.settings` (ewa.capabilities).

The models are real pico Qwen2 directories with the tiny init's own tokenizer (trained BPE, Qwen2.5's
template, TRL's response template); the other templates are the kinds published models ship.
"""
from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

from helpers import PICO, reduced_config, run_snakemake, workflow_copy

from ewa.capabilities import refusal
from ewa.config import section, validate

SETTINGS = ["reasoning", "tools", "agentic"]
# ChatML as many small instruct models ship it: every role rendered, no tools section.
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
          "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
# Gemma 1/2 refuse a system turn outright; some templates skip it without a word.
REJECTS_SYSTEM = ("{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
                  "{% endif %}" + CHATML)
DROPS_SYSTEM = CHATML.replace("{% for message in messages %}",
                              "{% for message in messages if message['role'] != 'system' %}")
NO_GENERATION_PROMPT = CHATML[:CHATML.index("{% if add_generation_prompt %}")]


@pytest.fixture(scope="module")
def pico_dir(tmp_path_factory) -> Path:
    """A pico model saved as the tiny init saves itself (ewa.init.build.build_tiny): weights, tokenizer,
    Qwen2.5's chat template and its response template."""
    from ewa.chat import add_response_parser
    from ewa.init.tiny import build_tiny_model, train_tokenizer

    out = tmp_path_factory.mktemp("pico")
    tokenizer = train_tokenizer(["def add(a, b):\n    return a + b\n", "print(sum(map(int, input().split())))"] * 20,
                                PICO["vocab_size"])
    build_tiny_model(tokenizer, section("model", {"tiny": PICO})["tiny"], seed=0).save_pretrained(out)
    add_response_parser(tokenizer).save_pretrained(out)
    return out


def with_template(pico_dir: Path, dest: Path, template: str) -> Path:
    """A copy of the pico model whose tokenizer carries `template` and no response template: a published
    model's tokenizer files as its authors wrote them."""
    shutil.copytree(pico_dir, dest)
    (dest / "chat_template.jinja").write_text(template)
    config = json.loads((dest / "tokenizer_config.json").read_text())
    config.pop("response_template", None)
    config.pop("response_schema", None)
    (dest / "tokenizer_config.json").write_text(json.dumps(config))
    return dest


def test_the_tiny_inits_template_does_every_setting(pico_dir):
    assert refusal(str(pico_dir), SETTINGS, section("sample")) is None
    assert refusal("tiny", SETTINGS, section("sample")) is None  # not built yet: the same template


def test_qwens_template_as_published_gets_its_response_parser_and_does_every_setting(pico_dir, tmp_path):
    """Qwen2.5's tokenizer files carry no response template: TRL's, found by the template's text, parses
    its tool calls, as in the sampler."""
    from ewa.init.tiny import CHAT_TEMPLATE

    model = with_template(pico_dir, tmp_path / "qwen", CHAT_TEMPLATE)
    assert "response_template" not in json.loads((model / "tokenizer_config.json").read_text())
    assert refusal(str(model), SETTINGS, section("sample")) is None


def test_a_template_without_tools_is_refused_the_tools_setting_alone(pico_dir, tmp_path):
    model = with_template(pico_dir, tmp_path / "chatml", CHATML)
    assert refusal(str(model), ["reasoning", "agentic"], section("sample")) is None
    refused = refusal(str(model), SETTINGS, section("sample"))
    # the tools setting's own refusal, word for word what `ewa sample` prints
    assert refused.key == "sample.settings", refused.line()
    assert refused.why.startswith(f"model.init {model}: setting tools: this model's chat template does not render tools")
    assert "\n" not in refused.line() and refused.line().startswith("config: key 'sample.settings': ")


@pytest.mark.parametrize("template, words", [
    (REJECTS_SYSTEM, "cannot render the setting's conversation (System role not supported)"),
    (DROPS_SYSTEM, "drops the system message"),
    (NO_GENERATION_PROMPT, "ignores add_generation_prompt"),
])
def test_a_template_that_cannot_take_the_prompts_is_refused(pico_dir, tmp_path, template, words):
    model = with_template(pico_dir, tmp_path / "model", template)
    refused = refusal(str(model), ["reasoning"], section("sample"))
    assert refused.key == "sample.settings", refused.line()
    assert f"setting reasoning: this model's chat template {words}" in refused.why, refused.line()


def test_a_model_directory_without_a_tokenizer_names_model_init(pico_dir, tmp_path):
    model = shutil.copytree(pico_dir, tmp_path / "bare", ignore=shutil.ignore_patterns("tokenizer*", "*.jinja"))
    refused = refusal(str(model), ["reasoning"], section("sample"))
    assert refused.key == "model.init" and refused.line() == f"config: key 'model.init': {model}: no tokenizer " \
        "(expected one of tokenizer.json, tokenizer_config.json, vocab.json, tokenizer.model)"
    # the plan leaves a directory whose files are still to come to the jobs that read them
    assert refusal(str(model), ["reasoning"], section("sample"), staged_ok=True) is None


def test_preflight_names_the_setting_and_its_fix(pico_dir, tmp_path):
    from ewa.preflight import chat_template_check

    model = with_template(pico_dir, tmp_path / "chatml", CHATML)
    whole = validate({"model": {"init": str(model)}, "sample": {"settings": ["reasoning", "tools"]}})
    check = chat_template_check(whole)
    line = check.line("node")
    assert check.status == "failed" and "key 'sample.settings'" in line and "setting tools" in line, line
    assert "; fix: remove it from sample.settings" in line
    assert chat_template_check(validate({})).status == "skipped"  # the tiny init


# --- the workflow, planned as a user plans it ----------------------------------------------------------

def dry_run(tmp_path: Path, model: dict, settings: list[str] = SETTINGS):
    config = reduced_config()
    config["model"] = model
    config["sample"]["settings"] = settings
    return run_snakemake(workflow_copy(tmp_path / "wf", config), "-n", "-p", check=False)


def commands(r, program: str) -> list[list[str]]:
    """The shell commands `snakemake -p` prints that run `program`, as words."""
    return [shlex.split(line[line.index(program):]) for line in (r.stdout + r.stderr).splitlines()
            if f"{program} --" in line]


def test_a_model_directory_alone_is_planned_without_sft(pico_dir, tmp_path):
    r = dry_run(tmp_path, {"init": str(pico_dir)})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    init = commands(r, "ewa init")
    assert len(init) == 1
    given = json.loads(init[0][init[0].index("--config") + 1])
    assert given == {"model": {"init": str(pico_dir)}, "seed": 0}  # nothing to fine-tune it with
    assert validate(given, partial=True)["model"]["sft"]["steps"] == 0


def test_tools_of_a_template_without_tools_stop_the_plan(pico_dir, tmp_path):
    model = with_template(pico_dir, tmp_path / "chatml", CHATML)
    r = dry_run(tmp_path, {"init": str(model)}, ["reasoning", "tools"])
    assert r.returncode != 0
    lines = [line for line in (r.stdout + r.stderr).splitlines() if "sample.settings" in line]
    assert len(lines) == 1 and lines[0].startswith("config: key 'sample.settings': ") and "setting tools" in lines[0], \
        r.stderr[-3000:]


def test_init_of_a_model_directory_with_the_tiny_defaults_links_it_as_it_is(pico_dir, tmp_path):
    """`ewa init --init DIR` with a config written for the tiny model: its SFT defaults do not apply."""
    from ewa.cli import main

    problems = tmp_path / "problems.jsonl"
    problems.write_text(json.dumps({"id": "p", "source": "t", "difficulty": "easy", "statement": "s",
                                    "testtype": "stdin", "tests": [{"input": "", "output": ""}]}) + "\n")
    assert main(["init", "--init", str(pico_dir), "--problems", str(problems), "--out", str(tmp_path / "init")]) == 0
    record = json.loads((tmp_path / "init" / "ewa_init.json").read_text())
    assert "sft_result" not in record
    assert (tmp_path / "init" / "model.safetensors").read_bytes() == (pico_dir / "model.safetensors").read_bytes()
