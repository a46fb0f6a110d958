"""Figures of the study: the correctness-efficiency frontier across alphas, pass@k curves, matched-
budget ensemble gains (at one budget and over budgets) and solve overlaps. Agg backend; every figure
saved atomically, as PNG and SVG unless asked otherwise.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from ewa.io import atomic_path  # noqa: E402

MARKERS = {"interpolated": "o", "endpoint": "s", "extrapolated": "^"}
CMAP = "viridis"
plt.rcParams.update({"font.size": 9, "axes.spines.top": False, "axes.spines.right": False,
                     "svg.hashsalt": "ewa", "svg.fonttype": "none"})


def _save(fig, stem: Path, formats) -> list[Path]:
    paths = []
    for fmt in formats:
        path = Path(f"{stem}.{fmt}")
        with atomic_path(path) as tmp:
            # fixed metadata keeps the files byte-identical across reruns
            fig.savefig(tmp, format=fmt, dpi=150, bbox_inches="tight",
                        metadata={"Date": None} if fmt == "svg" else {"Software": None})
        paths.append(path)
    plt.close(fig)
    return paths


def _alpha_norm(alphas):
    lo, hi = float(np.min(alphas)), float(np.max(alphas))
    return matplotlib.colors.Normalize(lo, hi if hi > lo else lo + 1)


def plot_frontier(frontier: pd.DataFrame, stem: Path, formats=("png", "svg")) -> list[Path]:
    """Optimization- vs correctness-failure rate per alpha, CIs as error bars, joined in alpha order."""
    f = frontier.sort_values("alpha")
    x, y = f["correctness_failure_rate"].to_numpy(), f["optimization_failure_rate"].to_numpy()
    norm = _alpha_norm(f["alpha"])
    cmap = plt.get_cmap(CMAP)
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    ax.plot(x, y, "-", color="0.75", lw=1, zorder=1)
    if "correctness_failure_rate_lo" in f and f["correctness_failure_rate_lo"].notna().any():
        xerr = np.abs(np.stack([x - f["correctness_failure_rate_lo"], f["correctness_failure_rate_hi"] - x]))
        yerr = np.abs(np.stack([y - f["optimization_failure_rate_lo"], f["optimization_failure_rate_hi"] - y]))
        ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt="none", ecolor="0.6", elinewidth=0.8, capsize=2, zorder=2)
    for label, marker in MARKERS.items():
        m = (f["label"] == label).to_numpy()
        if m.any():
            ax.scatter(x[m], y[m], c=f["alpha"][m], cmap=cmap, norm=norm, marker=marker,
                       s=90 if label == "endpoint" else 55, edgecolors="black", linewidths=0.6, zorder=3)
    if "pareto" in f:
        p = f["pareto"].to_numpy(bool)
        ax.scatter(x[p], y[p], s=220, facecolors="none", edgecolors="crimson", linewidths=1.2, zorder=4)
    span = np.array([np.ptp(x) or 1.0, np.ptp(y) or 1.0])
    placed = []
    for xi, yi, a in zip(x, y, f["alpha"]):
        # stack the labels of (near-)coincident points instead of printing them on top of each other
        crowd = sum(np.all(np.abs((np.array(q) - (xi, yi)) / span) < 0.03) for q in placed)
        placed.append((xi, yi))
        ax.annotate(f"{a:+.2g}", (xi, yi), xytext=(6, 5 - 10 * crowd), textcoords="offset points", fontsize=7.5)
    fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, label="alpha (0 = low coverage, 1 = high)")
    handles = [Line2D([], [], marker=mk, ls="", color="0.5", markeredgecolor="black", label=lb)
               for lb, mk in MARKERS.items() if (f["label"] == lb).any()]
    handles.append(Line2D([], [], marker="o", ls="", markerfacecolor="none", markeredgecolor="crimson",
                          markersize=11, label="Pareto-optimal"))
    ax.legend(handles=handles, loc="best", frameon=False)
    # a sample with no program is CE too: behaviour.csv's no_answer_share says how much of the rate it is
    ax.set_xlabel("correctness-failure rate (WA + RE + CE, no answer counted as CE)")
    ax.set_ylabel("optimization-failure rate (TLE + MLE)")
    ax.set_title("Correctness-efficiency frontier across alphas")
    ax.margins(0.12)
    return _save(fig, stem, formats)


def plot_pass_at_k(curves: pd.DataFrame, stem: Path, formats=("png", "svg")) -> list[Path]:
    """pass@k against k, one line per alpha coloured by alpha; extrapolated alphas dashed."""
    norm = _alpha_norm(curves["alpha"])
    cmap = plt.get_cmap(CMAP)
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for alpha, g in curves.groupby("alpha"):
        label = "endpoint" if np.isclose(alpha, 0) or np.isclose(alpha, 1) else (
            "interpolated" if 0 < alpha < 1 else "extrapolated")
        ax.plot(g["k"], g["pass_at_k"], color=cmap(norm(alpha)), lw=2.2 if label == "endpoint" else 1.2,
                ls="--" if label == "extrapolated" else "-", marker="." if g["k"].nunique() <= 16 else None)
    if curves["k"].max() > 10:
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1, 2, 5)))
        ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("k (samples per problem)")
    ax.set_ylabel("pass@k (unbiased estimator)")
    ax.set_ylim(0, min(1.0, curves["pass_at_k"].max() * 1.1 + 0.02))
    ax.set_title("pass@k per alpha")
    fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, label="alpha")
    ax.legend(handles=[Line2D([], [], color="0.3", lw=2.2, label="endpoint"),
                       Line2D([], [], color="0.3", lw=1.2, label="interpolated"),
                       Line2D([], [], color="0.3", lw=1.2, ls="--", label="extrapolated")],
              loc="lower right", frameon=False)
    return _save(fig, stem, formats)


def plot_ensembles(ensembles: pd.DataFrame, stem: Path, formats=("png", "svg"), budget: int | None = None,
                   max_windows: int = 6) -> list[Path]:
    """pass@B of mixtures against the best single checkpoint at the same budget B (first budget by
    default): all problems on top, choices made on the dev split and scored on held-out problems below."""
    budget = budget if budget is not None else int(ensembles["budget"].iloc[0])
    e = ensembles[(ensembles["budget"] == budget) & ensembles["pass_at_budget"].notna()]
    full = e[e["split"] == "all"]
    windows = full[full["kind"] == "window"].nlargest(max_windows, "pass_at_budget")
    panels = [("all problems (gain over the oracle best single)",
               pd.concat([full[full["kind"] == "best_single_oracle"], full[full["kind"] == "uniform"], windows])),
              ("held-out problems (allocation and single chosen on the dev split)", e[e["split"] == "test"])]
    panels = [(t, d) for t, d in panels if len(d)]
    sizes = [len(d) for _, d in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(7.6, 0.3 * sum(sizes) + 1.3 * len(panels) + 0.4),
                             sharex=True, squeeze=False, gridspec_kw={"height_ratios": sizes})
    xlo = min(d["pass_at_budget_lo"].fillna(d["pass_at_budget"]).min() for _, d in panels)
    xhi = max(d["pass_at_budget_hi"].fillna(d["pass_at_budget"]).max() for _, d in panels)
    pad = max(xhi - xlo, 0.02)
    for ax, (title, d) in zip(axes[:, 0], panels):
        d = d.iloc[::-1]
        is_ref = d["kind"].str.startswith("best_single").to_numpy()
        gain = d["gain_vs_best_single"].to_numpy(dtype=float)
        # a NaN gain (no ensemble chosen: the allocation is one alpha) is no comparison: grey like the reference
        colors = np.where(is_ref | np.isnan(gain), "0.6",
                          np.where(np.nan_to_num(gain) > 1e-9, "tab:green",
                                   np.where(np.nan_to_num(gain) < -1e-9, "tab:red", "tab:blue")))
        ypos = np.arange(len(d))
        v = d["pass_at_budget"].to_numpy(dtype=float)
        lo = d["pass_at_budget_lo"].fillna(d["pass_at_budget"]).to_numpy(dtype=float)
        hi = d["pass_at_budget_hi"].fillna(d["pass_at_budget"]).to_numpy(dtype=float)
        # dots with whiskers rather than bars: ensembles often differ by a point or two near the top
        ax.hlines(ypos, lo, hi, color="0.35", lw=1.2, zorder=2)
        ax.scatter(v, ypos, c=colors, s=70, marker="D", edgecolors="black", linewidths=0.5, zorder=3)
        if is_ref.any():
            ax.axvline(v[is_ref][0], color="0.3", ls=":", lw=1, zorder=1)
        for yi in ypos:
            text = f"{v[yi]:.3f}" if is_ref[yi] or np.isnan(gain[yi]) else f"{v[yi]:.3f} ({gain[yi]:+.3f})"
            ax.annotate(text, (hi[yi], yi), xytext=(6, 0), textcoords="offset points", va="center", fontsize=7.5)
        ax.grid(axis="x", color="0.92", lw=0.8)
        ax.set_axisbelow(True)
        labels = [f"{n}\n{a}" if len(a) <= 44 else n for n, a in zip(d["ensemble"], d["allocation"])]
        ax.set_yticks(ypos, labels, fontsize=7)
        ax.set_ylim(-0.6, len(d) - 0.4)
        ax.set_title(title, fontsize=9, loc="left")
    xlim = (max(0.0, xlo - 0.1 * pad), min(1.03, xhi + 0.3 * pad))  # room for the labels on the right
    axes[-1, 0].set_xlim(*xlim)
    axes[-1, 0].set_xticks([t for t in axes[-1, 0].get_xticks() if xlim[0] - 1e-9 <= t <= 1 + 1e-9])
    axes[-1, 0].set_xlim(*xlim)
    axes[-1, 0].set_xlabel(f"pass@{budget}: {budget} samples per problem split across the checkpoints")
    fig.suptitle(f"Matched-budget ensembles vs the best single checkpoint (B = {budget}; gain in brackets)",
                 fontsize=10)
    fig.tight_layout()
    return _save(fig, stem, formats)


def plot_budget_curve(curve: pd.DataFrame, stem: Path, formats=("png", "svg")) -> list[Path]:
    """Claim 4b over budgets: on the held-out families, pass@k of the dev-selected single alpha and of the
    dev-optimised allocation (top; hollow where the allocation is that one alpha) and the gain with its
    CI (bottom), with the headroom over the single (the most problems any allocation could add) as a step
    line."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6.4, 5.6), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    c = curve.sort_values("k") if len(curve) else curve
    if len(c):
        k = c["k"].to_numpy(dtype=float)
        chosen = c["ensemble_chosen"].astype(bool).to_numpy()
        top.plot(k, c["single_pass_at_k"], "-o", color="0.4", ms=4, label="best single alpha (dev-selected)")
        top.plot(k, c["ensemble_pass_at_k"], "-", color="tab:green", lw=1, zorder=1)
        top.scatter(k[chosen], c["ensemble_pass_at_k"][chosen], color="tab:green", marker="D", s=30, zorder=3,
                    label="dev-optimised allocation")
        top.scatter(k[~chosen], c["ensemble_pass_at_k"][~chosen], facecolors="none", edgecolors="tab:green",
                    marker="D", s=30, zorder=3, label="allocation = one alpha (no ensemble chosen)")
        gain, lo, hi = (c[col].to_numpy(dtype=float) for col in ("gain", "gain_lo", "gain_hi"))
        ok = ~np.isnan(gain)
        if ok.any():
            err = np.abs(np.stack([gain[ok] - np.where(np.isnan(lo[ok]), gain[ok], lo[ok]),
                                   np.where(np.isnan(hi[ok]), gain[ok], hi[ok]) - gain[ok]]))
            bottom.errorbar(k[ok], gain[ok], yerr=err, fmt="D", color="tab:green", ms=4, capsize=2,
                            label="gain (CI)")
        bottom.axhline(0, color="0.3", lw=0.8, ls=":")
        room = bottom.twinx()
        room.step(k, c["headroom_at_k"], where="mid", color="tab:orange", lw=1, alpha=0.8)
        room.set_ylabel("headroom: most problems to gain", color="tab:orange")
        room.set_ylim(bottom=0)
        if k.max() > 16:
            for ax in (top, bottom):
                ax.set_xscale("log")
        top.legend(loc="lower right", frameon=False, fontsize=8)
    else:
        top.text(0.5, 0.5, "no held-out families to score on", ha="center", va="center", transform=top.transAxes)
    top.set_ylabel("pass@k on held-out families")
    top.set_title("Claim 4b over budgets: ensemble vs the best single alpha, both chosen on other families")
    bottom.set_ylabel("gain (ensemble − single)")
    bottom.set_xlabel("k (samples per problem, split across the allocation's alphas)")
    fig.tight_layout()
    return _save(fig, stem, formats)


