"""The study's claims over several seeds: one table (markdown, the section of docs/results.md) with each
claim's value per seed and whether every seed's CI lies on the claimed side, each seed's ensemble
headroom and choice, a seed-band plot, and the first seed's frontier plot. Every number comes from the
pipeline's own per-seed outputs: each seed's claims (paired bootstrap CIs over problems, headroom) and
approaches tables. With a registry (ewa.analysis.registry) every seed must be registered for this report
and its outputs made at the registered commit and config; registration.json says which registration the
tables answer to, and summary.json holds the figures the controls section compares (controls_section).
Before any claim is read, every seed is checked against the withdrawal rule (ewa.analysis.withdrawal):
a table that breaks it renders "withdrawn by rule: <reason>" and no claim value at all.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd

from ewa.alphas import alpha_tag
from ewa.analysis import withdrawal as withdraw
from ewa.analysis.claims import CLAIMS, ENSEMBLE_ROWS, value_text
from ewa.analysis.registry import check as check_registry
from ewa.io import atomic_path, write_json, write_text

OUTPUT_FILES = ("science.md", "seeds.png", "frontier.png", "summary.json", "registration.json", withdraw.FILE)
START, END = "<!-- science:start -->", "<!-- science:end -->"
RATES = (("opt", "TLE+MLE", "tab:red"), ("corr", "WA+RE+CE", "tab:blue"), ("ac", "AC", "tab:green"),
         ("ce", "of which CE", "tab:grey"))


def seed_of(claims_dir: Path) -> int:
    """A seed's number, from its claims' provenance (nothing else of the seed is read)."""
    path = Path(claims_dir) / "provenance.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing (that seed's claims step has not run)")
    return int(json.loads(path.read_text())["config"]["seed"])


def read_run(claims_dir: Path, approaches_dir: Path) -> tuple:
    """One seed's claims.csv, per_alpha.csv, approaches.csv, premise.csv, headroom.json, budget_curve.csv
    (None for runs made before it existed) and its seed (from the claims' provenance)."""
    files = [claims_dir / "claims.csv", claims_dir / "per_alpha.csv", approaches_dir / "approaches.csv",
             approaches_dir / "premise.csv", claims_dir / "headroom.json"]
    missing = [f for f in files if not f.is_file()]
    if missing:
        raise FileNotFoundError(f"{missing[0]}: missing (that seed's claims and approaches steps have not run)")
    seed = json.loads((claims_dir / "provenance.json").read_text())["config"]["seed"]
    tables = [pd.read_csv(f, keep_default_na=False, na_values=[""]) for f in files[:4]]
    curve = claims_dir / "budget_curve.csv"
    budget = pd.read_csv(curve, keep_default_na=False, na_values=[""]) if curve.is_file() else None
    return (*tables, json.loads(files[4].read_text()), budget, int(seed))


def overall(verdicts: list[str]) -> str:
    hits = sum(v == "reproduced" for v in verdicts)
    if all(v == "no room" for v in verdicts):
        return "no room (see note)"
    if all(v.startswith("untestable") for v in verdicts):  # neither reproduced nor refuted: say why
        return " / ".join(sorted(set(verdicts)))
    if hits == len(verdicts):
        return "**reproduced**"
    if hits == 0:
        # Say how the seeds that missed did ("direction only", "no ensemble chosen", ...), once per kind.
        how = [f"{kind} in {verdicts.count(kind)} of {len(verdicts)}" for kind in sorted(set(verdicts))
               if kind != "not reproduced"]
        return "not reproduced" + (f" ({'; '.join(how)})" if how else "")
    return f"mixed: {hits} of {len(verdicts)} seeds"


def seed_notes(notes: list, seeds: list[int]) -> str:
    """Each seed's note, once per distinct text, naming the seeds it holds for unless it holds for all."""
    by_text: dict[str, list[int]] = {}
    for seed, text in zip(seeds, notes):
        if isinstance(text, str) and text:
            by_text.setdefault(text, []).append(seed)
    return "; ".join(text if len(which) == len(seeds) else f"{text} (seed{'s' * (len(which) > 1)} "
                     f"{', '.join(map(str, which))})" for text, which in by_text.items())


def number(value: float) -> str:
    """A claim's value; "–" where a seed has none (an ensemble claim with no ensemble chosen)."""
    return "–" if pd.isna(value) else f"{value:+.3f}"


def value_ci(row) -> str:
    return value_text(row["value"], row["ci_lo"], row["ci_hi"])  # a run without resamples: no "[nan, nan]"


# The measure each claim's key names, as the code states it now: a run keeps the words of its own day.
MEASURES = {c.key: c.measure for c in CLAIMS}


def seed_spread(values: pd.Series) -> str:
    """Mean ± sd over the seeds that have a value, saying how many when some have none."""
    if len(values) == 1:
        return "one seed"
    measured = values.dropna()
    if len(measured) < 2:
        text = number(measured.iloc[0]) if len(measured) else "–"
    else:
        text = f"{measured.mean():+.3f} ± {measured.std(ddof=1):.3f}"
    return text + (f" (over {len(measured)} of {len(values)} seeds)" if 0 < len(measured) < len(values) else "")


def claims_table(claims: list[pd.DataFrame], seeds: list[int]) -> list[str]:
    lines = [f"| claim | measure | seed {seeds[0]}: value [95% CI] | design effect (mean over seeds) "
             f"| mean ± sd over {len(seeds)} seeds | per seed | verdict |", "|---|---|---|---|---|---|---|"]
    for i, row in claims[0].iterrows():
        values = pd.Series([c.loc[i, "value"] for c in claims], dtype=float)
        verdicts = [c.loc[i, "verdict"] for c in claims]
        per_seed = ", ".join(map(number, values))
        spread = seed_spread(values)
        # An ensemble claim's note is that seed's headroom: the per-seed table below shows every seed's.
        why = ("headroom and allocation per seed: table below" if row["claim"] in ENSEMBLE_ROWS
               else seed_notes([c.loc[i, "note"] for c in claims], seeds))
        verdict = overall(verdicts) + (f"; {why}" if why else "")
        effects = pd.Series([c.loc[i, "design_effect"] if "design_effect" in c else float("nan") for c in claims],
                            dtype=float)
        effect = "–" if effects.isna().all() else f"{effects.mean():.2f}"
        lines.append(f"| {row['title']} | {MEASURES.get(row['claim'], row['measure'])} | {value_ci(row)} | {effect} "
                     f"| {spread} | {per_seed} | {cell(verdict)} |")
    return lines


def cell(text: str) -> str:
    """Text for a Markdown table cell: a cross-fitted choice joins its folds' choices with '|'."""
    return text.replace("|", "\\|")


def ensembles_table(claims: list[pd.DataFrame], headrooms: list[dict], seeds: list[int]) -> list[str]:
    """Per seed: how many problems an ensemble could add (solved by some alpha, not by the best single
    one), and what each ensemble claim chose and concluded."""
    keys = [k for k in ENSEMBLE_ROWS if k in set(claims[0]["claim"])]
    titles = [claims[0].set_index("claim").loc[k, "title"].split(".")[0] for k in keys]
    lines = ["| seed | problems | solved by some alpha | solved by the best single alpha | "
             + " | ".join(f"{t}: allocation | {t}: gain [95% CI], verdict" for t in titles) + " |",
             "|---|---|---|---|" + "---|---|" * len(keys)]
    for seed, table, room in zip(seeds, claims, headrooms):
        rows = table.set_index("claim")
        cells = []
        for k in keys:
            r = rows.loc[k]
            cells += [cell(r["allocation"]) if isinstance(r["allocation"], str) else "–",
                      cell(f"{value_ci(r)}, {r['verdict']}")]
        lines.append(f"| {seed} | {room['n_problems']} | {room['solved_by_some_alpha']} | "
                     f"{room['solved_by_best_single']} (alpha {alpha_tag(room['best_single_alpha'])}) | "
                     + " | ".join(cells) + " |")
    return lines


def how_4b_chooses(headrooms: list[dict]) -> str:
    """How claim 4b's choices were made and scored: one dev/test split, or cross-fitted folds."""
    folds = headrooms[0].get("claims", {}).get("ensemble_selected", {}).get("folds") if headrooms else None
    if folds:
        return (f"the held-out families are dealt into {folds} folds, and each fold is scored by the single alpha "
                "and the allocation chosen at each k on the other folds (every problem scored once)")
    return "the dev split chooses the single alpha and the allocation at each k, the test families score them"


def budget_table(curves: list[pd.DataFrame | None]) -> list[str]:
    """Claim 4b at every budget k = 1..n, over seeds: the dev-chosen single alpha's and allocation's
    pass@k on the test families, the headroom an allocation could add, and how many seeds chose an
    ensemble and gained with a cluster-bootstrap CI above 0. Empty when no seed has a budget curve."""
    curves = [c for c in curves if c is not None]
    if not curves:
        return []
    lines = [f"| k | single alpha pass@k (mean over {len(curves)} seeds) | allocation pass@k | headroom (problems) "
             "| seeds choosing an ensemble | their gain, mean | seeds whose gain CI > 0 |",
             "|---|---|---|---|---|---|---|"]
    for k in sorted(set.intersection(*(set(c["k"]) for c in curves))):
        rows = pd.DataFrame([c.set_index("k").loc[k] for c in curves])
        chosen = rows[rows["ensemble_chosen"].astype(str).str.lower() == "true"]
        gain = f"{chosen['gain'].astype(float).mean():+.3f}" if len(chosen) else "–"
        above = int((chosen["gain_lo"].astype(float) > 0).sum())
        lines.append(f"| {k} | {rows['single_pass_at_k'].astype(float).mean():.3f} | "
                     f"{rows['ensemble_pass_at_k'].astype(float).mean():.3f} | "
                     f"{rows['headroom_at_k'].astype(float).mean():.2f} | {len(chosen)} of {len(curves)} | {gain} | "
                     f"{above} of {len(curves)} |")
    return lines


def rates_table(per_alpha: list[pd.DataFrame]) -> list[str]:
    alphas = per_alpha[0]["alpha"]
    lines = ["| alpha | " + " | ".join(alpha_tag(a) for a in alphas) + " |", "|---|" + "---|" * len(alphas)]
    stacked = pd.concat(per_alpha).groupby("alpha")
    mean, sd = stacked.mean(), stacked.std(ddof=1)
    for key, label, _ in RATES:
        cells = [f"{mean.loc[a, key]:.3f}" + (f" ± {sd.loc[a, key]:.3f}" if len(per_alpha) > 1 else "") for a in alphas]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


# What each alpha writes (ewa approaches): the rows that explain claims 2 and 4.
APPROACH_ROWS = (("efficient", "share", "share of samples whose CPU time grows like an efficient algorithm"),
                 ("efficient", "corr", "WA+RE+CE among efficient attempts"),
                 ("brute", "corr", "WA+RE+CE among brute-force attempts"),
                 ("efficient", "AC", "AC among efficient attempts"),
                 ("brute", "AC", "AC among brute-force attempts"))


def approaches_table(approaches: list[pd.DataFrame], alphas) -> list[str]:
    lines = ["| alpha | " + " | ".join(alpha_tag(a) for a in alphas) + " |", "|---|" + "---|" * len(alphas)]
    for approach, column, label in APPROACH_ROWS:
        runs = [t[t["approach"] == approach].set_index("alpha")[column].reindex(alphas) for t in approaches]
        if column == "share":  # an alpha without efficient attempts has a share of 0; its verdict mix stays undefined
            runs = [r.fillna(0.0) for r in runs]
        mean = pd.concat(runs, axis=1).mean(axis=1)
        lines.append(f"| {label} | " + " | ".join("–" if pd.isna(v) else f"{v:.3f}" for v in mean) + " |")
    return lines


# The premise the claims rest on, by plan line (ewa.analysis.approaches.premise_table).
PREMISE_ROWS = (("brute_ac_where_suffices", "brute-force attempts AC, where a brute force suffices"),
                ("problems_mostly_brute_ac", "problems where a brute force suffices and most brute-force attempts are AC"),
                ("brute_corr", "brute-force attempts WA+RE+CE (plan line)"),
                ("efficient_corr", "efficient attempts WA+RE+CE (plan line)"))


def premise_ratio(premises: list[pd.DataFrame], alphas) -> pd.Series:
    """Per alpha: efficient attempts' correctness-failure share over brute-force attempts' (plan line, means
    over seeds); NaN where brute-force attempts never fail on correctness or there are none."""
    mean = pd.concat(premises).groupby("alpha").mean(numeric_only=True).reindex(alphas)
    return mean["efficient_corr"] / mean["brute_corr"].where(mean["brute_corr"] > 0)


def premise_table(premises: list[pd.DataFrame], alphas) -> list[str]:
    """Per alpha: the mean over seeds, the correctness-failure ratio of the means, and the brute-force
    attempts behind them summed over seeds. Empty when no seed has plan lines (a real model's run)."""
    stacked = pd.concat(premises).groupby("alpha")
    mean = stacked.mean(numeric_only=True).reindex(alphas)
    if mean[[key for key, _ in PREMISE_ROWS]].isna().all().all():
        return []
    total = stacked[["brute_attempts", "brute_attempts_there"]].sum().reindex(alphas)
    cell = lambda v: "–" if pd.isna(v) else f"{v:.3f}"
    lines = ["| alpha | " + " | ".join(alpha_tag(a) for a in alphas) + " |", "|---|" + "---|" * len(alphas)]
    lines += [f"| {label} | " + " | ".join(cell(v) for v in mean[key]) + " |" for key, label in PREMISE_ROWS]
    ratio = premise_ratio(premises, alphas)
    lines.append("| efficient / brute-force WA+RE+CE | " + " | ".join(cell(v) for v in ratio) + " |")
    lines.append("| brute-force attempts over all seeds (where a brute force suffices) | "
                 + " | ".join(f"{int(n)} ({int(m)})" for n, m in zip(total["brute_attempts"], total["brute_attempts_there"]))
                 + " |")
    return lines


def premise_section(premises: list[pd.DataFrame], alphas) -> list[str]:
    table = premise_table(premises, alphas)
    if not table:
        return []
    return ["The premise, by plan line (the miniature's ground truth; mean over seeds). The growth classes "
            "above exist only for programs that ran long enough for their cost to show, so a brute force "
            "that fails a small test is never among them and their brute-force rows show almost no "
            "correctness failures. The premise holds strongly when brute-force attempts are AC at least 80% "
            "of the time on the problems where a brute force suffices, and efficient attempts fail on correctness at "
            "least twice as often as brute-force ones.", "", *table, ""]


def pyplot():
    """matplotlib's pyplot (Agg), imported when a figure is drawn: every Snakemake process imports this module
    for OUTPUT_FILES while it reads the workflow (on SLURM, each job's), and none of them draws."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot(per_alpha: list[pd.DataFrame], seeds: list[int], out: Path, title: str) -> None:
    plt = pyplot()
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
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)


def preregistration(seeds: list[int], design_seeds: list[int], demo_seed: int) -> str:
    """Which seeds tuned the design and which are reported; a reported seed that tuned it is an error."""
    tuned = sorted(set(seeds) & set(design_seeds))
    if tuned:
        raise ValueError(f"science: seed(s) {tuned} tuned the design (science.design_seeds) and cannot be "
                         "reported; report seeds the design never saw")
    reported = ", ".join(map(str, seeds))
    if not design_seeds:
        return (f"Reported seeds: {reported}. No seeds are declared as having tuned the design "
                "(`science.design_seeds` is empty).")
    return (f"Pre-registered: the design was tuned by looking at the results of seeds "
            f"{', '.join(map(str, sorted(design_seeds)))} (`science.design_seeds`; `make demo` runs seed {demo_seed}). "
            f"The reported seeds, {reported}, are disjoint from them.")


def registration_text(registration: dict | None) -> str:
    if registration is None:
        return ("Not checked against a registry (`ewa science` without `--registry`): these tables are not a "
                "pre-registered report.")
    return (f"Registered: seeds {', '.join(map(str, registration['seeds']))} ({registration['experiment']}) in "
            f"`{Path(registration['registry']).name}` at commit `{registration['commit'][:10]}`, experiment config "
            f"sha256 `{registration['config_sha256'][:12]}`; every seed's claims and approaches were made there "
            "(their provenance), and no earlier report showed any of them.")


def summary(claims: list[pd.DataFrame], premises: list[pd.DataFrame], seeds: list[int], alphas, benchmark: str,
            setting: str, registration: dict | None) -> dict:
    """What controls_section compares between runs: each claim's values and verdicts per seed, and the
    premise ratio per alpha."""
    ratio = premise_ratio(premises, alphas)
    return {"benchmark": benchmark, "setting": setting, "seeds": seeds, "registration": registration,
            "claims": [{"claim": key, "title": claims[0].loc[i, "title"],
                        "values": [None if pd.isna(c.loc[i, "value"]) else float(c.loc[i, "value"]) for c in claims],
                        "verdicts": [str(c.loc[i, "verdict"]) for c in claims],
                        # runs made before claims.csv had the column: their verdict was the intervals' own
                        "ci_verdicts": [str(c.loc[i, "ci_verdict" if "ci_verdict" in c else "verdict"]) for c in claims]}
                       for i, key in claims[0]["claim"].items()],
            "premise_ratio": {alpha_tag(a): (None if pd.isna(r) else float(r)) for a, r in ratio.items()}}


def write_science(claims_dirs: list[Path], approaches_dirs: list[Path], frontier_png: Path | None, out_dir: Path,
                  benchmark: str, setting: str, design_seeds: list[int] = (), demo_seed: int = 0,
                  registry: str | Path | None = None, repo: str | Path | None = None,
                  registration: dict | None = None, withdraw_if: dict | None = None, sample_n: int | None = None,
                  preflight: list[Path] = (), withdrawal: dict | None = None) -> str:
    """Write science.md, seeds.png, frontier.png (the first seed's), summary.json and registration.json into
    `out_dir`; returns the markdown. The markdown links its figures as docs/frontier-{benchmark}-{setting}
    [-seeds].png, where scripts/science.py copies them beside docs/results.md. design_seeds, demo_seed: see
    preregistration(). registry: the pre-registration record every seed must match (ewa.analysis.registry;
    checked before anything is written), and repo the git checkout its commits are compared in; or
    registration, the record of a check already made (ewa.analysis.archive renders archived runs with it).
    frontier_png None: no copy of the first seed's frontier plot. withdraw_if: the withdrawal rule
    (`science.withdraw_if`), checked on every seed before any claim is read, with sample_n (`sample.n`) and
    the run's preflight records; or withdrawal, the record of a check already made (an archived run's)."""
    seeds = [seed_of(Path(c)) for c in claims_dirs]
    if len(seeds) != len(approaches_dirs):
        raise ValueError(f"science: {len(seeds)} claims directories but {len(approaches_dirs)} approaches directories")
    registered = preregistration(seeds, list(design_seeds), demo_seed)
    if registry is not None:
        registration = check_registry(
            registry, [(s, Path(c), Path(a)) for s, c, a in zip(seeds, claims_dirs, approaches_dirs)], repo)
    if withdraw_if is not None:
        withdrawal = withdraw.check([Path(c) for c in claims_dirs], withdraw_if, sample_n, list(preflight))
    out_dir = Path(out_dir)
    if withdrawal is not None and withdrawal["withdrawn"]:
        return write_withdrawn(withdrawal, out_dir, benchmark=benchmark, setting=setting, seeds=seeds,
                               registered=registered, registration=registration, design_seeds=sorted(design_seeds),
                               demo_seed=demo_seed, claims_dirs=claims_dirs, approaches_dirs=approaches_dirs,
                               frontier=frontier_png is not None)
    read = [read_run(Path(c), Path(a)) for c, a in zip(claims_dirs, approaches_dirs, strict=True)]
    claims, per_alpha, approaches, premises, headrooms, budgets, seeds = (list(x) for x in zip(*read))
    if len({tuple(a["alpha"]) for a in per_alpha}) > 1:
        raise ValueError("science: the seeds' runs use different alpha grids; compare runs of one config")
    out_dir.mkdir(parents=True, exist_ok=True)
    plot(per_alpha, seeds, out_dir / "seeds.png", f"{benchmark} held-out, {setting}")
    if frontier_png is not None:
        with atomic_path(out_dir / "frontier.png") as tmp:
            shutil.copy(frontier_png, tmp)
    figure, frontier = (f"docs/frontier-{benchmark}-{setting}{suffix}.png" for suffix in ("-seeds", ""))
    text = "\n".join([
        f"Generated by `make science` (`ewa science`) from runs with seeds {', '.join(map(str, seeds))} "
        f"on {benchmark} (held-out) / {setting}. CI: paired bootstrap over problem families (evaluate.ci, evaluate.cluster_by), shown for "
        f"seed {seeds[0]}, with the design effect (the clustered CI's variance over an independent-problems "
        "one); every run's own CIs are in its `results/seed<N>/claims/{benchmark}/{setting}/claims.csv` "
        "and report. Verdict: reproduced when every seed's CI lies strictly on the claimed side (a flat "
        "solve rate: the whole CI within ±0.05; an ensemble: a gain whose CI excludes 0, from an allocation "
        "over two or more alphas, else \"no ensemble chosen\").", "", registered, "",
        registration_text(registration), "",
        *([withdraw.passed_text(withdrawal), ""] if withdrawal is not None else []),
        *claims_table(claims, seeds), "",
        "Ensembles per seed: an ensemble can only add problems that some alpha solves and the best single "
        "one does not (within the samples drawn); the allocation each claim used (alpha:samples) and what "
        "it gained over the single alpha.", "",
        *ensembles_table(claims, headrooms, seeds), "",
        *([(f"Claim 4b over the budget k = 1 … n (each seed's `budget_curve.csv`): {how_4b_chooses(headrooms)}; "
            "headroom is what an allocation could add over the single at that k. The verdict above is read at "
            "the configured budget."), "",
           *budget_table(budgets), ""] if any(b is not None for b in budgets) else []),
        "Verdict shares per alpha (mean ± sd over seeds):", "", *rates_table(per_alpha), "",
        "What each alpha writes, classified from how each program's CPU time grows over the size-ordered "
        "tests (`ewa approaches`; mean over seeds; samples that failed before the tests separate the two "
        "kinds are unclassified, and the plan-line table with its agreement is in each run's "
        "approaches/ directory). "
        "Claim 2 needs efficient attempts to fail on correctness more often than brute-force ones; claim 4 "
        "needs some problems that only some alphas solve.", "",
        *approaches_table(approaches, per_alpha[0]["alpha"].tolist()), "",
        *premise_section(premises, per_alpha[0]["alpha"].tolist()),
        f"![verdict shares per alpha, every seed]({figure})", "",
        f"The pipeline's frontier plot for seed {seeds[0]} (`results/seed{seeds[0]}/frontier/{benchmark}/{setting}/frontier.png`):", "",
        f"![frontier, seed {seeds[0]}]({frontier})"])
    alphas = per_alpha[0]["alpha"].tolist()
    record = summary(claims, premises, seeds, alphas, benchmark, setting, registration)
    # where each seed's files were read, so the report's archive (ewa.analysis.archive) copies those
    record["inputs"] = {"claims": [str(Path(c).resolve()) for c in claims_dirs],
                        "approaches": [str(Path(a).resolve()) for a in approaches_dirs]}
    record["design_seeds"], record["demo_seed"] = sorted(design_seeds), demo_seed
    write_json(out_dir / "summary.json", record)
    write_json(out_dir / "registration.json", registration or {"checked": False})
    if withdrawal is not None:
        withdraw.write(out_dir, withdrawal)
    write_text(out_dir / "science.md", text + "\n")
    return text


def placeholder(out: Path, text: str) -> None:
    """A figure saying why there is none: the rule outputs every figure, a withdrawn table draws no claim."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 1.2))
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, fontsize=9)
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)


