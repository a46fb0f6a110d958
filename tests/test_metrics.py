"""pass@k against combinatorics, per-problem verdict counting, bad evaluation tables, rates and
bootstrap CIs."""
from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from helpers import metrics_settings

from ewa.analysis.bootstrap import bootstrap_counts, design_effect, weighted_means, weighted_samples
from ewa.analysis.frontier import frontier_table
from ewa.analysis.metrics import miss_probability, pass_at_k, per_problem_stats, read_evals
from ewa.cli import main
from ewa.verdicts import VERDICTS


def exact_pass_at_k(n, c, k) -> Fraction:
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


def write_evals(path, verdicts_by_problem: dict[str, list[str]], **overrides):
    """An evaluation table in the documented schema, one row per sample."""
    rows = [{"problem_id": pid, "sample_id": s, "verdict": v, "tests_passed": 0, "tests_total": 3,
             "first_failed_test": None if v == "AC" else 0, "first_failed_tier": None if v == "AC" else 0,
             "cpu_time_s": 0.01, "peak_memory_mb": 8.0}
            for pid, vs in verdicts_by_problem.items() for s, v in enumerate(vs)]
    frame = pd.DataFrame(rows, columns=["problem_id", "sample_id", "verdict", "tests_passed", "tests_total",
                                        "first_failed_test", "first_failed_tier", "cpu_time_s", "peak_memory_mb"])
    for col, value in overrides.items():
        if value is None:
            frame = frame.drop(columns=col)
        else:
            frame[col] = value
    frame.to_parquet(path, index=False)
    return path


# --- pass@k -----------------------------------------------------------------------------------------

def test_pass_at_k_matches_comb_for_every_small_case():
    cases = [(n, c, k) for n in range(1, 16) for c in range(n + 1) for k in range(1, n + 1)]
    n, c, k = (np.array(x) for x in zip(*cases))
    got = pass_at_k(n, c, k)
    want = np.array([float(exact_pass_at_k(*case)) for case in cases])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    for case in cases[::37]:  # the scalar path agrees too and returns a plain float
        assert isinstance(pass_at_k(*case), float)
        assert pass_at_k(*case) == pytest.approx(float(exact_pass_at_k(*case)), abs=1e-14)


def test_pass_at_k_matches_enumerating_every_draw():
    for n, c, k in [(5, 2, 2), (6, 1, 3), (7, 3, 4), (6, 5, 1), (7, 0, 3)]:
        samples = [True] * c + [False] * (n - c)
        draws = list(itertools.combinations(range(n), k))
        hit = sum(any(samples[i] for i in d) for d in draws) / len(draws)
        assert pass_at_k(n, c, k) == pytest.approx(hit, abs=1e-14)


def test_pass_at_k_edges():
    assert pass_at_k(10, 0, 3) == 0.0
    assert pass_at_k(10, 10, 3) == 1.0
    assert pass_at_k(10, 8, 3) == 1.0  # any 3 of 10 contain one of the 8
    assert pass_at_k(1, 1, 1) == 1.0
    with pytest.raises(ValueError, match="exceeds n"):
        pass_at_k(5, 2, 6)
    with pytest.raises(ValueError, match="exceeds n"):
        pass_at_k(np.array([10, 4]), np.array([1, 1]), 5)
    with pytest.raises(ValueError):
        pass_at_k(5, 6, 1)  # c > n
    with pytest.raises(ValueError):
        pass_at_k(5, 2, 0)
    with pytest.raises(ValueError):
        pass_at_k(5, 2.5, 1)
    assert miss_probability(5, 2, 0) == 1.0


def test_pass_at_k_broadcasts():
    n = np.array([[10], [20], [30]])
    c = np.array([[1], [5], [0]])
    k = np.array([1, 2, 5, 10])
    got = pass_at_k(n, c, k)
    assert got.shape == (3, 4)
    for i in range(3):
        for j in range(4):
            assert got[i, j] == pytest.approx(float(exact_pass_at_k(n[i, 0], c[i, 0], k[j])), abs=1e-14)
    assert pass_at_k([10, 10], [0, 10], 1).tolist() == [0.0, 1.0]


def test_pass_at_k_stable_at_paper_scale():
    n = 250
    ks = np.arange(100, 251)
    for c in (1, 2, 5, 50, 150, 249):
        got = pass_at_k(n, c, ks)
        want = np.array([float(exact_pass_at_k(n, c, int(k))) for k in ks])
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got, want, rtol=1e-12)
        assert np.all(np.diff(got) >= -1e-15)  # more samples never hurt
    # far tail: C(n-c,k)/C(n,k) ~ 1e-300 still comes out right where the naive ratio overflows floats
    assert miss_probability(1000, 400, 300) == pytest.approx(
        float(Fraction(math.comb(600, 300), math.comb(1000, 300))), rel=1e-9)