def plot_overlaps(overlaps: pd.DataFrame, alphas, stem: Path, formats=("png", "svg")) -> list[Path]:
    """Left: Jaccard overlap of solved sets; right: problems solved by the row alpha but not the column."""
    alphas = np.asarray(alphas, dtype=float)
    A = len(alphas)
    idx = {a: i for i, a in enumerate(alphas)}
    jac, only = np.eye(A), np.zeros((A, A))
    for r in overlaps.itertuples():
        i, j = idx[r.alpha_a], idx[r.alpha_b]
        jac[i, j] = jac[j, i] = r.jaccard
        only[i, j], only[j, i] = r.only_a, r.only_b
    ticks = [f"{a:+.2g}" for a in alphas]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6))
    for ax, mat, title, cmap, fmt in ((axes[0], jac, "Jaccard overlap of solved problems", "Blues", "{:.2f}"),
                                      (axes[1], only, "solved by row alpha, not by column alpha", "Oranges", "{:.0f}")):
        im = ax.imshow(mat, cmap=cmap, vmin=0, vmax=1 if mat is jac else max(1, np.nanmax(mat)))
        ax.set_xticks(range(A), ticks, rotation=90 if A > 8 else 0, fontsize=7)
        ax.set_yticks(range(A), ticks, fontsize=7)
        ax.set_xlabel("alpha")
        ax.set_ylabel("alpha")
        ax.set_title(title)
        fig.colorbar(im, ax=ax, shrink=0.85)
        if A <= 12:
            for i in range(A):
                for j in range(A):
                    if not np.isnan(mat[i, j]):
                        dark = mat[i, j] > 0.6 * (np.nanmax(mat) or 1)
                        ax.text(j, i, fmt.format(mat[i, j]), ha="center", va="center", fontsize=6.5,
                                color="white" if dark else "black")
    fig.tight_layout()
    return _save(fig, stem, formats)


