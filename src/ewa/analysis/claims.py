"""The study's four claims tested on one run's alpha grid, each with a paired cluster-bootstrap CI.

Alpha 0 is the low-coverage checkpoint, alpha 1 the high-coverage one. Claims 1-3 (but 3a) are
differences of per-problem rates, averaged over problems; 3a is a rank correlation over the alphas in
[0, 1]; claim 4 reads the matched-budget ensembles of `ewa frontier`. Every CI resamples clusters of
problems (evaluate.cluster_by: a family's instances share one program text), identically for
every alpha, and each claim reports its design effect: the variance of its resamples over the variance
they would have if problems were independent. A claim is reproduced only when its whole CI lies
strictly on the claimed side; an ensemble claim without the headroom to show a gain is untestable, not
refuted. What the run could not measure reads "untestable (why)", never a bare NaN: extrapolation claims
without an alpha on their side of the grid, the ensembles and flat solve rate when nothing is solved, and
every claim when the endpoints are the same weights (ewa.train.outcome: GRPO without signal).
ewa.analysis.science combines the claims.csv of several seeds into the table of docs/results.md.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ewa.alphas import alpha_tag
from ewa.analysis.bootstrap import (CLUSTER_BY, bootstrap_counts, design_effect, percentile_interval,
                                    resampled_means)
from ewa.analysis.ensemble import (NO_ENSEMBLE, EnsembleSettings, best_single, budget_curve, budget_ks, headroom,
                                   is_ensemble)
from ewa.analysis.frontier import AlphaGrid
from ewa.train.outcome import IDENTICAL, UNCHANGED, Endpoints
from ewa.verdicts import AC, CE, FAILURE_VERDICTS, columns

# "ce" is part of "corr"; it is kept apart to show where extrapolation breaks the model's syntax.
SHARES = {"opt": FAILURE_VERDICTS["optimization"], "corr": FAILURE_VERDICTS["correctness"], "ac": (AC,), "ce": (CE,)}
OUTPUT_FILES = ("claims.csv", "per_alpha.csv", "headroom.json", "budget_curve.csv", "budget_curve.png",
                "claims.html", "provenance.json")
FLAT = 0.05  # claim 2b: a solve-rate change whose whole CI lies within +-FLAT counts as flat
MIN_MONOTONE = 3  # claim 3a: a rank correlation over fewer alphas in [0, 1] says nothing about the interior
SATURATED = "untestable (saturated)"  # claim 4: too few problems an ensemble could add to show a gain
TOO_FEW_ALPHAS = "untestable (too few interior alphas)"
NO_ALPHA_BELOW = "untestable (no alpha below 0)"  # claims 3b, 3c on a grid that does not extrapolate below
NO_ALPHA_ABOVE = "untestable (no alpha above 1)"  # claims 3d, 3e
NOTHING_SOLVED = "untestable (nothing solved)"  # claims 2b and 4: no alpha solves any problem
NOT_MEASURED = "untestable (not measured)"  # a claim with no value, e.g. claim 4 without ensembles.csv
BELOW, ABOVE = ("opt_below_low", "corr_below_low"), ("opt_beyond_high", "corr_beyond_high")


@dataclass(frozen=True)
class ClaimsSettings:
    """The claims' knobs; `ewa claims` fills them from the config's `evaluate` section and `seed`."""
    bootstrap: int  # resamples for the CIs; 0 disables them
    ci: float  # percentile interval coverage
    seed: int  # bootstrap and dev/test split (the frontier's, so the split is the ensembles')
    cluster_by: str  # what the bootstrap resamples: "family" (a problem without one is its own) or "problem"
    dev_fraction: float  # share of families the dev-selected single and allocation are chosen on
    budget: int  # claim 4's budget when no ensembles table gives it
    min_headroom: int  # claim 4 is testable only with at least this many problems an ensemble could add
    folds: int = 0  # claim 4b: 0, one dev/test split; K, cross-fitting over K family folds (EnsembleSettings)

    def __post_init__(self):
        if self.cluster_by not in CLUSTER_BY:
            raise ValueError(f"cluster_by must be one of {', '.join(CLUSTER_BY)}, got {self.cluster_by!r}")
        if self.bootstrap < 0 or self.min_headroom < 0 or self.budget < 1:
            raise ValueError("bootstrap and min_headroom must be >= 0 and budget >= 1")


@dataclass(frozen=True)
class Claim:
    key: str
    title: str
    measure: str
    expect: str  # "<0", ">0", "~0" (within +-FLAT)


CLAIMS = (
    Claim("opt_high_minus_low", "1. optimization failures fall as coverage rises", "TLE+MLE share, alpha 1 minus alpha 0", "<0"),
    Claim("corr_high_minus_low", "2. correctness failures rise as coverage rises", "WA+RE+CE share, alpha 1 minus alpha 0", ">0"),
    Claim("ac_high_minus_low", "2b. ... with solve rate roughly flat", f"AC share, alpha 1 minus alpha 0 (flat: the whole CI within ±{FLAT})", "~0"),
    Claim("opt_monotone", "3a. from alpha 0 to 1, optimization failures fall monotonically", "Spearman rank correlation of alpha and the TLE+MLE share over the alphas in [0, 1]", "<0"),
    Claim("corr_monotone", "3a. ... and correctness failures rise monotonically", "Spearman rank correlation of alpha and the WA+RE+CE share over the alphas in [0, 1]", ">0"),
    Claim("opt_below_low", "3b. below 0, more optimization failures", "TLE+MLE share, smallest alpha minus alpha 0", ">0"),
    Claim("corr_below_low", "3c. below 0, fewer correctness failures", "WA+RE+CE share, smallest alpha minus alpha 0", "<0"),
    Claim("opt_beyond_high", "3d. beyond 1, fewer optimization failures", "TLE+MLE share, largest alpha minus alpha 1", "<0"),
    Claim("corr_beyond_high", "3e. beyond 1, more correctness failures", "WA+RE+CE share, largest alpha minus alpha 1", ">0"),
    Claim("ensemble_uniform", "4a. matched-budget ensemble beats the best single checkpoint", "pass@B, the budget spread evenly over the alphas (over evenly spaced alphas when B is below their number) minus the best single alpha (chosen on the same problems)", ">0"),
    Claim("ensemble_selected", "4b. ... with both chosen on other problems", "pass@B on held-out test families, dev-selected allocation minus dev-selected single alpha", ">0"),
)
# Which row of ensembles.csv (split, ensemble) each ensemble claim reads.
ENSEMBLE_ROWS = {"ensemble_uniform": ("all", "uniform all"), "ensemble_selected": ("test", "optimized (dev-selected)")}
MONOTONE = {"opt_monotone": "opt", "corr_monotone": "corr"}


@dataclass
class Claims:
    """What `ewa claims` writes: the claims table, the ensembles' headroom, claim 4b over budgets."""
    table: pd.DataFrame
    headroom: dict
    budget_curve: pd.DataFrame


