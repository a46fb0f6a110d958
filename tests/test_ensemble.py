"""Matched-budget ensembles: the pooled estimator against exhaustive enumeration and against simulated
draws (unbiased when draws of different alphas are independent, biased low when they share their random
numbers), the allocation optimiser against exhaustive search, and the ensembles table."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from helpers import ensemble_settings

from ewa.analysis.ensemble import (best_single, budget_curve, budget_ks, dev_choice, dev_test_split, ensemble_pass,
                                   family_folds, headroom, matched_budget_table, optimize_allocation, preferred,
                                   uniform_allocation)
from ewa.analysis.metrics import pass_at_k


def enumerate_pass(n_i, c_i, b_i) -> float:
    """Share of all ways to draw b_i of alpha i's samples (each alpha independently) with an AC."""
    per_alpha = [list(itertools.combinations([s < c for s in range(n)], b)) for n, c, b in zip(n_i, c_i, b_i)]
    hits = total = 0
    for draw in itertools.product(*per_alpha):
        total += 1
        hits += any(any(d) for d in draw)
    return hits / total


def test_pooled_estimator_equals_exhaustive_enumeration():
    rng = np.random.default_rng(0)
    for _ in range(40):
        A, P = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        n = rng.integers(1, 7, size=(P, A))
        c = rng.integers(0, n + 1)
        alloc = rng.integers(0, n.min(axis=0) + 1)
        want = [enumerate_pass(n[p], c[p], alloc) for p in range(P)]
        np.testing.assert_allclose(ensemble_pass(n, c, alloc), want, atol=1e-12)


# Known per-problem, per-alpha solve rates for the simulations: similar rates (rows 0-1), one strong
# alpha (rows 2, 5), rare successes (row 3), an alpha that never solves (rows 4, 5).
SOLVE_RATE = np.array([[0.10, 0.15, 0.20], [0.30, 0.30, 0.30], [0.05, 0.40, 0.10],
                       [0.02, 0.05, 0.08], [0.00, 0.25, 0.50], [0.60, 0.10, 0.00]])
ALLOCATIONS = ([4, 4, 4], [6, 0, 6], [2, 5, 5], [12, 0, 0])  # B = 12 = n; the last is a single alpha
N_SAMPLES, REPLICATES = 12, 4000


def simulate_records(shared_random_numbers: bool, seed: int) -> np.ndarray:
    """AC outcomes of simulated sample records [replicate, problem, alpha, sample]: sample s of alpha a
    is AC when its uniform is below SOLVE_RATE[problem, a]. With shared random numbers, sample s of every
    alpha uses the same uniform (a seed without the alpha in it); otherwise each draws its own."""
    rng = np.random.default_rng(seed)
    P, A = SOLVE_RATE.shape
    uniforms = rng.random((REPLICATES, P, 1 if shared_random_numbers else A, N_SAMPLES))
    return uniforms < SOLVE_RATE[None, :, :, None]


def estimated_pass(ac: np.ndarray, allocation) -> np.ndarray:
    """The pooled estimator on each replicate's records: [replicate, problem]."""
    R, P, A, n = ac.shape
    c = ac.sum(axis=-1).reshape(R * P, A)
    return ensemble_pass(np.full_like(c, n), c, allocation).reshape(R, P)


def exact_pass(allocation) -> np.ndarray:
    """Per-problem pass rate of b_i fresh, independent draws from each alpha: 1 - prod (1 - p_i)^b_i."""
    return 1.0 - np.prod((1.0 - SOLVE_RATE) ** np.asarray(allocation), axis=1)


def standard_error(x: np.ndarray) -> np.ndarray:
    return x.std(axis=0, ddof=1) / np.sqrt(len(x))


def test_pooled_estimator_is_unbiased_for_independent_draws():
    ac = simulate_records(shared_random_numbers=False, seed=11)
    for allocation in ALLOCATIONS:
        estimates = estimated_pass(ac, allocation).mean(axis=1)  # pass@B over problems, per replicate
        # Within 4 standard errors of the mean over replicates (seeded, so it cannot flake). The SE is
        # below 0.003, so a bias like the ~0.03 of correlated draws (below) would fail by ~10 SE.
        gap = abs(estimates.mean() - exact_pass(allocation).mean())
        assert gap <= 4 * standard_error(estimates), (allocation, gap)
        assert standard_error(estimates) < 0.003