def write_withdrawn(withdrawal: dict, out_dir: Path, *, benchmark: str, setting: str, seeds: list[int],
                    registered: str, registration: dict | None, design_seeds: list[int], demo_seed: int,
                    claims_dirs=(), approaches_dirs=(), frontier: bool = False) -> str:
    """A table withdrawn by rule: science.md says why and shows no claim (no claim file was read), the
    figures say withdrawn, summary.json has no claims, withdrawal.json the breaches and the files read."""
    out_dir.mkdir(parents=True, exist_ok=True)
    reason = withdraw.withdrawn_text(withdrawal)
    for name in ("seeds.png",) + (("frontier.png",) if frontier else ()):
        placeholder(out_dir / name, f"{benchmark} / {setting}: {reason}")
    text = "\n".join([
        f"Generated by `make science` (`ewa science`) from runs with seeds {', '.join(map(str, seeds))} on "
        f"{benchmark} (held-out) / {setting}.", "", registered, "", registration_text(registration), "",
        f"**This run is {reason}.** The withdrawal rule (`science.withdraw_if`, registered with the config) was "
        "checked on every seed before any claim was read, and one breach withdraws the whole run: no claim of "
        f"it is shown. Every breach, the bounds and the files read are in its `{withdraw.FILE}`."])
    record = {"benchmark": benchmark, "setting": setting, "seeds": seeds, "registration": registration,
              "withdrawn": withdrawal["reason"], "claims": [], "premise_ratio": {},
              "inputs": {"claims": [str(Path(c).resolve()) for c in claims_dirs],
                         "approaches": [str(Path(a).resolve()) for a in approaches_dirs]},
              "design_seeds": design_seeds, "demo_seed": demo_seed}
    write_json(out_dir / "summary.json", record)
    write_json(out_dir / "registration.json", registration or {"checked": False})
    withdraw.write(out_dir, withdrawal)
    write_text(out_dir / "science.md", text + "\n")
    return text


