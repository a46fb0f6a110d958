"""The analysis steps, each writing into an output directory it owns alone:

    ewa frontier --evals alpha=-0.5:a.parquet alpha=0:b.parquet ... --problems problems.jsonl --out-dir DIR
    ewa claims --evals alpha=A:PATH ... --ensembles DIR/ensembles.csv [--problems problems.jsonl] --out-dir DIR
    ewa approaches --evals alpha=A:PATH ... --samples alpha=A:PATH ... --problems problems.jsonl --out-dir DIR
    ewa science --claims DIR ... --approaches DIR ... --frontier-plot PNG [--preflight JSON ...] --out-dir DIR
    ewa front --claims BENCHMARK/SETTING=DIR ... --out front.rst

`ewa science` reads `science.design_seeds` and `seed` from the config (which seeds tuned the design), and
`science.withdraw_if` with `sample.n`: the withdrawal rule every seed is checked against before any claim.

Each --evals/--samples item names one grid point's file as `alpha=A:PATH` (ewa.alphas). pass@k values,
the ensemble budget and windows, the dev share, bootstrap resamples and what they resample (cluster_by),
CI coverage, claim 4's minimum headroom and the seed come from the config (`evaluate`, `seed`); flags
override them.
"""
from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from ewa.alphas import alpha_tag, parse_alpha_spec
from ewa.analysis.bootstrap import CLUSTER_BY
from ewa.io import atomic_path, provenance, sha256_file, write_json, write_text


def add_grid_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--evals", nargs="+", required=True, metavar="alpha=A:PATH",
                        help="evaluation tables, one per alpha")
    parser.add_argument("--bootstrap", type=int, default=None, help="problem resamples for CIs; 0 = none "
                        "(default: evaluate.bootstrap)")
    parser.add_argument("--seed", type=int, default=None, help="bootstrap and dev/test split seed (default: seed)")
    parser.add_argument("--ci", type=float, default=None, help="CI coverage (default: evaluate.ci)")
    parser.add_argument("--cluster-by", choices=CLUSTER_BY, default=None,
                        help="what the bootstrap resamples: problem families or problems (default: evaluate.cluster_by)")
    parser.add_argument("--problems", type=Path, help="canonical problems.jsonl: difficulty and family per problem "
                        "(without it the family is read from the problem id: mini/<family>/...)")
    parser.add_argument("--out-dir", required=True, type=Path, help="the directory this step writes (replaced whole)")


def option(value, default):
    return default if value is None else value


def add_frontier_arguments(parser: argparse.ArgumentParser) -> None:
    add_grid_arguments(parser)
    parser.add_argument("--k", type=int, nargs="+", default=None, help="pass@k columns (default: evaluate.k)")
    parser.add_argument("--budget", type=int, nargs="+",
                        help="ensemble budgets B per problem (default: evaluate.budget)")
    parser.add_argument("--windows", type=int, nargs="*", default=None,
                        help="widths of contiguous alpha windows mixed uniformly (default: evaluate.windows)")
    parser.add_argument("--dev-fraction", type=float, default=None,
                        help="share of problem families the optimised allocation is fitted on "
                             "(default: evaluate.dev_fraction)")
    parser.add_argument("--formats", nargs="*", default=["png", "svg"], help="plot formats; none = no plots")


def frontier(args: argparse.Namespace, config: dict) -> int:
    from ewa.analysis.ensemble import EnsembleSettings
    from ewa.analysis.frontier import load_grid, write_frontier
    from ewa.analysis.metrics import MetricsSettings

    ev = config["evaluate"]
    seed, reps = option(args.seed, config["seed"]), option(args.bootstrap, ev["bootstrap"])
    ci, cluster_by = option(args.ci, ev["ci"]), option(args.cluster_by, ev["cluster_by"])
    specs = [parse_alpha_spec(s) for s in args.evals]
    metrics = MetricsSettings(k=tuple(option(args.k, ev["k"])), bootstrap=reps, ci=ci, seed=seed, cluster_by=cluster_by)
    ensembles = EnsembleSettings(budgets=tuple(option(args.budget, [ev["budget"]])),
                                 windows=tuple(option(args.windows, ev["windows"])),
                                 dev_fraction=option(args.dev_fraction, ev["dev_fraction"]), seed=seed, bootstrap=reps,
                                 ci=ci, cluster_by=cluster_by, folds=ev["folds"])
    grid = load_grid(specs, args.problems)
    inputs = {str(p): sha256_file(p) for _, p in specs}
    if args.problems:
        inputs[str(args.problems)] = sha256_file(args.problems)
    prov = provenance({"metrics": asdict(metrics), "ensembles": asdict(ensembles), "formats": args.formats},
                      inputs=inputs, alphas={alpha_tag(a): str(p) for a, p in specs})
    summary = write_frontier(grid, args.out_dir, metrics, ensembles, tuple(args.formats), prov)
    print(f"{len(grid.alphas)} alphas x {summary['n_problems']} problems -> {args.out_dir} "
          f"(pareto alphas: {', '.join(alpha_tag(a) for a in summary['pareto_alphas'])})")
    return 0


