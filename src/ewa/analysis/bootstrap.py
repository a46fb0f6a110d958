"""The problem-level bootstrap every CI of the study uses: resample problems with replacement, identically
for every alpha (a paired bootstrap), and take percentile intervals of weighted means over problems.

>>> import numpy as np
>>> boot = bootstrap_counts(4, reps=200, seed=0)
>>> value, lo, hi = mean_ci(np.array([0.0, 1.0, 1.0, 0.0]), boot)
>>> value, bool(lo < value < hi)
(0.5, True)
"""
from __future__ import annotations

import warnings

import numpy as np


def bootstrap_counts(n_problems: int, reps: int, seed: int) -> np.ndarray:
    """(reps, P) matrix: how often each problem is drawn in each resample (with replacement).

    Depends only on (P, reps, seed), so every alpha evaluated on the same problems is resampled
    identically: a paired bootstrap, which keeps differences between alphas honest.
    """
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n_problems, size=(reps, n_problems))
    flat = (np.arange(reps)[:, None] * n_problems + idx).ravel()
    return np.bincount(flat, minlength=reps * n_problems).reshape(reps, n_problems).astype(np.float64)


def resampled_means(values: np.ndarray, boot: np.ndarray) -> np.ndarray:
    """Means over problems (axis 0) of `values` (P, ...) in every resample of `boot` (R, P): (R, ...).
    For statistics that are not a mean themselves (claim 3a's share): compute them on each resample."""
    values = np.asarray(values, dtype=np.float64)
    sums = np.tensordot(boot, values, axes=1)
    return sums / boot.sum(axis=1).reshape(-1, *(1,) * (values.ndim - 1))


def percentile_interval(samples: np.ndarray, ci: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """The central `ci` percentile interval of bootstrap `samples` (R, ...) along axis 0."""
    lo, hi = np.percentile(samples, [50 * (1 - ci), 50 * (1 + ci)], axis=0)
    return lo, hi


def weighted_means(X: np.ndarray, W: np.ndarray, boot: np.ndarray | None, ci: float = 0.95):
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
            samples = (boot @ WX) / (boot @ W2)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: nothing to weigh
                lo, hi = np.nanpercentile(samples, [50 * (1 - ci), 50 * (1 + ci)], axis=0)
        else:
            lo = hi = np.full(value.shape, np.nan)
    value, lo, hi = (np.where(undefined, np.nan, a).reshape(shape) for a in (value, lo, hi))
    return value, lo, hi


def mean_ci(values: np.ndarray, boot: np.ndarray, ci: float = 0.95) -> tuple[float, float, float]:
    """Mean of per-problem `values` with its percentile CI over the resamples `boot`."""
    value, lo, hi = weighted_means(np.asarray(values, dtype=np.float64)[:, None], np.ones((len(values), 1)), boot, ci)
    return float(value[0]), float(lo[0]), float(hi[0])