FAMILY_COLOURS = ("black", "tab:orange", "tab:blue", "tab:green", "tab:purple", "tab:brown")


def _simplex_colour(weights: np.ndarray) -> np.ndarray:
    """RGB of a barycentric point from its first three weights, negative weights clipped: a vertex is pure
    red, green or blue, the centre grey-white, a point outside the simplex the colour of the side it leaves by."""
    w = np.clip(np.asarray(weights, dtype=np.float64)[:3], 0, None)
    return w / w.max() if w.max() > 0 else np.full(3, 0.5)


def _ternary_xy(weights: np.ndarray) -> np.ndarray:
    """Cartesian position of barycentric weights (n, 3) in an equilateral triangle with unit sides."""
    corners = np.array([[0.0, 0.0], [1.0, 0.0], [0.5, np.sqrt(3) / 2]])
    return np.asarray(weights, dtype=np.float64) @ corners


def plot_families(points: pd.DataFrame, spec: dict, comparison: pd.DataFrame, stem: Path,
                  formats=("png", "svg")) -> list[Path]:
    """Every family on the frontier plane: lines as lines in alpha order (hollow markers off their family's
    front), a simplex as points coloured by their barycentric position, with a ternary inset showing where
    each simplex point lies (outside the triangle: extrapolated), and each family's hypervolume in the legend."""
    fig, ax = plt.subplots(figsize=(7.2, 5.4))
    hv = {r.family_a: r.hv_a for r in comparison.itertuples()} | {r.family_b: r.hv_b for r in comparison.itertuples()}
    lines = [f for f in spec["families"] if f["kind"] != "simplex"]
    for colour, family in zip(FAMILY_COLOURS, lines):
        f = points[points.family == family["name"]].sort_values("alpha")
        x, y = f["correctness_failure_rate"].to_numpy(), f["optimization_failure_rate"].to_numpy()
        style = "-" if family["kind"] == "line" else "--"
        ax.plot(x, y, style, color=colour, lw=1.4, zorder=2,
                label=f"{family['name']} ({family['kind']}), HV {hv.get(family['name'], np.nan):.3f}")
        front = f["family_front"].to_numpy(bool)
        ax.scatter(x[front], y[front], color=colour, s=28, zorder=3)
        ax.scatter(x[~front], y[~front], facecolors="white", edgecolors=colour, s=28, zorder=3)
        for xi, yi, a in zip(x, y, f["alpha"]):
            ax.annotate(f"{a:+.2g}", (xi, yi), xytext=(4, 3), textcoords="offset points", fontsize=6.5, color=colour)
    simplexes = [f for f in spec["families"] if f["kind"] == "simplex"]
    for family in simplexes:
        f = points[points.family == family["name"]]
        weights = f[[f"w_{s}" for s in family["sources"]]].to_numpy()
        colours = np.array([_simplex_colour(w) for w in weights])
        inside = (weights >= -1e-9).all(1)
        for mask, marker in ((inside, "o"), (~inside, "D")):
            ax.scatter(f["correctness_failure_rate"][mask], f["optimization_failure_rate"][mask], c=colours[mask],
                       marker=marker, s=46, edgecolors="0.25", linewidths=0.5, zorder=4)
        ax.scatter([], [], c="0.7", marker="o", edgecolors="0.25",
                   label=f"{family['name']} (simplex), HV {hv.get(family['name'], np.nan):.3f}")
    if simplexes and len(simplexes[0]["sources"]) == 3:
        family = simplexes[0]
        f = points[points.family == family["name"]]
        weights = f[[f"w_{s}" for s in family["sources"]]].to_numpy()
        inset = ax.inset_axes([0.70, 0.62, 0.30, 0.36])
        triangle = _ternary_xy(np.eye(3))
        inset.fill(triangle[:, 0], triangle[:, 1], facecolor="0.95", edgecolor="0.3", lw=0.8)
        xy = _ternary_xy(weights)
        inside = (weights >= -1e-9).all(1)
        for mask, marker in ((inside, "o"), (~inside, "D")):
            inset.scatter(xy[mask, 0], xy[mask, 1], c=np.array([_simplex_colour(w) for w in weights])[mask],
                          marker=marker, s=14, edgecolors="0.25", linewidths=0.4)
        for (tx, ty), name, offset in zip(triangle, family["sources"], ((-4, -9), (4, -9), (0, 5))):
            inset.annotate(name, (tx, ty), xytext=offset, textcoords="offset points", fontsize=6.5, ha="center")
        inset.set_aspect("equal")
        inset.axis("off")
    ax.set_xlabel("correctness-failure rate (WA + RE + CE)")
    ax.set_ylabel("optimization-failure rate (TLE + MLE)")
    ax.set_title("Merge families on the correctness-efficiency plane (lower left is better)")
    ax.legend(loc="lower left", frameon=False, fontsize=7)
    ax.margins(0.1)
    return _save(fig, stem, formats)
