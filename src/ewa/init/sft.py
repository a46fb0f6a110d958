"""Supervised warm start of the shared init: TRL's SFTTrainer on traces of all three inference settings
built from the train problems' reference solutions (ewa.init.traces), completion-only loss.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from datasets import Dataset
from trl import SFTConfig, SFTTrainer

from ewa import progress
from ewa.init import SFT_HISTORY_FILE
from ewa.runtime import checkpointing_arg
from ewa.trackers import point_tensorboard, tensorboard_dir, trainer_args

HISTORY = {"loss": "loss", "grad_norm": "grad_norm", "learning_rate": "learning_rate",
           "token_accuracy": "mean_token_accuracy", "entropy": "entropy"}  # column <- trainer log key


def describe_step(logs: dict, step: int, max_steps: int) -> str:
    """One logging step of the warm start as a line (the numbers are in sft_metrics.csv).

    >>> describe_step({"loss": 0.03843, "grad_norm": 0.41, "learning_rate": 0.002, "mean_token_accuracy": 0.97}, 25, 900)
    'step 25/900 | loss 0.0384 | grad norm 0.41 | lr 0.002 | token accuracy 97%'
    """
    parts = [f"step {step}/{max_steps}"]
    if "loss" in logs:
        parts.append(f"loss {logs['loss']:.3g}")
    if "grad_norm" in logs:
        parts.append(f"grad norm {logs['grad_norm']:.2g}")
    if "learning_rate" in logs:
        parts.append(f"lr {logs['learning_rate']:.2g}")
    if "mean_token_accuracy" in logs:
        parts.append(f"token accuracy {logs['mean_token_accuracy']:.0%}")
    return " | ".join(parts)


def write_history(log_history: list[dict], directory: Path) -> None:
    """The loss curve, one row per logging step, as sft_metrics.csv in `directory` (the init's, before it
    is published: nothing reads it but the training figures; merges copy no metrics file)."""
    import pandas as pd

    rows = [{"step": h["step"], **{col: h.get(key) for col, key in HISTORY.items()}}
            for h in log_history if "loss" in h]
    pd.DataFrame(rows, columns=["step", *HISTORY]).to_csv(directory / SFT_HISTORY_FILE, index=False)


def run_sft(model, tokenizer, examples: list[dict], settings: dict, seed: int, history: Path | None = None) -> dict:
    """Train `model` in place on the validated `model.sft` section; returns a summary (steps, first/last
    loss) for the provenance record. `history`: a directory to write the loss curve to (sft_metrics.csv).
    Inside `ewa init` each logging step is one line and the job's progress file (ewa.progress)."""
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
            # model.sft.report_to (ewa.trackers): none unless the config names a tracker
            **trainer_args(settings.get("report_to"), "model.sft.report_to", f"seed{seed}-init"),
            seed=seed,
            data_seed=seed,
            use_cpu=not torch.cuda.is_available(),
            bf16=False,
            **checkpointing_arg(False),
            dataloader_num_workers=0,
            dataset_num_proc=None,
        )
        progress.quiet_bars()
        meter = progress.current()  # the init job's
        callbacks = [progress.trainer_callback(meter, describe_step)] if meter else []
        trainer = SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer,
                             callbacks=callbacks)
        progress.quiet_trainer(trainer)
        point_tensorboard(trainer, tensorboard_dir(meter.out) if meter and meter.out else None)
        trainer.train()
        losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
        if history is not None:
            write_history(trainer.state.log_history, Path(history))
    return {"steps": trainer.state.global_step, "examples": len(examples),
            "first_loss": losses[0] if losses else None, "last_loss": losses[-1] if losses else None}
