"""Process-wide settings a stage makes before working: torch's CPU threads and the allocator."""
from __future__ import annotations

import ctypes
import platform

from ewa.errors import UserError

# glibc's mallopt parameters (malloc.h), and values above the largest tensor of the demo's init (its logits,
# scored at once) and above what a step of it frees.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 64 << 20
TRIM_THRESHOLD = 512 << 20


def keep_freed_memory() -> bool:
    """Keep the memory torch frees in the process, for the next step's tensors. By default glibc maps each
    tensor over 32 MB afresh and hands the free top of its heap back to the kernel, so every step faults
    its pages in again, zeroed. The arithmetic is untouched, so the bytes are the same
    (docs/benchmarks.md#the-allocator). True where set (Linux glibc)."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    mallopt = ctypes.CDLL(None).mallopt
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


def configure_cpu(threads: int | None) -> None:
    """Before a stage computes: torch's threads (1 suits tiny models, which lose more to thread sync than they
    gain; None keeps torch's choice) and an allocator that keeps freed tensors' memory (keep_freed_memory)."""
    keep_freed_memory()
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
