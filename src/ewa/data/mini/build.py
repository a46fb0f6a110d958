"""Turn the families into Problems: one instance per parameter value, tests from tiny to large.

Every test's input starts with the instance's parameter line, which the family's shared programs read
first; the statement names the values and says so.

Expected outputs come from the efficient reference run in this process (our own trusted code). The two
public tests are chosen (deterministically, by regenerating) the way a problem setter picks examples:
every wrong variant passes the smallest, and the second exposes a wrong variant where some small input
can (a wrong variant that no small input catches fails only on hidden tests). So under `agentic` a
first attempt with the family's pitfall can get feedback that shows it, as real examples often do.

A held-out instance may be built with small inputs only (`small_inputs`): its suite stops at the
smaller half of the levels, which the brute force passes within the limits, so slow-but-correct code
solves it. That mixes problems that need the efficient algorithm with problems that do not, as a real
benchmark does.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from ewa.data.mini import arrays, dp, hashing, numbers, search, strings
from ewa.data.mini.family import (LEVELS, PUBLIC_LEVELS, Family, param_line, param_sentence, param_tag, run_source,
                                  same_output, with_reader)
from ewa.problems import Problem, make_test

FAMILIES: dict[str, Family] = {f.name: f for m in (arrays, hashing, search, numbers, dp, strings) for f in m.FAMILIES}
SPLITS = ("train", "heldout", "all")
ATTEMPTS = 200


@dataclass(frozen=True)
class Instance:
    family: Family
    params: dict
    split: str  # train | heldout

    @property
    def id(self) -> str:
        return f"mini/{self.family.name}/{param_tag(self.params)}"

    @property
    def statement(self) -> str:
        return f"{self.family.statement.format(**self.params)} {param_sentence(self.params)}"

    @property
    def solutions(self) -> dict:
        f, p = self.family, self.params
        return {"brute": with_reader(f.brute, p), "efficient": with_reader(f.efficient, p),
                "wrong": [with_reader(w, p) for w in f.wrong]}


def instances(split: str = "all", families: Sequence[str] | None = None) -> list[Instance]:
    if split not in SPLITS:
        raise ValueError(f"mini: field 'split' must be one of {', '.join(SPLITS)}, got {split!r}")
    unknown = sorted(set(families or ()) - set(FAMILIES))
    if unknown:
        raise ValueError(f"mini: field 'families' names unknown families {unknown}")
    out = []
    for name, fam in FAMILIES.items():
        if families is not None and name not in families:
            continue
        for part in ("train", "heldout"):
            if split in (part, "all"):
                out.extend(Instance(fam, dict(p), part) for p in getattr(fam, part))
    return out


@lru_cache(maxsize=None)
def _compiled(source: str):
    return compile(source, "<mini>", "exec")


def _passes(source: str, stdin: str, expected: str) -> bool:
    try:
        return same_output(run_source(_compiled(source), stdin), expected)
    except Exception:  # a wrong variant may crash (e.g. float overflow): that is a failure
        return False


def _is_example(level: int, wrong_passes: list[bool]) -> bool:
    """Whether a public test fits its place: the smallest lets every wrong variant pass; the second
    catches one (when the family has any)."""
    return all(wrong_passes) if level == 0 else not wrong_passes or not all(wrong_passes)


SMALL_LEVELS = LEVELS // 2  # the smaller half: the brute force passes every one (scripts/check_mini.py)


def build_problem(inst: Instance, seed: int = 0, small: bool = False) -> Problem:
    fam, sol = inst.family, inst.solutions
    sizes = fam.sizes(inst.params)
    assert len(sizes) == LEVELS, f"{inst.id}: sizes() must give {LEVELS} values"
    levels = SMALL_LEVELS if small else LEVELS
    tests: list = []
    for level, n in enumerate(sizes[:levels]):
        fallback = None
        for attempt in range(ATTEMPTS):
            # Seeded by the instance id too: held-out instances get their own hidden tests.
            rng = random.Random(f"mini/{seed}/{inst.id}/{level}/{attempt}")
            stdin = param_line(inst.params) + fam.gen(rng, n, inst.params, level)
            if tests and len(stdin.encode()) < tests[-1].size:
                continue  # the size order must be the level order (tiers are prefixes of it)
            expected = run_source(_compiled(sol["efficient"]), stdin)
            test = make_test(stdin, expected, public=level < PUBLIC_LEVELS)
            if level >= PUBLIC_LEVELS or _is_example(level, [_passes(w, stdin, expected) for w in sol["wrong"]]):
                break
            fallback = fallback or test
        else:
            # Level 1 is best effort (no small input catches the wrong variants: the first one then);
            # the smallest test must let every wrong variant pass.
            if level == 0 or fallback is None:
                raise RuntimeError(f"{inst.id}: no suitable test at level {level} in {ATTEMPTS} attempts")
            test = fallback
        tests.append(test)
    return Problem(
        id=inst.id, source="mini", difficulty=fam.difficulty, statement=inst.statement, testtype="stdin",
        tests=tuple(tests), time_limit_s=fam.time_limit_s, memory_limit_mb=fam.memory_limit_mb,
        meta={"family": fam.name, "topic": fam.topic, "params": dict(inst.params), "split": inst.split,
              "inputs": "small" if small else "full", "levels": list(range(levels)), "sizes": list(sizes[:levels]),
              "complexity": {"brute": fam.complexity[0], "efficient": fam.complexity[1]},
              "solutions": sol},
        judge="mini",
    )


def planned(split: str = "all", families: Sequence[str] | None = None,
            small_inputs: float = 0.0) -> list[tuple[Instance, bool]]:
    """Each instance of `split` and whether it is built with small inputs only (see build)."""
    if not 0.0 <= small_inputs <= 1.0:
        raise ValueError(f"mini: field 'small_inputs' must be between 0 and 1, got {small_inputs!r}")
    plan, rank = [], {}
    for inst in instances(split, families):
        k = rank[inst.family.name, inst.split] = rank.get((inst.family.name, inst.split), -1) + 1
        plan.append((inst, inst.split == "heldout" and k < round(small_inputs * len(inst.family.heldout))))
    return plan


def build(seed: int = 0, split: str = "all", families: Sequence[str] | None = None,
          small_inputs: float = 0.0) -> list[Problem]:
    """The mini problems of `split` (train | heldout | all), deterministic in `seed`.

    small_inputs: the share of each family's held-out instances (the first ones) built with small
    inputs only; training instances always keep the full suite, so every regime is defined on it."""
    return [build_problem(inst, seed, small) for inst, small in planned(split, families, small_inputs)]


def test_counts(split: str = "all", families: Sequence[str] | None = None,
                small_inputs: float = 0.0) -> list[tuple[str, int]]:
    """(difficulty, tests) of every problem build() would make, in its order, without running any
    reference solution: what `ewa plan` needs, in milliseconds instead of seconds."""
    return [(inst.family.difficulty, SMALL_LEVELS if small else LEVELS)
            for inst, small in planned(split, families, small_inputs)]


def corpus_texts() -> list[str]:
    """Statements of the training instances and every reference program of them (tokenizer corpus).

    Held-out instances are left out so nothing about their parameter values leaks into training."""
    texts = []
    for inst in instances("train"):
        sol = inst.solutions
        texts += [inst.statement, sol["brute"], sol["efficient"], *sol["wrong"]]
    return texts
