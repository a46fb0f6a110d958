"""The reported runs' small per-seed files, kept in the repository so the results page can be checked.

`make science` archives, for every `ewa science` table it publishes, each seed's claims, approaches and
behaviour files under docs/science/RUN/BENCHMARK/SETTING/seed<N>/ (RUN: `study`, or `control-NAME`),
with run.json naming the seeds, the design seeds and the registration the table was checked against.
The page's science and controls sections are rendered from the archive alone, so a test can render
them again and compare them with docs/results.md: a number edited by hand, or an archive that is not
what the tables were made from, shows.

    archive_table(science_dir, archive_root, run, order, config)   # one `ewa science` table
    render(archive_root, figures_dir) -> (science_section, controls_section)

A table withdrawn by rule (ewa.analysis.withdrawal), or one of a run another table of which was, keeps its
withdrawal record in run.json and no per-seed file: its claims were never read, and are not published.
"""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from ewa.analysis import withdrawal as withdraw
from ewa.analysis.science import (DEFAULT_CONTROL_RULE, controls_section, preregistration, write_science,
                                  write_withdrawn)
from ewa.io import atomic_path, write_json

STUDY = "study"
# Per seed: what each step's directory contributes (results/seed<N>/<step>/<benchmark>/<setting>/<file>).
FILES = {"claims": ("claims.csv", "per_alpha.csv", "headroom.json", "budget_curve.csv", "provenance.json"),
         "approaches": ("approaches.csv", "premise.csv"),
         "frontier": ("behaviour.csv",)}
START = {"science": "<!-- science:start -->", "controls": "<!-- controls:start -->"}
END = {"science": "<!-- science:end -->", "controls": "<!-- controls:end -->"}


def seed_dirs(summary: dict, science_dir: Path) -> list[dict[str, Path]]:
    """Per seed of a table: its claims, approaches and frontier directories. `ewa science` records where it
    read them; tables made before it did are found in the results/ tree around results/science/."""
    benchmark, setting = summary["benchmark"], summary["setting"]
    if "inputs" in summary:
        dirs = [{"claims": Path(c), "approaches": Path(a)}
                for c, a in zip(summary["inputs"]["claims"], summary["inputs"]["approaches"], strict=True)]
    else:
        results = science_dir.resolve().parents[2]
        dirs = [{step: results / f"seed{seed}" / step / benchmark / setting for step in ("claims", "approaches")}
                for seed in summary["seeds"]]
    for d in dirs:  # results/<...>/claims/BENCHMARK/SETTING -> results/<...>/frontier/BENCHMARK/SETTING
        d["frontier"] = d["claims"].parents[2] / "frontier" / benchmark / setting
    return dirs


def withdrawal_of(science_dir: Path) -> dict | None:
    """The withdrawal rule's record of an `ewa science` table (None for tables made before the rule)."""
    path = Path(science_dir) / withdraw.FILE
    return json.loads(path.read_text()) if path.is_file() else None


def archive_table(science_dir: Path, archive_root: Path, run: str, order: int, config: dict,
                  withdrawn_with: str | None = None) -> Path:
    """Copy the per-seed files behind one `ewa science` table into archive_root/run/BENCHMARK/SETTING/,
    replacing what was there; returns that directory. config: the experiment's, for the design seeds of
    tables whose summary does not name them. withdrawn_with: the reason another table of the same run was
    withdrawn, which withdraws this one too."""
    summary = json.loads((science_dir / "summary.json").read_text())
    withdrawal = withdrawal_of(science_dir)
    if withdrawn_with and not (withdrawal or {}).get("withdrawn"):
        withdrawal = {**(withdrawal or {}), "withdrawn": True, "reason": withdrawn_with}
    withdrawn = bool((withdrawal or {}).get("withdrawn"))
    design_seeds = summary["design_seeds"] if "design_seeds" in summary else config["science"]["design_seeds"]
    demo_seed = summary["demo_seed"] if "demo_seed" in summary else config["seed"]
    registration = json.loads((science_dir / "registration.json").read_text())
    benchmark, setting, seeds = summary["benchmark"], summary["setting"], summary["seeds"]
    dest = archive_root / run / benchmark / setting
    with atomic_path(dest) as tmp:
        tmp.mkdir()
        # a withdrawn table's claims were never read: none of its seeds' files is published
        for seed, dirs in [] if withdrawn else zip(seeds, seed_dirs(summary, science_dir), strict=True):
            for step, names in FILES.items():
                for name in names:
                    if (dirs[step] / name).is_file():
                        (tmp / f"seed{seed}" / step).mkdir(parents=True, exist_ok=True)
                        shutil.copy(dirs[step] / name, tmp / f"seed{seed}" / step / name)
        write_json(tmp / "run.json", {"run": run, "order": order, "benchmark": benchmark, "setting": setting,
                                      "seeds": seeds, "design_seeds": sorted(design_seeds), "demo_seed": demo_seed,
                                      "control_rule": config["science"]["control_rule"],
                                      "registration": None if registration.get("checked") is False else registration,
                                      **({"withdrawal": withdrawal} if withdrawal is not None else {})})
    return dest


