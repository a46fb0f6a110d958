"""`ewa approaches` on the synthetic alpha grid of helpers.DESIGN, with plan lines written by ewa.prompts."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from helpers import alpha_specs, write_approach_samples, write_design

from ewa.analysis.approaches import approach_of
from ewa.cli import main
from ewa.prompts import code_answer


def test_plan_lines_name_the_approach():
    assert approach_of(code_answer("x", "brute")) == "brute"
    assert approach_of(code_answer("x", "wrong")) == "efficient"  # wrong variants claim efficiency
    assert approach_of(code_answer("x")) == "unstated"
    assert approach_of("Approach: dynamic programming.\n```python\n```") == "unstated"


def test_table_counts_each_approach_and_its_verdicts(tmp_path, capsys):
    evals, _ = write_design(tmp_path)
    samples = write_approach_samples(evals)
    out = tmp_path / "approaches"
    assert main(["approaches", "--evals", *alpha_specs(evals), "--samples", *alpha_specs(samples),
                 "--out-dir", str(out)]) == 0, capsys.readouterr().err
    table = pd.read_csv(out / "approaches.csv").set_index(["alpha", "approach"])
    truth = pd.concat(pd.read_parquet(p).assign(alpha=a) for a, p in zip((-0.5, 0.0, 0.5, 1.0, 1.5), evals))
    truth["approach"] = ["unstated" if s == 0 else "brute" if v == "TLE" else "efficient"
                         for s, v in zip(truth.sample_id, truth.verdict)]
    for (alpha, approach), group in truth.groupby(["alpha", "approach"]):
        row = table.loc[(alpha, approach)]
        assert row.n == len(group)
        assert row.share == pytest.approx(len(group) / (truth.alpha == alpha).sum(), abs=1e-4)
        assert row.WA == pytest.approx((group.verdict == "WA").mean(), abs=1e-4)
        assert row["corr"] == pytest.approx(group.verdict.isin(["WA", "RE", "CE"]).mean(), abs=1e-4)
    assert table.xs("brute", level="approach")["TLE"].eq(1).all()
    assert table.groupby(level="alpha")["share"].sum().round(6).eq(1).all()
    assert json.loads((out / "provenance.json").read_text())["config"]["samples"]


def test_a_judged_sample_missing_from_the_samples_is_one_error_line(tmp_path, capsys):
    evals, _ = write_design(tmp_path)
    samples = write_approach_samples(evals)
    lines = Path(samples[2]).read_text().splitlines()
    Path(samples[2]).write_text("\n".join(lines[:-1]) + "\n")
    out = tmp_path / "approaches"
    assert main(["approaches", "--evals", *alpha_specs(evals), "--samples", *alpha_specs(samples),
                 "--out-dir", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and samples[2] in err[0] and "1 judged sample(s)" in err[0]
    assert not out.exists()
