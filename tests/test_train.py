"""GRPO per coverage regime: the sandbox-judged reward, a short real GRPOTrainer run, resuming a killed
run, bad-input errors, and the scale path's config resolution and launch command."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
import torch
from accelerate.commands.config.config_args import load_config_from_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from helpers import PICO_WIDE, REGIMES, grpo_settings

from ewa.cli import main
from ewa.problems import Problem, make_test, write_problems
from ewa.train.grpo import batch_shape, grpo_config
from ewa.train.launch import accelerate_config_path, launch_command
from ewa.train.reward import CoverageReward

BRUTE = ("n = int(input())\nxs = input().split()\n"
         "print(sum(1 for i in range(n) for j in range(i + 1, n) if xs[i] == xs[j]))")
EFFICIENT = ("from collections import Counter\ninput()\n"
             "print(sum(v * (v - 1) // 2 for v in Counter(input().split()).values()))")
WRONG = "from collections import Counter\ninput()\nprint(sum(v * v // 2 for v in Counter(input().split()).values()))"
# Few GRPO steps on a pico model: short completions, small groups.
GRPO = {"max_steps": 3, "prompts_per_step": 2, "num_generations": 2, "max_completion_length": 80,
        "learning_rate": 1e-3, "beta": 0.04, "save_steps": 1}


def pairs_problem(pid: str) -> Problem:
    """Count equal pairs: brute force is O(n^2), so it passes the small tests and exceeds the limit on the big one."""
    rng = random.Random(pid)
    tests = []
    for n in (2, 5, 9, 40, 40000):
        xs = [rng.randint(1, 20) for _ in range(n)]
        counts = {}
        for x in xs:
            counts[x] = counts.get(x, 0) + 1
        tests.append(make_test(f"{n}\n{' '.join(map(str, xs))}\n", str(sum(v * (v - 1) // 2 for v in counts.values())),
                               public=n == 2))
    return Problem(id=pid, source="toy", difficulty="easy", statement="Read n and n integers; print how many pairs "
                   "i < j have equal values.", testtype="stdin", tests=tuple(tests), time_limit_s=0.5,
                   meta={"solutions": {"brute": BRUTE, "efficient": EFFICIENT, "wrong": [WRONG]}})


def answer(code: str) -> list[dict]:
    return [{"role": "assistant", "content": f"Approach: efficient algorithm.\n```python\n{code}\n```"}]


@pytest.fixture(scope="session")
def problems_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("train") / "train.jsonl"
    write_problems([pairs_problem("toy/pairs-a"), pairs_problem("toy/pairs-b")], path)
    return path


@pytest.fixture(scope="session")
def pico_init(tmp_path_factory, problems_file):
    """A pico init, SFT'd hard enough on the two problems that it writes code blocks."""
    out = tmp_path_factory.mktemp("init") / "init"
    sft = {"steps": 80, "batch_size": 8, "learning_rate": 1e-2, "warmup_ratio": 0.1}
    config = {"seed": 0, "model": {"init": "tiny", "tiny": PICO_WIDE, "sft": sft}}
    assert main(["init", "--config", json.dumps(config), "--problems", str(problems_file), "--out", str(out)]) == 0
    return out


def train_argv(init, problems, out, regime="high", settings=GRPO, regimes=REGIMES):
    config = {"grpo": settings, "sandbox": {"backend": "bwrap"}, "regimes": regimes, "seed": 0}
    return ["train", "--init", str(init), "--problems", str(problems), "--regime", regime,
            "--config", json.dumps(config), "--out", str(out)]


