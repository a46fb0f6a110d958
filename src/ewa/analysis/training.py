"""Training as it happened, from the files the jobs already write: each regime's GRPO steps (its
checkpoint's metrics.csv: reward, groups without spread, the rollouts' verdicts, KL, completion length) and
the init's warm-start loss (sft_metrics.csv in the init's directory). One figure per regime and one of the
warm start for a run; across seeds, the median and the spread of each curve per regime.

The verdict mix splits the rollouts as the study splits failures: AC, optimization failures (TLE, MLE),
correctness failures (WA, RE, and CE with code) and no code at all (CE without a program).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ewa.init import SFT_HISTORY_FILE
from ewa.io import atomic_path

TABLE = "training.csv"
SFT_FIGURE = "sft.png"
# the rollouts' verdict mix: label -> (metrics.csv verdict columns added, subtracted), colour
MIX = {"AC": (("AC",), (), "tab:green"), "optimization (TLE+MLE)": (("TLE", "MLE"), (), "tab:orange"),
       "correctness (WA+RE+CE)": (("WA", "RE", "CE"), ("no_code",), "tab:red"), "no code": (("no_code",), (), "0.6")}
# the curves compared across seeds: column -> title
SEED_CURVES = {"reward": "reward (mean)", "zero_spread": "groups without spread",
               "share_AC": "AC", "share_optimization": "optimization failures (TLE+MLE)",
               "share_correctness": "correctness failures (WA+RE+CE)", "kl": "KL to the init"}


def pyplot():
    """matplotlib's pyplot (Agg), imported only when a figure is drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def verdict_shares(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per step, each part of the verdict mix as a share of the step's judged completions.

    >>> m = pd.DataFrame({"step": [1], "verdict_AC": [2], "verdict_TLE": [1], "verdict_MLE": [0],
    ...     "verdict_WA": [1], "verdict_RE": [0], "verdict_CE": [4], "verdict_no_code": [3]})
    >>> verdict_shares(m).iloc[0].to_dict()
    {'AC': 0.25, 'optimization (TLE+MLE)': 0.125, 'correctness (WA+RE+CE)': 0.25, 'no code': 0.375}
    """
    counts = {}
    for label, (added, subtracted, _) in MIX.items():
        total = sum(metrics[f"verdict_{v}"].fillna(0) for v in added)
        counts[label] = total - sum(metrics[f"verdict_{v}"].fillna(0) for v in subtracted)
    frame = pd.DataFrame(counts)
    judged = frame.sum(axis=1).where(lambda n: n > 0)
    return frame.div(judged, axis=0).fillna(0.0)


def run_table(metrics: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per regime and step: metrics.csv's columns and the verdict mix as shares (what the
    seed comparison reads)."""
    rows = []
    for regime, m in metrics.items():
        shares = verdict_shares(m).rename(columns=dict(zip(MIX, ("share_AC", "share_optimization",
                                                                 "share_correctness", "share_no_code"))))
        rows.append(pd.concat([pd.DataFrame({"regime": regime}, index=m.index), m, shares], axis=1)
                    .rename(columns={"frac_reward_zero_std": "zero_spread"}))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


def save(fig, out: Path) -> None:
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=120, format="png", metadata={"Software": None})  # fixed bytes for fixed data
    pyplot().close(fig)


def plot_regime(regime: str, metrics: pd.DataFrame, out: Path, seed: int | None = None) -> None:
    """Four panels over GRPO steps: reward and groups without spread; the verdict mix; KL; length."""
    plt = pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(9, 6), sharex=True)
    steps = metrics["step"]
    ax = axes[0, 0]
    ax.plot(steps, metrics["reward"], "o-", ms=3, color="tab:blue", label="reward (mean)")
    if "reward_std" in metrics:
        ax.fill_between(steps, metrics["reward"] - metrics["reward_std"], metrics["reward"] + metrics["reward_std"],
                        color="tab:blue", alpha=0.15, lw=0, label="± its spread (std)")
    ax.plot(steps, metrics["frac_reward_zero_std"], "s--", ms=3, color="0.4",
            label="groups without spread (no gradient)")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title("reward")
    ax.legend(fontsize=7, loc="best")
    ax = axes[0, 1]
    shares = verdict_shares(metrics)
    ax.stackplot(steps, *[shares[label] for label in MIX], labels=list(MIX), colors=[c for *_, c in MIX.values()],
                 alpha=0.85)
    ax.set_ylim(0, 1)
    ax.set_title("rollouts' verdicts (share of completions)")
    ax.legend(fontsize=7, loc="lower left")
    ax = axes[1, 0]
    ax.plot(steps, metrics["kl"], "o-", ms=3, color="tab:purple")
    ax.set_title("KL to the init")
    ax.set_xlabel("GRPO step")
    ax = axes[1, 1]
    ax.plot(steps, metrics["completion_length"], "o-", ms=3, color="tab:brown")
    ax.set_title("completion length (tokens, mean)")
    ax.set_xlabel("GRPO step")
    from matplotlib.ticker import MaxNLocator

    for a in axes.flat:
        a.spines[["top", "right"]].set_visible(False)
        a.xaxis.set_major_locator(MaxNLocator(integer=True))
    where = f"seed {seed}, " if seed is not None else ""
    fig.suptitle(f"GRPO, regime {regime} ({where}{len(metrics)} steps)")
    fig.tight_layout()
    save(fig, out)