def add_claims_arguments(parser: argparse.ArgumentParser) -> None:
    add_grid_arguments(parser)
    parser.add_argument("--ensembles", default=None, help="ensembles.csv of `ewa frontier` (claim 4)")
    parser.add_argument("--min-headroom", type=int, default=None,
                        help="problems an ensemble could add below which claim 4 is untestable "
                             "(default: evaluate.min_headroom)")
    parser.add_argument("--endpoints", nargs=2, type=Path, default=None, metavar=("LOW_DIR", "HIGH_DIR"),
                        help="the checkpoints at alpha 0 and 1: where they are the same weights (or one never left "
                             "the init), every claim reads untestable")


def claims(args: argparse.Namespace, config: dict) -> int:
    import pandas as pd

    from ewa.analysis import plots
    from ewa.analysis.claims import ClaimsSettings, measure, per_alpha, value_text
    from ewa.analysis.frontier import load_grid
    from ewa.train.outcome import endpoints

    ev = config["evaluate"]
    settings = ClaimsSettings(bootstrap=option(args.bootstrap, ev["bootstrap"]), ci=option(args.ci, ev["ci"]),
                              seed=option(args.seed, config["seed"]),
                              cluster_by=option(args.cluster_by, ev["cluster_by"]), dev_fraction=ev["dev_fraction"],
                              budget=ev["budget"], min_headroom=option(args.min_headroom, ev["min_headroom"]),
                              folds=ev["folds"])
    specs = [parse_alpha_spec(s) for s in args.evals]
    grid = load_grid(specs, args.problems)
    ensembles = pd.read_csv(args.ensembles) if args.ensembles else None
    ends = endpoints(*args.endpoints) if args.endpoints else None
    result = measure(grid, ensembles, settings, ends)
    table = result.table
    shown = table[["title", "measure", "value", "ci_lo", "ci_hi", "design_effect", "verdict", "allocation", "note"]]
    inputs = {str(p): sha256_file(p) for _, p in specs}
    if args.problems:
        inputs[str(args.problems)] = sha256_file(args.problems)
    with atomic_path(args.out_dir) as tmp:
        tmp.mkdir()
        table.to_csv(tmp / "claims.csv", index=False)
        per_alpha(grid).to_csv(tmp / "per_alpha.csv", index=False)
        write_json(tmp / "headroom.json", result.headroom)
        result.budget_curve.to_csv(tmp / "budget_curve.csv", index=False)
        plots.plot_budget_curve(result.budget_curve, tmp / "budget_curve", ("png",))
        (tmp / "claims.html").write_text(shown.to_html(index=False, float_format=lambda v: f"{v:+.3f}", na_rep="–"))
        write_json(tmp / "provenance.json", provenance(
            {**asdict(settings), "alphas": grid.alphas.tolist(), "evals": inputs,
             "ensembles": sha256_file(args.ensembles) if args.ensembles else None},
            endpoints=None if ends is None else {"low": str(args.endpoints[0]), "high": str(args.endpoints[1]),
                                                 "identical": ends.identical, "unchanged": list(ends.unchanged)}))
    if ends is not None and ends.untestable:
        print(f"every claim is {ends.untestable}: {ends.why}")
    for r in table.itertuples():
        chosen = f" ({r.allocation})" if isinstance(r.allocation, str) and r.allocation else ""
        value = value_text(r.value, r.ci_lo, r.ci_hi)
        print(f"{r.title}: {value} {r.verdict}{chosen} {r.note}".rstrip())
    return 0


def add_approaches_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--evals", nargs="+", required=True, metavar="alpha=A:PATH", help="evaluation tables")
    parser.add_argument("--samples", nargs="+", required=True, metavar="alpha=A:PATH",
                        help="sample files, one per alpha of --evals (their plan lines: the declared approach)")
    parser.add_argument("--problems", type=Path, help="the problems file the tables were judged on: test sizes "
                        "and limits, to classify approaches by growth (without it: by plan line only)")
    parser.add_argument("--out-dir", required=True, type=Path, help="writes approaches.csv, declared.csv, "
                        "agreement.csv, classified.parquet and provenance.json")


