"""Combine the claims of several seeds' runs into the README's results section and a seed-band plot.

    python scripts/science.py RUN_DIR [RUN_DIR ...] [--benchmark mini] [--setting reasoning] [--readme README.md]

Each RUN_DIR is the working directory of one seed's run (`make demo` writes `.`, `make science` adds
runs/seed<N>). Every number comes from the pipeline's own outputs: each run's
results/frontier/{benchmark}/{setting}/claims.csv (`ewa claims`: paired bootstrap CIs over problems)
and per_alpha.csv. The seed spread is the standard deviation of a claim's value across runs.
"""
from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

START, END = "<!-- science:start -->", "<!-- science:end -->"
RATES = (("opt", "TLE+MLE", "tab:red"), ("corr", "WA+RE+CE", "tab:blue"), ("ac", "AC", "tab:green"),
         ("ce", "of which CE", "tab:grey"))


def read_run(run: Path, benchmark: str, setting: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, int]:
    where = run / "results/frontier" / benchmark / setting
    files = [where / "claims.csv", where / "per_alpha.csv", run / "results/approaches" / benchmark / f"{setting}.csv"]
    missing = [f for f in files if not f.is_file()]
    if missing:
        raise SystemExit(f"science: {missing[0]} is missing (run the pipeline in {run} first)")
    seed = json.loads((where / "claims.provenance.json").read_text())["config"]["seed"]  # the run's seed
    return (*map(pd.read_csv, files), int(seed))


def overall(verdicts: list[str]) -> str:
    hits = sum(v == "reproduced" for v in verdicts)
    if all(v == "no room" for v in verdicts):
        return "no room (see note)"
    if hits == len(verdicts):
        return "**reproduced**"
    if hits == 0:
        # Say how close the seeds that missed came ("direction only", "within CI"), once per kind.
        near = [f"{kind} in {verdicts.count(kind)} of {len(verdicts)}" for kind in sorted(set(verdicts))
                if kind != "not reproduced"]
        return "not reproduced" + (f" ({'; '.join(near)})" if near else "")
    return f"mixed: {hits} of {len(verdicts)} seeds"


def claims_table(claims: list[pd.DataFrame], seeds: list[int]) -> list[str]:
    lines = [f"| claim | measure | seed {seeds[0]}: value [95% CI] | mean ± sd over {len(seeds)} seeds "
             "| per seed | verdict |", "|---|---|---|---|---|---|"]
    for i, row in claims[0].iterrows():
        values = pd.Series([c.loc[i, "value"] for c in claims])
        verdicts = [c.loc[i, "verdict"] for c in claims]
        per_seed = ", ".join(f"{v:+.3f}" for v in values)
        spread = f"{values.mean():+.3f} ± {values.std(ddof=1):.3f}" if len(values) > 1 else "one seed"
        verdict = overall(verdicts) + (f"; {row['note']}" if isinstance(row["note"], str) and row["note"] else "")
        lines.append(f"| {row['title']} | {row['measure']} | {row['value']:+.3f} [{row['ci_lo']:+.3f}, "
                     f"{row['ci_hi']:+.3f}] | {spread} | {per_seed} | {verdict} |")
    return lines


def rates_table(per_alpha: list[pd.DataFrame]) -> list[str]:
    alphas = per_alpha[0]["alpha"]
    lines = ["| alpha | " + " | ".join(f"{a:+.2f}" for a in alphas) + " |", "|---|" + "---|" * len(alphas)]
    stacked = pd.concat(per_alpha).groupby("alpha")
    mean, sd = stacked.mean(), stacked.std(ddof=1)
    for key, label, _ in RATES:
        cells = [f"{mean.loc[a, key]:.3f}" + (f" ± {sd.loc[a, key]:.3f}" if len(per_alpha) > 1 else "") for a in alphas]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


# What each alpha writes (ewa approaches): the rows that explain claims 2 and 4.
APPROACH_ROWS = (("efficient", "share", "share of samples declaring an efficient algorithm"),
                 ("efficient", "corr", "WA+RE+CE among efficient attempts"),
                 ("brute", "corr", "WA+RE+CE among brute-force attempts"),
                 ("efficient", "AC", "AC among efficient attempts"),
                 ("brute", "AC", "AC among brute-force attempts"))


