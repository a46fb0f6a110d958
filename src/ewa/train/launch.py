"""The scale path's launch command: `ewa train` under `accelerate launch` with a DeepSpeed ZeRO-3 (optimizer
in GPU or host memory) or FSDP config shipped in ewa/train/accelerate/ (or your own file) when GPUs are
requested, a plain process otherwise.

Only command construction lives here (it is what runs on a GPU node); the CPU miniature never needs it.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

# Short names for the files shipped in the package; any other value is a path to an accelerate config.
ACCELERATE_CONFIGS = ("zero3", "zero3_offload", "fsdp")


def accelerate_config_path(name: str) -> Path:
    """Resolve `grpo.accelerate_config` (a short name or a path) to an existing file."""
    path = Path(__file__).parent / "accelerate" / f"{name}.yaml" if name in ACCELERATE_CONFIGS else Path(name)
    if not path.is_file():
        raise ValueError(f"grpo.accelerate_config: {name!r} is neither {' nor '.join(ACCELERATE_CONFIGS)} "
                         f"nor an existing file")
    return path


def under_launcher() -> bool:
    """True inside a process started by accelerate/torchrun (it must not relaunch itself)."""
    return "LOCAL_RANK" in os.environ


def launch_command(train_argv: list[str], settings: dict, gpus: int, python: str = sys.executable) -> list[str]:
    """argv that runs `ewa train <train_argv>`: accelerate-launched across GPUs, or plain."""
    config = settings.get("accelerate_config")
    if not config or gpus <= 0:
        return [python, "-m", "ewa.cli", "train", *train_argv]
    # one training process per GPU; a colocated vLLM (grpo.use_vllm) runs inside them
    return [python, "-m", "accelerate.commands.launch", "--config_file", str(accelerate_config_path(config)),
            "--num_processes", str(gpus), "-m", "ewa.cli", "train", *train_argv]