# --- reading tables ---------------------------------------------------------------------------------

def test_read_evals_counts_verdicts_per_problem(tmp_path):
    path = write_evals(tmp_path / "e.parquet", {"b": ["AC", "WA", "TLE"], "a": ["MLE", "MLE", "CE", "RE"]})
    pc = read_evals(path)
    assert pc.problem_ids.tolist() == ["a", "b"]
    assert pc.n.tolist() == [4, 3] and pc.c.tolist() == [0, 1]
    assert dict(zip(VERDICTS, pc.counts[0])) == {"AC": 0, "WA": 0, "TLE": 0, "MLE": 2, "RE": 1, "CE": 1}


@pytest.mark.parametrize("case, message", [
    ("missing", "missing column(s) first_failed_tier"),
    ("verdict", "column 'verdict' has unknown value(s) ['OK']"),
    ("empty", "empty evaluation table"),
    ("duplicate", "column 'sample_id' repeats"),
])
def test_bad_tables_fail_with_one_line_naming_file_and_column(tmp_path, capsys, case, message):
    path = tmp_path / f"{case}.parquet"
    if case == "missing":
        write_evals(path, {"a": ["AC"]}, first_failed_tier=None)
    elif case == "verdict":
        write_evals(path, {"a": ["AC", "OK"]})
    elif case == "empty":
        write_evals(path, {})
    else:
        write_evals(path, {"a": ["AC", "WA"]}, sample_id=[0, 0])
    rc = main(["frontier", "--evals", f"alpha=0:{path}", "--bootstrap", "0", "--formats",
               "--out-dir", str(tmp_path / "out")])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip() and "read evals" not in line]
    assert rc == 2
    assert len(err) == 1 and str(path) in err[0] and message in err[0]
    assert not (tmp_path / "out").exists()


# --- rates and the bootstrap ------------------------------------------------------------------------

def counts_of(*verdict_lists):
    return np.array([[vs.count(v) for v in VERDICTS] for vs in verdict_lists])


def test_rates_on_a_known_mix():
    counts = counts_of(["AC", "AC", "WA", "TLE"],      # solved
                       ["TLE", "TLE", "MLE", "WA"],    # unsolved: 3/4 optimization failures
                       ["RE", "CE", "WA", "WA"])       # unsolved: all correctness failures
    table = frontier_table(counts[:, None, :], np.array([0.0]), metrics_settings(k=(1, 4), bootstrap=0))
    got = table.iloc[0]
    assert got["ac_rate"] == pytest.approx(2 / 12) and got["pass@1"] == pytest.approx(2 / 12)
    assert got["pass@4"] == pytest.approx(1 / 3) and got["solved_rate"] == pytest.approx(1 / 3)
    assert got["optimization_failure_rate"] == pytest.approx((1 + 3 + 0) / 12)
    assert got["correctness_failure_rate"] == pytest.approx((1 + 1 + 4) / 12)
    assert got["unsolved_optimization_failure_rate"] == pytest.approx((3 / 4 + 0) / 2)
    assert got["unsolved_correctness_failure_rate"] == pytest.approx((1 / 4 + 1) / 2)
    assert got["share_WA"] == pytest.approx(4 / 12) and got["share_MLE"] == pytest.approx(1 / 12)


def test_pass_at_k_beyond_the_samples_is_nan_not_an_error():
    names, X, W = per_problem_stats(counts_of(["AC", "WA"], ["WA", "WA", "AC"]), ks=(1, 3))
    value, lo, hi = weighted_means(X, W, bootstrap_counts(2, 50, 0), ci=0.95)
    got = dict(zip(names, value))
    assert np.isnan(got["pass@3"]) and got["pass@1"] == pytest.approx((1 / 2 + 1 / 3) / 2)


def test_bootstrap_ci_contains_estimate_is_seeded_and_matches_a_plain_loop():
    rng = np.random.default_rng(3)
    counts = np.stack([rng.multinomial(20, rng.dirichlet(np.ones(6))) for _ in range(40)])
    names, X, W = per_problem_stats(counts, ks=(1, 5))
    boot = bootstrap_counts(40, 400, seed=7)
    assert boot.shape == (400, 40) and np.all(boot.sum(axis=1) == 40)
    value, lo, hi = weighted_means(X, W, boot, ci=0.95)
    ok = ~np.isnan(value)
    assert np.all((lo[ok] <= value[ok]) & (value[ok] <= hi[ok])) and np.all(hi[ok] > lo[ok])
    again = weighted_means(X, W, bootstrap_counts(40, 400, seed=7), ci=0.95)
    np.testing.assert_array_equal(np.nan_to_num(again[1]), np.nan_to_num(lo))
    other = weighted_means(X, W, bootstrap_counts(40, 400, seed=8), ci=0.95)
    assert not np.allclose(np.nan_to_num(other[1]), np.nan_to_num(lo))
    # the vectorised resampling equals resampling problem indices one replicate at a time
    idx = np.random.default_rng(7).integers(0, 40, size=(400, 40))
    s = names.index("optimization_failure_rate")
    loop = [X[i, s].mean() for i in idx]
    assert np.percentile(loop, [2.5, 97.5]) == pytest.approx([lo[s], hi[s]], abs=1e-12)


