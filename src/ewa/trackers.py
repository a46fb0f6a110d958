"""Experiment trackers for the trainers (`grpo.report_to`, `model.sft.report_to`): TensorBoard, Weights &
Biases and trackio, passed through to transformers' `report_to` with a run name that carries the seed and
the regime (`seed0-high`, `seed0-init`). Off unless the config names one: then nothing is logged anywhere
and the trainers' outputs are what they were.

TensorBoard's event files go to `logs/tensorboard/<output under results/>` beside the workflow's results/
(`tensorboard --logdir logs/tensorboard` shows every run), never into a model directory a rule declares;
for an output elsewhere, to `<output>.tensorboard`. W&B and trackio keep their own places (WANDB_DIR,
TRACKIO_DIR); WANDB_MODE=offline logs without a network (`wandb sync` later), and trackio is local first.
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from ewa.errors import UserError

TRACKERS = {"tensorboard": ("tensorboard", "tensorboardX"), "wandb": ("wandb",), "trackio": ("trackio",)}


def trackers(value) -> list[str]:
    """The trackers a `report_to` value names, in its order ('none' or absent: none).

    >>> trackers("none"), trackers(None), trackers("tensorboard"), trackers(["wandb", "tensorboard"])
    ([], [], ['tensorboard'], ['wandb', 'tensorboard'])
    """
    if value is None or value == "none":
        return []
    names = [value] if isinstance(value, str) else list(value)
    return [n for n in dict.fromkeys(names) if n != "none"]


def missing(value, key: str) -> str | None:
    """One line naming the first tracker of `value` that is unknown or not installed here; None if all are."""
    for name in trackers(value):
        if name not in TRACKERS:
            return f"{key}: unknown tracker {name!r} (expected none or one of: {', '.join(TRACKERS)})"
        if not any(importlib.util.find_spec(module) for module in TRACKERS[name]):
            return (f"{key}: {name} is not installed in this environment (pip install {TRACKERS[name][0]}), "
                    f"or leave it out of {key}")
    return None


def check(value, key: str) -> list[str]:
    """The trackers of `value`, or UserError naming one that cannot log here."""
    if why := missing(value, key):
        raise UserError(why)
    return trackers(value)


def config_error(config: dict) -> str | None:
    """The validated config's first tracker that cannot log here, as one line (None if every one can):
    the workflow refuses it when it is parsed, before any job runs."""
    return (missing(config["grpo"].get("report_to"), "config: key 'grpo.report_to'")
            or missing(config["model"]["sft"].get("report_to"), "config: key 'model.sft.report_to'"))


def tensorboard_dir(out: str | os.PathLike) -> Path:
    """Where the run that writes `out` keeps its TensorBoard event files."""
    from ewa.progress import side_path

    return side_path(out, "tensorboard") or Path(f"{os.path.abspath(out)}.tensorboard")


def trainer_args(value, key: str, run_name: str) -> dict:
    """transformers TrainingArguments fields for `value`: report_to, and the run name when one is on."""
    names = check(value, key)
    return {"report_to": names, "run_name": run_name} if names else {"report_to": "none"}


def point_tensorboard(trainer, log_dir: Path | None) -> None:
    """Send the trainer's TensorBoard callback (present when report_to names it) to `log_dir`."""
    from transformers.integrations import TensorBoardCallback

    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, TensorBoardCallback) and log_dir is not None:
            log_dir.mkdir(parents=True, exist_ok=True)
            callback.logging_dir = str(log_dir)
