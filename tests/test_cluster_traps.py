"""Three traps of a first cluster run, each as a user hits it:

- `ewa preflight --configfile FILE` (Snakemake's spelling) checks FILE's sandbox, as `--config FILE` does,
  not the schema's default interpreter;
- a user's model directory shares no inode with results/: a tool that rewrites one of its files in place
  (truncate and write, as many savers do) leaves the run's init alone, and the other way round;
- a warm start (model.sft) of a model whose chat template has no {% generation %} markers (SmolLM2's ChatML)
  is refused when the workflow plans, by `ewa preflight` and by `ewa init` before any trace is built, in one
  line naming model.sft; Qwen2.5's template, which TRL knows, is not.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from helpers import reduced_config, run_snakemake, workflow_copy
from test_capabilities import pico_dir, with_template  # noqa: F401 (pico_dir: the module's fixture)

from ewa.capabilities import warm_start_refusal
from ewa.cli import main
from ewa.config import section, validate

# ChatML as SmolLM2-135M-Instruct ships it: no {% generation %} markers, and not a template TRL knows.
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
          "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
WARM_START = {"steps": 2, "batch_size": 2, "learning_rate": 1e-5}


@pytest.fixture(scope="module")
def chatml_dir(pico_dir, tmp_path_factory) -> Path:
    return with_template(pico_dir, tmp_path_factory.mktemp("chatml") / "model", CHATML)


@pytest.fixture
def problems(tmp_path) -> Path:
    path = tmp_path / "problems.jsonl"
    path.write_text(json.dumps({"id": "p", "source": "t", "difficulty": "easy", "statement": "s", "testtype": "stdin",
                                "tests": [{"input": "", "output": ""}]}) + "\n")
    return path


# -- preflight reads the file whichever spelling is used ----------------------------------------------------

def test_preflight_with_configfile_checks_that_files_interpreter(tmp_path, capsys):
    python = tmp_path / "no-such-python3"
    config = reduced_config()
    config["sandbox"]["python"] = str(python)
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(config))
    for flag in ("--configfile", "--config"):
        rc = main(["preflight", flag, str(path), "--results", str(tmp_path / "results")])
        err = capsys.readouterr().err
        failed = [line for line in err.splitlines() if " interpreter failed: " in line]
        assert rc == 2 and len(failed) == 1 and f"sandbox.python: {python} not found" in failed[0], (flag, err)


# -- the user's model files are never the run's -------------------------------------------------------------

def test_a_tool_rewriting_the_users_model_in_place_leaves_the_runs_init_alone(pico_dir, tmp_path, problems):
    user = shutil.copytree(pico_dir, tmp_path / "user-model")
    init = tmp_path / "results" / "init"
    assert main(["init", "--init", str(user), "--problems", str(problems), "--out", str(init)]) == 0
    for f in user.iterdir():
        assert (init / f.name).read_bytes() == f.read_bytes() and (init / f.name).stat().st_ino != f.stat().st_ino
    weights = (init / "model.safetensors").read_bytes()
    with open(user / "model.safetensors", "r+b") as f:  # a saver writing in place: truncate, then write
        f.truncate(0)
        f.write(b"rewritten by another tool")
    assert (init / "model.safetensors").read_bytes() == weights
    with open(init / "config.json", "w") as f:  # and a job writing into the init touches no file of the user
        f.write("{}")
    assert json.loads((user / "config.json").read_text())["model_type"] == "qwen2"
    copied = json.loads((init / "ewa_init.json").read_text())["copied"]
    assert copied["method"] in ("reflink", "copy") and copied["files"] == len(list(user.iterdir()))


# -- a warm start its template cannot train -----------------------------------------------------------------

def test_a_template_without_generation_markers_is_refused_a_warm_start(pico_dir, chatml_dir):
    refused = warm_start_refusal(str(chatml_dir), section("model", {"init": str(chatml_dir), "sft": WARM_START})["sft"])
    assert refused.key == "model.sft" and "\n" not in refused.line()
    assert refused.line().startswith(f"config: key 'model.sft': model.init {chatml_dir}: its chat template has no "
                                     "{% generation %} markers")
    assert "; set model.sft.steps: 0" in refused.line()
    sft = section("model", {"init": str(pico_dir), "sft": WARM_START})["sft"]
    assert warm_start_refusal(str(pico_dir), sft) is None  # Qwen2.5's: TRL brings its training version
    assert warm_start_refusal(str(chatml_dir), section("model", {"init": str(chatml_dir)})["sft"]) is None  # no SFT


def test_the_workflow_refuses_the_warm_start_when_it_plans(chatml_dir, tmp_path):
    config = reduced_config()
    config["model"] = {"init": str(chatml_dir), "sft": WARM_START}
    config["sample"]["settings"] = ["reasoning"]
    r = run_snakemake(workflow_copy(tmp_path / "wf", config), "-n", check=False)
    lines = [line for line in (r.stdout + r.stderr).splitlines() if "model.sft" in line]
    assert r.returncode != 0 and len(lines) == 1 and lines[0].startswith("config: key 'model.sft': "), r.stderr[-3000:]


def test_preflight_and_init_refuse_it_before_any_trace_is_built(chatml_dir, tmp_path, problems, capsys):
    from ewa.preflight import chat_template_check

    whole = validate({"model": {"init": str(chatml_dir), "sft": WARM_START}, "sample": {"settings": ["reasoning"]}})
    check = chat_template_check(whole)
    assert check.status == "failed" and "key 'model.sft'" in check.line("node")
    rc = main(["init", "--init", str(chatml_dir), "--config", json.dumps({"model": {"sft": WARM_START}}),
               "--problems", str(problems), "--out", str(tmp_path / "init")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "config: key 'model.sft': " in err
    assert not (tmp_path / "init").exists()