def test_pooled_estimator_underestimates_ensembles_of_draws_sharing_their_random_numbers():
    """Common random numbers: every alpha's sample s is driven by the same uniform, so alphas succeed
    together. An ensemble that spends its B samples on B different sample slots (b_i slots per alpha)
    still makes independent draws and passes at the exact rate; the estimator, computed from the
    correlated records, multiplies covarying miss probabilities and comes out low."""
    ac = simulate_records(shared_random_numbers=True, seed=12)
    for allocation in ALLOCATIONS:
        allocation = np.array(allocation)
        owner = np.repeat(np.arange(len(allocation)), allocation)  # slot s is drawn from alpha owner[s]
        true_pass = ac[:, :, owner, np.arange(allocation.sum())].any(axis=-1).mean(axis=1)  # [replicate]
        estimate = estimated_pass(ac, allocation).mean(axis=1)
        assert abs(true_pass.mean() - exact_pass(allocation).mean()) <= 4 * standard_error(true_pass)
        bias = estimate - true_pass  # paired: the same records
        if np.count_nonzero(allocation) == 1:  # one alpha: nothing to correlate with, b = n is exact
            assert np.all(bias == 0)
        else:
            assert bias.mean() < -0.02 and bias.mean() < -10 * standard_error(bias), (allocation, bias.mean())


def test_single_checkpoint_is_pass_at_k_and_overdraw_is_refused():
    n, c = np.array([[10, 10], [10, 10]]), np.array([[3, 0], [0, 9]])
    np.testing.assert_allclose(ensemble_pass(n, c, [4, 0]), pass_at_k(n[:, 0], c[:, 0], 4))
    assert ensemble_pass(n, c, [0, 0]).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="exceeds n"):
        ensemble_pass(n, c, [11, 0])


def test_uniform_allocation_spreads_the_remainder():
    assert uniform_allocation(12, 3).tolist() == [4, 4, 4]
    assert uniform_allocation(10, 3).tolist() == [3, 4, 3]
    assert uniform_allocation(2, 5).tolist() == [0, 1, 0, 1, 0]  # not bunched at one end
    for B, m in [(7, 4), (250, 20), (3, 7)]:
        a = uniform_allocation(B, m)
        assert a.sum() == B and a.max() - a.min() <= 1


def exhaustive_best(n, c, B):
    best = -1.0
    for alloc in itertools.product(*(range(k + 1) for k in n.min(axis=0))):
        if sum(alloc) == B:
            best = max(best, ensemble_pass(n, c, np.array(alloc)).mean())
    return best


@pytest.mark.parametrize("exhaustive_limit", [20000, 0], ids=["exact", "local-search"])
def test_optimizer_against_exhaustive_search(exhaustive_limit):
    rng = np.random.default_rng(1)
    gaps = []
    for _ in range(60):
        A, P, m = int(rng.integers(2, 5)), int(rng.integers(3, 15)), int(rng.integers(4, 9))
        B = int(rng.integers(1, min(12, A * m) + 1))
        n = np.full((P, A), m)
        c = rng.binomial(m, rng.beta(0.5, 1.5, size=(P, A)))
        alloc = optimize_allocation(n, c, B, exhaustive_limit=exhaustive_limit)
        assert alloc.sum() == B and np.all(alloc >= 0) and np.all(alloc <= m)
        got = ensemble_pass(n, c, alloc).mean()
        singles = [ensemble_pass(n, c, B * (np.arange(A) == a)).mean() for a in range(A) if B <= m]
        assert got >= max(singles, default=0) - 1e-12
        gaps.append(exhaustive_best(n, c, B) - got)
    gaps = np.array(gaps)
    assert np.all(gaps >= -1e-12)
    if exhaustive_limit:
        assert np.all(gaps < 1e-12)
    else:  # a heuristic: optimal almost always, never far off
        assert np.mean(gaps < 1e-12) >= 0.95 and gaps.max() < 0.02


