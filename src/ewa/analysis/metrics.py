"""Statistics of judged samples: unbiased pass@k, verdict mix, optimization/correctness failure rates and
per-difficulty breakdowns, all vectorised with numpy (their CIs: ewa.analysis.bootstrap).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ewa.analysis.bootstrap import CLUSTER_BY
from ewa.problems import read_problems
from ewa.verdicts import AC, FAILURE_VERDICTS, VERDICTS, columns

EVAL_COLUMNS = ("problem_id", "sample_id", "verdict", "tests_passed", "tests_total",
                "first_failed_test", "first_failed_tier", "cpu_time_s", "peak_memory_mb")
# Summed in sorted order: float addition is not associative, and the published tables used this order.
OPT_COLS = columns(sorted(FAILURE_VERDICTS["optimization"]))
CORR_COLS = columns(sorted(FAILURE_VERDICTS["correctness"]))
AC_COL = VERDICTS.index(AC)


@dataclass(frozen=True)
class MetricsSettings:
    """The frontier's knobs; `ewa frontier` fills them from the config's `evaluate` section and `seed`."""
    k: tuple[int, ...]  # pass@k reported for each k (NaN where k exceeds the samples)
    bootstrap: int  # resamples of problems for the CIs; 0 disables them
    ci: float  # percentile interval coverage
    seed: int  # seeds the bootstrap resampling
    cluster_by: str  # what the bootstrap resamples: "family" (a problem without one is its own) or "problem"

    def __post_init__(self):
        if self.cluster_by not in CLUSTER_BY:
            raise ValueError(f"cluster_by must be one of {', '.join(CLUSTER_BY)}, got {self.cluster_by!r}")
        if not self.k or any(int(k) != k or k < 1 for k in self.k):
            raise ValueError(f"k must be positive integers, got {self.k!r}")
        if self.bootstrap < 0:
            raise ValueError(f"bootstrap must be >= 0, got {self.bootstrap}")
        if not 0 < self.ci < 1:
            raise ValueError(f"ci must be in (0, 1), got {self.ci}")


# ---------------------------------------------------------------------------------------------------
# pass@k
# ---------------------------------------------------------------------------------------------------

def _as_int_array(x, name: str) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype.kind not in "iu":
        if a.dtype.kind != "f" or not np.all(np.isfinite(a)) or np.any(a != np.round(a)):
            raise ValueError(f"{name} must be integers, got {x!r}")
    return a.astype(np.int64)


def _miss_table(n: int, k: int) -> np.ndarray:
    """t[c] = C(n-c, k) / C(n, k) for c = 0..n, as the product prod_{j=n-c+1..n} (1 - k/j).

    Every factor lies in [0, 1], so the running product never overflows and underflows only where
    the true value is below ~1e-308 (the combinatorial ratio itself overflows for n ~ 1000).
    """
    j = np.arange(n, 0, -1, dtype=np.float64)
    return np.concatenate(([1.0], np.cumprod(np.clip(1.0 - k / j, 0.0, None))))


def _miss(n: np.ndarray, c: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Vectorised C(n-c, k)/C(n, k) for validated, broadcast int arrays with 0 <= k <= n."""
    shape = np.broadcast_shapes(n.shape, c.shape, k.shape)
    n, c, k = (np.broadcast_to(a, shape).ravel() for a in (n, c, k))
    out = np.empty(n.size, dtype=np.float64)
    if n.size == 0:
        return out.reshape(shape)
    # One O(n) table per distinct (n, k): samples per problem and k are shared across most problems.
    key = n * (int(k.max()) + 1) + k
    keys, inverse = np.unique(key, return_inverse=True)
    pair_n, pair_k = keys // (int(k.max()) + 1), keys % (int(k.max()) + 1)
    offsets = np.concatenate(([0], np.cumsum(pair_n + 1)))
    flat = np.concatenate([_miss_table(int(nn), int(kk)) for nn, kk in zip(pair_n, pair_k)])
    out[:] = flat[offsets[inverse.ravel()] + c]
    return out.reshape(shape)