def shares(grid: AlphaGrid) -> dict[str, np.ndarray]:
    """Per-problem verdict shares [problem, alpha] for optimization failures, correctness failures, AC."""
    n = grid.counts.sum(-1)
    return {name: grid.counts[..., columns(verdicts)].sum(-1) / n
            for name, verdicts in SHARES.items()}


def verdict(expect: str, point: float, lo: float, hi: float) -> str:
    """reproduced: the whole CI lies strictly on the claimed side; direction only (a sign) or point only
    (flat): the point estimate does and the CI does not."""
    if np.isnan(point):
        return NOT_MEASURED
    if expect in ("<0", ">0"):
        sign = -1 if expect == "<0" else 1
        if sign * (hi if sign < 0 else lo) > 0:  # <0: hi < 0; >0: lo > 0 (a CI touching 0 is not enough)
            return "reproduced"
        return "direction only" if sign * point > 0 else "not reproduced"
    if -FLAT < lo and hi < FLAT:
        return "reproduced"
    return "point only" if abs(point) < FLAT else "not reproduced"


def average_ranks(y: np.ndarray) -> np.ndarray:
    """1-based ranks along the last axis, ties sharing their average rank."""
    y = np.asarray(y)
    below = (y[..., None, :] < y[..., :, None]).sum(-1)
    equal = (y[..., None, :] == y[..., :, None]).sum(-1)  # itself included
    return below + (equal + 1) / 2


def spearman(y: np.ndarray) -> np.ndarray:
    """Spearman rank correlation of position (alpha ascending) and y along the last axis; NaN where y
    is the same everywhere (no ranking to correlate)."""
    ry = average_ranks(y)
    rx = np.arange(y.shape[-1], dtype=np.float64)
    rx, ry = rx - rx.mean(), ry - ry.mean(-1, keepdims=True)
    den = np.sqrt((ry ** 2).sum(-1) * (rx ** 2).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (ry * rx).sum(-1) / np.where(den > 0, den, 1.0), np.nan)