# The negative controls `make science` runs beside the study (configs/control-NAME.yaml, each config.yaml
# with one change): the change, and what the design predicts the pipeline then finds.
CONTROLS = {
    "same-regimes": {
        "change": "both regimes reward the whole suite (`regimes`: low and high at fraction 1.0), and `high` "
                  "trains on a GRPO seed and data order of its own (`seed_stream`): two trainings on one reward "
                  "from one init",
        # {where}, {lead} and {tail}: the words of the control's rule (RULE_WORDS)
        "predicts": "With no difference between the regimes the pipeline must report none: no claim that "
                    "alphas differ in a direction is reproduced {where} ({lead}a flat solve rate, 2b, holds "
                    "trivially when nothing differs). In the study claim 1 follows from the design (the brute "
                    "force passes exactly the smaller half of each suite, and `low` rewards exactly that half); "
                    "this control shows that the pipeline measures that difference and does not make one{tail}.",
    },
    "no-wrong": {
        "change": "no wrong efficient variants in the SFT mix (`model.sft.mix.wrong: 0`): the init never "
                  "answers a reasoning or agentic prompt with a plausible-but-wrong efficient program (the "
                  "tools traces still call them, so in tools part of the premise stays)",
        "predicts": "The premise, that efficient attempts fail on correctness more often than brute-force "
                    "ones, is put in by the SFT mix: without the wrong variants the premise ratio and claim 2 "
                    "shrink. What is left of them is how much harder the efficient programs are for the tiny "
                    "model on their own.",
    },
}


