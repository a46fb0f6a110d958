"""Matched-budget ensembles over the alpha grid: spend B samples per problem across several merged
checkpoints (b_i from alpha i, sum b_i = B) and estimate pass@B from the pooled samples.

For one problem, drawing b_i of alpha i's n_i judged samples without replacement misses every AC with
probability C(n_i - c_i, b_i) / C(n_i, b_i), an unbiased estimate of (1 - p_i)^b_i. The estimator
pass@B = 1 - prod_i C(n_i - c_i, b_i) / C(n_i, b_i), averaged over problems, multiplies these.

Assumption: the samples of different checkpoints are independent draws (given the problem). Then the
factors are independent, the expectation of their product is the product of (1 - p_i)^b_i, and the
estimate is unbiased for the pass rate of an ensemble that draws b_i fresh samples from each alpha.
If draws are positively correlated across alphas (samples that share their random numbers, as when a
sample's seed did not depend on the alpha), alphas succeed and fail together, the factors covary, and
the expected product exceeds the product of expectations: the estimate is biased low, against
ensembles (tests/test_ensemble.py measures both). A single checkpoint is the special case of one
b_i = B (it is estimable only while B <= n_i) and needs no assumption.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ewa.alphas import alpha_tag
from ewa.analysis.bootstrap import (CLUSTER_BY, bootstrap_counts, clusters_of, design_effect, weighted_means,
                                    weighted_samples)
from ewa.analysis.metrics import miss_probability, pass_at_k_or_nan

NO_ENSEMBLE = "no ensemble chosen"  # the dev split put the whole budget on one alpha: nothing to compare
TIE = 1e-12  # values this close are equal: preferred() decides between them


@dataclass(frozen=True)
class EnsembleSettings:
    """The ensembles' knobs; `ewa frontier` fills them from the config's `evaluate` section and `seed`."""
    budgets: tuple[int, ...] | None  # samples per problem; None = the smallest sample count n
    windows: tuple[int, ...]  # widths of contiguous alpha windows mixed uniformly
    dev_fraction: float  # share of families the allocation (and the best single) is chosen on
    seed: int  # dev/test split and bootstrap
    bootstrap: int  # resamples of problems for the CIs; 0 disables them
    ci: float  # percentile interval coverage
    cluster_by: str  # what the bootstrap resamples: "family" (a problem without one is its own) or "problem"
    # 0: one dev/test split (dev_fraction). K >= 2: cross-fitting over K family folds, each scored by the
    # choices made on the other K - 1, so every problem is scored and none by a choice that saw its family
    folds: int = 0

    def __post_init__(self):
        if self.cluster_by not in CLUSTER_BY:
            raise ValueError(f"cluster_by must be one of {', '.join(CLUSTER_BY)}, got {self.cluster_by!r}")
        if self.budgets is not None and any(b < 1 for b in self.budgets):
            raise ValueError(f"budgets must be >= 1, got {self.budgets}")
        if not 0 < self.dev_fraction < 1:
            raise ValueError(f"dev_fraction must be in (0, 1), got {self.dev_fraction}")
        if self.folds == 1 or self.folds < 0:
            raise ValueError(f"folds must be 0 (one dev/test split) or at least 2, got {self.folds}")


def ensemble_pass(n: np.ndarray, c: np.ndarray, allocation) -> np.ndarray:
    """Per-problem chance that pooled draws (allocation[i] from alpha i) contain an AC.

    n, c: (P, A) sample and AC counts per problem and alpha. Raises ValueError if some b_i > n_i.
    Unbiased for the ensemble's pass rate only if samples of different alphas are independent draws
    (module docstring); with positively correlated draws it underestimates it.
    """
    n, c = np.asarray(n), np.asarray(c)
    allocation = np.asarray(allocation, dtype=np.int64)
    if allocation.shape != (n.shape[1],):
        raise ValueError(f"allocation has {allocation.size} entries for {n.shape[1]} alphas")
    return 1.0 - miss_probability(n, c, allocation[None, :]).prod(axis=1)


def uniform_allocation(budget: int, m: int) -> np.ndarray:
    """Split `budget` as evenly as possible over m checkpoints; the remainder goes to evenly spaced
    members rather than the first ones, so no end of the alpha range is favoured."""
    alloc = np.full(m, budget // m, dtype=np.int64)
    r = budget % m
    alloc[((np.arange(r) + 0.5) * m / r).astype(np.int64) if r else []] += 1
    return alloc


def _miss_tables(n: np.ndarray, c: np.ndarray, max_b: int) -> np.ndarray:
    """T[p, a, b] = C(n-c, b)/C(n, b) for b = 0..max_b; NaN where b exceeds that n."""
    b = np.arange(max_b + 1)[None, None, :]
    T = miss_probability(n[:, :, None], c[:, :, None], np.minimum(b, n[:, :, None]))
    T[np.broadcast_to(b > n[:, :, None], T.shape)] = np.nan
    return T


def _compositions(budget: int, cap: np.ndarray, limit: int) -> np.ndarray | None:
    """Every allocation (b_1..b_A), 0 <= b_i <= cap_i, summing to budget; None if more than limit."""
    if math.comb(budget + len(cap) - 1, len(cap) - 1) > limit:
        return None
    out = []

    def rec(prefix, left, i):
        if i == len(cap) - 1:
            if left <= cap[i]:
                out.append(prefix + [left])
            return
        for b in range(min(left, cap[i]) + 1):
            rec(prefix + [b], left - b, i + 1)

    rec([], budget, 0)
    return np.array(out, dtype=np.int64).reshape(-1, len(cap))


def optimize_allocation(n: np.ndarray, c: np.ndarray, budget: int, step: int | None = None,
                        exhaustive_limit: int = 20000) -> np.ndarray:
    """Integer allocation of `budget` over the alphas maximising mean pass@budget on these problems.

    Exact (every allocation scored) while there are at most `exhaustive_limit` of them. Otherwise local
    search (move `step` samples between two alphas while it helps, halving the step down to 1) started
    from a greedy build-up, the uniform split and the best single checkpoint; the best result is
    returned, so it is never worse on these problems than the uniform split or the best single.
    Among allocations that tie, preferred() decides: a mixture is chosen only when it beats every simpler
    one (a tie with a single alpha is no reason to call the choice an ensemble).
    """
    n, c = np.asarray(n, dtype=np.int64), np.asarray(c, dtype=np.int64)
    P, A = n.shape
    cap = n.min(axis=0)  # b_i may not exceed any problem's sample count for alpha i
    if cap.sum() < budget:
        raise ValueError(f"budget {budget} exceeds the {cap.sum()} samples available per problem")
    T = _miss_tables(n, c, int(min(budget, cap.max())))
    rows = np.arange(P)

    def value(alloc):
        return 1.0 - T[rows[:, None], np.arange(A)[None, :], alloc[None, :]].prod(axis=1).mean()

    def greedy(s):
        alloc = np.zeros(A, dtype=np.int64)
        while (left := budget - alloc.sum()) > 0:
            inc = np.minimum(min(s, left), cap - alloc)  # what each alpha can still take
            cands = np.flatnonzero(inc > 0)
            gains = [value(alloc + inc[a] * (np.arange(A) == a)) for a in cands]
            a = cands[int(np.argmax(gains))]
            alloc[a] += inc[a]
        return alloc

    def local_search(alloc, s):
        best = value(alloc)
        while s >= 1:
            G = T[rows[:, None], np.arange(A)[None, :], alloc[None, :]]  # (P, A) current misses
            move, move_value = None, best
            for i in np.flatnonzero(alloc >= s):
                # take s from alpha i, give s to every feasible j at once
                Gi = G.copy()
                Gi[:, i] = T[:, i, alloc[i] - s]
                js = np.flatnonzero((np.arange(A) != i) & (alloc + s <= cap))
                if not js.size:
                    continue
                trial = np.repeat(Gi[None], js.size, axis=0)
                trial[np.arange(js.size), :, js] = T[:, js, alloc[js] + s].T
                vals = 1.0 - trial.prod(axis=2).mean(axis=1)
                j = int(np.argmax(vals))
                if vals[j] > move_value + 1e-12:
                    move, move_value = (i, js[j]), vals[j]
            if move is None:
                s //= 2
                continue
            alloc = alloc.copy()
            alloc[move[0]] -= s
            alloc[move[1]] += s
            best = move_value
        return alloc, best

    grid = _compositions(budget, cap, exhaustive_limit)
    if grid is not None:
        values = np.concatenate([
            1.0 - T[rows[None, :, None], np.arange(A)[None, None, :], g[:, None, :]].prod(axis=2).mean(axis=1)
            for g in np.array_split(grid, max(1, len(grid) * P * A // 2_000_000))])
        return preferred(list(grid), values)
    step = step or max(1, budget // 16)
    starts = [greedy(step)]
    uni = uniform_allocation(budget, A)
    if np.all(uni <= cap):
        starts.append(uni)
    singles = [budget * (np.arange(A) == a) for a in range(A) if cap[a] >= budget]
    if singles:
        starts.append(preferred(singles, [value(s) for s in singles]))
    results = [local_search(s.astype(np.int64), step) for s in starts]
    return preferred([r[0] for r in results], np.array([r[1] for r in results]))


def preferred(allocations: list[np.ndarray], values) -> np.ndarray:
    """The allocation with the highest value. The one tie rule of every choice among alphas (the best
    single, the oracle, the dev-selected single and the optimised allocation): among values within TIE
    of the best, the allocation over the fewest alphas, then the one with the most samples on the lowest
    alpha (between singles: the lowest alpha), so a single alpha and an allocation that ties it agree."""
    values = np.asarray(values, dtype=np.float64)
    tied = np.flatnonzero(values >= np.nanmax(values) - TIE)
    return allocations[min(tied, key=lambda i: (np.count_nonzero(allocations[i]), tuple(-allocations[i])))]


def best_single(n: np.ndarray, c: np.ndarray, budget: int, cap: np.ndarray | None = None) -> int | None:
    """The alpha whose `budget` samples alone score the highest mean pass@budget on these problems (ties:
    preferred()); only alphas with cap >= budget samples (default: on every one of these problems) count.
    None when no alpha has enough samples."""
    A = n.shape[1]
    cap = n.min(axis=0) if cap is None else cap
    singles = [budget * (np.arange(A) == a) for a in range(A) if cap[a] >= budget]
    if not singles:
        return None
    return int(np.argmax(preferred(singles, [ensemble_pass(n, c, s).mean() for s in singles])))


def headroom(n: np.ndarray, c: np.ndarray, single: int | None, clusters, budget: int) -> dict:
    """What an ensemble of `budget` samples could add over one single alpha on these problems.

    headroom_at_budget: sum over problems of (the best alpha's pass@budget on that problem minus the
    single's), the most problems any allocation could add: an allocation's estimated miss probability,
    prod_i C(n-c_i, b_i)/C(n, b_i), is at least the smallest C(n-c_i, B)/C(n, B) (each log factor is concave
    in b_i and 0 at b_i = 0). headroom_problems (and _clusters): the problems some alpha solves (an AC
    among its samples) and the single does not; at budget = n the two counts are equal.
    """
    n, c = np.asarray(n), np.asarray(c)
    clusters = np.asarray(clusters).astype(str)
    solved = c > 0
    some = solved.any(axis=1)
    by_single = solved[:, single] if single is not None else np.zeros(len(solved), dtype=bool)
    room = some & ~by_single
    reach = np.stack([pass_at_k_or_nan(n[:, a], c[:, a], budget) for a in range(n.shape[1])], axis=1)
    reach = np.where(np.isnan(reach), solved.astype(np.float64), reach)  # too few samples: as solved as seen
    best = reach.max(axis=1) if len(reach) else np.zeros(0)
    gap = best - (reach[:, single] if single is not None else 0.0)
    return {"n_problems": int(len(solved)), "n_clusters": int(len(set(clusters))),
            "solved_by_some_alpha": int(some.sum()), "solved_by_single": int(by_single.sum()),
            "headroom_at_budget": round(float(gap.sum()), 6), "headroom_problems": int(room.sum()),
            "headroom_clusters": int(len(set(clusters[room])))}


def _uniform_sets(alphas: np.ndarray, windows) -> list[tuple[str, str, list[int]]]:
    """(kind, name, alpha indices) for the uniform mixtures worth comparing; sets of one are singles."""
    inside = (alphas > 1e-9) & (alphas < 1 - 1e-9)
    endpoint = np.isclose(alphas, 0.0) | np.isclose(alphas, 1.0)
    named = [("uniform all", np.ones_like(inside)), ("uniform endpoints", endpoint),
             ("uniform interpolated", inside), ("uniform [0,1]", inside | endpoint),
             ("uniform extrapolated", ~(inside | endpoint))]
    sets, seen = [], set()
    for name, mask in named:
        idx = tuple(np.flatnonzero(mask))
        if len(idx) >= 2 and idx not in seen:
            seen.add(idx)
            sets.append(("uniform", name, list(idx)))
    for w in windows:
        for start in range(len(alphas) - w + 1):
            idx = tuple(range(start, start + w))
            if idx not in seen:
                seen.add(idx)
                sets.append(("window", f"window {alpha_tag(alphas[start])}..{alpha_tag(alphas[start + w - 1])}", list(idx)))
    return sets


def _row(kind, name, alphas, alloc, budget, split, n, c):
    """One candidate: its per-problem pass@budget (or None with a note when not estimable)."""
    used = np.flatnonzero(alloc)
    cap = n.min(axis=0)
    note = ""
    over = [i for i in used if alloc[i] > cap[i]]
    if over:
        x = None
        note = "; ".join(f"not estimable: {alloc[i]} samples of alpha {alpha_tag(alphas[i])} > n={cap[i]}" for i in over)
    else:
        x = ensemble_pass(n, c, alloc)
    return {"budget": budget, "split": split, "kind": kind, "ensemble": name,
            "alphas": " ".join(alpha_tag(alphas[i]) for i in used),
            "allocation": " ".join(f"{alpha_tag(alphas[i])}:{alloc[i]}" for i in used),
            "n_problems": len(n), "note": note, "_x": x}


def _finish(rows: list[dict], reference: dict | None, boots, ci) -> list[dict]:
    """Add pass_at_budget and gain over the reference single, with paired bootstrap CIs (one matrix
    product for all rows: every row is resampled on the same draws), and the gain's design effect.
    boots: (cluster resamples, problem resamples), or None without resamples."""
    ref = reference["_x"] if reference and reference.get("_x") is not None else None
    xs = [r.pop("_x") for r in rows]
    done = [i for i, x in enumerate(xs) if x is not None]
    boot, independent = boots or (None, None)
    if done:
        X = np.stack([xs[i] for i in done], axis=1)
        X = np.concatenate([X, X - ref[:, None] if ref is not None else np.full_like(X, np.nan)], axis=1)
        ones = np.ones_like(X)
        v, lo, hi = weighted_means(X, ones, boot, ci)
        deff = (design_effect(weighted_samples(X, ones, boot), weighted_samples(X, ones, independent))
                if boot is not None else np.full(X.shape[1], np.nan))
    for r in rows:
        r.update(reference=reference["ensemble"] if reference else "", pass_at_budget=np.nan,
                 pass_at_budget_lo=np.nan, pass_at_budget_hi=np.nan, gain_vs_best_single=np.nan,
                 gain_lo=np.nan, gain_hi=np.nan, gain_design_effect=np.nan)
    for j, i in enumerate(done):
        g = j + len(done)
        rows[i].update(pass_at_budget=v[j], pass_at_budget_lo=lo[j], pass_at_budget_hi=hi[j],
                       gain_vs_best_single=v[g], gain_lo=lo[g], gain_hi=hi[g], gain_design_effect=deff[g])
        if ref is None and not rows[i]["note"]:
            rows[i]["note"] = "no single checkpoint is estimable at this budget"
    return rows


def dev_test_split(families, dev_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Problem indices of the dev and test parts, split by family: sibling instances of one family are
    near-duplicates, so a family on both sides would let the dev choice peek at test problems.

    families: one label per problem (a problem without a family is its own). Deterministic in seed and
    independent of the problems' order (families are shuffled from their sorted order). With two or
    more families each side gets at least one.
    """
    names, family_of = np.unique(np.asarray(families), return_inverse=True)  # sorted labels
    order = np.random.default_rng(seed).permutation(len(names))
    n_dev = int(round(len(names) * dev_fraction))
    if len(names) >= 2:
        n_dev = min(max(n_dev, 1), len(names) - 1)
    in_dev = np.isin(family_of.ravel(), order[:n_dev])
    return np.flatnonzero(in_dev), np.flatnonzero(~in_dev)


def _boots(clusters, settings: EnsembleSettings, seed: int):
    """(cluster resamples, problem resamples) of these problems for the CIs and the design effect."""
    if not settings.bootstrap or not len(clusters):
        return None
    return (bootstrap_counts(clusters, settings.bootstrap, seed),
            bootstrap_counts(len(clusters), settings.bootstrap, seed))


def family_folds(families, k: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(choose-on, score-on) problem indices of K folds of whole families, each fold scored once by the
    rest: families are dealt round-robin from a seeded shuffle of their sorted labels, so the folds
    differ in size by at most one family. K is capped at the number of families."""
    names, family_of = np.unique(np.asarray(families), return_inverse=True)
    family_of = family_of.ravel()
    fold_of = np.empty(len(names), dtype=np.int64)
    fold_of[np.random.default_rng(seed).permutation(len(names))] = np.arange(len(names)) % max(1, min(k, len(names)))
    return [(np.flatnonzero(fold_of[family_of] != f), np.flatnonzero(fold_of[family_of] == f))
            for f in range(min(k, len(names))) if len(names) >= 2]


def choice_pairs(labels, folds: int, dev_fraction: float, seed: int):
    """The (dev, test) pairs of problem indices, split by family label (one dev_fraction split, or `folds`
    folds), and every problem they score (sorted). A pair with an empty side is dropped."""
    if folds:
        pairs = family_folds(labels, folds, seed)
    else:
        pairs = [dev_test_split(labels, dev_fraction, seed)]
    pairs = [(dev, test) for dev, test in pairs if len(dev) and len(test)]
    test = np.sort(np.concatenate([t for _, t in pairs])) if pairs else np.zeros(0, dtype=np.int64)
    return pairs, test


def _parts(P: int, families, settings: EnsembleSettings):
    """choice_pairs of these problems, and every problem's bootstrap cluster."""
    if families is not None and len(families) != P:
        raise ValueError(f"{len(families)} family labels for {P} problems")
    clusters = clusters_of(np.arange(P), families, settings.cluster_by)
    labels = np.arange(P) if families is None else families
    return (*choice_pairs(labels, settings.folds, settings.dev_fraction, settings.seed), clusters)


def fold_text(parts: list[str]) -> str:
    """One choice per fold, joined; one text when every fold made the same choice."""
    return parts[0] if len(set(parts)) == 1 else " | ".join(parts)


def is_ensemble(allocation: str) -> bool:
    """Whether an allocation text ("alpha:b ...", per fold joined by " | ") puts samples on two or more
    alphas in some fold: a single alpha is no ensemble."""
    return any(len(part.split()) >= 2 for part in allocation.split("|"))


def matched_budget_table(n: np.ndarray, c: np.ndarray, alphas, settings: EnsembleSettings,
                         families=None) -> pd.DataFrame:
    """Every single checkpoint and mixture at each budget: one row per (budget, split, ensemble).

    split 'all': singles, uniform mixtures and alpha windows on every problem; the gain is over the
    oracle best single (chosen on the same problems, which favours the single).
    split 'test': the allocation optimised on a seeded dev part and the single best on dev, both
    evaluated on the held-out problems; the gain is over that dev-selected single, and there is none
    (NO_ENSEMBLE) when the allocation is one alpha. The parts are split by `families` (one label per
    problem; None: every problem its own family), and CIs resample the clusters of settings.cluster_by.
    """
    n, c = np.asarray(n, dtype=np.int64), np.asarray(c, dtype=np.int64)
    alphas = np.asarray(alphas, dtype=np.float64)
    P, A = n.shape
    budgets = settings.budgets or (int(n.min()),)
    pairs, test, clusters = _parts(P, families, settings)
    boot_all = _boots(clusters, settings, settings.seed)
    boot_test = _boots(clusters[test], settings, settings.seed + 1)
    out = []
    for B in budgets:
        singles = [_row("single", f"single {alpha_tag(a)}", alphas, B * (np.arange(A) == i), B, "all", n, c)
                   for i, a in enumerate(alphas)]
        best = best_single(n, c, B)
        oracle = None if best is None else {**singles[best], "kind": "best_single_oracle",
                                            "ensemble": f"best single (oracle) {alpha_tag(alphas[best])}"}
        rows = singles + ([oracle] if oracle else [])
        for kind, name, idx in _uniform_sets(alphas, settings.windows):
            alloc = np.zeros(A, dtype=np.int64)
            alloc[idx] = uniform_allocation(B, len(idx))
            row = _row(kind, name, alphas, alloc, B, "all", n, c)
            if B < len(idx):
                row["note"] = (row["note"] + "; " if row["note"] else "") + f"budget < {len(idx)} alphas"
            rows.append(row)
        out += _finish(rows, oracle, boot_all, settings.ci)
        if pairs:
            out += _held_out(n, c, alphas, B, pairs, test, boot_test, settings.ci)
    return pd.DataFrame(out, columns=[
        "budget", "split", "kind", "ensemble", "alphas", "allocation", "n_problems", "pass_at_budget",
        "pass_at_budget_lo", "pass_at_budget_hi", "gain_vs_best_single", "gain_lo", "gain_hi",
        "gain_design_effect", "reference", "dev_pass_at_budget", "note"])


def dev_choice(n: np.ndarray, c: np.ndarray, budget: int, dev: np.ndarray) -> tuple[int | None, np.ndarray | None]:
    """What the dev problems choose at this budget: the best single alpha (None when no alpha has the
    samples) and the optimised allocation (None when the budget exceeds every alpha's samples together),
    both by preferred()'s tie rule, so an allocation that puts everything on one alpha puts it on the
    single's."""
    cap = n.min(axis=0)
    single = best_single(n[dev], c[dev], budget, cap)
    alloc = optimize_allocation(n[dev], c[dev], budget) if cap.sum() >= budget else None
    return single, alloc


def fold_scores(n, c, pairs, test, allocations) -> np.ndarray | None:
    """Per-problem pass@B of the test problems (in `test`'s order), each fold's problems under that
    fold's allocation; None when some fold's allocation is missing or asks more samples than it has."""
    x = np.empty(len(test))
    where = {p: i for i, p in enumerate(test)}
    for (_, part), alloc in zip(pairs, allocations):
        if alloc is None or np.any(alloc > n[part].min(axis=0)):
            return None
        x[[where[p] for p in part]] = ensemble_pass(n[part], c[part], alloc)
    return x


def _held_out(n, c, alphas, B, pairs, test, boots, ci) -> list[dict]:
    A = len(alphas)
    cap = n.min(axis=0)
    choices = [dev_choice(n, c, B, dev) for dev, _ in pairs]
    singles = [None if single is None else B * (np.arange(A) == single) for single, _ in choices]
    allocs = [alloc for _, alloc in choices]
    uni = uniform_allocation(B, A)

    def row(kind, name, fold_allocs):
        x = fold_scores(n, c, pairs, test, fold_allocs)
        used = sorted({i for a in fold_allocs if a is not None for i in np.flatnonzero(a)})
        text = fold_text([" ".join(f"{alpha_tag(alphas[i])}:{a[i]}" for i in np.flatnonzero(a)) if a is not None
                          else "–" for a in fold_allocs])
        dev_x = [ensemble_pass(n[dev], c[dev], a) for (dev, _), a in zip(pairs, fold_allocs)
                 if a is not None and np.all(a <= cap)]
        over = sorted({i for a in fold_allocs if a is not None for i in np.flatnonzero(a > cap)})
        note = "; ".join(f"not estimable: {max(a[i] for a in fold_allocs if a is not None)} samples of alpha "
                         f"{alpha_tag(alphas[i])} > n={cap[i]}" for i in over)
        return {"budget": B, "split": "test", "kind": kind, "ensemble": name,
                "alphas": " ".join(alpha_tag(alphas[i]) for i in used), "allocation": text,
                "n_problems": len(test), "note": note if x is None and note else "" if x is not None
                else "not estimable at this budget",
                "_x": x, "_dev": np.concatenate(dev_x).mean() if len(dev_x) == len(pairs) else np.nan}

    rows, best_dev = [], None
    if all(a is not None for a in singles):
        tags = fold_text([alpha_tag(alphas[single]) for single, _ in choices])
        best_dev = row("best_single_dev", f"best single (dev-selected) {tags}", singles)
        rows.append(best_dev)
    if all(a is not None for a in allocs):
        rows.append(row("optimized", "optimized (dev-selected)", allocs))
    rows.append(row("uniform", "uniform all", [uni] * len(pairs)))
    dev_values = [r.pop("_dev") for r in rows]
    rows = _finish(rows, best_dev, boots, ci)
    for r, v in zip(rows, dev_values):
        r["dev_pass_at_budget"] = v
        if r["kind"] == "optimized" and not is_ensemble(r["allocation"]):  # a single alpha is no ensemble
            r.update(gain_vs_best_single=np.nan, gain_lo=np.nan, gain_hi=np.nan, gain_design_effect=np.nan,
                     note=f"{NO_ENSEMBLE}: the dev split put the whole budget on alpha "
                          f"{fold_text([alpha_tag(alphas[np.argmax(a)]) for a in allocs])}")
    return rows


def budget_ks(n_min: int, budget: int | None = None) -> list[int]:
    """The budgets of a curve: k = 1..n (48 log-spaced values beyond 64), and `budget` if it fits."""
    ks = np.arange(1, n_min + 1) if n_min <= 64 else np.unique(np.geomspace(1, n_min, 48).round().astype(int))
    return sorted(set(ks.tolist()) | ({budget} if budget is not None and budget <= n_min else set()))


def budget_curve(n: np.ndarray, c: np.ndarray, alphas, settings: EnsembleSettings, families=None,
                 ks=None) -> pd.DataFrame:
    """Claim 4b at every budget k (budget_ks by default): on the held-out families, pass@k of the
    dev-selected single alpha and of the dev-optimised allocation, the gain with its cluster-bootstrap
    CI (NaN when the allocation is one alpha: NO_ENSEMBLE) and the headroom over that single. The split
    (or folds: each fold's problems under its own choices, the headroom summed over the folds) and
    resamples are matched_budget_table's, so the row at its budget agrees with its 'test' rows."""
    n, c = np.asarray(n, dtype=np.int64), np.asarray(c, dtype=np.int64)
    alphas = np.asarray(alphas, dtype=np.float64)
    P, A = n.shape
    pairs, test, clusters = _parts(P, families, settings)
    columns = ["k", "n_test_problems", "n_test_clusters", "single_alpha", "single_pass_at_k", "allocation",
               "ensemble_pass_at_k", "ensemble_chosen", "gain", "gain_lo", "gain_hi", "gain_design_effect",
               "headroom_at_k", "headroom_problems", "headroom_clusters", "note", "single_alphas"]
    if not pairs:
        return pd.DataFrame(columns=columns)
    boots = _boots(clusters[test], settings, settings.seed + 1)
    rows = []
    for k in ks or budget_ks(int(n.min())):
        k = int(k)
        choices = [dev_choice(n, c, k, dev) for dev, _ in pairs]
        rooms = [headroom(n[part], c[part], single, clusters[part], k) for (_, part), (single, _) in zip(pairs, choices)]
        picked = [single for single, _ in choices]
        row = {"k": k, "n_test_problems": len(test), "n_test_clusters": sum(r["n_clusters"] for r in rooms),
               "single_alpha": np.nan if None in picked or len(set(picked)) > 1 else alphas[picked[0]],
               "single_pass_at_k": np.nan, "allocation": "", "ensemble_pass_at_k": np.nan,
               "ensemble_chosen": False, "gain": np.nan, "gain_lo": np.nan, "gain_hi": np.nan,
               "gain_design_effect": np.nan,
               "headroom_at_k": round(sum(r["headroom_at_budget"] for r in rooms), 6),
               "headroom_problems": sum(r["headroom_problems"] for r in rooms),
               "headroom_clusters": sum(r["headroom_clusters"] for r in rooms), "note": "",
               "single_alphas": fold_text(["–" if s is None else alpha_tag(alphas[s]) for s in picked])}
        allocs = [alloc for _, alloc in choices]
        singles = [None if s is None else k * (np.arange(A) == s) for s in picked]
        x_single, x_ens = fold_scores(n, c, pairs, test, singles), fold_scores(n, c, pairs, test, allocs)
        if x_single is None or x_ens is None:
            rows.append({**row, "note": "not estimable at this budget"})
            continue
        row.update(single_pass_at_k=x_single.mean(), ensemble_pass_at_k=x_ens.mean(),
                   allocation=fold_text([" ".join(f"{alpha_tag(alphas[i])}:{a[i]}" for i in np.flatnonzero(a))
                                         for a in allocs]))
        row["ensemble_chosen"] = is_ensemble(row["allocation"])
        if row["ensemble_chosen"]:
            X = (x_ens - x_single)[:, None]
            (gain,), (lo,), (hi,) = weighted_means(X, np.ones_like(X), None if boots is None else boots[0],
                                                   settings.ci)
            deff = (design_effect(weighted_samples(X, np.ones_like(X), boots[0]),
                                  weighted_samples(X, np.ones_like(X), boots[1]))[0] if boots else np.nan)
            row.update(gain=gain, gain_lo=lo, gain_hi=hi, gain_design_effect=deff)
        else:
            row["note"] = (f"{NO_ENSEMBLE}: the dev split put the whole budget on alpha "
                           f"{fold_text([alpha_tag(alphas[np.argmax(a)]) for a in allocs])}")
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)
