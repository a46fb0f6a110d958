"""The peak memory of GRPO training steps of a model shape, measured, and what `ewa plan` predicts for the
same setting.

The measurement runs in a fresh process (`python -m ewa.gpucheck.memory`), so that its peak is its own: a
random-init model of the shape, saved and loaded by TRL's GRPOTrainer with the project's GRPOConfig
(ewa.train.grpo.grpo_config) exactly as `ewa train` loads an init, and two optimizer steps (the second is
the steady state the plan describes: weights, gradients, optimizer state and reference model resident while
one micro-batch's activations live). Two substitutions keep it to the planned shape and off the sandbox:
generation is TRL's `rollout_func` returning random token ids of exactly the planned prompt and completion
lengths, and the reward is a random number.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import sys
import time
from pathlib import Path

import yaml

GB = 1e9


def plan_train(config: dict, grpo: dict, model_config: Path, prompt_tokens: int, gpu_mem_gb: float,
               work: Path) -> dict:
    """`ewa plan`'s train rule for this setting on one GPU of `gpu_mem_gb` GB: the experiment with `grpo`
    as its grpo section, the architecture of `model_config`, no profile but that GPU."""
    from ewa.plan.cli import add_plan_arguments, build_plan

    work.mkdir(parents=True, exist_ok=True)
    (work / "profile").mkdir(exist_ok=True)
    (work / "config.yaml").write_text(yaml.safe_dump({**config, "grpo": grpo}))
    (work / "profile" / "config.yaml").write_text(yaml.safe_dump(
        {"set-resources": {"train": {"gpu": 1, "gpu_mem_gb": round(gpu_mem_gb, 1)}}}))
    parser = argparse.ArgumentParser(add_help=False)
    add_plan_arguments(parser)
    args = parser.parse_args(["--configfile", str(work / "config.yaml"), "--profile", str(work / "profile"),
                              "--model-config", str(model_config), "--prompt-tokens", str(prompt_tokens)])
    plan = build_plan(args)
    train = plan["rules"]["train"]
    return {"peak_gb": train["peak_gb"], "limit_gb": train["limit_gb"], "terms_gb": train["memory_gb"],
            "refusal": train["refusal"], "parameters": plan["model"]["parameters"]}


def others_on_device() -> float:
    """GB of the GPU that others hold (other processes, and this one's context and cache): what the measured
    process finds used before it starts, so that its own share is told apart."""
    import torch

    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info()
    return (total - free) / GB


def measure_in_child(model_config: Path, tokenizer: Path, grpo: dict, prompt_tokens: int, work: Path,
                     env: dict, timeout: float, others_gb: float = 0.0) -> dict:
    """Run `measure` in a fresh interpreter with `env` (the device it sees); its JSON answer, or
    {"error": the last line it printed}."""
    import subprocess

    argv = [sys.executable, "-m", "ewa.gpucheck.memory", "--model-config", str(model_config), "--tokenizer",
            str(tokenizer), "--grpo", json.dumps(grpo), "--prompt-tokens", str(prompt_tokens), "--work", str(work),
            "--others-gb", f"{others_gb:.4f}"]
    work.mkdir(parents=True, exist_ok=True)
    run = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)
    (work / "measure.log").write_text(run.stdout + run.stderr)
    lines = run.stdout.strip().splitlines()
    if run.returncode == 0 and lines:
        return json.loads(lines[-1])
    why = (run.stderr.strip().splitlines() or lines or [f"exit status {run.returncode}"])[-1]
    return {"error": f"{why[-400:]} ({work / 'measure.log'})"}


def random_model(model_config: Path, out: Path, device: str, bf16: bool) -> int:
    """A seeded random-init model of the shape in `model_config`, built on `device` and saved to `out`;
    its parameter count (a tied head counted once)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(model_config, out / "config.json")
    config = AutoConfig.from_pretrained(out)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16 if bf16 else torch.float32)
    model.save_pretrained(out)
    return sum(p.numel() for p in model.parameters())