@pytest.mark.parametrize("exhaustive_limit", [20000, 0], ids=["exact", "local-search"])
def test_optimizer_prefers_a_single_alpha_it_cannot_beat(exhaustive_limit):
    # alpha 1 solves every problem in 5 of 10 samples: 6 or more of its samples never all miss, so
    # +1:6 +2:4 scores 1 as well as +1:10; a mixture that only ties is not chosen
    n, c = np.full((5, 3), 10), np.tile([0, 5, 0], (5, 1))
    assert optimize_allocation(n, c, 10, exhaustive_limit=exhaustive_limit).tolist() == [0, 10, 0]
    nothing_solved = optimize_allocation(np.full((2, 2), 10), np.zeros((2, 2), int), 4, exhaustive_limit=exhaustive_limit)
    assert np.count_nonzero(nothing_solved) == 1


def test_optimizer_respects_tight_caps_with_large_steps():
    n = np.array([[5, 6, 5], [5, 7, 5]])
    c = np.array([[1, 0, 2], [0, 3, 1]])
    assert optimize_allocation(n, c, 16, step=4, exhaustive_limit=0).tolist() == [5, 6, 5]
    assert optimize_allocation(n, c, 16).tolist() == [5, 6, 5]
    with pytest.raises(ValueError, match="exceeds"):
        optimize_allocation(n, c, 17)