def approaches_table(approaches: list[pd.DataFrame], alphas) -> list[str]:
    lines = ["| alpha | " + " | ".join(f"{a:+.2f}" for a in alphas) + " |", "|---|" + "---|" * len(alphas)]
    for approach, column, label in APPROACH_ROWS:
        runs = [t[t["approach"] == approach].set_index("alpha")[column].reindex(alphas) for t in approaches]
        if column == "share":  # an alpha without efficient attempts has a share of 0; its verdict mix stays undefined
            runs = [r.fillna(0.0) for r in runs]
        mean = pd.concat(runs, axis=1).mean(axis=1)
        lines.append(f"| {label} | " + " | ".join("–" if pd.isna(v) else f"{v:.3f}" for v in mean) + " |")
    return lines


def plot(per_alpha: list[pd.DataFrame], seeds: list[int], out: Path, title: str) -> None:
    fig, ax = plt.subplots(figsize=(7, 4))
    for key, label, color in RATES:
        for j, table in enumerate(per_alpha):
            ax.plot(table["alpha"], table[key], color=color, alpha=0.35, lw=1, marker="o", ms=3,
                    label=f"{label} (one line per seed)" if j == 0 else None)
        mean = pd.concat(per_alpha).groupby("alpha")[key].mean()
        ax.plot(mean.index, mean.values, color=color, lw=2.5)
    for edge in (0, 1):
        ax.axvline(edge, color="grey", ls=":", lw=1)
    ax.set_xlabel("alpha  (0 = low-coverage checkpoint, 1 = high-coverage)")
    ax.set_ylabel("share of samples")
    ax.set_title(f"{title}: seeds {', '.join(map(str, seeds))}; thick line = mean")
    ax.legend(fontsize=8, loc="center right")
    fig.tight_layout()
    tmp = out.with_name(out.stem + ".tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    tmp.replace(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--benchmark", default="mini")
    p.add_argument("--setting", default="reasoning")
    p.add_argument("--readme", type=Path, default=Path("README.md"))
    args = p.parse_args()
    read = [read_run(r, args.benchmark, args.setting) for r in args.runs]
    claims, per_alpha, approaches, seeds = (list(x) for x in zip(*read))
    if len({tuple(a["alpha"]) for a in per_alpha}) > 1:
        raise SystemExit("science: the runs use different alpha grids; compare runs of one config")
    figure = f"docs/frontier-{args.benchmark}-{args.setting}-seeds.png"
    (args.readme.parent / "docs").mkdir(exist_ok=True)
    plot(per_alpha, seeds, args.readme.parent / figure, f"{args.benchmark} held-out, {args.setting}")
    frontier = f"docs/frontier-{args.benchmark}-{args.setting}.png"  # the pipeline's own plot, first run
    shutil.copy(args.runs[0] / "results/frontier" / args.benchmark / args.setting / "frontier.png",
                args.readme.parent / frontier)
    text = "\n".join([
        START, "",
        f"Generated by `scripts/science.py` (`make science`) from runs with seeds {', '.join(map(str, seeds))} "
        f"on {args.benchmark} (held-out) / {args.setting}. CI: 95% paired bootstrap over problems, shown for "
        f"seed {seeds[0]}; every run's own CIs are in its `results/frontier/{args.benchmark}/{args.setting}/claims.csv` "
        "and report. Verdict: reproduced when every seed's CI lies on the claimed side.", "",
        *claims_table(claims, seeds), "",
        "Verdict shares per alpha (mean ± sd over seeds):", "", *rates_table(per_alpha), "",
        "What each alpha writes: the plan line every answer opens with (`ewa approaches`; mean over seeds). "
        "Claim 2 needs efficient attempts to fail on correctness more often than brute-force ones; claim 4 "
        "needs some problems that only some alphas solve.", "",
        *approaches_table(approaches, per_alpha[0]["alpha"].tolist()), "",
        f"![verdict shares per alpha, every seed]({figure})", "",
        f"The pipeline's frontier plot for seed {seeds[0]} (`results/frontier/{args.benchmark}/{args.setting}/frontier.png`):", "",
        f"![frontier, seed {seeds[0]}]({frontier})", "", END])
    readme = args.readme.read_text()
    if START in readme:
        readme = readme[:readme.index(START)] + text + readme[readme.index(END) + len(END):]
    else:
        readme += "\n## Does the miniature reproduce the study?\n\n" + text + "\n"
    tmp = args.readme.with_suffix(".md.tmp")
    tmp.write_text(readme)
    tmp.replace(args.readme)
    print(text)


if __name__ == "__main__":
    main()