# How same-regimes counts a directional claim against itself (science.control_rule). A table archived
# without the key was registered before it existed, under the any-seed rule.
DEFAULT_CONTROL_RULE = "any_seed"
RULE_WORDS = {"any_seed": {"where": "in any seed", "lead": "", "tail": ""},
              "every_seed": {"where": "by the study's rule", "lead": "every seed's CI on the claimed side; ",
                             "tail": " out of training noise"}}


def control_rule(control: dict) -> str:
    return control.get("control_rule", DEFAULT_CONTROL_RULE)


def _claims_by_key(summary: dict) -> dict:
    return {c["claim"]: c for c in summary["claims"]}


def _mean(claim: dict) -> float | None:
    """The mean of a claim's values over the seeds that have one (None: no seed has)."""
    values = [v for v in claim["values"] if v is not None]
    return sum(values) / len(values) if values else None


def _cell(claim: dict | None) -> str:
    if claim is None:
        return "–"
    hits = sum(v == "reproduced" for v in claim["verdicts"])
    mean = _mean(claim)
    return ("–" if mean is None else f"{mean:+.3f}") + f" ({hits} of {len(claim['verdicts'])})"


def label(claim: dict) -> str:
    return claim["title"].split(".")[0]


def control_outcome(name: str, main: dict, control: dict) -> str:
    """Whether the control came out as its design predicts, in one sentence, from the two summaries."""
    claims, ours = _claims_by_key(control), _claims_by_key(main)
    if name == "same-regimes":
        # the claims that alphas differ in a direction (not a flat rate, nor a share within a range), by their
        # intervals: identical endpoints read untestable, so only the intervals can show a difference the
        # pipeline made
        keys = [c.key for c in CLAIMS if c.expect in ("<0", ">0") and c.key in claims]
        directed = [(claims[k], claims[k].get("ci_verdicts", claims[k]["verdicts"])) for k in keys]
        counted = lambda c, ci: f"{label(c)} ({sum(v == 'reproduced' for v in ci)} of {len(ci)} seeds)"  # noqa: E731
        labels = ", ".join(dict.fromkeys(label(c) for c, _ in directed))
        if control_rule(control) == "any_seed":
            found = [counted(c, ci) for c, ci in directed if "reproduced" in ci]
            if not found:
                return f"As predicted: none of claims {labels} is reproduced in any seed."
            return ("Not as predicted: the pipeline reports a difference where none was put in, claim "
                    + ", ".join(found) + ".")
        found = [counted(c, ci) for c, ci in directed if ci and all(v == "reproduced" for v in ci)]
        some = [counted(c, ci) for c, ci in directed if "reproduced" in ci and not all(v == "reproduced" for v in ci)]
        seen = (" One seed's CI alone lies on the claimed side for " + ", ".join(some) + ": two trainings on "
                "different seeds differ, in no direction the seeds agree on." if some else "")
        if not found:
            return f"As predicted: none of claims {labels} is reproduced (every seed, the study's rule).{seen}"
        return ("Not as predicted: the pipeline reports a difference where none was put in, claim "
                + ", ".join(found) + " (every seed)." + seen)
    both = [a for a, r in control["premise_ratio"].items()
            if r is not None and main["premise_ratio"].get(a) is not None]
    shrank = [a for a in both if control["premise_ratio"][a] < main["premise_ratio"][a]]
    ratio = (f"the premise ratio is lower at {len(shrank)} of the {len(both)} alphas where both runs have one"
             if both else "the premise ratio is undefined (no brute-force attempt fails on correctness)")
    key = "corr_high_minus_low"
    measured = key in claims and key in ours and None not in (_mean(claims[key]), _mean(ours[key]))
    claim2 = (f"claim 2 is {_mean(claims[key]):+.3f} against the study's {_mean(ours[key]):+.3f}" if measured
              else "claim 2 is not measured")
    held = bool(both) and len(shrank) == len(both) and measured and _mean(claims[key]) < _mean(ours[key])
    return ("As predicted: " if held else "Not as predicted: ") + ratio + "; " + claim2 + "."