def tables(archive_root: Path, run: str) -> list[tuple[dict, Path]]:
    """(run.json, directory) of every table archived under `run`, in publishing order."""
    found = [(json.loads(p.read_text()), p.parent) for p in sorted((archive_root / run).glob("*/*/run.json"))]
    return sorted(found, key=lambda item: item[0]["order"])


def render_table(meta: dict, directory: Path, out_dir: Path) -> str:
    """One table's markdown (and its seeds.png in out_dir), from its archived files only."""
    seeds = meta["seeds"]
    withdrawal = meta.get("withdrawal")
    if withdrawal is not None and withdrawal["withdrawn"]:
        return write_withdrawn(withdrawal, out_dir, benchmark=meta["benchmark"], setting=meta["setting"], seeds=seeds,
                               registered=preregistration(seeds, meta["design_seeds"], meta["demo_seed"]),
                               registration=meta["registration"], design_seeds=meta["design_seeds"],
                               demo_seed=meta["demo_seed"])
    return write_science([directory / f"seed{s}" / "claims" for s in seeds],
                         [directory / f"seed{s}" / "approaches" for s in seeds], None, out_dir, meta["benchmark"],
                         meta["setting"], meta["design_seeds"], meta["demo_seed"], registration=meta["registration"],
                         withdrawal=withdrawal)


def render(archive_root: str | Path, figures_dir: str | Path | None = None) -> tuple[str, str | None]:
    """The results page's science section (every study table, with figures named as the page links them:
    docs/frontier-BENCHMARK-SETTING-seeds.png, written into figures_dir when given) and controls section
    (each control beside the study's table of its benchmark and setting; None without controls), both
    with their markers."""
    archive_root = Path(archive_root)
    study = tables(archive_root, STUDY)
    if not study:
        raise FileNotFoundError(f"{archive_root / STUDY}: no archived study tables")
    parts, summaries = [START["science"], ""], {}
    with tempfile.TemporaryDirectory() as scratch:
        for meta, directory in study:
            out = Path(scratch) / meta["benchmark"] / meta["setting"]
            text = render_table(meta, directory, out)
            if len(study) > 1:
                parts += [f"#### {meta['benchmark']} / {meta['setting']}", ""]
            parts += [text.replace("](docs/", "]("), ""]  # the page lives in docs/
            summaries[meta["benchmark"], meta["setting"]] = json.loads((out / "summary.json").read_text())
            if figures_dir is not None:
                shutil.copy(out / "seeds.png", Path(figures_dir) / f"frontier-{meta['benchmark']}-{meta['setting']}-seeds.png")
        controls = [START["controls"], ""]
        runs = sorted(p.name for p in archive_root.glob("control-*"))
        for run in runs:
            for meta, directory in tables(archive_root, run):
                out = Path(scratch) / run / meta["benchmark"] / meta["setting"]
                render_table(meta, directory, out)
                main = summaries.get((meta["benchmark"], meta["setting"]))
                if main is None:
                    raise ValueError(f"archive: {run} is {meta['benchmark']} / {meta['setting']}, which no study "
                                     "table is")
                control = json.loads((out / "summary.json").read_text())
                control["control_rule"] = meta.get("control_rule", DEFAULT_CONTROL_RULE)  # registered with the run
                controls += controls_section(main, {run.removeprefix("control-"): control})
    return "\n".join(parts + [END["science"]]), "\n".join(controls + [END["controls"]]) if runs else None


def section(page: str, name: str) -> str | None:
    """The page's `name` section (science | controls), markers included; None when it has none."""
    if START[name] not in page:
        return None
    return page[page.index(START[name]):page.index(END[name]) + len(END[name])]