def test_bootstrap_draws_whole_clusters_in_an_order_free_way():
    families = np.array(["b", "a", "b", "c", "a", "c"])
    boot = bootstrap_counts(families, 300, seed=2)
    assert boot.shape == (300, 6) and np.all(boot.sum(axis=1) == 6)  # three clusters of two, drawn three times
    for x, y in ((0, 2), (1, 4), (3, 5)):  # siblings are always drawn together
        np.testing.assert_array_equal(boot[:, x], boot[:, y])
    order = np.array([1, 4, 0, 2, 3, 5])  # the same problems listed by family: each keeps its draws
    np.testing.assert_array_equal(bootstrap_counts(families[order], 300, seed=2), boot[:, order])
    # P singleton clusters 0..P-1 are P independent problems, draw for draw
    np.testing.assert_array_equal(bootstrap_counts(np.arange(40), 50, seed=7), bootstrap_counts(40, 50, seed=7))


def test_cluster_bootstrap_covers_at_the_nominal_rate_where_the_problem_bootstrap_does_not():
    """1000 simulated datasets of 36 families x 2 siblings whose values share 80% of their variance (ICC
    0.8): the mean's 95% CI covers the true mean about 95% of the time when families are resampled, and
    visibly less when siblings are resampled as if independent (their design effect is 1 + ICC = 1.8)."""
    C, m, icc, datasets, reps = 36, 2, 0.8, 1000, 1000
    rng = np.random.default_rng(0)
    family = np.repeat(np.arange(C), m)
    x = rng.normal(0, np.sqrt(icc), (C, datasets))[family] + rng.normal(0, np.sqrt(1 - icc), (C * m, datasets))
    ones = np.ones_like(x)  # the true mean of every dataset is 0
    by_family, by_problem = bootstrap_counts(family, reps, seed=1), bootstrap_counts(C * m, reps, seed=1)
    coverage = {}
    for name, boot in (("family", by_family), ("problem", by_problem)):
        _, lo, hi = weighted_means(x, ones, boot, ci=0.95)
        coverage[name] = float(np.mean((lo < 0) & (0 < hi)))
    # measured (seeded): 0.933 and 0.831; a percentile interval over 36 clusters runs a little short of 95%
    assert 0.92 <= coverage["family"] <= 0.97, coverage
    assert coverage["problem"] <= 0.88 and coverage["family"] - coverage["problem"] >= 0.06, coverage
    deff = design_effect(weighted_samples(x, ones, by_family), weighted_samples(x, ones, by_problem))
    assert np.median(deff) == pytest.approx(1 + (m - 1) * icc, abs=0.15)
    # the coverage asked for is the coverage given
    _, lo90, hi90 = weighted_means(x, ones, by_family, ci=0.9)
    assert 0.86 <= np.mean((lo90 < 0) & (0 < hi90)) <= 0.93  # measured: 0.878


def test_ci_coverage_and_cluster_unit_come_from_the_settings():
    with pytest.raises(ValueError, match="cluster_by must be one of family, problem"):
        metrics_settings(cluster_by="seed")
    # the frontier's CIs resample families: two identical siblings per family widen them
    counts = np.repeat(counts_of(["AC", "WA"], ["WA", "WA"], ["AC", "AC"], ["TLE", "AC"], ["WA", "TLE"], ["AC", "MLE"]),
                       2, axis=0)[:, None, :]
    families = np.repeat([f"f{i}" for i in range(6)], 2)
    widths = {}
    for ci in (0.5, 0.95):
        for name, clusters in (("family", families), ("problem", None)):
            t = frontier_table(counts, np.array([0.0]), metrics_settings(k=(1,), bootstrap=400, ci=ci), clusters)
            widths[name, ci] = float(t.ac_rate_hi[0] - t.ac_rate_lo[0])
    assert widths["family", 0.95] > 1.2 * widths["problem", 0.95]
    assert widths["family", 0.5] < widths["family", 0.95]
