"""`ewa claims`, `ewa science` and scripts/science.py on the synthetic alpha grid of helpers.DESIGN
(rates known by hand)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from helpers import ROOT, alpha_specs, expected_rate, write_approach_samples, write_design

from ewa.analysis.claims import verdict
from ewa.cli import main

OPT, CORR, AC = {"TLE", "MLE"}, {"WA", "RE", "CE"}, {"AC"}


def run_claims(tmp_path: Path, capsys, seed: int = 0) -> pd.DataFrame:
    """frontier, claims and approaches of one run, into tmp_path/results/{step}/mini/reasoning."""
    paths, problems = write_design(tmp_path)
    evals = alpha_specs(paths)
    results = tmp_path / "results"
    out = results / "frontier" / "mini" / "reasoning"
    assert main(["frontier", "--evals", *evals, "--problems", str(problems), "--k", "1", "--budget", "10",
                 "--bootstrap", "200", "--formats", "png", "--out-dir", str(out)]) == 0, capsys.readouterr().err
    assert main(["claims", "--evals", *evals, "--ensembles", str(out / "ensembles.csv"), "--bootstrap", "200",
                 "--seed", str(seed), "--out-dir", str(results / "claims/mini/reasoning")]) == 0, \
        capsys.readouterr().err
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
    assert claims.loc["interpolated_between", "value"] == 1.0  # alpha 0.5 sits inside both ranges
    for row in claims.itertuples():
        assert row.ci_lo <= row.value + 1e-12 and row.value <= row.ci_hi + 1e-12, row.Index
    # every problem moves the same way: the CIs exclude 0
    assert claims.loc["opt_high_minus_low", "verdict"] == "reproduced"
    assert claims.loc["corr_below_low", "verdict"] == "reproduced"
    assert claims.loc["ac_high_minus_low", "verdict"] == "not reproduced"  # +0.075 is not flat
    assert claims.loc["opt_beyond_high", "verdict"] == "not reproduced"  # rises again beyond 1
    ens = pd.read_csv(tmp_path / "results/frontier/mini/reasoning/ensembles.csv")
    uniform = ens[(ens.split == "all") & (ens.ensemble == "uniform all")].iloc[0]
    assert claims.loc["ensemble_uniform", "value"] == pytest.approx(uniform.gain_vs_best_single)
    assert claims.loc["ensemble_uniform", "note"] == "headroom: 3 of 4 problems solved by some alpha, 3 by the best single one"
    assert "<table" in (tmp_path / "results/claims/mini/reasoning/claims.html").read_text()
    per_alpha = pd.read_csv(tmp_path / "results/claims/mini/reasoning/per_alpha.csv")
    assert per_alpha.opt.tolist() == pytest.approx([expected_rate(a, OPT) for a in (-0.5, 0.0, 0.5, 1.0, 1.5)])


@pytest.mark.parametrize("expect, point, lo, hi, outcome", [
    ("<0", -0.3, -0.4, -0.2, "reproduced"),
    ("<0", -0.1, -0.3, 0.1, "direction only"),
    ("<0", 0.1, 0.0, 0.2, "not reproduced"),
    (">0", 0.1, 0.02, 0.2, "reproduced"),
    (">0", 0.1, -0.02, 0.2, "direction only"),
    ("~0", 0.04, -0.1, 0.1, "reproduced"),
    ("~0", 0.2, 0.1, 0.3, "not reproduced"),
    (">=0", 0.0, 0.0, 0.0, "reproduced"),
    (">=0", -0.01, -0.03, 0.01, "within CI"),
    (">=0", -0.05, -0.08, -0.02, "not reproduced"),
    ("all", 1.0, 1.0, 1.0, "reproduced"),
    ("all", 0.6, 0.6, 0.6, "partly"),
])
def test_verdict_rules(expect, point, lo, hi, outcome):
    assert verdict(expect, point, lo, hi) == outcome


def test_grid_without_an_endpoint_is_one_error_line(tmp_path, capsys):
    paths, _ = write_design(tmp_path)
    assert main(["claims", "--evals", *[p for p in alpha_specs(paths) if "alpha+1.00" not in p],
                 "--out-dir", str(tmp_path / "claims")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "endpoints 0 and 1" in err[-1] and not (tmp_path / "claims").exists()


def test_science_rewrites_only_its_readme_section(tmp_path, capsys):
    runs = [tmp_path / f"seed{s}" for s in (3, 4)]
    for seed, run in zip((3, 4), runs):
        run.mkdir()
        run_claims(run, capsys, seed=seed)
    science = tmp_path / "results/science/mini/reasoning"
    assert main(["science", "--claims", *(str(r / "results/claims/mini/reasoning") for r in runs),
                 "--approaches", *(str(r / "results/approaches/mini/reasoning") for r in runs),
                 "--frontier-plot", str(runs[0] / "results/frontier/mini/reasoning/frontier.png"),
                 "--benchmark", "mini", "--setting", "reasoning", "--out-dir", str(science)]) == 0, \
        capsys.readouterr().err
    readme = tmp_path / "README.md"
    readme.write_text("# title\n\nbefore\n<!-- science:start -->\nold numbers\n<!-- science:end -->\nafter\n")
    done = subprocess.run([sys.executable, str(ROOT / "scripts/science.py"), str(science), "--readme", str(readme)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    text = readme.read_text()
    assert text.startswith("# title\n\nbefore\n<!-- science:start -->") and text.endswith("<!-- science:end -->\nafter\n")
    assert "old numbers" not in text and "seeds 3, 4" in text
    rows = [line for line in text.splitlines() if line.startswith("| 1. optimization failures")]
    assert len(rows) == 1 and "-0.375 ± 0.000" in rows[0] and "**reproduced**" in rows[0]
    # helpers.write_approach_samples: every TLE declares brute force, so brute attempts never fail on correctness
    brute = [line for line in text.splitlines() if line.startswith("| WA+RE+CE among brute-force attempts")]
    assert len(brute) == 1 and set(brute[0].split(" | ")[1:-1]) == {"0.000"}
    assert (tmp_path / "docs/frontier-mini-reasoning-seeds.png").stat().st_size > 10_000
    assert (tmp_path / "docs/frontier-mini-reasoning.png").stat().st_size > 10_000
