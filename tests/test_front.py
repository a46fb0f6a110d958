"""The report's front page renders the run's config and every claim with its verdict."""
from __future__ import annotations

import html

import numpy as np
import pandas as pd
from docutils.core import publish_parts

from ewa.analysis.claims import CLAIMS, measure
from ewa.analysis.front import CATEGORIES, front_page
from ewa.config import validate
from ewa.train.outcome import Endpoints

from helpers import claims_settings
from test_claims import make_grid


def rendered(rst: str) -> str:
    """The page as `snakemake --report` shows it (the link targets it appends included)."""
    rst += "".join(f"\n.. _{name}: javascript:void(0)" for name in [n for n, _ in CATEGORIES] + ["Workflow", "Statistics"])
    page = html.unescape(publish_parts(rst, writer="html", settings_overrides={"report_level": 2})["html_body"])
    assert "system-message" not in page  # docutils' own complaints would show up in the report
    return page


def test_front_page_shows_the_config_and_every_claim_as_written(tmp_path):
    claims = pd.DataFrame([{"title": c.title, "value": 0.01 * i, "ci_lo": -0.2, "ci_hi": 0.3,
                            "verdict": "reproduced" if i % 2 else "not reproduced"} for i, c in enumerate(CLAIMS)])
    (tmp_path / "claims").mkdir()
    claims.to_csv(tmp_path / "claims" / "claims.csv", index=False)
    config = validate({"merge": {"alphas": [-0.5, 0, 1, 2]}, "sample": {"n": 16}, "seed": 7})
    rst = front_page(config, {"mini / reasoning": tmp_path / "claims"})
    # the link targets `snakemake --report` appends: one per category, the workflow and the statistics
    rst += "".join(f"\n.. _{name}: javascript:void(0)" for name in [n for n, _ in CATEGORIES] + ["Workflow", "Statistics"])
    page = html.unescape(publish_parts(rst, writer="html", settings_overrides={"report_level": 2})["html_body"])
    assert "system-message" not in page  # docutils' own complaints would show up in the report
    assert "-0.50, +0.00, +1.00, +2.00" in page and "n = 16 per problem; seed 7" in page
    for c, r in zip(CLAIMS, claims.itertuples()):
        assert f"<td>{c.title}</td>\n<td>{r.value:+.3f} [-0.200, +0.300]</td>\n<td>{r.verdict}</td>" in page


def test_front_page_says_first_when_the_endpoints_are_identical_and_never_prints_nan(tmp_path):
    """The claims of a grid without extrapolation and with identical endpoints, as `ewa claims` writes them."""
    grid = make_grid([0.0, 0.5, 1.0], np.zeros((6, 3), int), np.tile([5, 3, 1], (6, 1)))
    config = validate({"merge": {"alphas": [0, 0.5, 1]}})
    for name, ends in (("plain", None), ("same", Endpoints(identical=True, unchanged=("low", "high")))):
        table = measure(grid, None, claims_settings(bootstrap=0), ends).table
        (tmp_path / name).mkdir()
        table.to_csv(tmp_path / name / "claims.csv", index=False)
    plain = rendered(front_page(config, {"mini / reasoning": tmp_path / "plain"}))
    assert "nan" not in plain.lower() and "No claim is testable" not in plain
    for words in ("untestable (no alpha below 0)", "untestable (no alpha above 1)", "untestable (nothing solved)"):
        assert f"<td>{words}</td>" in plain
    same = rendered(front_page(config, {"mini / reasoning": tmp_path / "same"}))
    assert "nan" not in same.lower()
    first = same.index("No claim is testable in this run")
    assert first < same.index("ewa trains one RL checkpoint")  # before the study and the claims
    assert "the low and high checkpoints are identical" in same[first:same.index("ewa trains one RL checkpoint")]
    assert same.count("<td>untestable (endpoints identical)</td>") == len(CLAIMS)
