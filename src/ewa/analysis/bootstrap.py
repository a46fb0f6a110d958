"""The bootstrap every CI of the study uses: resample clusters of problems with replacement (a family's
instances share one program text, so they are not independent draws), identically for every alpha (a
paired bootstrap), and take percentile intervals of weighted means over problems.

>>> import numpy as np
>>> boot = bootstrap_counts(np.array(["f0", "f0", "f1", "f1"]), reps=200, seed=0)
>>> value, lo, hi = mean_ci(np.array([0.0, 0.0, 1.0, 1.0]), boot, ci=0.95)
>>> value, bool(lo < value < hi), sorted(set(boot[:, 0] - boot[:, 1]))  # siblings are drawn together
(0.5, True, [np.float64(0.0)])
"""
from __future__ import annotations

import warnings

import numpy as np

CLUSTER_BY = ("family", "problem")  # evaluate.cluster_by: the unit the bootstrap resamples


def clusters_of(problem_ids, families, cluster_by: str) -> np.ndarray:
    """One cluster label per problem: its family (`families`, one label per problem, a problem without a
    family being its own) or, with cluster_by "problem" or no families at all, the problem itself."""
    if cluster_by not in CLUSTER_BY:
        raise ValueError(f"cluster_by must be one of {', '.join(CLUSTER_BY)}, got {cluster_by!r}")
    if cluster_by == "problem" or families is None:
        return np.asarray(problem_ids)
    if len(families) != len(problem_ids):
        raise ValueError(f"{len(families)} family labels for {len(problem_ids)} problems")
    return np.asarray(families, dtype=object)


def bootstrap_counts(clusters, reps: int, seed: int) -> np.ndarray:
    """(reps, P) matrix: how often each problem is drawn in each resample.

    clusters: the number of problems P (each its own cluster) or one cluster label per problem. Each
    resample draws as many clusters as there are, with replacement, and a problem counts as often as its
    cluster is drawn. Depends only on (clusters, reps, seed), so every alpha evaluated on the same
    problems is resampled identically: a paired bootstrap, which keeps differences between alphas honest.
    Clusters are numbered in their sorted order (the problems' order does not matter), and P singleton
    clusters numbered 0..P-1 are drawn exactly as P independent problems are.
    """
    if np.ndim(clusters) == 0:
        inverse, m = np.arange(int(clusters)), int(clusters)
    else:
        labels = np.asarray(clusters)
        names, inverse = np.unique(labels if labels.dtype.kind in "iuf" else labels.astype(str), return_inverse=True)
        inverse, m = inverse.ravel(), len(names)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, m, size=(reps, m))
    flat = (np.arange(reps)[:, None] * m + idx).ravel()
    drawn = np.bincount(flat, minlength=reps * m).reshape(reps, m).astype(np.float64)
    return drawn[:, inverse]


def resampled_means(values: np.ndarray, boot: np.ndarray) -> np.ndarray:
    """Means over problems (axis 0) of `values` (P, ...) in every resample of `boot` (R, P): (R, ...).
    For statistics that are not a mean themselves (claim 3a's rank correlation): compute them on each
    resample."""
    values = np.asarray(values, dtype=np.float64)
    sums = np.tensordot(boot, values, axes=1)
    return sums / boot.sum(axis=1).reshape(-1, *(1,) * (values.ndim - 1))


def percentile_interval(samples: np.ndarray, ci: float) -> tuple[np.ndarray, np.ndarray]:
    """The central `ci` percentile interval of bootstrap `samples` (R, ...) along axis 0, ignoring NaN
    resamples (a statistic a resample leaves undefined)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: no interval
        lo, hi = np.nanpercentile(samples, [50 * (1 - ci), 50 * (1 + ci)], axis=0)
    return lo, hi


def design_effect(clustered: np.ndarray, independent: np.ndarray) -> np.ndarray:
    """Variance of a statistic's resamples drawn by cluster over its variance with problems drawn as if
    independent (along axis 0): how much the clustering widens the interval, squared. NaN where the
    independent variance is 0 (a statistic every resample leaves the same) or there are no resamples."""
    if len(clustered) < 2 or len(independent) < 2:
        return np.full(np.shape(clustered)[1:], np.nan)
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        v_c, v_i = np.nanvar(clustered, axis=0, ddof=1), np.nanvar(independent, axis=0, ddof=1)
        return np.where(v_i > 1e-15, v_c / np.where(v_i > 1e-15, v_i, 1.0), np.nan)


def weighted_samples(X: np.ndarray, W: np.ndarray, boot: np.ndarray) -> np.ndarray:
    """sum(w*x)/sum(w) over problems in every resample of `boot`: (R, ...) for X, W shaped (P, ...)."""
    X2, W2 = X.reshape(len(X), -1), W.reshape(len(W), -1)
    WX = np.where(W2 > 0, np.nan_to_num(X2), 0.0) * W2
    with np.errstate(invalid="ignore", divide="ignore"):
        return ((boot @ WX) / (boot @ W2)).reshape(len(boot), *X.shape[1:])


def weighted_means(X: np.ndarray, W: np.ndarray, boot: np.ndarray | None, ci: float):
    """Point estimates and percentile CIs of sum(w*x)/sum(w) over problems (axis 0).

    X, W: (P, ...) arrays. boot: (R, P) resample counts or None. A metric with any NaN among its
    weighted problems (pass@k with k > n) is NaN with no interval. Returns (value, lo, hi).
    """
    shape = X.shape[1:]
    X2, W2 = X.reshape(len(X), -1), W.reshape(len(W), -1)
    undefined = np.any(np.isnan(X2) & (W2 > 0), axis=0)
    WX = np.where(W2 > 0, np.nan_to_num(X2), 0.0) * W2
    with np.errstate(invalid="ignore", divide="ignore"):
        value = WX.sum(0) / W2.sum(0)
    if boot is not None and len(boot):
        lo, hi = percentile_interval(weighted_samples(X2, W2, boot), ci)
    else:
        lo = hi = np.full(value.shape, np.nan)
    value, lo, hi = (np.where(undefined, np.nan, a).reshape(shape) for a in (value, lo, hi))
    return value, lo, hi


def mean_ci(values: np.ndarray, boot: np.ndarray | None, ci: float) -> tuple[float, float, float]:
    """Mean of per-problem `values` with its percentile CI over the resamples `boot`."""
    value, lo, hi = weighted_means(np.asarray(values, dtype=np.float64)[:, None], np.ones((len(values), 1)), boot, ci)
    return float(value[0]), float(lo[0]), float(hi[0])
