"""Loader for the bundled miniature problem set: generated from code in ewa.data.mini, no input file."""
from __future__ import annotations

from ewa.data.mini import build
from ewa.problems import Problem


def load(input: str | None = None, split: str = "train", seed: int = 0, **options) -> list[Problem]:
    """The mini problems of `split` (train | heldout | all); option `families` keeps only those named,
    `small_inputs` (0-1) builds that share of each family's held-out instances with small inputs only."""
    if input:
        raise ValueError(f"mini: field 'input' must be empty (the set is generated from code), got {input!r}")
    families = options.pop("families", None)
    small_inputs = options.pop("small_inputs", 0.0)
    if options:
        raise ValueError(f"mini: unknown option(s) {', '.join(sorted(options))} (known: families, small_inputs)")
    if isinstance(families, str):
        families = [families]
    return build(seed=seed, split=split, families=families, small_inputs=small_inputs)
