"""Weight-space merges on an alpha grid: theta(alpha) = (1 - alpha) * theta_A + alpha * theta_B, and the
general base + sum_i c_i * (theta_i - base), streamed tensor by tensor with one pass for the whole grid.

This module stays free of torch (cheap to import); the streaming core lives in ewa.merge.stream, the
arithmetic on the CPU or a GPU in ewa.merge.blend, the command in ewa.merge.cli.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

from ewa.errors import UserError

DEFAULT_MAX_SHARD_SIZE = "2GB"
HASH_MODES = ("sampled", "full")


class MergeError(UserError):
    """Inputs that cannot be merged; the message is one line naming the directory or tensor."""


def parse_size(text: str | int) -> int:
    """Bytes in a size such as "2GB" (decimal units, as HF's max_shard_size), "512MiB" or 1000000."""
    if isinstance(text, int):
        return text
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(?:([KMGT])(i?)B?|B)?\s*", str(text), re.IGNORECASE)
    if not m:
        raise ValueError(f"max shard size {text!r}: expected a size such as 2GB, 500MB or 1GiB")
    number, unit, binary = m.groups()
    scale = (1024 if binary else 1000) ** ("KMGT".index(unit.upper()) + 1) if unit else 1
    return int(float(number) * scale)


def merge_task_arithmetic(base_dir, endpoint_dirs: Sequence, coefficient_sets: Sequence[Sequence[float]],
                          out_dirs: Sequence, device: str = "auto",
                          max_shard_bytes: int | str = DEFAULT_MAX_SHARD_SIZE, hash_mode: str = "sampled",
                          progress: bool = True) -> list[Path]:
    """theta = theta_base + sum_i c_i * (theta_i - theta_base), one output directory per coefficient set.

    All sets come from a single pass over the inputs. A set of zeros reproduces the base bit for bit, and
    a set with one 1 and zeros elsewhere reproduces that endpoint.
    """
    from ewa.merge.stream import merge

    roles = ["base", *(f"endpoint {i}" for i in range(len(endpoint_dirs)))]
    records = [{"method": "task_arithmetic", "formula": "theta_base + sum_i c_i * (theta_i - theta_base)",
                "coefficients": [float(c) for c in cs]} for cs in coefficient_sets]
    return merge(base_dir, endpoint_dirs, coefficient_sets, out_dirs, roles, records, device=device,
                 max_shard_bytes=max_shard_bytes, hash_mode=hash_mode, progress=progress)


def merge_linear(a_dir, b_dir, alphas: Sequence[float], out_dirs: Sequence, device: str = "auto",
                 max_shard_bytes: int | str = DEFAULT_MAX_SHARD_SIZE, hash_mode: str = "sampled",
                 progress: bool = True) -> list[Path]:
    """theta(alpha) = (1 - alpha) * theta_A + alpha * theta_B for every alpha (any real; 0 = A, 1 = B).

    A is the lowest-coverage regime's checkpoint, B the highest. One pass over A and B serves the whole
    grid; alphas 0 and 1 reproduce A and B bit for bit.
    """
    from ewa.merge.stream import merge

    records = [{"method": "linear", "formula": "(1 - alpha) * theta_A + alpha * theta_B", "alpha": float(a)}
               for a in alphas]
    return merge(a_dir, [b_dir], [[a] for a in alphas], out_dirs, ["A", "B"], records, device=device,
                 max_shard_bytes=max_shard_bytes, hash_mode=hash_mode, progress=progress)