def approaches(args: argparse.Namespace, config: dict) -> int:
    from ewa.analysis.approaches import write_approaches

    evals = {alpha_tag(a): (a, p) for a, p in (parse_alpha_spec(s) for s in args.evals)}
    samples = {alpha_tag(a): p for a, p in (parse_alpha_spec(s, "--samples") for s in args.samples)}
    if set(evals) != set(samples):
        raise ValueError(f"--samples alphas {sorted(samples)} differ from --evals alphas {sorted(evals)}")
    grid = sorted(evals.values(), key=lambda e: e[0])
    table, agreement = write_approaches(grid, {a: samples[alpha_tag(a)] for a, _ in grid}, args.problems,
                                        args.out_dir)
    for r in table.itertuples():
        print(f"alpha {alpha_tag(r.alpha)} {r.approach:>9}: share {r.share:.3f}, AC {r.AC:.3f}, "
              f"TLE+MLE {r.opt:.3f}, WA+RE+CE {r.corr:.3f} (n={r.n}, by {r.classified_by})")
    for r in () if agreement is None else agreement.itertuples():
        print(f"alpha {alpha_tag(r.alpha)} growth vs plan line: agreement {r.agreement:.3f} over {r.both_known} "
              f"samples, coverage {r.coverage:.3f} of {r.stated} with a plan line")
    return 0


def add_science_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--claims", nargs="+", required=True, type=Path, help="each seed's `ewa claims` directory")
    parser.add_argument("--approaches", nargs="+", required=True, type=Path,
                        help="each seed's `ewa approaches` directory, in the same order")
    parser.add_argument("--frontier-plot", required=True, type=Path, help="the first seed's frontier.png")
    parser.add_argument("--benchmark", required=True)
    parser.add_argument("--setting", required=True)
    parser.add_argument("--out-dir", required=True, type=Path, help="writes science.md, seeds.png, frontier.png")
    parser.add_argument("--registry", type=Path, default=None,
                        help="the pre-registration record (docs/registry.yaml): refuse a seed not registered for "
                             "this report, already reported, or made at another commit or config")
    parser.add_argument("--preflight", nargs="*", type=Path, default=[],
                        help="the run's preflight records (results/preflight/*.json): their containment probe is "
                             "part of the withdrawal rule (science.withdraw_if.containment)")


def science(args: argparse.Namespace, config: dict) -> int:
    import sys

    from ewa.analysis.science import write_science
    from ewa.analysis.withdrawal import FILE

    # The withdrawal rule (science.withdraw_if) and sample.n come from the config: the workflow passes both.
    text = write_science(args.claims, args.approaches, args.frontier_plot, args.out_dir, args.benchmark,
                         args.setting, config["science"]["design_seeds"], config["seed"], registry=args.registry,
                         withdraw_if=config["science"]["withdraw_if"], sample_n=config["sample"]["n"],
                         preflight=args.preflight)
    print(text)
    record = json.loads((args.out_dir / FILE).read_text())
    if record["withdrawn"]:  # the report still renders, so the page says so; the run is not an error
        print(f"ewa science: warning: {args.benchmark}/{args.setting} withdrawn by rule: {record['reason']}",
              file=sys.stderr)
    return 0


def add_front_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--claims", nargs="*", default=[], metavar="BENCHMARK/SETTING=DIR",
                        help="each benchmark and setting's `ewa claims` directory")
    parser.add_argument("--out", required=True, type=Path, help="the front page (reStructuredText)")


def front(args: argparse.Namespace, config: dict) -> int:
    from ewa.analysis.front import front_page
    from ewa.errors import UserError

    claims = {}
    for item in args.claims:
        label, sep, directory = item.partition("=")
        if not sep:
            raise UserError(f"--claims: {item!r} is not BENCHMARK/SETTING=DIR")
        claims[label.replace("/", " / ")] = Path(directory)
    write_text(args.out, front_page(config, claims))
    return 0


def add_families_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--families", required=True, help="the families and their points as JSON, or a file "
                        "holding it (ewa.families.family_spec of the experiment config)")
    parser.add_argument("--evals", nargs="+", required=True, metavar="point=TAG:PATH",
                        help="evaluation table of every point, by its tag: point=+0.50:PATH, point=@init+1.00:PATH")
    parser.add_argument("--bootstrap", type=int, default=None, help="resamples of problem clusters for CIs; 0 = none "
                        "(default: evaluate.bootstrap)")
    parser.add_argument("--seed", type=int, default=None, help="bootstrap and dev/test split seed (default: seed)")
    parser.add_argument("--problems", type=Path, help="canonical problems.jsonl: family per problem")
    parser.add_argument("--formats", nargs="*", default=["png", "svg"], help="plot formats; none = no plots")
    parser.add_argument("--out-dir", required=True, type=Path, help="the directory this step writes (replaced whole)")