def controls_section(main: dict, controls: dict[str, dict]) -> list[str]:
    """Markdown: per control (name -> its `ewa science` summary.json), what it changes, what the design
    predicts, a table of each claim and the premise ratio beside the study's (`main`, the summary of the
    same benchmark and setting), and whether the prediction held."""
    lines = []
    for name, control in controls.items():
        if name not in CONTROLS:
            raise ValueError(f"science: no control named {name!r} (known: {', '.join(CONTROLS)})")
        if (control["benchmark"], control["setting"]) != (main["benchmark"], main["setting"]):
            raise ValueError(f"science: control {name} is {control['benchmark']} / {control['setting']}, the "
                             f"study's table {main['benchmark']} / {main['setting']}")
        about = CONTROLS[name]
        if main.get("withdrawn") or control.get("withdrawn"):
            which = "this control" if control.get("withdrawn") else "the study it is compared with"
            lines += [f"#### Control: {name} ({control['benchmark']} / {control['setting']})", "",
                      f"The change: {about['change']}. Not compared: {which} was "
                      f"withdrawn by rule: {(control.get('withdrawn') or main.get('withdrawn'))}.", ""]
            continue
        ours, theirs = _claims_by_key(main), _claims_by_key(control)
        seeds = lambda s: ", ".join(map(str, s["seeds"]))  # noqa: E731
        lines += [f"#### Control: {name} ({control['benchmark']} / {control['setting']})", "",
                  f"The change: {about['change']}. Seeds {seeds(control)}, {control['benchmark']} / "
                  f"{control['setting']}. " + registration_text(control["registration"]), "",
                  about["predicts"].format(**RULE_WORDS[control_rule(control)]) if name == "same-regimes"
                  else about["predicts"], "",
                  f"| claim | study: mean (seeds reproduced), seeds {seeds(main)} | control: mean (seeds "
                  f"reproduced), seeds {seeds(control)} |", "|---|---|---|"]
        lines += [f"| {c['title']} | {_cell(c)} | {_cell(theirs.get(key))} |" for key, c in ours.items()]
        alphas = sorted(main["premise_ratio"], key=float)  # summary.json keeps them as sorted text
        fmt = lambda r: "–" if r is None else f"{r:.2f}"  # noqa: E731
        lines += ["", "Premise ratio (efficient / brute-force WA+RE+CE by plan line, mean over seeds) per alpha:", "",
                  "| run | " + " | ".join(alphas) + " |", "|---|" + "---|" * len(alphas),
                  "| study | " + " | ".join(fmt(main["premise_ratio"][a]) for a in alphas) + " |",
                  f"| control {name} | " + " | ".join(fmt(control["premise_ratio"].get(a)) for a in alphas) + " |",
                  "", control_outcome(name, main, control), ""]
    return lines