def test_reward_follows_the_regimes_tests(sandbox):
    p = pairs_problem("toy/pairs-a")
    problems = {p.id: p}
    completions = [answer(EFFICIENT), answer(BRUTE), answer(WRONG), [{"role": "assistant", "content": "no code"}]]
    ids = [p.id] * 4
    logged = {}
    high = CoverageReward(problems, REGIMES[1], sandbox)
    assert high(completions, problem_id=ids, log_metric=logged.__setitem__) == [1.0, 0.0, 0.0, 0.0]
    assert high.__name__ == "coverage_high"
    assert (logged["verdicts/AC"], logged["verdicts/TLE"], logged["verdicts/WA"], logged["verdicts/CE"]) == (1, 1, 1, 1)
    assert logged["verdicts/no_code"] == 1 and logged["completions_judged"] == 4 and logged["programs_run"] == 3
    # a program seen before is not run again: same rewards, no sandbox time
    assert high(completions[:2] * 2, problem_id=ids) == [1.0, 0.0, 1.0, 0.0]
    assert high.history[-1]["programs_run"] == 0 and high.history[-1]["verdicts/TLE"] == 2
    # low coverage never runs the big test, so brute force is rewarded there
    assert CoverageReward(problems, REGIMES[0], sandbox)(completions, problem_id=ids) == [1.0, 1.0, 0.0, 0.0]
    fraction = CoverageReward(problems, REGIMES[1], sandbox, reward="fraction")(completions[:2], problem_id=ids[:2])
    assert fraction == [1.0, 0.8]  # brute passes 4 of the 5 tests


def test_grpo_run_writes_model_and_verdict_metrics(pico_init, problems_file, tmp_path):
    out = tmp_path / "checkpoints" / "high"
    assert main(train_argv(pico_init, problems_file, out)) == 0
    metrics = pd.read_csv(out / "metrics.csv")
    assert list(metrics["step"]) == [1, 2, 3]
    verdicts = metrics[[f"verdict_{v}" for v in ("AC", "WA", "TLE", "MLE", "RE", "CE")]].sum(axis=1)
    assert (verdicts == 4).all() and (metrics["completions"] == 4).all()  # 2 prompts x 2 generations
    assert (metrics["reward"] == metrics["verdict_AC"] / 4).all()  # binary reward = share accepted
    assert (metrics["verdict_CE"] >= metrics["verdict_no_code"]).all()
    assert metrics["verdict_no_code"].sum() < verdicts.sum()  # the init writes code the sandbox judged
    assert metrics["step_time_s"].notna().all() and metrics["completion_length"].gt(0).all()
    record = json.loads((out / "ewa_train.json").read_text())
    assert record["regime"] == REGIMES[1] and record["global_step"] == 3 and record["resumed_from"] is None
    # what the checkpoint's bytes depend on besides seed and config: `ewa train --threads` 1 here
    assert record["compute"] == {"torch_threads": 1, "cpu_capability": torch.backends.cpu.get_cpu_capability()}
    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.config.model_type == "qwen2"
    assert (out / "tokenizer.json").is_file() and (out / "chat_template.jinja").is_file()
    assert AutoTokenizer.from_pretrained(out).response_template  # the init's response template carries over
    assert not (out.parent / ".high.work").exists()  # checkpoints dropped once the final model is written