def families(args: argparse.Namespace, config: dict) -> int:
    import json

    from ewa.analysis.families import FamilySettings, write_families

    ev = config["evaluate"]
    text = args.families if args.families.lstrip().startswith("{") else Path(args.families).read_text()
    spec = json.loads(text)
    evals = []
    for item in args.evals:
        tag, sep, path = item.removeprefix("point=").partition(":")
        if not item.startswith("point=") or not sep or not tag or not path:
            raise ValueError(f"--evals {item!r}: expected point=TAG:PATH, e.g. point=@init+1.00:evals.parquet")
        evals.append((tag, Path(path)))
    settings = FamilySettings(k=tuple(ev["k"]), bootstrap=option(args.bootstrap, ev["bootstrap"]), ci=ev["ci"],
                              seed=option(args.seed, config["seed"]), cluster_by=ev["cluster_by"],
                              budget=ev["budget"], dev_fraction=ev["dev_fraction"], folds=ev["folds"])
    inputs = {str(p): sha256_file(p) for _, p in evals}
    if args.problems:
        inputs[str(args.problems)] = sha256_file(args.problems)
    prov = provenance({"families": spec, "settings": asdict(settings), "formats": args.formats}, inputs=inputs)
    summary = write_families(spec, evals, args.problems, args.out_dir, settings, tuple(args.formats), prov)
    for r in summary["line_vs_trajectories"]:
        print(f"{r['family_a']} - {r['family_b']}: hypervolume {r['hv_diff']:+.4f} "
              f"[{r['hv_diff_lo'] if r['hv_diff_lo'] is not None else float('nan'):+.4f}, "
              f"{r['hv_diff_hi'] if r['hv_diff_hi'] is not None else float('nan'):+.4f}] ({r['verdict']})")
    print(f"{summary['models']} models in {len(summary['families'])} families x {summary['n_problems']} problems "
          f"-> {args.out_dir}")
    return 0


def add_training_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoints", nargs="*", default=[], metavar="REGIME=DIR",
                        help="one run: each regime's checkpoint directory (its metrics.csv), low to high")
    parser.add_argument("--init", type=Path, help="one run: the init's directory (its sft_metrics.csv): sft.png")
    parser.add_argument("--tables", nargs="*", default=[], metavar="SEED=PATH",
                        help="across seeds: each seed's training.csv (written by a run's `ewa training`)")
    parser.add_argument("--out-dir", required=True, type=Path, help="where the figures and training.csv go")


def pairs(items: list[str], flag: str, key) -> dict:
    from ewa.errors import UserError

    parsed = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise UserError(f"{flag}: {item!r} is not NAME=PATH")
        try:
            parsed[key(name)] = Path(path)
        except ValueError:
            raise UserError(f"{flag}: {item!r}: {name!r} is not a seed") from None
    return parsed


def training(args: argparse.Namespace, config: dict) -> int:
    from ewa.analysis.training import write_run, write_seeds
    from ewa.errors import UserError

    checkpoints, tables = pairs(args.checkpoints, "--checkpoints", str), pairs(args.tables, "--tables", int)
    if bool(checkpoints) == bool(tables):
        raise UserError("give --checkpoints (one run's regimes) or --tables (seeds' training.csv), one of them")
    for regime, directory in checkpoints.items():
        if not (directory / "metrics.csv").is_file():
            raise UserError(f"--checkpoints {regime}: {directory} has no metrics.csv (not a checkpoint of ewa train)")
    for seed, path in tables.items():
        if not path.is_file():
            raise UserError(f"--tables {seed}: {path}: no such file")
    written = (write_run(checkpoints, args.init, args.out_dir, config.get("seed")) if checkpoints
               else write_seeds(tables, args.out_dir))
    print(f"ewa training: wrote {', '.join(p.name for p in written)} to {args.out_dir}")
    return 0


COMMANDS = {
    "training": (add_training_arguments, training),
    "families": (add_families_arguments, families),
    "front": (add_front_arguments, front),
    "frontier": (add_frontier_arguments, frontier),
    "claims": (add_claims_arguments, claims),
    "approaches": (add_approaches_arguments, approaches),
    "science": (add_science_arguments, science),
}
