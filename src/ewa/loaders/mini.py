"""Loader for the bundled miniature problem set: generated from code in ewa.mini, no input file."""
from __future__ import annotations

from ewa.mini import build
from ewa.problems import Problem


def load(input: str | None = None, split: str = "train", seed: int = 0, **options) -> list[Problem]:
    """The mini problems of `split` (train | heldout | all); option `families` keeps only those named."""
    if input:
        raise ValueError(f"mini: field 'input' must be empty (the set is generated from code), got {input!r}")
    families = options.pop("families", None)
    if options:
        raise ValueError(f"mini: unknown option(s) {', '.join(sorted(options))} (known: families)")
    if isinstance(families, str):
        families = [families]
    return build(seed=seed, split=split, families=families)
