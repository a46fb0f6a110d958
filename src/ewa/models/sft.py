"""Supervised warm start of the shared init: TRL's SFTTrainer on the reference solutions of the train
problems (brute force, efficient, and wrong efficient attempts), completion-only loss.
"""
from __future__ import annotations

import tempfile
from typing import Sequence

import torch
from datasets import Dataset
from trl import SFTConfig, SFTTrainer

from ewa.problems import Problem
from ewa.prompts import code_answer, reasoning_messages

# Defaults of the `model.sft` settings (a comment per knob, nanoGPT-style).
SFT_DEFAULTS = {
    "steps": 600,  # optimizer steps (~6.6 epochs of the mini train split); 0 skips the warm start
    "learning_rate": 2e-3,  # a ~2M-parameter model from scratch needs a large rate
    "batch_size": 8,
    "warmup_ratio": 0.05,
    "weight_decay": 0.0,
    "max_length": 1024,  # prompt + completion tokens; longer examples are truncated
    # Copies of each kind of reference solution per problem. Wrong variants are there so that, as in
    # real models, an efficient attempt carries a real risk of a wrong answer.
    "mix": {"brute": 2, "efficient": 2, "wrong": 1},
    "logging_steps": 25,
}


def sft_settings(settings: dict | None) -> dict:
    settings = dict(settings or {})
    unknown = sorted(set(settings) - set(SFT_DEFAULTS))
    if unknown:
        raise ValueError(f"model.sft: unknown key {unknown[0]!r} (known: {', '.join(SFT_DEFAULTS)})")
    resolved = {**SFT_DEFAULTS, **settings}
    resolved["mix"] = {**SFT_DEFAULTS["mix"], **(settings.get("mix") or {})}
    bad = sorted(set(resolved["mix"]) - set(SFT_DEFAULTS["mix"]))
    if bad:
        raise ValueError(f"model.sft.mix: unknown kind {bad[0]!r} (known: brute, efficient, wrong)")
    return resolved


def solution_variants(problem: Problem) -> list[tuple[str, str]]:
    """(kind, source) for every reference solution a problem ships in meta['solutions']."""
    solutions = problem.meta.get("solutions") or {}
    out = [(kind, solutions[kind]) for kind in ("brute", "efficient") if solutions.get(kind)]
    out += [("wrong", src) for src in solutions.get("wrong") or []]
    return out


def sft_examples(problems: Sequence[Problem], mix: dict) -> list[dict]:
    """Conversational prompt-completion rows (TRL's format) in a fixed order; the trainer shuffles by seed."""
    rows = []
    for problem in problems:
        prompt = reasoning_messages(problem)
        for kind, source in solution_variants(problem):
            completion = [{"role": "assistant", "content": code_answer(source, kind)}]
            row = {"prompt": prompt, "completion": completion, "kind": kind, "problem_id": problem.id}
            rows += [row] * int(mix[kind])
    return rows


def run_sft(model, tokenizer, examples: list[dict], settings: dict, seed: int) -> dict:
    """Train `model` in place; returns a summary (steps, first/last loss) for the provenance record."""
    s = sft_settings(settings)
    if not examples:
        raise ValueError("model.sft: the train problems ship no reference solutions (meta.solutions) to warm-start on")
    dataset = Dataset.from_list([{"prompt": e["prompt"], "completion": e["completion"]} for e in examples])
    with tempfile.TemporaryDirectory(prefix="ewa-sft-") as work:
        config = SFTConfig(
            output_dir=work,
            max_steps=int(s["steps"]),
            per_device_train_batch_size=int(s["batch_size"]),
            learning_rate=float(s["learning_rate"]),
            lr_scheduler_type="cosine",
            warmup_steps=int(s["warmup_ratio"] * s["steps"]),
            weight_decay=float(s["weight_decay"]),
            max_length=int(s["max_length"]),
            completion_only_loss=True,
            logging_steps=int(s["logging_steps"]),
            save_strategy="no",
            report_to="none",
            seed=seed,
            data_seed=seed,
            use_cpu=not torch.cuda.is_available(),
            bf16=False,
            activation_checkpointing=False,  # the deprecated gradient_checkpointing alias warns
            dataloader_num_workers=0,
            dataset_num_proc=None,
        )
        trainer = SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer)
        trainer.train()
        losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    return {"steps": trainer.state.global_step, "examples": len(examples),
            "first_loss": losses[0] if losses else None, "last_loss": losses[-1] if losses else None}