def test_tensorboard_gets_the_reward_curve_and_the_log_one_line_per_step(pico_init, problems_file, tmp_path, capfd):
    """`grpo.report_to: tensorboard`: TRL's own TensorBoard callback writes the run's scalars under
    logs/tensorboard/ beside results/, named by seed and regime; the log has one readable line per step, no
    raw dictionaries; the progress file ends done with the last step's reward and verdicts."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "results" / "seed0" / "checkpoints" / "high"
    settings = {**GRPO, "max_steps": 2, "report_to": "tensorboard"}
    assert main(train_argv(pico_init, problems_file, out, settings=settings)) == 0
    events = EventAccumulator(str(tmp_path / "logs" / "tensorboard" / "seed0" / "checkpoints" / "high"))
    events.Reload()
    metrics = pd.read_csv(out / "metrics.csv")
    rewards = events.Scalars("train/reward")
    assert [e.step for e in rewards] == [1, 2]
    assert [e.value for e in rewards] == pytest.approx(list(metrics["reward"]))
    assert [e.value for e in events.Scalars("train/verdicts/AC")] == list(metrics["verdict_AC"])
    assert "seed0-high" in events.Tensors("args/text_summary")[0].tensor_proto.string_val[0].decode()
    assert not [p for p in out.rglob("*") if "tfevents" in p.name]  # nothing in the model directory
    err = capfd.readouterr().err
    steps = [line for line in err.splitlines() if line.startswith("ewa train high: step ")]
    assert [line.split(" | ")[0] for line in steps] == ["ewa train high: step 1/2", "ewa train high: step 2/2"]
    assert f"reward {metrics['reward'][1]:.3f}" in steps[1] and "ETA" in steps[1] and "steps/s" in steps[1]
    assert "{'loss'" not in err and "'reward':" not in err
    record = json.loads((tmp_path / "logs" / "progress" / "seed0" / "checkpoints" / "high.json").read_text())
    assert (record["state"], record["done"], record["total"], record["job"]) == ("done", 2, 2, "train")
    assert record["info"]["last"]["reward"] == pytest.approx(metrics["reward"][1])


def test_a_bf16_run_trains_and_saves_fp32_master_weights(pico_init, problems_file, tmp_path):
    """`grpo.bf16: true` in one plain process (the one-GPU path): bf16 compute, fp32 weights, and the model
    saved is the fp32 master copy, so the task vector a merge extrapolates is not rounded to bf16."""
    from ewa.checkpoint import read_checkpoint
    from ewa.train.outcome import first_difference

    out = tmp_path / "high"
    assert main(train_argv(pico_init, problems_file, out, regime="low", settings={**GRPO, "bf16": True})) == 0
    assert {dtype for dtype, _ in read_checkpoint(out).specs.values()} == {"F32"}
    assert first_difference(pico_init, out) is not None


def test_killed_run_resumes_from_its_last_checkpoint(pico_init, problems_file, tmp_path):
    out = tmp_path / "checkpoints" / "high"
    work = tmp_path / "checkpoints" / ".high.work"
    settings = {**GRPO, "max_steps": 5}
    argv = [sys.executable, "-m", "ewa.cli", *train_argv(pico_init, problems_file, out, settings=settings)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 240
    try:
        while not (work / "checkpoint-2" / "trainer_state.json").is_file():
            assert proc.poll() is None and time.monotonic() < deadline, "training ended before checkpoint-2"
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not out.exists()  # killed: no final output that looks done
    assert main(train_argv(pico_init, problems_file, out, settings=settings)) == 0
    record = json.loads((out / "ewa_train.json").read_text())
    resumed = int(record["resumed_from"].rsplit("-", 1)[1])
    assert resumed >= 2 and record["global_step"] == 5
    assert list(pd.read_csv(out / "metrics.csv")["step"]) == [1, 2, 3, 4, 5]  # history carried over, no repeats


@pytest.mark.parametrize("change, needle", [
    ({"regime": "medium"}, "--regime: unknown regime 'medium'"),
    ({"regimes": [{"name": "low", "max_size": 0}, {"name": "high", "max_size": 10**9}], "regime": "low"},
     "selects no tests"),
    ({"settings": {**GRPO, "lr": 1}}, "unknown key 'grpo.lr'"),
    ({"settings": {**GRPO, "num_generations": 1}}, "grpo.num_generations"),
    ({"settings": {**GRPO, "bf16": True, "trl": {"model_init_kwargs": {"dtype": "bfloat16"}}}},
     "grpo.trl.model_init_kwargs: dtype bfloat16 would keep the trained weights and AdamW's moments in 16 bits"),
    ({"init": "missing"}, "--init"),
    ({"init": "no-config"}, "config.json is missing"),
])
def test_bad_input_fails_before_training(pico_init, problems_file, tmp_path, capsys, change, needle):
    import shutil

    init = pico_init
    if change.get("init") == "missing":
        init = tmp_path / "nowhere"
    elif change.get("init") == "no-config":
        init = tmp_path / "broken"
        shutil.copytree(pico_init, init)
        (init / "config.json").unlink()
    out = tmp_path / "out"
    rc = main(train_argv(init, problems_file, out, regime=change.get("regime", "high"),
                         settings=change.get("settings", GRPO), regimes=change.get("regimes", REGIMES)))
    err = capsys.readouterr().err.strip()
    assert rc == 2 and needle in err and len(err.splitlines()) == 1
    assert not out.exists() and not (tmp_path / ".out.work").exists()


def test_scale_settings_resolve_to_a_grpo_config(tmp_path):
    s = grpo_settings({"prompts_per_step": 8, "num_generations": 4})
    assert batch_shape(s, world_size=1) == (32, 1)
    assert batch_shape({**s, "per_device_train_batch_size": 4}, world_size=4) == (4, 2)
    with pytest.raises(ValueError, match="per_device_train_batch_size"):
        batch_shape({**s, "per_device_train_batch_size": 3}, world_size=2)
    config = grpo_config(s, tmp_path, seed=7)
    shape = (config.per_device_train_batch_size, config.gradient_accumulation_steps, config.num_generations)
    assert shape == (32, 1, 4)
    assert config.bf16 is False and config.use_cpu and config.seed == 7 and config.beta == s["beta"]
    assert config.logging_steps == 1 and config.save_steps == s["save_steps"] and not config.use_vllm
    scale = grpo_settings({"bf16": True, "gradient_checkpointing": True, "use_vllm": True,
                           "vllm_tensor_parallel_size": 2, "accelerate_config": "zero3",
                           "trl": {"vllm_enable_sleep_mode": True}})
    config = grpo_config(scale, tmp_path, seed=7)
    assert config.use_vllm and config.vllm_mode == "colocate" and config.vllm_tensor_parallel_size == 2
    assert config.vllm_gpu_memory_utilization == scale["vllm_gpu_memory_utilization"] and config.vllm_enable_sleep_mode
    # vLLM is colocated only: nothing would start the server a server-mode trainer waits for
    with pytest.raises(ValueError, match="unknown key 'grpo.vllm_mode'"):
        grpo_settings({"vllm_mode": "server"})
    with pytest.raises(ValueError, match="grpo.trl.vllm_mode: only colocate"):
        grpo_config({**scale, "trl": {"vllm_mode": "server"}}, tmp_path, seed=7)


@pytest.mark.parametrize("name, kind", [("zero3", "DEEPSPEED"), ("zero3_offload", "DEEPSPEED"), ("fsdp", "FSDP")])
def test_shipped_accelerate_configs_parse(name, kind):
    config = load_config_from_file(str(accelerate_config_path(name)))
    assert config.distributed_type.name == kind and config.mixed_precision == "bf16"
    if kind == "DEEPSPEED":  # the optimizer state lives on the GPUs unless the file's name says otherwise
        offload = config.deepspeed_config["offload_optimizer_device"]
        assert offload == ("cpu" if name.endswith("_offload") else "none")


def test_launch_command(tmp_path):
    argv = ["--init", "results/init", "--regime", "high"]
    plain = launch_command(argv, {"accelerate_config": None}, gpus=8, python="py")
    assert plain == ["py", "-m", "ewa.cli", "train", *argv]
    assert launch_command(argv, {"accelerate_config": "zero3"}, gpus=0, python="py") == plain  # no GPUs: plain
    cmd = launch_command(argv, {"accelerate_config": "zero3"}, gpus=8, python="py")
    assert cmd[:3] == ["py", "-m", "accelerate.commands.launch"]
    assert cmd[cmd.index("--config_file") + 1].endswith("ewa/train/accelerate/zero3.yaml")  # shipped in the package
    assert cmd[cmd.index("--num_processes") + 1] == "8" and cmd[-len(argv) - 3:] == ["-m", "ewa.cli", "train", *argv]
    offload = launch_command(argv, {"accelerate_config": "zero3_offload", "use_vllm": True}, gpus=8, python="py")
    assert offload[offload.index("--config_file") + 1].endswith("ewa/train/accelerate/zero3_offload.yaml")
    assert offload[offload.index("--num_processes") + 1] == "8"  # every GPU trains; vLLM is colocated
    custom = tmp_path / "mine.yaml"
    custom.write_text("distributed_type: MULTI_GPU\n")
    assert str(custom) in launch_command(argv, {"accelerate_config": str(custom)}, gpus=2)
    with pytest.raises(ValueError, match="grpo.accelerate_config"):
        launch_command(argv, {"accelerate_config": "zero9"}, gpus=2)