def peak_now(cuda: bool, others_gb: float) -> dict:
    """This process's peak: on CUDA the allocator's reserved peak plus what lives outside it (context,
    cuBLAS workspaces: the device's used memory less PyTorch's reserve and less what `others_gb` held
    before it started); on the CPU the peak RSS."""
    if not cuda:
        return {"peak_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GB, 3),
                "what": "peak RSS"}
    import torch

    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    outside = (total - free - torch.cuda.memory_reserved()) / GB - others_gb
    reserved = torch.cuda.max_memory_reserved() / GB
    return {"peak_gb": round(reserved + outside, 3), "what": "peak reserved + CUDA context",
            "max_allocated_gb": round(torch.cuda.max_memory_allocated() / GB, 3),
            "max_reserved_gb": round(reserved, 3), "outside_pytorch_gb": round(outside, 3),
            "others_gb": round(others_gb, 3), "device_total_gb": round(total / GB, 2)}


def measure(model_config: Path, tokenizer_dir: Path, grpo: dict, prompt_tokens: int, work: Path,
            others_gb: float = 0.0) -> dict:
    """Two GRPO optimizer steps of `grpo`'s setting on a random model of the shape; the peak memory."""
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOTrainer

    from ewa.config import section
    from ewa.train.grpo import batch_shape, grpo_config

    cuda = torch.cuda.is_available()
    if not cuda:
        torch.set_num_threads(1)  # as the train rule runs the tiny model
    settings = section("grpo", grpo)
    micro, _ = batch_shape(settings, 1)
    completion = settings["max_completion_length"]
    started = time.time()
    parameters = random_model(model_config, work / "model", "cuda" if cuda else "cpu", bool(settings["bf16"]))
    if cuda:
        torch.cuda.empty_cache()
    config = grpo_config(settings, work / "trainer", seed=0, world_size=1)
    config.save_strategy = "no"  # the end-of-training checkpoint comes after the measured steps
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    eos = tokenizer.eos_token_id
    special = set(tokenizer.all_special_ids)
    vocab = json.loads(model_config.read_text())["vocab_size"]  # the shape's, whatever the tokenizer's
    plain = [i for i in range(min(len(tokenizer), vocab)) if i not in special]
    rng = random.Random(0)

    def rollout(prompts, trainer):  # exactly the planned lengths, ending in EOS
        n = len(prompts)
        return {"prompt_ids": [[rng.choice(plain) for _ in range(prompt_tokens)] for _ in range(n)],
                "completion_ids": [[rng.choice(plain) for _ in range(completion - 1)] + [eos] for _ in range(n)],
                "logprobs": None}

    def random_reward(completions, **kwargs):
        return [rng.random() for _ in completions]

    class Peak(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            if cuda:  # loading and the random init are not the step's
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()

    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": f"problem {i}"}], "problem_id": f"p{i}"}
                                 for i in range(8)])
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    trainer = GRPOTrainer(model=str(work / "model"), reward_funcs=random_reward, args=config, train_dataset=dataset,
                          processing_class=tokenizer, rollout_func=rollout, callbacks=[Peak()])
    trainer.train()
    return {"device": torch.cuda.get_device_name(0) if cuda else "cpu", "parameters": parameters,
            "micro_batch": micro, "prompt_tokens": prompt_tokens, "completion_tokens": completion,
            "steps": trainer.state.global_step, "seconds": round(time.time() - started, 1), **peak_now(cuda, others_gb)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model-config", type=Path, required=True)
    p.add_argument("--tokenizer", type=Path, required=True)
    p.add_argument("--grpo", required=True, help="the grpo section (JSON)")
    p.add_argument("--prompt-tokens", type=int, required=True)
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--others-gb", type=float, default=0.0, help="GB of the GPU others held when it started")
    a = p.parse_args()
    result = measure(a.model_config, a.tokenizer, json.loads(a.grpo), a.prompt_tokens, a.work, a.others_gb)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
