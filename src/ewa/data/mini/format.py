"""The miniature as a format: its problems generated from code (no input), judged as ewa judges, counted
for `ewa plan` from the family definitions, and its reference programs the corpus a tokenizer built from
scratch learns from."""
from __future__ import annotations

from ewa.formats import Format, PlanHints
from ewa.sandbox.semantics import own

SPLIT_HELP = "train | heldout | all"


def records(input: str | None = None, skip_invalid: bool = False, **options):
    from ewa.data.mini.loader import load

    return load(input, **options)


def count(entry: dict, seed: int) -> tuple[int, float]:
    """Counted from the family definitions: nothing is generated or run."""
    from ewa.data.mini.build import test_counts

    wanted = {d.lower() for d in entry.get("difficulty") or ()}
    counts = [tests for difficulty, tests in test_counts(entry["split"], None, entry.get("small_inputs", 0.0))
              if not wanted or difficulty.lower() in wanted][:entry.get("limit")]
    return len(counts), sum(counts) / max(1, len(counts))


def corpus():
    from ewa.data.mini.build import corpus_texts

    return corpus_texts()


FORMAT = Format(
    name="mini",
    description="the bundled miniature: stdin/stdout families whose brute force is correct but too slow",
    records=records,
    input="none",
    splits=("train", "heldout", "all"),
    options={
        "small_inputs": {
            "type": "number", "minimum": 0, "maximum": 1,
            "description": "Share of each family's held-out instances whose hidden suite has small inputs only "
                           "(the smaller half of the levels, which a brute force passes), so slow-but-correct "
                           "code solves them. 0 (the default): every problem needs the efficient algorithm."},
    },
    semantics=(own("mini", "1", "program as written; stdout tokens, real numbers within float_tol"),),
    min_python=(3, 8),
    plan=PlanHints(count=count),
    corpus=corpus,
)
