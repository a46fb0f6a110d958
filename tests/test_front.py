"""The report's front page renders the run's config and every claim with its verdict."""
from __future__ import annotations

import html

import pandas as pd
from docutils.core import publish_parts

from ewa.analysis.claims import CLAIMS
from ewa.analysis.front import CATEGORIES, front_page
from ewa.config import validate


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
