"""`ewa claims`, `ewa science` and scripts/science.py on the synthetic alpha grid of helpers.DESIGN
(rates known by hand), and each claim's verdict rule on small constructed grids."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers import (DESIGN, ROOT, alpha_specs, claims_settings, ensemble_settings, expected_rate,
                     write_approach_samples, write_design)

from ewa.analysis.claims import CLAIMS, OUTPUT_FILES, ceiling, measure, read_claims, value_text, verdict
from ewa.analysis.ensemble import matched_budget_table
from ewa.analysis.frontier import AlphaGrid
from ewa.analysis.science import control_outcome, how_4b_chooses
from ewa.cli import main
from ewa.config import validate
from ewa.train.outcome import Endpoints
from ewa.verdicts import VERDICTS

OPT, CORR, AC = {"TLE", "MLE"}, {"WA", "RE", "CE"}, {"AC"}


def run_claims(tmp_path: Path, capsys, seed: int = 0, design: dict = DESIGN, min_headroom: int | None = None) -> pd.DataFrame:
    """frontier, claims and approaches of one run, into tmp_path/results/{step}/mini/reasoning."""
    paths, problems = write_design(tmp_path, design)
    evals = alpha_specs(paths)
    results = tmp_path / "results"
    out = results / "frontier" / "mini" / "reasoning"
    assert main(["frontier", "--evals", *evals, "--problems", str(problems), "--k", "1", "--budget", "10",
                 "--bootstrap", "200", "--seed", str(seed), "--formats", "png", "--out-dir", str(out)]) == 0, \
        capsys.readouterr().err
    headroom = [] if min_headroom is None else ["--min-headroom", str(min_headroom)]
    assert main(["claims", "--evals", *evals, "--ensembles", str(out / "ensembles.csv"), "--problems", str(problems),
                 "--bootstrap", "200", "--seed", str(seed), *headroom,
                 "--out-dir", str(results / "claims/mini/reasoning")]) == 0, capsys.readouterr().err
    assert main(["approaches", "--evals", *evals, "--samples", *alpha_specs(write_approach_samples(paths)),
                 "--out-dir", str(results / "approaches/mini/reasoning")]) == 0, capsys.readouterr().err
    return pd.read_csv(results / "claims/mini/reasoning/claims.csv").set_index("claim")


def test_claims_match_hand_counted_rates(tmp_path, capsys):
    claims = run_claims(tmp_path, capsys)
    diff = lambda a, b, kinds: expected_rate(a, kinds) - expected_rate(b, kinds)  # noqa: E731
    assert claims.loc["opt_high_minus_low", "value"] == pytest.approx(diff(1.0, 0.0, OPT))  # -0.375
    assert claims.loc["corr_high_minus_low", "value"] == pytest.approx(diff(1.0, 0.0, CORR))  # +0.3
    assert claims.loc["ac_high_minus_low", "value"] == pytest.approx(diff(1.0, 0.0, AC))  # +0.075
    assert claims.loc["opt_below_low", "value"] == pytest.approx(diff(-0.5, 0.0, OPT))
    assert claims.loc["corr_below_low", "value"] == pytest.approx(diff(-0.5, 0.0, CORR))
    assert claims.loc["opt_beyond_high", "value"] == pytest.approx(diff(1.5, 1.0, OPT))
    assert claims.loc["corr_beyond_high", "value"] == pytest.approx(diff(1.5, 1.0, CORR))
    # alphas 0, 0.5, 1: TLE+MLE falls and WA+RE+CE rises on every problem, so in every resample too
    assert claims.loc["opt_monotone", ["value", "ci_lo", "ci_hi"]].tolist() == [-1.0, -1.0, -1.0]
    assert claims.loc["corr_monotone", ["value", "ci_lo", "ci_hi"]].tolist() == [1.0, 1.0, 1.0]
    assert (claims.loc[["opt_monotone", "corr_monotone"], "verdict"] == "reproduced").all()
    assert claims.loc["opt_monotone", "note"].startswith("one alpha between the endpoints")
    for row in claims.itertuples():
        if not np.isnan(row.value):
            assert row.ci_lo <= row.value + 1e-12 and row.value <= row.ci_hi + 1e-12, row.Index
    # every problem moves the same way: the CIs exclude 0
    assert claims.loc["opt_high_minus_low", "verdict"] == "reproduced"
    assert claims.loc["corr_below_low", "verdict"] == "reproduced"
    assert claims.loc["ac_high_minus_low", "verdict"] == "not reproduced"  # +0.075 is not flat
    assert claims.loc["opt_beyond_high", "verdict"] == "not reproduced"  # rises again beyond 1
    # resampling the two families (p0-p2 and p3) rather than four problems: the design effect is reported
    assert claims.loc["opt_high_minus_low", "design_effect"] > 1
    ens = pd.read_csv(tmp_path / "results/frontier/mini/reasoning/ensembles.csv")
    uniform = ens[(ens.split == "all") & (ens.ensemble == "uniform all")].iloc[0]
    assert claims.loc["ensemble_uniform", "value"] == pytest.approx(uniform.gain_vs_best_single)
    assert claims.loc["ensemble_uniform", "design_effect"] == pytest.approx(uniform.gain_design_effect)
    # Every problem some alpha solves, alpha -0.5 (the lowest of the tied best singles) solves too: no
    # ensemble could gain, and below evaluate.min_headroom (8) that is untestable, not refuted.
    assert claims.loc["ensemble_uniform", "note"] == ("headroom at B = 10: at most 0.0 of 4 problems to gain over "
                                                      "alpha -0.50, the best single one (0 solved by some alpha and "
                                                      "not by it, in 0 clusters); testable from 8")
    assert claims.loc["ensemble_uniform", "verdict"] == "untestable (saturated)"
    # With n = B = 10, all samples of any alpha that solves a problem cover it: no mixture beats the best
    # single alpha on the dev family, so the allocation is one alpha and there is no gain to report.
    optimized = ens[(ens.split == "test") & (ens.ensemble == "optimized (dev-selected)")].iloc[0]
    assert len(optimized.allocation.split()) == 1 and np.isnan(optimized.gain_vs_best_single)
    assert optimized.note.startswith("no ensemble chosen")
    assert claims.loc["ensemble_selected", "allocation"] == optimized.allocation
    assert np.isnan(claims.loc["ensemble_selected", "value"])
    assert claims.loc["ensemble_selected", "verdict"] == "untestable (saturated)"
    out = tmp_path / "results/claims/mini/reasoning"
    headroom = json.loads((out / "headroom.json").read_text())
    assert {k: headroom[k] for k in ("n_problems", "solved_by_some_alpha", "solved_by_best_single",
                                     "best_single_alpha", "headroom_problems", "headroom_at_budget", "budget",
                                     "min_headroom")} == {
        "n_problems": 4, "solved_by_some_alpha": 3, "solved_by_best_single": 3, "best_single_alpha": -0.5,
        "headroom_problems": 0, "headroom_at_budget": 0.0, "budget": 10, "min_headroom": 8}
    assert headroom["n_clusters"] == 2 and headroom["cluster_by"] == "family"
    assert headroom["claims"]["ensemble_selected"]["split"] == "test"
    assert not headroom["claims"]["ensemble_selected"]["testable"]
    curve = pd.read_csv(out / "budget_curve.csv")
    assert curve.k.tolist() == list(range(1, 11)) and not curve.ensemble_chosen.any() and curve.gain.isna().all()
    assert curve.set_index("k").loc[10, "allocation"] == optimized.allocation  # the frontier's choice at B
    assert (out / "budget_curve.png").stat().st_size > 10_000
    html = (out / "claims.html").read_text()
    assert "<table" in html and "design_effect" in html
    per_alpha = pd.read_csv(out / "per_alpha.csv")
    assert per_alpha.opt.tolist() == pytest.approx([expected_rate(a, OPT) for a in (-0.5, 0.0, 0.5, 1.0, 1.5)])
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUT_FILES)


def test_claims_refuse_an_ensembles_table_made_on_another_split(tmp_path, capsys):
    run_claims(tmp_path, capsys)
    paths, problems = write_design(tmp_path / "again")
    ensembles = tmp_path / "results/frontier/mini/reasoning/ensembles.csv"
    table = pd.read_csv(ensembles)
    table.loc[table.kind == "optimized", "allocation"] = "+0.50:5 +1.00:5"
    table.to_csv(ensembles, index=False)
    assert main(["claims", "--evals", *alpha_specs(paths), "--ensembles", str(ensembles), "--problems", str(problems),
                 "--bootstrap", "0", "--out-dir", str(tmp_path / "claims")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "dev-selected allocation at B = 10" in err[-1] and not (tmp_path / "claims").exists()


@pytest.mark.parametrize("expect, point, lo, hi, outcome", [
    ("<0", -0.3, -0.4, -0.2, "reproduced"),
    ("<0", -0.1, -0.3, 0.1, "direction only"),
    ("<0", -0.02, -0.05, 0.0, "direction only"),  # a CI touching 0 is not strictly below it
    ("<0", 0.1, 0.0, 0.2, "not reproduced"),
    (">0", 0.1, 0.02, 0.2, "reproduced"),
    (">0", 0.1, -0.02, 0.2, "direction only"),
    (">0", 0.02, 0.0, 0.05, "direction only"),
    (">0", 0.0, 0.0, 0.0, "not reproduced"),  # a gain of exactly 0, CI [0, 0], is no gain
    ("~0", 0.01, -0.04, 0.049, "reproduced"),
    ("~0", 0.04, -0.1, 0.1, "point only"),  # flat point, but the CI allows a change beyond ±0.05
    ("~0", 0.0, -0.05, 0.03, "point only"),  # touching the bound is not within it
    ("~0", 0.2, 0.1, 0.3, "not reproduced"),
    (">0", float("nan"), float("nan"), float("nan"), "untestable (not measured)"),  # never a word pandas reads as NaN
])
def test_verdict_rules(expect, point, lo, hi, outcome):
    assert verdict(expect, point, lo, hi) == outcome


def make_grid(alphas, ac, opt, n: int = 10, families=None) -> AlphaGrid:
    """P problems x alphas from per-problem counts [P, A] of AC and TLE samples; the rest are WA."""
    ac, opt = np.asarray(ac), np.asarray(opt)
    counts = np.zeros(ac.shape + (len(VERDICTS),), dtype=np.int64)
    counts[..., VERDICTS.index("AC")], counts[..., VERDICTS.index("TLE")] = ac, opt
    counts[..., VERDICTS.index("WA")] = n - ac - opt
    ids = np.array([f"p{i:03d}" for i in range(len(ac))], dtype=object)
    return AlphaGrid(ids, counts, np.asarray(alphas, float),
                     families=ids.copy() if families is None else np.asarray(families, dtype=object))


def claims_of(grid: AlphaGrid, ensembles=None, endpoints=None, **settings) -> pd.DataFrame:
    return measure(grid, ensembles, claims_settings(**{"bootstrap": 400, "seed": 0, **settings}),
                   endpoints).table.set_index("claim")


def monotone_grid(opt_per_alpha, corr_per_alpha, P: int = 60, noise: int = 0) -> AlphaGrid:
    """Alphas 0, 0.25, 0.5, 0.75, 1: every problem has the given TLE and WA counts (of 10) per alpha, give
    or take `noise` samples that alternate over the problems."""
    opt = np.tile(opt_per_alpha, (P, 1)) + noise * (np.arange(P) % 2)[:, None]
    corr = np.tile(corr_per_alpha, (P, 1))
    return make_grid([0.0, 0.25, 0.5, 0.75, 1.0], 10 - opt - corr, opt)


def test_3a_is_a_monotone_trend_with_a_ci_not_a_tolerance():
    # failure shares that move step by step from one endpoint to the other: both rank correlations are
    # -1 and +1 in every resample
    claims = claims_of(monotone_grid([5, 4, 3, 2, 1], [1, 2, 3, 4, 5], noise=1))
    assert claims.loc["opt_monotone", ["value", "ci_hi"]].tolist() == [-1.0, -1.0]
    assert claims.loc["corr_monotone", ["value", "ci_lo"]].tolist() == [1.0, 1.0]
    assert (claims.loc[["opt_monotone", "corr_monotone"], "verdict"] == "reproduced").all()
    # interior alphas beyond the endpoints (a hump: TLE in 30%, 50%, 50%, 50%, 10% of samples) are no
    # monotone trend: the interior's order is noise, and the resamples' correlations reach 0
    rng = np.random.default_rng(1)
    opt = rng.binomial(5, np.tile([0.3, 0.5, 0.5, 0.5, 0.1], (60, 1)))
    hump = claims_of(make_grid([0.0, 0.25, 0.5, 0.75, 1.0], np.zeros_like(opt), opt)).loc["opt_monotone"]
    assert -0.4 - 1e-9 <= hump.value <= 0 and hump.ci_hi >= 0 and hump.verdict in ("direction only", "not reproduced")
    # (without noise the interior's order would be fixed and a weak correlation, here -0.22, would be
    # reproduced: the claim is a direction with a CI, not a strength)
    # the wrong way round is not reproduced
    assert claims_of(monotone_grid([1, 2, 3, 4, 5], [1, 1, 1, 1, 1])).loc["opt_monotone", "verdict"] == "not reproduced"
    # a share that never moves has no ranking: not reproduced, and said so
    flat = claims_of(monotone_grid([2, 2, 2, 2, 2], [1, 2, 3, 4, 5])).loc["opt_monotone"]
    assert np.isnan(flat.value) and flat.verdict == "not reproduced" and "the same at every alpha" in flat.note
    # no resamples: the point, no interval
    row = claims_of(monotone_grid([5, 4, 3, 2, 1], [1, 2, 3, 4, 5]), bootstrap=0).loc["opt_monotone"]
    assert row.value == -1.0 and np.isnan(row.ci_lo) and row.verdict == "direction only"


def test_3a_needs_three_alphas_in_0_1():
    grid = make_grid([-0.5, 0.0, 1.0, 1.5], np.full((20, 4), 3), np.tile([6, 4, 2, 1], (20, 1)))
    claims = claims_of(grid)
    for key in ("opt_monotone", "corr_monotone"):
        assert np.isnan(claims.loc[key, "value"]) and claims.loc[key, "verdict"] == "untestable (too few interior alphas)"
    assert claims.loc["opt_high_minus_low", "verdict"] == "reproduced"  # the other claims are unaffected


def test_a_flat_solve_rate_needs_its_whole_ci_within_the_band():
    P = 40
    ac0 = np.full(P, 3)
    noisy = ac0 + np.where(np.arange(P) % 2, 3, -3)  # +-0.3 per problem, 0 on average
    tight = ac0.copy()
    tight[0] += 1  # +0.0025 on average, the same on nearly every resample
    for ac1, point, outcome in ((noisy, 0.0, "point only"), (tight, 0.0025, "reproduced")):
        grid = make_grid([0.0, 1.0], np.stack([ac0, ac1], 1), np.full((P, 2), 2))
        row = claims_of(grid).loc["ac_high_minus_low"]
        assert row.value == pytest.approx(point) and row.verdict == outcome, (row.ci_lo, row.ci_hi)
    assert row.ci_lo > -0.05 and row.ci_hi < 0.05


def test_claims_resample_families_and_report_the_design_effect():
    # 30 families of two identical siblings: resampled by family, a sibling pair counts as one draw, so
    # every difference's variance doubles (design effect 2) and its CI widens by about sqrt(2)
    rng = np.random.default_rng(5)
    opt = np.repeat(np.stack([rng.integers(2, 9, 30), rng.integers(0, 5, 30)], axis=1), 2, axis=0)
    grid = make_grid([0.0, 1.0], np.zeros_like(opt), opt, families=np.repeat([f"f{i}" for i in range(30)], 2))
    by_family, by_problem = claims_of(grid, bootstrap=2000), claims_of(grid, bootstrap=2000, cluster_by="problem")
    row, naive = by_family.loc["opt_high_minus_low"], by_problem.loc["opt_high_minus_low"]
    assert row.value == naive.value
    assert row.design_effect == pytest.approx(2.0, abs=0.3) and naive.design_effect == pytest.approx(1.0)
    assert (row.ci_hi - row.ci_lo) / (naive.ci_hi - naive.ci_lo) == pytest.approx(np.sqrt(2), abs=0.2)
    # evaluate.ci is the coverage of every claim's interval
    narrow = claims_of(grid, bootstrap=2000, ci=0.5).loc["opt_high_minus_low"]
    assert narrow.ci_hi - narrow.ci_lo < 0.5 * (row.ci_hi - row.ci_lo)


def ensemble_claims(ac: np.ndarray, families, **settings) -> pd.DataFrame:
    """Claims 4a and 4b on alphas 0, 0.5, 1 with AC counts `ac` [P, 3] of 10 samples and no TLE."""
    grid = make_grid([0.0, 0.5, 1.0], ac, np.zeros_like(ac), families=families)
    ensembles = matched_budget_table(grid.n, grid.c, grid.alphas, ensemble_settings(budgets=(10,), bootstrap=400),
                                     families)
    return claims_of(grid, ensembles, **settings).loc[["ensemble_uniform", "ensemble_selected"]]


def test_ensemble_claims_need_headroom_and_a_gain_from_two_or_more_alphas():
    P = 40
    families = np.repeat([f"f{i}" for i in range(P // 2)], 2)  # pairs of siblings
    # alpha 0 solves the first half of the problems half the time, alpha 1 the second half: complementary
    complementary = np.zeros((P, 3), dtype=np.int64)
    complementary[: P // 2, 0] = complementary[P // 2:, 2] = 5
    claims = ensemble_claims(complementary, families)
    assert (claims.verdict == "reproduced").all() and (claims.ci_lo > 0).all()
    assert len(claims.loc["ensemble_selected", "allocation"].split()) >= 2
    assert claims.note.str.startswith("headroom at B = 10: ").all()
    # alpha 0.5 solves everything half the time, the others nothing: no problem is left for an ensemble
    # to add, and an ensemble that cannot gain is untestable (saturated), never "not reproduced"
    dominant = np.zeros((P, 3), dtype=np.int64)
    dominant[:, 1] = 5
    claims = ensemble_claims(dominant, families)
    assert (claims.verdict == "untestable (saturated)").all()
    assert claims.loc["ensemble_uniform", "value"] < 0  # the gain is still reported
    # ... and with no minimum: every extra sample belongs on alpha 0.5, so 4b chose no ensemble, no number
    claims = ensemble_claims(dominant, families, min_headroom=0)
    assert claims.loc["ensemble_selected", "allocation"] == "+0.50:10"
    assert np.isnan(claims.loc["ensemble_selected", ["value", "ci_lo", "ci_hi", "design_effect"]].astype(float)).all()
    assert claims.loc["ensemble_selected", "verdict"] == "no ensemble chosen"
    assert claims.loc["ensemble_uniform", "verdict"] == "not reproduced"


def test_cross_fitted_4b_is_scored_on_every_family_and_its_headroom_read_there():
    P = 40
    families = np.repeat([f"f{i}" for i in range(P // 2)], 2)
    # alpha 0 solves 8 problems now and then, alpha 1 another 8; alpha 0.5 solves the rest: what an
    # ensemble could add is 16 problems' worth on all 40, half that on a half test split
    ac = np.zeros((P, 3), dtype=np.int64)
    ac[:, 1] = 10
    ac[:8, 1], ac[:8, 0] = 0, 3
    ac[20:28, 1], ac[20:28, 2] = 0, 3
    grid = make_grid([0.0, 0.5, 1.0], ac, np.zeros_like(ac), families=families)
    room = {}
    for folds in (0, 4):
        ensembles = matched_budget_table(grid.n, grid.c, grid.alphas,
                                         ensemble_settings(budgets=(10,), bootstrap=200, folds=folds), families)
        result = measure(grid, ensembles, claims_settings(bootstrap=200, seed=0, folds=folds, min_headroom=12))
        row = result.table.set_index("claim").loc["ensemble_selected"]
        room[folds] = result.headroom["claims"]["ensemble_selected"]
        assert room[folds]["n_problems"] == (20 if folds == 0 else 40)
        assert row.verdict == ("untestable (saturated)" if folds == 0 else "reproduced"), row.note
    assert room[0]["headroom_at_budget"] < 12 <= room[4]["headroom_at_budget"]
    assert "of 40 held-out problems" in ceiling(room[4], 12, 10)
    # the science page says how 4b chose and scored, from the seed's headroom.json
    assert "dealt into 4 folds" in how_4b_chooses([result.headroom])
    assert how_4b_chooses([{**result.headroom, "claims": {"ensemble_selected": room[0]}}]).startswith("the dev split")


def test_tied_singles_choose_the_same_alpha_and_no_ensemble():
    # Every alpha solves every problem in 4 of 8 samples: at B = 8 every single alpha and every allocation
    # scores pass@8 = 1 on dev. The optimiser and the dev-best single follow one tie rule (the lowest
    # alpha), so there is no "gain" of one single alpha over another: no ensemble chosen, no number.
    P, alphas = 24, [-0.5, 0.0, 0.5, 1.0, 1.5]
    families = np.repeat([f"f{i}" for i in range(P // 2)], 2)
    grid = make_grid(alphas, np.full((P, 5), 4), np.zeros((P, 5), int), n=8, families=families)
    ensembles = matched_budget_table(grid.n, grid.c, grid.alphas, ensemble_settings(budgets=(8,), bootstrap=200),
                                     families)
    test = ensembles[ensembles.split == "test"].set_index("kind")
    assert test.loc["optimized", "allocation"] == "-0.50:8"
    assert test.loc["best_single_dev", "ensemble"] == "best single (dev-selected) -0.50"
    assert ensembles.loc[ensembles.kind == "best_single_oracle", "ensemble"].tolist() == ["best single (oracle) -0.50"]
    claims = claims_of(grid, ensembles, min_headroom=0).loc["ensemble_selected"]
    assert claims.verdict == "no ensemble chosen" and np.isnan(claims.value)
    assert json_safe(measure(grid, ensembles, claims_settings(bootstrap=0, min_headroom=0)).headroom)


def json_safe(record: dict) -> bool:
    """headroom.json is written as JSON: no numpy scalars in it."""
    return json.loads(json.dumps(record)) == record


def test_what_was_not_measured_reads_untestable_with_its_reason_never_nan(tmp_path):
    # alphas 0, 0.5 and 1 only: nothing extrapolates, so claims 3b-3e have no alpha to read
    grid = make_grid([0.0, 0.5, 1.0], np.full((12, 3), 3), np.tile([5, 3, 1], (12, 1)))
    claims = claims_of(grid)
    for key in ("opt_below_low", "corr_below_low"):
        assert claims.loc[key, "verdict"] == "untestable (no alpha below 0)"
        assert "smallest alpha is 0" in claims.loc[key, "note"]
    for key in ("opt_beyond_high", "corr_beyond_high"):
        assert claims.loc[key, "verdict"] == "untestable (no alpha above 1)"
        assert "largest alpha is 1" in claims.loc[key, "note"]
    assert claims.loc["opt_high_minus_low", "verdict"] == "reproduced"  # what the grid does measure is unaffected
    # as written to claims.csv and read back by the pages: the words, not NaN
    claims.reset_index().to_csv(tmp_path / "claims.csv", index=False)
    back = read_claims(tmp_path / "claims.csv").set_index("claim")
    assert back["verdict"].tolist() == claims["verdict"].tolist() and "nan" not in set(back["verdict"])
    assert value_text(back.loc["opt_below_low", "value"], np.nan, np.nan) == "–"
    assert value_text(0.25, np.nan, np.nan) == "+0.250"  # no resamples: the value without "[nan, nan]"
    # nothing solved at any alpha: the ensembles and a flat solve rate are untestable for that reason, not saturated
    unsolved = claims_of(make_grid([-0.5, 0.0, 1.0, 1.5], np.zeros((12, 4), int), np.tile([6, 4, 2, 1], (12, 1))))
    for key in ("ensemble_uniform", "ensemble_selected", "ac_high_minus_low"):
        assert unsolved.loc[key, "verdict"] == "untestable (nothing solved)", key
        assert unsolved.loc[key, "note"] == "no alpha solves any of the 12 problems"
    assert unsolved.loc["opt_high_minus_low", "verdict"] == "reproduced"  # failures still move


def test_claims_over_identical_endpoints_are_untestable():
    grid = make_grid([-0.5, 0.0, 0.5, 1.0, 1.5], np.full((12, 5), 3), np.tile([6, 5, 4, 2, 1], (12, 1)))
    assert claims_of(grid).loc["opt_high_minus_low", "verdict"] == "reproduced"
    same = claims_of(grid, endpoints=Endpoints(identical=True, unchanged=("low", "high")))
    assert (same["verdict"] == "untestable (endpoints identical)").all()
    assert same.loc["opt_high_minus_low", "note"].startswith(
        "the low and high checkpoints are identical: GRPO moved neither")
    assert same.loc["opt_high_minus_low", "value"] == claims_of(grid).loc["opt_high_minus_low", "value"]  # kept, unread
    # what the intervals alone say stays beside it: the same-regimes control asks whether noise reproduces a claim
    assert (same["ci_verdict"] == claims_of(grid)["verdict"]).all()
    noise = {"claims": [{"claim": k, "title": t, "values": [0.1], "verdicts": [v], "ci_verdicts": [ci]}
                        for k, t, v, ci in zip(same.index, same["title"], same["verdict"], same["ci_verdict"])]}
    assert control_outcome("same-regimes", noise, noise).startswith("Not as predicted: the pipeline reports a "
                                                                    "difference where none was put in, claim 1 (1 of 1")
    for c in noise["claims"]:
        c["ci_verdicts"] = ["not reproduced"]
    assert control_outcome("same-regimes", noise, noise).startswith("As predicted: none of claims 1, 2, 3a")
    one = claims_of(grid, endpoints=Endpoints(identical=False, unchanged=("low",)))
    assert (one["verdict"] == "untestable (low unchanged from the init)").all()
    assert (claims_of(grid, endpoints=Endpoints(identical=False))["verdict"] == claims_of(grid)["verdict"]).all()


def test_same_regimes_is_judged_by_the_rule_registered_with_it():
    """Reports registered before `science.control_rule` keep the any-seed rule they were registered with; from
    then on a directional claim counts against the control only as the study's verdict counts it (every seed)."""
    def control(*ci_per_claim, rule=None):
        claims = [{"claim": c.key, "title": c.title, "values": [0.1, 0.1], "verdicts": ["not reproduced"] * 2,
                   "ci_verdicts": ["not reproduced"] * 2} for c in CLAIMS]
        for claim, ci in zip(claims, ci_per_claim):
            claim["ci_verdicts"] = ci
        return {"claims": claims, **({"control_rule": rule} if rule else {})}
    one_seed = control(["reproduced", "not reproduced"])
    assert control_outcome("same-regimes", one_seed, one_seed).startswith(
        "Not as predicted: the pipeline reports a difference where none was put in, claim 1 (1 of 2 seeds).")
    one_seed["control_rule"] = "every_seed"
    held = control_outcome("same-regimes", one_seed, one_seed)
    assert held.startswith("As predicted: none of claims 1, 2, 3a") and "(every seed, the study's rule)" in held
    assert "One seed's CI alone lies on the claimed side for 1 (1 of 2 seeds)" in held
    both = control(["reproduced", "reproduced"], rule="every_seed")
    assert control_outcome("same-regimes", both, both) == ("Not as predicted: the pipeline reports a difference "
                                                          "where none was put in, claim 1 (2 of 2 seeds) (every seed).")
    assert validate({})["science"]["control_rule"] == "every_seed"


