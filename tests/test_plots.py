"""The figures render from real frontier/ensemble tables, reproducibly, with and without CIs."""
from __future__ import annotations

import struct
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from helpers import ensemble_settings, metrics_settings

from ewa.analysis import plots
from ewa.analysis.ensemble import budget_curve, matched_budget_table
from ewa.analysis.frontier import AlphaGrid, frontier_table, overlaps, pass_at_k_curves

ALPHAS = np.array([-1.0, -0.5, 0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0])


def synthetic_grid(P=50, n=16, seed=0) -> AlphaGrid:
    """Problems of varying hardness; low alphas fail by TLE/MLE, high alphas by WA/RE/CE."""
    rng = np.random.default_rng(seed)
    hard = rng.normal(size=P)
    counts = np.zeros((P, len(ALPHAS), 6), dtype=np.int64)
    for a, alpha in enumerate(ALPHAS):
        p_ac = 1 / (1 + np.exp(2 * hard + 1 - 0.8 * np.sin(2 * alpha)))
        opt = np.clip(0.55 - 0.25 * alpha, 0.05, 0.95)
        for p in range(P):
            probs = [p_ac[p], *(1 - p_ac[p]) * np.array([opt * 0.8, opt * 0.2, (1 - opt) * 0.7,
                                                         (1 - opt) * 0.2, (1 - opt) * 0.1])]
            counts[p, a] = rng.multinomial(n, [probs[0], probs[3], probs[1], probs[2], probs[4], probs[5]])
    return AlphaGrid(problem_ids=np.array([f"p{i}" for i in range(P)], dtype=object), counts=counts, alphas=ALPHAS,
                     sources=["synthetic"] * len(ALPHAS))


def png_size(path):
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def render_all(grid, front, ens, out):
    return [*plots.plot_frontier(front, out / "frontier"), *plots.plot_pass_at_k(pass_at_k_curves(grid), out / "pass_at_k"),
            *plots.plot_ensembles(ens, out / "ensembles"), *plots.plot_overlaps(overlaps(grid), grid.alphas, out / "overlaps")]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """Tables of a synthetic grid and the figures rendered from them once for the module."""
    grid = synthetic_grid()
    front = frontier_table(grid.counts, grid.alphas, metrics_settings(k=(1, 8), bootstrap=200))
    ens = matched_budget_table(grid.n, grid.c, grid.alphas, ensemble_settings(budgets=(16,), bootstrap=200))
    out = tmp_path_factory.mktemp("figures")
    return (grid, front, ens), out, render_all(grid, front, ens, out)


def test_every_figure_renders_as_png_and_svg(rendered):
    _, tmp_path, paths = rendered
    assert sorted(p.name for p in paths) == sorted(f"{name}.{fmt}" for name in plots_names() for fmt in ("png", "svg"))
    for path in paths:
        assert path.stat().st_size > 15_000, path
        if path.suffix == ".png":
            width, height = png_size(path)
            assert width >= 600 and height >= 400, (path, width, height)
        else:
            assert ET.parse(path).getroot().tag.endswith("svg")
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave no temporaries behind
    # the frontier carries one annotation per alpha
    svg = (tmp_path / "frontier.svg").read_text()
    assert all(f"{a:+.2g}" in svg for a in ALPHAS)


def plots_names():
    return ("frontier", "pass_at_k", "ensembles", "overlaps")


def test_figures_are_byte_reproducible(rendered, tmp_path):
    (grid, front, ens), _, first = rendered
    second = render_all(grid, front, ens, tmp_path)
    for a, b in zip(first, second):
        assert a.read_bytes() == b.read_bytes(), a.name


def test_figures_render_without_confidence_intervals(tmp_path):
    grid = synthetic_grid(P=12, n=4, seed=1)
    front = frontier_table(grid.counts, grid.alphas, metrics_settings(k=(1,), bootstrap=0))
    ens = matched_budget_table(grid.n, grid.c, grid.alphas, ensemble_settings(budgets=None, bootstrap=0))
    assert front["ac_rate_lo"].isna().all()
    for path in render_all(grid, front, ens, tmp_path):
        assert path.stat().st_size > 10_000


def test_budget_curve_renders_with_and_without_ensembles(tmp_path):
    grid = synthetic_grid(P=40, n=8, seed=2)
    families = np.repeat([f"f{i}" for i in range(20)], 2)
    curve = budget_curve(grid.n, grid.c, grid.alphas, ensemble_settings(budgets=(8,), bootstrap=100), families)
    assert len(curve) == 8
    empty = curve.iloc[:0]
    for name, table in (("curve", curve), ("empty", empty)):
        (path,) = plots.plot_budget_curve(table, tmp_path / name, ("png",))
        width, height = png_size(path)
        assert path.stat().st_size > 10_000 and width >= 600 and height >= 400, name