def _check_nck(n, c, k, k_name: str, k_min: int):
    n, c, k = _as_int_array(n, "n"), _as_int_array(c, "c"), _as_int_array(k, k_name)
    try:
        np.broadcast_shapes(n.shape, c.shape, k.shape)
    except ValueError:
        raise ValueError(f"n, c, {k_name} do not broadcast: shapes {n.shape}, {c.shape}, {k.shape}") from None
    if np.any(n < 1):
        raise ValueError(f"n (samples per problem) must be >= 1, got min {n.min()}")
    if np.any(c < 0) or np.any(c > n):
        raise ValueError("c (correct samples) must satisfy 0 <= c <= n")
    if np.any(k < k_min):
        raise ValueError(f"{k_name} must be >= {k_min}, got {k.min()}")
    if np.any(k > n):
        bad = np.broadcast_arrays(n, k)
        i = np.argmax(bad[1] > bad[0])
        raise ValueError(f"{k_name}={bad[1].flat[i]} exceeds n={bad[0].flat[i]} samples: not estimable")
    return n, c, k


def pass_at_k(n, c, k):
    """Unbiased pass@k (Chen et al. 2021): 1 - C(n-c, k) / C(n, k), with n samples of which c passed.

    Scalars or broadcastable integer arrays; returns a float for scalar input, else an ndarray.
    Raises ValueError if k > n (the estimator is undefined) or on invalid counts.

    >>> round(pass_at_k(10, 3, 1), 3), round(pass_at_k(10, 3, 5), 3)
    (0.3, 0.917)
    """
    scalar = all(np.ndim(x) == 0 for x in (n, c, k))
    n, c, k = _check_nck(n, c, k, "k", 1)
    out = 1.0 - _miss(n, c, k)
    return float(out) if scalar else out


def miss_probability(n, c, b):
    """C(n-c, b) / C(n, b): chance that b samples drawn without replacement from n (c correct) all fail.

    b = 0 gives 1. The building block of matched-budget ensembles (a product over checkpoints).
    """
    scalar = all(np.ndim(x) == 0 for x in (n, c, b))
    n, c, b = _check_nck(n, c, b, "b", 0)
    out = _miss(n, c, b)
    return float(out) if scalar else out


def pass_at_k_or_nan(n: np.ndarray, c: np.ndarray, k: int) -> np.ndarray:
    """Per-problem pass@k with NaN where k exceeds that problem's sample count (for tables)."""
    n, c = np.asarray(n, dtype=np.int64), np.asarray(c, dtype=np.int64)
    ok = n >= k
    out = np.full(n.shape, np.nan)
    if ok.any():
        out[ok] = 1.0 - _miss(n[ok], c[ok], np.asarray(k, dtype=np.int64))
    return out


# ---------------------------------------------------------------------------------------------------
# Reading evaluation tables into per-problem verdict counts
# ---------------------------------------------------------------------------------------------------

@dataclass
class VerdictCounts:
    """counts[p, ..., v] = samples of problem problem_ids[p] judged VERDICTS[v] (problems sorted by id)."""
    problem_ids: np.ndarray
    counts: np.ndarray

    @property
    def n(self) -> np.ndarray:
        """Samples per problem (and alpha)."""
        return self.counts.sum(axis=-1)

    @property
    def c(self) -> np.ndarray:
        """AC samples per problem (and alpha)."""
        return self.counts[..., AC_COL]


@dataclass
class ProblemCounts(VerdictCounts):
    """One evaluation table's counts[p, v]."""
    source: str = ""

    def __len__(self) -> int:
        return len(self.problem_ids)


