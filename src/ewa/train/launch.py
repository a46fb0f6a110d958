"""The scale path's launch command: `ewa train` under `accelerate launch` with a DeepSpeed ZeRO-3 or FSDP
config shipped in ewa/train/accelerate/ (or your own file) when GPUs are requested, a plain process otherwise.

Only command construction lives here (it is what runs on a GPU node); the CPU miniature never needs it.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

# Short names for the files shipped in the package; any other value is a path to an accelerate config.
ACCELERATE_CONFIGS = ("zero3", "fsdp")


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


def training_processes(settings: dict, gpus: int) -> int:
    """vLLM server mode keeps `vllm_server_gpus` of the node for the server; the rest train."""
    if settings.get("use_vllm") and settings.get("vllm_mode") == "server":
        return gpus - int(settings.get("vllm_server_gpus") or 0)
    return gpus


def launch_command(train_argv: list[str], settings: dict, gpus: int, python: str = sys.executable) -> list[str]:
    """argv that runs `ewa train <train_argv>`: accelerate-launched across GPUs, or plain."""
    config = settings.get("accelerate_config")
    if not config or gpus <= 0:
        return [python, "-m", "ewa.cli", "train", *train_argv]
    processes = training_processes(settings, gpus)
    if processes < 1:
        raise ValueError(f"grpo.vllm_server_gpus: leaves {processes} of {gpus} GPUs for training")
    return [python, "-m", "accelerate.commands.launch", "--config_file", str(accelerate_config_path(config)),
            "--num_processes", str(processes), "-m", "ewa.cli", "train", *train_argv]


def vllm_server_command(init: str, settings: dict) -> list[str]:
    """`trl vllm-serve` for vllm_mode=server; start it on the GPUs the trainers do not use."""
    return ["trl", "vllm-serve", "--model", str(init),
            "--tensor-parallel-size", str(settings.get("vllm_tensor_parallel_size") or 1),
            "--port", str(settings.get("vllm_server_port") or 8000)]
