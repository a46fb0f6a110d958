"""Process-wide settings a stage makes before working: torch's CPU threads."""
from __future__ import annotations

from ewa.errors import UserError


def set_threads(threads: int | None) -> None:
    """1 suits tiny models (they lose more to thread sync than they gain); None keeps torch's choice."""
    if threads is None:
        return
    if threads < 1:
        raise UserError(f"--threads: must be at least 1, got {threads}")
    import torch

    torch.set_num_threads(threads)


def compute_record() -> dict:
    """What a trained model's bytes depend on besides seed and config: torch's CPU threads and the vector
    instructions its kernels use. Where torch splits a reduction across threads (AVX-512 builds), one and
    two threads round differently, so the same seed gives other bytes (docs/benchmarks.md#make-science-the-inits-side-by-side)."""
    import torch

    return {"torch_threads": torch.get_num_threads(), "cpu_capability": torch.backends.cpu.get_cpu_capability()}


def checkpointing_arg(enabled: bool) -> dict:
    """The trainer argument that turns activation checkpointing on or off: transformers >= 5.18 names it
    activation_checkpointing (the old name warns); the GPU set's 5.17, which vLLM needs, only knows
    gradient_checkpointing."""
    import dataclasses

    from transformers import TrainingArguments

    names = {f.name for f in dataclasses.fields(TrainingArguments)}
    return {"activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing": enabled}
