"""Weight-space merges on an alpha grid: theta(alpha) = (1 - alpha) * theta_A + alpha * theta_B, and the
general base + sum_i c_i * (theta_i - base), streamed tensor by tensor with one pass for the whole grid.

This module stays free of torch so that `alpha_tag` is cheap to import (e.g. from the Snakefile); the
streaming core lives in ewa.merge.stream.
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Sequence

DEFAULT_MAX_SHARD_SIZE = "2GB"
HASH_MODES = ("sampled", "full")
# Snakemake wildcard constraint matching alpha_tag's output, e.g. `wildcard_constraints: alpha=ALPHA_TAG_PATTERN`.
ALPHA_TAG_PATTERN = r"[+-]\d+\.\d\d"


class MergeError(ValueError):
    """Inputs that cannot be merged; the message is one line naming the directory or tensor."""


def alpha_tag(alpha: float) -> str:
    """Canonical signed two-decimal name of an alpha for paths and wildcards: 0.5 -> "+0.50", -1 -> "-1.00".

    Alphas that two decimals cannot name are refused, so two grid points never share a directory.
    """
    alpha = float(alpha)
    if not math.isfinite(alpha) or abs(alpha - round(alpha, 2)) > 1e-9:
        raise ValueError(f"alpha {alpha!r} needs more than two decimals; its tag would not be unique")
    return f"{round(alpha, 2) + 0.0:+.2f}"  # + 0.0 turns -0.0 into +0.00


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


def add_arguments(parser) -> None:
    parser.add_argument("a_dir", metavar="A_DIR", help="checkpoint at alpha = 0 (lowest-coverage regime)")
    parser.add_argument("b_dir", metavar="B_DIR", help="checkpoint at alpha = 1 (highest-coverage regime)")
    grid = parser.add_mutually_exclusive_group(required=True)
    grid.add_argument("--alpha", type=float, help="one alpha; output goes to --out")
    grid.add_argument("--alphas", type=float, nargs="+", metavar="ALPHA",
                      help="several alphas from one pass; outputs go to --out-pattern")
    parser.add_argument("--out", metavar="OUT_DIR", help="output model directory (with --alpha)")
    parser.add_argument("--out-pattern", metavar="PATTERN",
                        help="output directory per alpha, {alpha} replaced by its tag: results/merged/{alpha}")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                        help="where the float32 arithmetic runs (auto: CUDA when present)")
    parser.add_argument("--max-shard-size", default=DEFAULT_MAX_SHARD_SIZE,
                        help="largest output shard file, e.g. 2GB (memory use does not depend on it)")
    parser.add_argument("--hash", default="sampled", choices=HASH_MODES,
                        help="input fingerprint in ewa_merge.json: sampled blocks (fast) or sha256 of every byte")


def run(args) -> int:
    if args.alpha is not None:
        if not args.out or args.out_pattern:
            raise MergeError("--alpha needs --out OUT_DIR (and no --out-pattern)")
        alphas, out_dirs = [args.alpha], [args.out]
    else:
        if not args.out_pattern or "{alpha}" not in args.out_pattern or args.out:
            raise MergeError("--alphas needs --out-pattern containing {alpha} (and no --out)")
        alphas = args.alphas
        out_dirs = [args.out_pattern.replace("{alpha}", alpha_tag(a)) for a in alphas]
    merge_linear(args.a_dir, args.b_dir, alphas, out_dirs, device=args.device,
                 max_shard_bytes=args.max_shard_size, hash_mode=args.hash)
    for alpha, out in zip(alphas, out_dirs):
        print(f"alpha {alpha:+g}: {out}")
    return 0