def interval(statistic, boots, ci: float) -> tuple[float, float, float, float]:
    """(value, CI low, CI high, design effect) of statistic(resample counts or None for the data itself),
    which returns one number per resample. boots: (cluster resamples, problem resamples) or None."""
    value = float(statistic(None))
    if boots is None:
        return value, np.nan, np.nan, np.nan
    clustered = statistic(boots[0])
    lo, hi = percentile_interval(clustered, ci)
    return value, float(lo), float(hi), float(design_effect(clustered, statistic(boots[1])))


def measure(grid: AlphaGrid, ensembles: pd.DataFrame | None, settings: ClaimsSettings,
            endpoints: Endpoints | None = None) -> Claims:
    """Every claim's value, CI and verdict. `endpoints` (ewa.train.outcome): when the checkpoints at alpha 0
    and 1 are the same weights, or one never left the init, every claim is untestable (values kept)."""
    a = grid.alphas
    if not (np.isclose(a, 0).any() and np.isclose(a, 1).any()):
        raise ValueError(f"the alpha grid must contain the endpoints 0 and 1, got {a.tolist()}")
    lo, hi = int(np.argmin(abs(a))), int(np.argmin(abs(a - 1)))
    first, last = 0, len(a) - 1
    s = shares(grid)
    clusters = grid.clusters(settings.cluster_by)
    boots = ((bootstrap_counts(clusters, settings.bootstrap, settings.seed),
              bootstrap_counts(len(clusters), settings.bootstrap, settings.seed)) if settings.bootstrap else None)

    def mean_of(x):
        return lambda boot: x.mean() if boot is None else resampled_means(x, boot)

    nan = (np.nan,) * 4
    diff = lambda k, i, j: interval(mean_of(s[k][:, i] - s[k][:, j]), boots, settings.ci) if i != j else nan  # noqa: E731
    values = {
        "opt_high_minus_low": diff("opt", hi, lo),
        "corr_high_minus_low": diff("corr", hi, lo),
        "ac_high_minus_low": diff("ac", hi, lo),
        "opt_below_low": diff("opt", first, lo),
        "corr_below_low": diff("corr", first, lo),
        "opt_beyond_high": diff("opt", last, hi),
        "corr_beyond_high": diff("corr", last, hi),
    }
    inner = np.flatnonzero((a > -1e-9) & (a < 1 + 1e-9))  # the endpoints and the alphas between them
    for key, rate in MONOTONE.items():
        x = s[rate][:, inner]
        values[key] = (interval(lambda boot, x=x: spearman(x.mean(0) if boot is None else resampled_means(x, boot)),
                                boots, settings.ci) if len(inner) >= MIN_MONOTONE else nan)
    room, curve = ensemble_evidence(grid, ensembles, settings)
    chosen = {}  # ensemble claim -> its allocation, "alpha:b ..."
    for key, (split, name) in ENSEMBLE_ROWS.items():
        values[key], chosen[key] = ensemble_gain(ensembles, split, name)
    rates = {k: s[k].mean(0) for k in s}
    solved = int((grid.c > 0).any(1).sum())  # problems some alpha solves
    rows = []
    for c in CLAIMS:
        point, low, high, deff = values[c.key]
        why = note(c.key, rates, lo, hi)
        single = bool(chosen.get(c.key)) and not is_ensemble(chosen[c.key])  # a single alpha is not an ensemble
        if c.key in ENSEMBLE_ROWS:
            why = ceiling(room["claims"][c.key], settings.min_headroom, room["budget"])
            if single:
                point = low = high = deff = np.nan
        if c.key in BELOW and first == lo:
            outcome = NO_ALPHA_BELOW
            why = "the grid's smallest alpha is 0: nothing extrapolates below the low checkpoint"
        elif c.key in ABOVE and last == hi:
            outcome = NO_ALPHA_ABOVE
            why = "the grid's largest alpha is 1: nothing extrapolates beyond the high checkpoint"
        elif (c.key in ENSEMBLE_ROWS or c.key == "ac_high_minus_low") and not solved:
            outcome, why = NOTHING_SOLVED, f"no alpha solves any of the {grid.n.shape[0]} problems"
        elif c.key in MONOTONE and len(inner) < MIN_MONOTONE:
            outcome = TOO_FEW_ALPHAS
            why = f"{len(inner)} alphas in [0, 1]; a monotone trend needs {MIN_MONOTONE}"
        elif c.key in MONOTONE and np.isnan(point):
            outcome, why = "not reproduced", "the share is the same at every alpha in [0, 1]"
        elif c.key in MONOTONE:
            outcome = verdict(c.expect, point, low, high)
            if len(inner) == MIN_MONOTONE:  # the sign of a rank correlation of 3 points is the ends' order
                why = ("one alpha between the endpoints: the correlation's sign is the endpoints' difference's "
                       "(claims 1 and 2); it is ±1 only where that alpha lies between them")
        elif why.startswith("no room"):
            outcome = "no room"
        elif c.key in ENSEMBLE_ROWS and not room["claims"][c.key]["testable"]:
            outcome = SATURATED
        elif single:
            outcome = NO_ENSEMBLE
        else:
            outcome = verdict(c.expect, point, low, high)
            if outcome == NOT_MEASURED and not why:
                why = "no ensembles table to read" if c.key in ENSEMBLE_ROWS else "no value"
        # ci_verdict: what the values and intervals alone say. Over identical endpoints it is what the statistics
        # make of pure sampling noise (the same-regimes control reads it); the verdict says the claim is untestable.
        ci_verdict = outcome
        if endpoints is not None and endpoints.untestable:
            outcome, why = endpoints.untestable, endpoints.why
        rows.append({"claim": c.key, "title": c.title, "measure": c.measure, "expect": c.expect,
                     "value": point, "ci_lo": low, "ci_hi": high, "design_effect": deff, "verdict": outcome,
                     "allocation": chosen.get(c.key, ""), "note": why, "ci_verdict": ci_verdict})
    return Claims(pd.DataFrame(rows), room, curve)