def plot_sft(history: pd.DataFrame | None, out: Path, why: str = "") -> None:
    """The warm start's loss over its steps (log scale), or one line saying why there is none."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    if history is None or history.empty:
        ax.text(0.5, 0.5, f"no warm-start loss to show\n{why}", ha="center", va="center", wrap=True)
        ax.set_axis_off()
    else:
        ax.plot(history["step"], history["loss"], "o-", ms=3, color="tab:blue")
        ax.set_yscale("log")
        ax.set_xlabel("SFT step")
        ax.set_ylabel("loss (completion tokens)")
        ax.spines[["top", "right"]].set_visible(False)
        ax.set_title(f"warm start of the init: loss from {history['loss'].iloc[0]:.3g} to {history['loss'].iloc[-1]:.3g}")
    fig.tight_layout()
    save(fig, out)


def write_run(checkpoints: dict[str, Path], init: Path | None, out_dir: Path, seed: int | None = None) -> list[Path]:
    """A run's figures: <regime>.png per regime, sft.png when `init` is given, and training.csv."""
    out_dir = Path(out_dir)
    metrics = {regime: pd.read_csv(Path(d) / "metrics.csv") for regime, d in checkpoints.items()}
    written = []
    for regime, m in metrics.items():
        plot_regime(regime, m, out_dir / f"{regime}.png", seed)
        written.append(out_dir / f"{regime}.png")
    if init is not None:
        path = Path(init) / SFT_HISTORY_FILE
        history = pd.read_csv(path) if path.is_file() else None
        plot_sft(history, out_dir / SFT_FIGURE, why=f"{init} has no {path.name}")
        written.append(out_dir / SFT_FIGURE)
    with atomic_path(out_dir / TABLE) as tmp:
        run_table(metrics).to_csv(tmp, index=False)
    return written + [out_dir / TABLE]


def across_seeds(tables: dict[int, pd.DataFrame]) -> pd.DataFrame:
    """Per regime, step and curve: the median over seeds, the lowest and the highest, and how many seeds.

    >>> t = lambda r: pd.DataFrame({"regime": ["low"], "step": [1], "reward": [r]})
    >>> across_seeds({0: t(0.1), 1: t(0.5), 2: t(0.3)})[["regime", "step", "curve", "median", "lo", "hi", "seeds"]].values.tolist()
    [['low', 1, 'reward', 0.3, 0.1, 0.5, 3]]
    """
    long = pd.concat([t.assign(seed=seed) for seed, t in tables.items()], ignore_index=True)
    curves = [c for c in SEED_CURVES if c in long]
    long = long.melt(id_vars=["regime", "step", "seed"], value_vars=curves, var_name="curve").dropna(subset=["value"])
    grouped = long.groupby(["regime", "step", "curve"], sort=False)["value"]
    summary = grouped.agg(median="median", lo="min", hi="max", seeds="count").reset_index()
    order = {c: i for i, c in enumerate(curves)}
    regimes = {r: i for i, r in enumerate(dict.fromkeys(long["regime"]))}
    return summary.sort_values(["regime", "curve", "step"], key=lambda s: s.map(order) if s.name == "curve" else (
        s.map(regimes) if s.name == "regime" else s)).reset_index(drop=True)


def plot_seeds(summary: pd.DataFrame, seeds: list[int], out: Path) -> None:
    """One column per regime, one row per curve: the median over seeds and the band from lowest to highest."""
    plt = pyplot()
    regimes = list(dict.fromkeys(summary["regime"]))
    curves = [c for c in SEED_CURVES if c in set(summary["curve"])]
    fig, axes = plt.subplots(len(curves), len(regimes), figsize=(3.6 * len(regimes), 1.9 * len(curves)),
                             sharex=True, sharey="row", squeeze=False)
    for j, regime in enumerate(regimes):
        for i, curve in enumerate(curves):
            ax = axes[i, j]
            part = summary[(summary["regime"] == regime) & (summary["curve"] == curve)]
            ax.fill_between(part["step"], part["lo"], part["hi"], color="tab:blue", alpha=0.2, lw=0)
            ax.plot(part["step"], part["median"], "o-", ms=2.5, color="tab:blue")
            ax.spines[["top", "right"]].set_visible(False)
            if i == 0:
                ax.set_title(f"regime {regime}")
            if j == 0:
                ax.set_ylabel(SEED_CURVES[curve], fontsize=8)
            if i == len(curves) - 1:
                ax.set_xlabel("GRPO step")
    fig.suptitle(f"GRPO over seeds {', '.join(map(str, seeds))}: median (line), lowest to highest (band)")
    fig.tight_layout()
    save(fig, out)


def write_seeds(tables: dict[int, Path], out_dir: Path) -> list[Path]:
    """training.png and training.csv (median, lowest, highest per regime, step and curve) over seeds."""
    out_dir = Path(out_dir)
    summary = across_seeds({seed: pd.read_csv(path) for seed, path in tables.items()})
    plot_seeds(summary, sorted(tables), out_dir / "training.png")
    with atomic_path(out_dir / TABLE) as tmp:
        summary.to_csv(tmp, index=False)
    return [out_dir / "training.png", out_dir / TABLE]
