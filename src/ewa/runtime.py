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