def ensemble_gain(ensembles: pd.DataFrame | None, split: str, name: str) -> tuple[tuple[float, ...], str]:
    """(gain over the reference single, CI, design effect) and the allocation of one row of ensembles.csv
    (its first budget)."""
    nan = (np.nan,) * 4
    if ensembles is None:
        return nan, ""
    row = ensembles[(ensembles["split"] == split) & (ensembles["ensemble"] == name)].head(1)
    if row.empty:
        return nan, ""
    allocation = row["allocation"].iloc[0]
    gain = tuple(float(row[c].iloc[0]) if c in row else np.nan
                 for c in ("gain_vs_best_single", "gain_lo", "gain_hi", "gain_design_effect"))
    return gain, allocation if isinstance(allocation, str) else ""


def note(key: str, rates: dict, lo: int, hi: int) -> str:
    """Where a trend has nowhere left to go, say so: a rate at 0 cannot fall further."""
    if key == "opt_beyond_high" and rates["opt"][hi] == 0:
        return "no room: alpha 1 has no TLE/MLE"
    if key == "corr_below_low" and rates["corr"][lo] == 0:
        return "no room: alpha 0 has no WA/RE/CE"
    return ""


def ensemble_evidence(grid: AlphaGrid, ensembles: pd.DataFrame | None,
                      settings: ClaimsSettings) -> tuple[dict, pd.DataFrame]:
    """Before any ensemble verdict: what an ensemble could add at the budget the ensembles used (their
    first, else settings.budget), for 4a over the best single alpha on every problem and for 4b over the
    dev-selected single on the held-out families, and claim 4b at every budget k = 1..n (budget_curve).

    No allocation can add more problems over the single than ensemble.headroom's headroom_at_budget (at
    k = n: the problems some alpha solves and the single does not); below settings.min_headroom a claim is
    untestable (saturated). The split
    and the dev choices are `ewa frontier`'s (same families, dev share and seed): a different choice at
    the ensembles' budget is an error, not a silent second answer.
    """
    budget = int(ensembles["budget"].iloc[0]) if ensembles is not None and len(ensembles) else settings.budget
    clusters = grid.clusters(settings.cluster_by)
    single = best_single(grid.n, grid.c, budget)
    oracle = {"split": "all", "single_alpha": None if single is None else float(grid.alphas[single]),
              **headroom(grid.n, grid.c, single, clusters, budget)}
    fit = EnsembleSettings(budgets=(budget,), windows=(), dev_fraction=settings.dev_fraction, seed=settings.seed,
                           bootstrap=settings.bootstrap, ci=settings.ci, cluster_by=settings.cluster_by,
                           folds=settings.folds)
    curve = budget_curve(grid.n, grid.c, grid.alphas, fit, grid.families, budget_ks(int(grid.n.min()), budget))
    at = curve[curve["k"] == budget]
    if len(at):
        r = at.iloc[0]
        selected = {"split": "test", "single_alpha": None if np.isnan(r.single_alpha) else float(r.single_alpha),
                    "single_alphas": r.single_alphas, "folds": settings.folds,
                    "n_problems": int(r.n_test_problems), "n_clusters": int(r.n_test_clusters),
                    "headroom_at_budget": float(r.headroom_at_k), "headroom_problems": int(r.headroom_problems),
                    "headroom_clusters": int(r.headroom_clusters)}
        check_split(ensembles, r, budget)
    else:  # no held-out part (one family) or a budget beyond the samples
        selected = {"split": "test", "single_alpha": None, "n_problems": 0, "n_clusters": 0,
                    "headroom_at_budget": 0.0, "headroom_problems": 0, "headroom_clusters": 0}
    claims = {"ensemble_uniform": oracle, "ensemble_selected": selected}
    for room in claims.values():
        room["testable"] = room["headroom_at_budget"] >= settings.min_headroom - 1e-9
    # The top level is 4a's (every problem, the best single alpha), as ewa science reads it.
    summary = {"n_problems": oracle["n_problems"], "solved_by_some_alpha": oracle["solved_by_some_alpha"],
               "solved_by_best_single": oracle["solved_by_single"],
               "best_single_alpha": oracle["single_alpha"], "n_clusters": oracle["n_clusters"],
               "headroom_at_budget": oracle["headroom_at_budget"], "headroom_problems": oracle["headroom_problems"],
               "headroom_clusters": oracle["headroom_clusters"],
               "budget": budget, "min_headroom": settings.min_headroom, "cluster_by": settings.cluster_by,
               "claims": claims}
    return summary, curve