def test_grid_without_an_endpoint_is_one_error_line(tmp_path, capsys):
    paths, _ = write_design(tmp_path)
    assert main(["claims", "--evals", *[p for p in alpha_specs(paths) if "alpha+1.00" not in p],
                 "--out-dir", str(tmp_path / "claims")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "endpoints 0 and 1" in err[-1] and not (tmp_path / "claims").exists()


def test_science_rewrites_only_its_section_of_the_results_page(tmp_path, capsys):
    runs = [tmp_path / f"seed{s}" for s in (3, 4)]
    # seed 4's alpha 1.5 solves p3 once: one more problem within an ensemble's reach than in seed 3
    designs = [DESIGN, {**DESIGN, 1.5: DESIGN[1.5][:3] + [(1, 2, 0, 7, 0, 0)]}]
    for seed, run, design in zip((3, 4), runs, designs):
        run.mkdir()
        # no minimum headroom: the page shows each seed's allocation and "no ensemble chosen" (the design's
        # 4 problems never leave an ensemble the 8 problems evaluate.min_headroom asks for)
        run_claims(run, capsys, seed=seed, design=design, min_headroom=0)
    science = tmp_path / "results/science/mini/reasoning"
    argv = ["science", "--claims", *(str(r / "results/claims/mini/reasoning") for r in runs),
            "--approaches", *(str(r / "results/approaches/mini/reasoning") for r in runs),
            "--frontier-plot", str(runs[0] / "results/frontier/mini/reasoning/frontier.png"),
            "--benchmark", "mini", "--setting", "reasoning", "--out-dir", str(science)]
    # a reported seed that tuned the design is refused, in one line, before anything is written
    capsys.readouterr()
    assert main([*argv, "--config", '{"science": {"design_seeds": [0, 4]}}']) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "seed(s) [4] tuned the design" in err[0] and not science.exists()
    # the design's 10 samples per problem, in tables with no judge's provenance to name a calibration
    design_config = {"science": {"design_seeds": [0, 1, 2], "withdraw_if": {"calibration": False}}, "seed": 0,
                     "sample": {"n": 10}}
    assert main([*argv, "--config", json.dumps(design_config)]) == 0, \
        capsys.readouterr().err
    page = tmp_path / "docs/results.md"
    page.parent.mkdir()
    page.write_text("# title\n\nbefore\n<!-- science:start -->\nold numbers\n<!-- science:end -->\nafter\n")
    done = subprocess.run([sys.executable, str(ROOT / "scripts/science.py"), str(science), "--page", str(page)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    assert text.startswith("# title\n\nbefore\n<!-- science:start -->") and text.endswith("<!-- science:end -->\nafter\n")
    assert "old numbers" not in text and "seeds 3, 4" in text
    assert ("tuned by looking at the results of seeds 0, 1, 2 (`science.design_seeds`; `make demo` runs seed 0). "
            "The reported seeds, 3, 4, are disjoint from them.") in text
    rows = [line for line in text.splitlines() if line.startswith("| 1. optimization failures")]
    assert len(rows) == 1 and "-0.375 ± 0.000" in rows[0] and "**reproduced**" in rows[0]
    # helpers.write_approach_samples: every TLE declares brute force, so brute attempts never fail on correctness
    brute = [line for line in text.splitlines() if line.startswith("| WA+RE+CE among brute-force attempts")]
    assert len(brute) == 1 and set(brute[0].split(" | ")[1:-1]) == {"0.000"}
    # ... so the premise's ratio of correctness failures is undefined, not infinite
    ratio = [line for line in text.splitlines() if line.startswith("| efficient / brute-force WA+RE+CE")]
    assert len(ratio) == 1 and set(ratio[0].split(" | ")[1:-1]) == {"–"}
    # headroom and the ensemble claims' choices per seed, not the first seed's for all
    rows = {line.split(" | ")[0]: line for line in text.splitlines() if line.startswith(("| 3 | 4 |", "| 4 | 4 |"))}
    assert rows["| 3"].startswith("| 3 | 4 | 3 | 3 (alpha -0.50) |")
    assert rows["| 4"].startswith("| 4 | 4 | 4 | 3 (alpha -0.50) |")
    assert "no ensemble chosen" in rows["| 3"]
    ensemble_rows = [line for line in text.splitlines() if line.startswith("| 4b.")]
    assert len(ensemble_rows) == 1 and "headroom and allocation per seed" in ensemble_rows[0]
    assert "not reproduced (no ensemble chosen in 2 of 2)" in ensemble_rows[0]
    # claim 4b over the budget k = 1..n, from each seed's budget_curve.csv
    start = text.index("| k | single alpha pass@k (mean over 2 seeds)")
    budget = [line.split(" | ") for line in text[start:].splitlines()[2:12]]
    assert [int(r[0].strip("| ")) for r in budget] == list(range(1, 11))
    single = [float(r[1]) for r in budget]
    assert single == sorted(single) and single[0] < single[-1]  # pass@k grows with k
    # no seed's dev split chooses an ensemble, at any k: the allocation is the single alpha
    assert all(r[2] == r[1] and r[4] == "0 of 2" and r[5] == "–" for r in budget)
    assert (tmp_path / "docs/frontier-mini-reasoning-seeds.png").stat().st_size > 10_000
    assert (tmp_path / "docs/frontier-mini-reasoning.png").stat().st_size > 10_000
    # the page links its figures relative to itself, beside it in docs/
    figures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert sorted(figures) == ["frontier-mini-reasoning-seeds.png", "frontier-mini-reasoning.png"]
    assert all((page.parent / f).is_file() for f in figures)


def test_a_seed_with_no_ensemble_chosen_shows_no_number_in_the_science_tables():
    from ewa.analysis.claims import CLAIMS
    from ewa.analysis.science import claims_table, ensembles_table
    def seed(gain):
        rows = [{"claim": c.key, "title": c.title, "measure": c.measure, "value": -0.1, "ci_lo": -0.2, "ci_hi": -0.05,
                 "design_effect": 1.0, "verdict": "reproduced", "allocation": None, "note": ""} for c in CLAIMS]
        rows[-1].update(value=gain, ci_lo=gain, ci_hi=gain, verdict="untestable (saturated)", allocation="+1.50:2")
        return pd.DataFrame(rows)
    claims = [seed(float("nan")), seed(0.04), seed(0.02)]
    room = {"n_problems": 72, "solved_by_some_alpha": 72, "solved_by_best_single": 70, "best_single_alpha": 1.5}
    text = "\n".join(claims_table(claims, [1, 2, 3]) + ensembles_table(claims, [room] * 3, [1, 2, 3]))
    assert "nan" not in text.lower()
    row = next(line for line in text.splitlines() if line.startswith("| 4b."))
    assert "| – |" in row and "+0.030 ± 0.014 (over 2 of 3 seeds)" in row and "–, +0.040, +0.020" in row
    assert "| 1 | 72 | 72 | 70 (alpha +1.50) |" in text and "–, untestable (saturated)" in text
