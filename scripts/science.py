"""Publish `make science`'s tables in docs/results.md: archive each seed's small files behind every
table under docs/science/ (ewa.analysis.archive), then render the page's science section (one
subsection per setting, in the order given) and controls section (each negative control beside the
study's table of the same setting) from that archive alone, with their figures beside the page.

    python scripts/science.py results/science/mini/reasoning ... [--control NAME=DIR ...]
        [--registry docs/registry.yaml] [--page docs/results.md] [--archive docs/science]
    python scripts/science.py --render-only          # the page again from the archive (what the tests check)

With --registry, every table must have been checked against that registry by `ewa science` (its
registration.json), and publishing moves their registrations from `next` to `reports`.

A run (the study, or one control) one of whose tables `ewa science` withdrew by rule (its withdrawal.json,
ewa.analysis.withdrawal) is withdrawn whole: every table of it is archived and rendered as withdrawn, with
no claim, and its registration moves to `withdrawn` with the rule's reason.
"""
from __future__ import annotations

import argparse
import datetime
import json
import re
import shutil
import sys
from pathlib import Path

from ewa.analysis.archive import STUDY, archive_table, render, withdrawal_of
from ewa.analysis.registry import record_report
from ewa.analysis.withdrawal import record_withdrawal
from ewa.errors import UserError
from ewa.config import load

ROOT = Path(__file__).resolve().parent.parent
SCIENCE = "<!-- science:start -->", "<!-- science:end -->"
CONTROLS = "<!-- controls:start -->", "<!-- controls:end -->"


def replace_section(page: str, markers: tuple[str, str], text: str) -> str:
    """`page` with what lies between the markers (themselves included) replaced by `text`, or `text`
    appended when the page has no such section yet."""
    start, end = markers
    if start in page:
        return page[:page.index(start)] + text + page[page.index(end) + len(end):]
    return page.rstrip("\n") + "\n\n" + text + "\n"


def control_arg(text: str) -> tuple[str, Path]:
    name, sep, directory = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=DIR")
    return name, Path(directory)


def withdrawn_runs(runs: list[tuple[str, Path, Path]]) -> dict[str, str]:
    """Run name -> the reason it is withdrawn: the first of its tables that `ewa science` withdrew by rule."""
    withdrawn = {}
    for run, science_dir, _ in runs:
        record = withdrawal_of(science_dir)
        if record and record["withdrawn"] and run not in withdrawn:
            withdrawn[run] = f"{' / '.join(science_dir.parts[-2:])}: {record['reason']}"
    return withdrawn


def archive(args: argparse.Namespace) -> None:
    """Check the registrations, record the report (or a run's withdrawal), and archive every table's
    per-seed files."""
    runs = [(STUDY, d, args.config) for d in args.science_dirs]
    runs += [(f"control-{name}", d, ROOT / "configs" / f"control-{name}.yaml") for name, d in args.control]
    withdrawn = withdrawn_runs(runs)
    for run, reason in withdrawn.items():
        print(f"science.py: warning: {run} withdrawn by rule: {reason}", file=sys.stderr)
    if args.registry:
        registrations = {}
        for run, science_dir, _ in runs:
            registration = json.loads((science_dir / "registration.json").read_text())
            if registration.get("checked") is False:
                sys.exit(f"science.py: {science_dir} was not checked against a registry (`ewa science --registry`); "
                         "not publishing it")
            registrations.setdefault(json.dumps(registration, sort_keys=True), (registration, run))
        try:
            for registration, run in registrations.values():
                if run in withdrawn:
                    record_withdrawal(args.registry, registration, withdrawn[run], datetime.date.today().isoformat())
                else:
                    record_report(args.registry, registration)
        except UserError as e:  # RegistryError among them
            sys.exit(f"science.py: {e}")
    for run in {run for run, _, _ in runs}:
        shutil.rmtree(args.archive / run, ignore_errors=True)  # a table no longer published leaves the archive
    for order, (run, science_dir, config_path) in enumerate(runs):
        archive_table(science_dir, args.archive, run, order, load(config_path), withdrawn.get(run))
        benchmark, setting = science_dir.parts[-2:]
        if run == STUDY and run not in withdrawn:  # the first seed's frontier plot (not rendered from the archive)
            shutil.copy(science_dir / "frontier.png", args.page.parent / f"frontier-{benchmark}-{setting}.png")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("science_dirs", type=Path, nargs="*", help="`ewa science` output directories of the study")
    p.add_argument("--control", type=control_arg, action="append", default=[], metavar="NAME=DIR",
                   help="a negative control's `ewa science` directory (ewa.analysis.science.CONTROLS names them)")
    p.add_argument("--registry", type=Path, help="publish only tables checked against this registry, and record "
                   "their report in it")
    p.add_argument("--config", type=Path, default=ROOT / "configs" / "science.yaml",
                   help="the study's experiment config (its design seeds); controls use configs/control-NAME.yaml")
    p.add_argument("--page", type=Path, default=ROOT / "docs" / "results.md",
                   help="the Markdown page to write into; figures go beside it")
    p.add_argument("--archive", type=Path, help="where per-seed files are kept (default: science/ beside the page)")
    p.add_argument("--render-only", action="store_true", help="only render the page from the archive")
    args = p.parse_args()
    args.archive = args.archive or args.page.parent / "science"
    if not args.render_only:
        if not args.science_dirs:
            p.error("give the study's `ewa science` directories, or --render-only")
        args.page.parent.mkdir(parents=True, exist_ok=True)
        archive(args)
    science, controls = render(args.archive, figures_dir=args.page.parent)
    page = args.page.read_text() if args.page.exists() else "# Results\n"
    page = replace_section(page, SCIENCE, science)
    if controls is not None:
        page = replace_section(page, CONTROLS, controls)
    tmp = args.page.with_suffix(".md.tmp")
    tmp.write_text(page)
    tmp.replace(args.page)
    print(science + ("\n\n" + controls if controls else ""))


if __name__ == "__main__":
    main()
