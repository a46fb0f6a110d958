"""The report's front page: what the study is, what this run was, what it found, and where to look.

Written as reStructuredText for `snakemake --report` (its workflow description); the category names
it links to are the ones rules/analysis.smk files results under.
"""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from ewa.alphas import alpha_tag
from ewa.analysis.claims import endpoints_untestable, read_claims, value_text

STUDY = """\
ewa trains one RL checkpoint per nested unit-test coverage regime from one shared initial model,
merges the low- and high-coverage checkpoints on an alpha grid, θ(α) = (1 − α)·θ_low + α·θ_high
(α < 0 and α > 1 extrapolate), samples every merged model, and judges every program in a sandbox.
Each failure is a **correctness failure** (WA, RE, CE) or an **optimization failure** (TLE, MLE). The
study's claim: low coverage keeps brute force (optimization failures), high coverage writes efficient
code that is wrong more often (correctness failures), extrapolation pushes both further, and a
matched-budget ensemble of alphas beats the best single one."""

# Where to look, by the report categories of rules/analysis.smk.
CATEGORIES = (
    ("Frontier", "verdict shares and failure rates per alpha, interpolated and extrapolated, with the Pareto set"),
    ("pass@k", "solve rate per alpha as the sample budget grows"),
    ("Ensembles", "matched-budget mixtures of alphas against the best single alpha"),
    ("Complementarity", "which problems each alpha solves that the others do not"),
    ("Behaviour", "what each setting did per alpha: tool calls, turns, answers missing (no_answer) among CE"),
    ("Claims", "each claim with its bootstrap interval and verdict; what each alpha writes (approaches)"),
    ("Training", "each regime's GRPO steps: reward, groups without spread, the rollouts' verdicts, KL, length; "
                 "the init's warm-start loss"),
)


def describe_run(config: dict) -> list[str]:
    model = config["model"]["init"]
    regimes = ", ".join(f"{r['name']} ({r['fraction']:.0%} of tests)" if r.get("fraction") is not None
                        else f"{r['name']} (inputs up to {r['max_size']} bytes)" for r in config["regimes"])
    merge, sample = config["merge"], config["sample"]
    return [
        f"- **model**: {'a tiny Qwen2 built from scratch (tokenizer, SFT warm start)' if model == 'tiny' else model}",
        f"- **regimes**: {regimes}; merged from ``{merge['low']}`` (α = 0) to ``{merge['high']}`` (α = 1)",
        f"- **alphas**: {', '.join(alpha_tag(a) for a in merge['alphas'])}",
        f"- **benchmarks**: {', '.join(config['benchmarks'])}; **settings**: {', '.join(sample['settings'])}",
        f"- **samples**: n = {sample['n']} per problem; seed {config['seed']}",
    ]


def cell(value: str) -> str:
    """Table text as written: "1. ..." would otherwise start an enumerated list inside the cell."""
    return re.sub(r"^(\w+)\. ", r"\1\\. ", value.replace("|", "/"))


def claims_table(label: str, claims: pd.DataFrame) -> list[str]:
    """One RST list-table of a benchmark/setting's claims with their verdicts."""
    lines = [f".. list-table:: {label}", "   :header-rows: 1", "", "   * - claim", "     - value [95% CI]",
             "     - verdict"]
    for r in claims.itertuples():
        value = value_text(r.value, r.ci_lo, r.ci_hi)
        lines += [f"   * - {cell(r.title)}", f"     - {value}", f"     - {cell(str(r.verdict))}"]
    return lines + [""]


def front_page(config: dict, claims: dict[str, Path]) -> str:
    """The front page; `claims` maps "benchmark / setting" to its `ewa claims` directory."""
    title = "ewa: correctness-efficiency frontiers of weight-averaged code RL"
    tables = {label: read_claims(Path(directory) / "claims.csv") for label, directory in claims.items()}
    lines = [title, "=" * len(title), ""]
    # Before the study: a run whose training did not move the weights has nothing to show, and must say so.
    untestable = {why for why in map(endpoints_untestable, tables.values()) if why}
    lines += [f"**No claim is testable in this run**: {cell(why)}. Every claim below reads *untestable*." for why in
              sorted(untestable)] + ([""] if untestable else [])
    lines += [STUDY, "", "This run", "--------", "", *describe_run(config), ""]
    lines += ["What it found", "-------------", ""]
    if claims:
        lines += ["A claim is *reproduced* only when its whole interval lies on the claimed side.", ""]
        for label, table in tables.items():
            lines += claims_table(label, table)
    else:
        lines += ["The claims need alphas 0 and 1 in the grid; this run has none to test.", ""]
    lines += ["Where to look", "-------------", ""]
    lines += [f"- `{name}`_: {what}" for name, what in CATEGORIES]
    lines += ["- `Workflow`_ and `Statistics`_: the jobs that made these results and their runtimes", ""]
    return "\n".join(lines)