def check_split(ensembles: pd.DataFrame | None, at_budget: pd.Series, budget: int) -> None:
    """The dev choices recomputed here must be the ones ensembles.csv scored."""
    if ensembles is None:
        return
    test = ensembles[(ensembles["budget"] == budget) & (ensembles["split"] == "test")].set_index("kind")
    if "optimized" not in test.index:
        return
    theirs = test.loc["optimized", "allocation"]
    if at_budget["allocation"] and theirs != at_budget["allocation"]:
        raise ValueError(f"ensembles.csv's dev-selected allocation at B = {budget} is {theirs!r}, but the same split "
                         f"chooses {at_budget['allocation']!r} here: remake ensembles.csv with this version of "
                         "`ewa frontier`, or give `ewa claims` the frontier's --problems, seed and evaluate.dev_fraction")


def ceiling(room: dict, minimum: int, budget: int) -> str:
    single = "no single alpha" if room["single_alpha"] is None else f"alpha {alpha_tag(room['single_alpha'])}"
    which = "the best single one" if room["split"] == "all" else "the dev-selected single one"
    if room.get("folds") and room["single_alpha"] is None and "–" not in room.get("single_alphas", "–"):
        single, which = f"alpha {room['single_alphas']}", f"each fold's dev-selected single one, over {room['folds']} folds"
    where = "problems" if room["split"] == "all" else "held-out problems"
    clusters = f"{room['headroom_clusters']} cluster{'s' * (room['headroom_clusters'] != 1)}"
    return (f"headroom at B = {budget}: at most {room['headroom_at_budget']:.1f} of {room['n_problems']} {where} "
            f"to gain over {single}, {which} ({room['headroom_problems']} solved by some alpha and not by it, "
            f"in {clusters}); testable from {minimum}")


TEXT_COLUMNS = ("claim", "title", "measure", "expect", "verdict", "allocation", "note", "ci_verdict")


def read_claims(path) -> pd.DataFrame:
    """A claims.csv with its words as written: pandas would otherwise read a verdict such as "n/a" (older
    runs) as NaN, and a page would print "nan"."""
    table = pd.read_csv(path, keep_default_na=False, na_values={c: ["", "nan", "NaN"] for c in
                                                                  ("value", "ci_lo", "ci_hi", "design_effect")})
    return table.astype({c: str for c in TEXT_COLUMNS if c in table})


def value_text(value: float, lo: float, hi: float) -> str:
    """A claim's value and CI as a page shows it: "–" for no value, the value alone without a CI."""
    if pd.isna(value):
        return "–"
    return f"{value:+.3f}" if pd.isna(lo) or pd.isna(hi) else f"{value:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def endpoints_untestable(table: pd.DataFrame) -> str | None:
    """Why no claim of this table is testable when the endpoints are the same weights (or one never trained),
    else None: the front page says it before anything else."""
    verdicts = set(table["verdict"])
    if len(verdicts) == 1 and ((v := verdicts.pop()) == IDENTICAL or v.endswith(UNCHANGED)):
        return str(table["note"].iloc[0])
    return None


def per_alpha(grid: AlphaGrid) -> pd.DataFrame:
    s = shares(grid)
    return pd.DataFrame({"alpha": grid.alphas, **{k: s[k].mean(0) for k in s}})