def read_evals(path: str | os.PathLike) -> ProblemCounts:
    """Validate an evaluation table (one row per judged sample) and count verdicts per problem."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such evaluation table")
    try:
        schema = pq.read_schema(path)
    except (pa.ArrowInvalid, OSError) as e:
        raise ValueError(f"{path}: not a readable parquet file ({e})") from None
    missing = [col for col in EVAL_COLUMNS if col not in schema.names]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
    table = pq.read_table(path, columns=["problem_id", "sample_id", "verdict"])
    if table.num_rows == 0:
        raise ValueError(f"{path}: empty evaluation table (no samples)")
    for col in ("problem_id", "sample_id", "verdict"):
        if table[col].null_count:
            raise ValueError(f"{path}: column '{col}' has {table[col].null_count} null value(s)")
    verdict = table["verdict"]
    if not pa.types.is_string(verdict.type) and not pa.types.is_large_string(verdict.type):
        verdict = pc.cast(verdict, pa.string())
    vcode = pc.index_in(verdict, value_set=pa.array(VERDICTS))
    if vcode.null_count:
        bad = pc.unique(pc.filter(verdict, pc.is_null(vcode))).to_pylist()[:5]
        raise ValueError(f"{path}: column 'verdict' has unknown value(s) {bad}; expected one of {', '.join(VERDICTS)}")
    pid = pc.cast(table["problem_id"], pa.string())
    ids = pa.array(sorted(pc.unique(pid).to_pylist()), type=pa.string())
    pcode = pc.index_in(pid, value_set=ids).to_numpy().astype(np.int64)
    scode = pc.dictionary_encode(table["sample_id"]).combine_chunks().indices.to_numpy().astype(np.int64)
    key = np.sort(pcode * (scode.max() + 1) + scode)
    if np.any(key[1:] == key[:-1]):
        raise ValueError(f"{path}: column 'sample_id' repeats within a problem (duplicate rows)")
    flat = pcode * len(VERDICTS) + vcode.to_numpy().astype(np.int64)
    counts = np.bincount(flat, minlength=len(ids) * len(VERDICTS)).reshape(len(ids), len(VERDICTS))
    return ProblemCounts(np.array(ids.to_pylist(), dtype=object), counts, str(path))


def problem_attributes(problems_path: str | os.PathLike, problem_ids, *names: str) -> list[np.ndarray]:
    """Each named attribute of every evaluated problem (e.g. "difficulty", "family"), in problem_ids'
    order; an id absent from the problems file is an error."""
    by_id = {p.id: p for p in read_problems(problems_path)}
    missing = [pid for pid in problem_ids if pid not in by_id]
    if missing:
        raise ValueError(f"{problems_path}: {len(missing)} evaluated problem(s) not in the problems file, "
                         f"e.g. {missing[0]!r}")
    return [np.array([getattr(by_id[pid], name) for pid in problem_ids], dtype=object) for name in names]


def id_family(problem_id: str) -> str:
    """A problem's family read from its id, for steps that have no problems file: the mini set's ids are
    mini/<family>/<parameters> (ewa.data.mini.build), the family its problems file records; any other id
    is a problem of its own, as Problem.family has it for a benchmark without families."""
    parts = str(problem_id).split("/")
    return parts[1] if len(parts) == 3 and parts[0] == "mini" else str(problem_id)


# ---------------------------------------------------------------------------------------------------
# Per-problem statistics
# ---------------------------------------------------------------------------------------------------

def per_problem_stats(counts: np.ndarray, ks=(1, 10)) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Every reported metric as a weighted mean over problems: metric = sum(w*x) / sum(w).

    counts has shape (P, 6) or (P, A, 6) (A alphas). Returns (names, X, W) with X, W shaped
    (P, S) or (P, A, S). Rates are per-problem shares averaged over problems (each problem weighs
    the same; with equal samples per problem this is the share over all samples). The unsolved_*
    metrics average only over problems without any AC sample.
    """
    counts = np.asarray(counts)
    n = counts.sum(axis=-1)
    c = counts[..., AC_COL]
    share = counts / n[..., None]
    solved = (c > 0).astype(np.float64)
    unsolved = 1.0 - solved
    ones = np.ones_like(solved)
    opt = share[..., OPT_COLS].sum(axis=-1)
    corr = share[..., CORR_COLS].sum(axis=-1)
    stats = {
        "ac_rate": (share[..., AC_COL], ones),  # mean per-problem AC share; equals pass@1
        "solved_rate": (solved, ones),  # share of problems with >= 1 AC among all their samples
        "optimization_failure_rate": (opt, ones),
        "correctness_failure_rate": (corr, ones),
        "unsolved_share": (unsolved, ones),
        "unsolved_optimization_failure_rate": (opt, unsolved),
        "unsolved_correctness_failure_rate": (corr, unsolved),
    }
    for v in VERDICTS[1:]:
        stats[f"share_{v}"] = (share[..., VERDICTS.index(v)], ones)
    for k in ks:
        stats[f"pass@{k}"] = (pass_at_k_or_nan(n, c, int(k)), ones)
    names = list(stats)
    return names, np.stack([x for x, _ in stats.values()], -1), np.stack([w for _, w in stats.values()], -1)
