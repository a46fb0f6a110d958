"""bf16 training that learns: ewa's trainer set-up (GRPOConfig from grpo_config, TRL's GRPOTrainer) with
`grpo.bf16: true` keeps fp32 parameters and AdamW moments and computes in bf16 autocast, so an update at the
paper configs' learning rate (1e-6) reaches the weights; a model loaded in bf16 (bf16 weights and moments)
rounds it away. bf16 arithmetic is the same on the CPU, so the run here is the GPU's arithmetic.
The plan's model-state terms are the bytes the trainer really holds."""
from __future__ import annotations

import random

import pytest
import torch
from datasets import Dataset
from trl import GRPOTrainer

from helpers import grpo_settings

from ewa.errors import UserError
from ewa.init.tiny import build_tiny_model, train_tokenizer
from ewa.plan import memory
from ewa.plan.model import architecture
from ewa.train.grpo import grpo_config

TINY = {"vocab_size": 300, "hidden_size": 64, "num_layers": 2, "num_heads": 4, "num_kv_heads": 2,
        "intermediate_size": 128, "max_position_embeddings": 256}
# the paper configs' learning rate, a constant schedule so that both steps apply it
SETTINGS = {"bf16": True, "learning_rate": 1e-6, "lr_scheduler_type": "constant", "warmup_steps": 0,
            "max_steps": 2, "prompts_per_step": 2, "num_generations": 2, "max_completion_length": 8, "beta": 0.0}


@pytest.fixture(scope="module")
def bf16_init(tmp_path_factory):
    """A tiny Qwen2 saved in bf16, as published checkpoints are (std 0.02 weights)."""
    out = tmp_path_factory.mktemp("bf16") / "init"
    tokenizer = train_tokenizer(["def f(x):\n    return x + 1\nprint(f(2))\n" * 20, "hello world " * 50], 300)
    build_tiny_model(tokenizer, TINY, seed=0).to(torch.bfloat16).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out, tokenizer


def train_two_steps(init, tokenizer, work, model_init_kwargs=None) -> dict:
    """Two optimizer steps of the real GRPOTrainer on ewa's config; generation replaced by TRL's rollout_func
    (fixed-length random tokens) and the reward by random numbers, so each group has a nonzero advantage."""
    config = grpo_config(grpo_settings(SETTINGS), work, seed=0)
    config.save_strategy = "no"
    if model_init_kwargs is not None:  # past grpo_config's refusal of a 16-bit dtype: the contrast
        config.model_init_kwargs = model_init_kwargs
    rng = random.Random(0)

    def rollout(prompts, trainer):
        return {"prompt_ids": [[rng.randrange(50, 250) for _ in range(6)] for _ in prompts],
                "completion_ids": [[rng.randrange(50, 250) for _ in range(7)] + [tokenizer.eos_token_id]
                                   for _ in prompts], "logprobs": None}

    def reward(completions, **kwargs):
        return [rng.random() for _ in completions]

    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": f"problem {i}"}]} for i in range(4)])
    trainer = GRPOTrainer(model=str(init), reward_funcs=reward, args=config, train_dataset=dataset,
                          processing_class=tokenizer, rollout_func=rollout)
    trained = trainer.model.model.layers[0].mlp.up_proj
    before = trained.weight.detach().clone()
    computed = []
    trained.register_forward_hook(lambda module, args, out: computed.append(out.dtype))
    trainer.train()
    optimizer = trainer.optimizer.optimizer if hasattr(trainer.optimizer, "optimizer") else trainer.optimizer
    state = [v for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v) and v.dim() > 0]
    return {"changed": (trained.weight.detach() != before).float().mean().item(),
            "weight_dtype": trained.weight.dtype, "compute_dtypes": set(computed),
            "mixed_precision": trainer.accelerator.mixed_precision,
            "weight_bytes": sum(p.numel() * p.element_size() for p in trainer.model.parameters()),
            "optimizer_bytes": sum(v.numel() * v.element_size() for v in state)}


def test_bf16_at_lr_1e_6_changes_the_weights_it_trains(bf16_init, tmp_path):
    init, tokenizer = bf16_init
    run = train_two_steps(init, tokenizer, tmp_path / "master")
    assert run["mixed_precision"] == "bf16" and run["compute_dtypes"] == {torch.bfloat16}  # computes in bf16
    assert run["weight_dtype"] == torch.float32 and run["changed"] > 0.99
    # The contrast: bf16 parameters (and so bf16 AdamW moments) keep ~98% of the elements where they were
    pure = train_two_steps(init, tokenizer, tmp_path / "pure", {"dtype": "bfloat16"})
    assert pure["weight_dtype"] == torch.bfloat16 and pure["changed"] < 0.1

    # `ewa plan`'s terms for each are what the trainer held: 4 + 8 bytes per parameter with fp32 weights and
    # moments, 2 + 4 with bf16 ones
    arch = architecture({"init": str(init)})
    for held, measured in ((memory.precision(memory.NO_SHARDING, bf16=True), run), (memory.PURE_BF16, pure)):
        states = memory.model_states(arch, memory.NO_SHARDING, 1, held, reference=False)
        assert (states["weights"], states["optimizer"]) == (measured["weight_bytes"], measured["optimizer_bytes"])


def test_a_passthrough_that_loads_bf16_parameters_is_refused(tmp_path):
    for dtype in ("bfloat16", "auto", "float16"):
        refusal = f"^grpo.trl.model_init_kwargs: dtype {dtype} would keep the trained weights"
        with pytest.raises(UserError, match=refusal):
            grpo_config(grpo_settings({**SETTINGS, "trl": {"model_init_kwargs": {"dtype": dtype}}}), tmp_path, seed=0)
    config = grpo_config(grpo_settings({**SETTINGS, "trl": {"model_init_kwargs": {"dtype": "float32"}}}), tmp_path, 0)
    assert config.model_init_kwargs == {"dtype": "float32"} and config.bf16


def test_fsdp2_bf16_mixed_precision_keeps_fp32_shards(bf16_init, tmp_path):
    """The `fsdp` config's path: FSDP2 (torch's fully_shard, one gloo rank on the CPU; accelerate runs FSDP only
    on an accelerator) with bf16 mixed precision over the model as ewa loads it (fp32) shards fp32 parameters,
    computes in bf16, and AdamW's moments are fp32: the update at lr 1e-6 lands. (accelerate 1.15's
    fsdp2_prepare_model also upcasts any bf16 trainable parameter to fp32 before sharding.)"""
    import torch.distributed as dist
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from transformers import AutoModelForCausalLM

    init, _ = bf16_init
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        model = AutoModelForCausalLM.from_pretrained(init, dtype="float32")  # grpo_config's model_init_kwargs
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16)
        for layer in model.model.layers:
            fully_shard(layer, mp_policy=policy)
        fully_shard(model, mp_policy=policy)
        trained = model.model.layers[0].mlp.up_proj
        before = trained.weight.full_tensor().clone()
        computed = []
        trained.register_forward_hook(lambda module, args, out: computed.append(out.dtype))
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
        ids = torch.randint(50, 250, (2, 16), generator=torch.Generator().manual_seed(0))
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        moments = {v.dtype for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v) and v.dim()}
        assert type(trained.weight).__name__ == "DTensor" and trained.weight.dtype == torch.float32
        assert computed == [torch.bfloat16] and moments == {torch.float32}
        assert (trained.weight.full_tensor() != before).float().mean().item() > 0.99
    finally:
        dist.destroy_process_group()