def complementary(P=40, m=10):
    """Alpha 0 solves the first half of the problems half the time, alpha 2 the second half; alpha 1
    rarely solves anything. Mixing 0 and 2 should beat every single checkpoint at matched budget."""
    n = np.full((P, 3), m)
    c = np.zeros((P, 3), dtype=int)
    c[: P // 2, 0] = m // 2
    c[P // 2:, 2] = m // 2
    c[::4, 1] = 1
    return n, c


def test_complementary_checkpoints_gain_at_matched_budget():
    n, c = complementary()
    alloc = optimize_allocation(n, c, 10)
    assert alloc[0] > 0 and alloc[2] > 0 and alloc[1] == 0
    table = matched_budget_table(n, c, [-0.5, 0.5, 1.5], ensemble_settings(budgets=(10,), bootstrap=300))
    rows = table.set_index(["split", "ensemble"])
    best = rows.loc[("all", "best single (oracle) -0.50")]
    assert best.pass_at_budget == pytest.approx(0.5)
    mix = rows.loc[("all", "uniform extrapolated")]  # alphas -0.5 and 1.5, 5 samples each
    assert mix.allocation == "-0.50:5 +1.50:5"
    assert mix.pass_at_budget == pytest.approx(1 - 1 / 252)  # 1 - C(5,5)/C(10,5) on every problem
    assert mix.gain_vs_best_single == pytest.approx(0.5 - 1 / 252) and mix.gain_lo > 0
    opt = rows.loc[("test", "optimized (dev-selected)")]
    assert opt.gain_vs_best_single > 0.2 and opt.n_problems == 20
    for a, tag in zip(range(3), ["-0.50", "+0.50", "+1.50"]):
        single = rows.loc[("all", f"single {tag}")]
        assert single.pass_at_budget == pytest.approx(pass_at_k(n[:, a], c[:, a], 10).mean())


def test_table_marks_budgets_a_single_cannot_reach():
    n, c = complementary(P=12, m=6)
    table = matched_budget_table(n, c, [0.0, 0.5, 1.0], ensemble_settings(budgets=(6, 12), bootstrap=100))
    at12 = table[(table.budget == 12) & (table.split == "all")].set_index("ensemble")
    assert np.isnan(at12.loc["single +0.00", "pass_at_budget"])
    assert "not estimable" in at12.loc["single +0.00", "note"]
    assert at12.loc["uniform all", "allocation"] == "+0.00:4 +0.50:4 +1.00:4"
    assert not np.isnan(at12.loc["uniform all", "pass_at_budget"])
    again = matched_budget_table(n, c, [0.0, 0.5, 1.0], ensemble_settings(budgets=(6, 12), bootstrap=100))
    assert table.equals(again)
    assert list(table.columns) == ["budget", "split", "kind", "ensemble", "alphas", "allocation", "n_problems",
                                   "pass_at_budget", "pass_at_budget_lo", "pass_at_budget_hi",
                                   "gain_vs_best_single", "gain_lo", "gain_hi", "gain_design_effect",
                                   "reference", "dev_pass_at_budget", "note"]


def test_dev_and_test_are_split_by_family():
    # 12 families of 1-3 sibling instances, listed in a scrambled order
    families = np.array([f"mini/fam{i}" for i in (0, 0, 1, 2, 2, 2, 3, 4, 5, 5, 6, 7, 7, 8, 9, 10, 11, 11)])
    families = families[np.random.default_rng(3).permutation(len(families))]
    dev, test = dev_test_split(families, 0.5, seed=4)
    assert sorted(np.concatenate([dev, test]).tolist()) == list(range(len(families)))
    assert not set(families[dev]) & set(families[test])  # no family on both sides
    assert len(set(families[dev])) == 6
    again = dev_test_split(families, 0.5, seed=4)
    assert all(np.array_equal(a, b) for a, b in zip((dev, test), again))  # deterministic given the seed
    order = np.argsort(families, kind="stable")  # the problems' order does not matter
    dev_sorted, _ = dev_test_split(families[order], 0.5, seed=4)
    assert set(families[order][dev_sorted]) == set(families[dev])
    assert any(set(families[dev_test_split(families, 0.5, seed=s)[0]]) != set(families[dev]) for s in range(5, 10))
    # no families: each problem its own; two families: one each side
    assert [len(x) for x in dev_test_split(np.arange(10), 0.5, seed=0)] == [5, 5]
    assert {len(x) for x in dev_test_split(np.array(["a", "a", "a", "b"]), 0.9, seed=0)} == {1, 3}


def test_held_out_ensembles_are_fitted_on_other_families():
    n, c = complementary(P=12, m=6)
    families = np.repeat(["f0", "f1", "f2"], 4)  # three families of four siblings
    table = matched_budget_table(n, c, [0.0, 0.5, 1.0], ensemble_settings(budgets=(6,), bootstrap=0), families)
    assert set(table.loc[table.split == "test", "n_problems"]) <= {4, 8}  # whole families only
    with pytest.raises(ValueError, match="2 family labels for 12 problems"):
        matched_budget_table(n, c, [0.0, 0.5, 1.0], ensemble_settings(budgets=(6,), bootstrap=0), families[:2])


def test_one_tie_rule_for_singles_and_allocations():
    # equal values: the fewest alphas, then the most samples on the lowest alpha
    allocations = [np.array(a) for a in ([0, 0, 8], [8, 0, 0], [4, 4, 0], [0, 8, 0], [2, 6, 0])]
    assert preferred(allocations, [1.0] * 5).tolist() == [8, 0, 0]
    assert preferred(allocations[2:3] + allocations[4:], [1.0, 1.0]).tolist() == [4, 4, 0]
    assert preferred(allocations, [0.5, 0.5, 0.9, 0.5, 0.9]).tolist() == [4, 4, 0]  # a real gain wins
    # every alpha solves every problem: the optimiser (exact or local search) and the best single agree
    n, c = np.full((6, 5), 8), np.full((6, 5), 4)
    for limit in (20000, 0):
        assert optimize_allocation(n, c, 8, exhaustive_limit=limit).tolist() == [8, 0, 0, 0, 0]
    assert best_single(n, c, 8) == 0
    assert best_single(n, c, 9) is None  # no alpha has 9 samples


def test_held_out_single_alpha_is_no_ensemble_and_has_no_gain():
    n, c = np.full((12, 3), 8), np.tile([0, 4, 0], (12, 1))  # alpha 0.5 solves everything
    table = matched_budget_table(n, c, [0.0, 0.5, 1.0], ensemble_settings(budgets=(8,), bootstrap=100),
                                 np.repeat([f"f{i}" for i in range(6)], 2))
    opt = table[table.kind == "optimized"].iloc[0]
    assert opt.allocation == "+0.50:8" and opt.pass_at_budget == 1.0
    assert np.isnan([opt.gain_vs_best_single, opt.gain_lo, opt.gain_hi, opt.gain_design_effect]).all()
    assert opt.note == "no ensemble chosen: the dev split put the whole budget on alpha +0.50"


def test_ensemble_cis_resample_families():
    n, c = complementary(P=40, m=10)
    siblings = np.repeat(np.arange(20), 2)
    c = c[siblings * 2 % 40]  # pairs of identical siblings (family f0: problems 0 and 1, ...)
    families = np.array([f"f{i}" for i in siblings])
    widths = {}
    for cluster_by in ("family", "problem"):
        table = matched_budget_table(n, c, [-0.5, 0.5, 1.5], ensemble_settings(budgets=(10,), bootstrap=1000,
                                                                               cluster_by=cluster_by), families)
        row = table.set_index(["split", "ensemble"]).loc[("all", "uniform extrapolated")]
        widths[cluster_by] = row.gain_hi - row.gain_lo
        assert row.gain_design_effect == pytest.approx(2.0 if cluster_by == "family" else 1.0, abs=0.35)
    assert widths["family"] > 1.2 * widths["problem"]
    with pytest.raises(ValueError, match="cluster_by must be one of family, problem"):
        ensemble_settings(cluster_by="alpha")


def test_budget_curve_is_claim_4b_at_every_budget():
    n, c = complementary(P=40, m=10)
    families = np.repeat([f"f{i}" for i in range(20)], 2)
    settings = ensemble_settings(budgets=(10,), bootstrap=300)
    curve = budget_curve(n, c, [-0.5, 0.5, 1.5], settings, families).set_index("k")
    assert curve.index.tolist() == list(range(1, 11))
    # at the table's budget the curve is its held-out rows: the same choices, gain and CI
    test = matched_budget_table(n, c, [-0.5, 0.5, 1.5], settings, families)
    test = test[test.split == "test"].set_index("kind")
    at = curve.loc[10]
    assert at.allocation == test.loc["optimized", "allocation"]
    assert test.loc["best_single_dev", "ensemble"].endswith(f"{at.single_alpha:+.2f}")
    assert [at.single_pass_at_k, at.ensemble_pass_at_k] == pytest.approx(
        [test.loc["best_single_dev", "pass_at_budget"], test.loc["optimized", "pass_at_budget"]])
    assert [at.gain, at.gain_lo, at.gain_hi] == pytest.approx(
        [test.loc["optimized", "gain_vs_best_single"], test.loc["optimized", "gain_lo"], test.loc["optimized", "gain_hi"]])
    # one sample cannot be split: no ensemble at k = 1, and no number; with more the complementary alphas
    # are mixed (from k = 3 here: at k = 2 one alpha's 78% on its half still beats 1 + 1 on dev) and gain
    assert not curve.loc[1, "ensemble_chosen"] and np.isnan(curve.loc[1, "gain"])
    assert curve.loc[1, "note"].startswith("no ensemble chosen")
    assert curve.loc[3:, "ensemble_chosen"].all() and (curve.loc[3:, "gain_lo"] > 0).all()
    assert curve.gain.isna().eq(~curve.ensemble_chosen).all()
    # the headroom: held-out problems the other alpha solves and the dev-selected single does not, and
    # the most any allocation could add at each budget (those problems at k = n)
    assert (curve.headroom_problems == 2 * curve.headroom_clusters).all() and curve.loc[10, "headroom_problems"] > 0
    assert curve.loc[10, "headroom_at_k"] == curve.loc[10, "headroom_problems"]
    assert (curve.gain * curve.n_test_problems <= curve.headroom_at_k + 1e-9).where(curve.ensemble_chosen, True).all()
    assert budget_ks(300, budget=100) == sorted(set(budget_ks(300)) | {100}) and len(budget_ks(300)) <= 49


def test_folds_score_every_family_once_by_choices_made_on_the_others():
    families = np.array([f"f{i}" for i in (0, 0, 1, 2, 2, 3, 4, 4, 5, 6, 7, 7, 8, 9)])
    folds = family_folds(families, 4, seed=2)
    tests = [set(test.tolist()) for _, test in folds]
    assert sorted(np.concatenate([t for _, t in folds]).tolist()) == list(range(len(families)))  # each once
    assert sorted(len(set(families[t])) for _, t in folds) == [2, 2, 3, 3]  # whole families, dealt evenly
    for dev, test in folds:
        assert not set(families[dev]) & set(families[test])
        assert sorted(np.concatenate([dev, test]).tolist()) == list(range(len(families)))
    assert [set(t.tolist()) for _, t in family_folds(families, 4, seed=2)] == tests  # deterministic
    assert len(family_folds(families[:3], 10, seed=0)) == 2  # at most one fold per family
    with pytest.raises(ValueError, match="folds must be 0"):
        ensemble_settings(folds=1)


def test_cross_fitted_4b_stitches_each_folds_choice_on_its_own_families():
    # alpha 0 solves the f0..f9 families, alpha 1.5 the f10..f19 ones: a fold's dev part holds both kinds
    n, c = complementary(P=40, m=10)
    families = np.repeat([f"f{i}" for i in range(20)], 2)
    alphas = [-0.5, 0.5, 1.5]
    settings = ensemble_settings(budgets=(4,), bootstrap=200, folds=5)
    table = matched_budget_table(n, c, alphas, settings, families)
    test = table[table.split == "test"].set_index("kind")
    assert (test.n_problems == 40).all()  # every problem scored, against 20 with one split
    # by hand: each fold's problems under the single alpha and allocation its other four folds chose
    single, opt = np.zeros(40), np.zeros(40)
    for dev, part in family_folds(families, 5, settings.seed):
        alpha, alloc = dev_choice(n, c, 4, dev)
        single[part] = ensemble_pass(n[part], c[part], 4 * (np.arange(3) == alpha))
        opt[part] = ensemble_pass(n[part], c[part], alloc)
    assert test.loc["best_single_dev", "pass_at_budget"] == pytest.approx(single.mean())
    assert test.loc["optimized", "pass_at_budget"] == pytest.approx(opt.mean())
    assert test.loc["optimized", "gain_vs_best_single"] == pytest.approx(opt.mean() - single.mean())
    assert test.loc["optimized", "gain_lo"] > 0  # the complementary alphas mixed, on every family
    curve = budget_curve(n, c, alphas, settings, families).set_index("k")
    at = curve.loc[4]
    assert at.allocation == test.loc["optimized", "allocation"] and at.n_test_problems == 40
    assert at.gain == pytest.approx(test.loc["optimized", "gain_vs_best_single"])
    # the headroom is each fold's over its own single, summed: what a 1/5 test split would see, five times over
    parts = family_folds(families, 5, settings.seed)
    assert at.headroom_at_k == pytest.approx(sum(
        headroom(n[p], c[p], dev_choice(n, c, 4, d)[0], families[p], 4)["headroom_at_budget"] for d, p in parts))
    one_split = budget_curve(n, c, alphas, ensemble_settings(budgets=(4,), bootstrap=0), families).set_index("k")
    assert one_split.loc[4, "n_test_problems"] == 20


def test_headroom_bounds_every_allocations_gain():
    # No allocation adds more problems over a single alpha than headroom_at_budget, whatever the counts
    rng = np.random.default_rng(4)
    for _ in range(30):
        P, A, m = int(rng.integers(3, 12)), int(rng.integers(2, 4)), int(rng.integers(3, 7))
        B = int(rng.integers(1, m + 1))
        n, c = np.full((P, A), m), rng.binomial(m, rng.beta(0.4, 1.2, size=(P, A)))
        single = int(rng.integers(A))
        bound = headroom(n, c, single, np.arange(P), B)["headroom_at_budget"]
        base = ensemble_pass(n, c, B * (np.arange(A) == single)).sum()
        for alloc in itertools.product(*(range(B + 1) for _ in range(A))):
            if sum(alloc) == B:
                assert ensemble_pass(n, c, np.array(alloc)).sum() - base <= bound + 1e-9
    # at B = n the bound counts the problems some alpha solves and the single does not
    n, c = np.full((4, 2), 8), np.array([[0, 3], [2, 0], [0, 0], [1, 1]])
    room = headroom(n, c, 0, np.array(["f0", "f0", "f1", "f1"]), 8)
    assert room["headroom_at_budget"] == room["headroom_problems"] == 1 and room["headroom_clusters"] == 1
    # below n every alpha may solve every problem at least once and still leave room at the budget used
    n, c = np.full((10, 2), 64), np.tile([[4, 1]], (10, 1))
    c[5:] = c[5:, ::-1]  # alpha 0 is strong on the first half, alpha 1 on the second
    room = headroom(n, c, 0, np.arange(10), 8)
    assert room["headroom_problems"] == 0 and room["headroom_at_budget"] == pytest.approx(1.485, abs=1e-3)
