"""Supervised warm start of the shared init: TRL's SFTTrainer on traces of all three inference settings
built from the train problems' reference solutions (ewa.init.traces), completion-only loss.
"""
from __future__ import annotations

import tempfile
import torch
from datasets import Dataset
from trl import SFTConfig, SFTTrainer

from ewa.runtime import checkpointing_arg


def run_sft(model, tokenizer, examples: list[dict], settings: dict, seed: int) -> dict:
    """Train `model` in place on the validated `model.sft` section; returns a summary (steps, first/last
    loss) for the provenance record."""
    if not examples:
        raise ValueError("model.sft: the train problems ship no reference solutions (meta.solutions) to warm-start on")
    dataset = Dataset.from_list([{k: e[k] for k in ("prompt", "completion", "tools")} for e in examples])
    with tempfile.TemporaryDirectory(prefix="ewa-sft-") as work:
        config = SFTConfig(
            output_dir=work,
            max_steps=int(settings["steps"]),
            per_device_train_batch_size=int(settings["batch_size"]),
            learning_rate=float(settings["learning_rate"]),
            lr_scheduler_type="cosine",
            warmup_steps=int(settings["warmup_ratio"] * settings["steps"]),
            weight_decay=float(settings["weight_decay"]),
            max_length=int(settings["max_length"]),
            completion_only_loss=True,
            assistant_only_loss=True,  # within a completion, not the tool outputs between assistant turns
            # Batches of similar length: tool-use rows are much longer than reasoning rows, and padding a
            # batch to its longest row would multiply the step time.
            train_sampling_strategy="group_by_length",
            logging_steps=int(settings["logging_steps"]),
            save_strategy="no",
            report_to="none",
            seed=seed,
            data_seed=seed,
            use_cpu=not torch.cuda.is_available(),
            bf16=False,
            **checkpointing_arg(False),
            dataloader_num_workers=0,
            dataset_num_proc=None,
        )
        trainer = SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer)
        trainer.train()
        losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    return {"steps": trainer.state.global_step, "examples": len(examples),
            "first_loss": losses[0] if losses else None, "last_loss": losses[-1] if losses else None}
