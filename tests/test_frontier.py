"""The frontier across alphas on a synthetic evaluation set with known verdict mixes (helpers.DESIGN),
Pareto sets, alpha parsing, and `ewa frontier` end to end."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers import alpha_specs, expected_rate, write_design

from ewa.alphas import alpha_label, parse_alpha_spec
from ewa.analysis.frontier import load_grid, pareto_mask
from ewa.analysis.metrics import id_family
from ewa.cli import main
from ewa.problems import Problem


def test_labels_and_alpha_specs():
    assert [alpha_label(a) for a in (-1, 0, 0.25, 1, 1.0000000001, 1.5)] == [
        "extrapolated", "endpoint", "interpolated", "endpoint", "endpoint", "extrapolated"]
    assert parse_alpha_spec("alpha=-0.5:a/b.parquet") == (-0.5, Path("a/b.parquet"))
    assert parse_alpha_spec("1.25:x.parquet") == (1.25, Path("x.parquet"))
    # the alpha is always given: a path is never parsed for one
    with pytest.raises(ValueError, match="expected alpha=A:PATH"):
        parse_alpha_spec("results/evals/alpha+0.50/lcb/tools.parquet")
    with pytest.raises(ValueError, match="expected alpha=A:PATH"):
        parse_alpha_spec("alpha=abc:x.parquet")


def test_pareto_on_hand_made_points():
    pts = np.array([[0.1, 0.9], [0.2, 0.5], [0.3, 0.6], [0.5, 0.2], [0.5, 0.2], [0.9, 0.1], [0.6, 0.3],
                    [np.nan, 0.0]])
    # (0.3,0.6) is beaten by (0.2,0.5); (0.6,0.3) by (0.5,0.2); equal points do not dominate each other
    assert pareto_mask(pts).tolist() == [True, True, False, True, True, True, False, False]
    # maximise the second column instead: only points with no better-in-both rival remain
    assert pareto_mask(pts[:7], minimize=[True, False]).tolist() == [True, False, False, False, False, False,
                                                                      False]
    assert pareto_mask(np.array([[1.0, 1.0]])).tolist() == [True]


def test_frontier_on_a_synthetic_eval_set(tmp_path, capsys):
    paths, problems = write_design(tmp_path)
    out = tmp_path / "frontier" / "mini" / "reasoning"
    rc = main(["frontier", "--evals", *alpha_specs(paths), "--problems", str(problems), "--k", "1", "5",
               "--budget", "10", "--bootstrap", "200", "--formats", "png", "--out-dir", str(out)])
    assert rc == 0, capsys.readouterr().err
    front = pd.read_csv(out / "frontier.csv")
    assert front.alpha.tolist() == [-0.5, 0.0, 0.5, 1.0, 1.5]
    assert front.label.tolist() == ["extrapolated", "endpoint", "interpolated", "endpoint", "extrapolated"]
    assert front.optimization_failure_rate[0] == pytest.approx(0.725)  # (3 * 0.7 + 0.8) / 4, by hand
    for row in front.itertuples():
        assert row.optimization_failure_rate == pytest.approx(expected_rate(row.alpha, {"TLE", "MLE"}))
        assert row.correctness_failure_rate == pytest.approx(expected_rate(row.alpha, {"WA", "RE", "CE"}))
        assert row.ac_rate == pytest.approx(expected_rate(row.alpha, {"AC"}))
        assert row.optimization_failure_rate_lo <= row.optimization_failure_rate <= row.optimization_failure_rate_hi
    unsolved = front.set_index("alpha")
    assert unsolved.loc[-0.5, "unsolved_optimization_failure_rate"] == pytest.approx(0.8)  # only p3
    assert unsolved.loc[1.5, "unsolved_optimization_failure_rate"] == pytest.approx((0.2 + 0.3) / 2)  # p2, p3
    assert front.solved_rate.tolist() == pytest.approx([0.75, 0.75, 0.75, 0.75, 0.5])
    assert front["pass@1"].tolist() == pytest.approx(front.ac_rate.tolist())
    # alpha 1.5 has more of both failure kinds than alpha 1.0: the only dominated point
    assert front.pareto.tolist() == [True, True, True, True, False]

    by_diff = pd.read_csv(out / "frontier_by_difficulty.csv").set_index(["difficulty", "alpha"])
    assert by_diff.loc[("hard", 1.5), "optimization_failure_rate"] == pytest.approx(
        expected_rate(1.5, {"TLE", "MLE"}, problems=[2, 3]))

    wide = pd.read_csv(out / "solve_matrix.csv").set_index("problem_id")
    assert wide.loc["p2"].tolist() == ["hard", 2, 3, 4, 4, 0]
    long = pd.read_parquet(out / "solve_matrix.parquet")
    assert len(long) == 20 and long.n_samples.eq(10).all()
    pairs = pd.read_csv(out / "overlaps.csv").set_index(["alpha_a", "alpha_b"])
    assert pairs.loc[(1.0, 1.5)].tolist() == [3, 2, 2, 1, 0, 3, pytest.approx(2 / 3)]
    assert pairs.loc[(-0.5, 0.0), "jaccard"] == 1.0

    ens = pd.read_csv(out / "ensembles.csv")
    singles = ens[ens.kind == "single"].set_index("ensemble")
    assert singles.loc["single +1.50", "pass_at_budget"] == pytest.approx(0.5)  # pass@n = solved rate
    assert {"uniform all", "uniform endpoints", "uniform [0,1]", "uniform extrapolated",
            "optimized (dev-selected)"} <= set(ens.ensemble)
    assert "uniform interpolated" not in set(ens.ensemble)  # one interpolated alpha is a single
    # dev and test are split by family (helpers.FAMILY: p0-p2 one family, p3 another), never 2 + 2
    assert set(ens.loc[ens.split == "test", "n_problems"]) in ({1}, {3})

    summary = json.loads((out / "summary.json").read_text())
    assert summary["solved_by_any_alpha"] == 3 and summary["solved_by_every_alpha"] == 2
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["config"]["metrics"]["k"] == [1, 5] and len(prov["inputs"]) == 6
    assert (out / "frontier.png").stat().st_size > 10_000 and not (out / "frontier.svg").exists()


def test_families_come_from_the_problems_file(tmp_path):
    paths, problems = write_design(tmp_path)
    grid = load_grid([(a, p) for a, p in zip((-0.5, 0.0, 0.5, 1.0, 1.5), paths)], problems)
    assert grid.families.tolist() == ["f0", "f0", "f0", "f1"]  # meta.family, as the mini loader writes it
    record = json.loads(problems.read_text().splitlines()[0])
    del record["meta"]
    assert Problem.from_record(record).family == "p0"  # no family: the problem is its own
    # without a problems file the family is read from the id: a mini id names it, any other is its own
    assert load_grid([(0.0, paths[1])]).families.tolist() == ["p0", "p1", "p2", "p3"]
    assert [id_family(p) for p in ("mini/sum_pairs/k3", "lcb/abc301_a", "humaneval/12")] == [
        "sum_pairs", "lcb/abc301_a", "humaneval/12"]


def test_bad_grids_fail_cleanly(tmp_path, capsys):
    paths, problems = write_design(tmp_path)
    out = tmp_path / "out"
    short = tmp_path / "short.parquet"
    first = alpha_specs(paths)[0]
    pd.read_parquet(paths[1]).query("problem_id != 'p3'").to_parquet(short, index=False)
    for argv, message in [
        (["--evals", first, f"alpha=0:{short}"], "problems differ"),
        (["--evals", first, f"alpha=-0.5:{paths[1]}"], "alpha -0.50 is given twice"),
        (["--evals", first, "nowhere/model.parquet"], "expected alpha=A:PATH"),
        (["--evals", first, "alpha=2:missing.parquet"], "missing.parquet"),
    ]:
        rc = main(["frontier", *argv, "--bootstrap", "0", "--formats", "--out-dir", str(out)])
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip() and "read evals" not in line]
        assert rc == 2 and len(err) == 1 and message in err[0], (argv, err)
        assert not out.exists()
