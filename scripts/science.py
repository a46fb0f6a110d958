"""Put `make science`'s combined tables into docs/results.md: the section between the science markers
(one subsection per setting, in the order given), with their figures copied beside the page, and the
negative controls beside the study's table of the same setting between the controls markers.

    python scripts/science.py results/science/mini/reasoning ... [--control NAME=DIR ...]
        [--registry docs/registry.yaml] [--page docs/results.md]

With --registry, every table must have been checked against that registry by `ewa science` (its
registration.json), and publishing moves their registrations from `next` to `reports`.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path

from ewa.analysis.registry import RegistryError, record_report
from ewa.analysis.science import controls_section

SCIENCE = "<!-- science:start -->", "<!-- science:end -->"
CONTROLS = "<!-- controls:start -->", "<!-- controls:end -->"
# `ewa science` links its figures from the repository's root (docs/NAME.png); the page lives in docs/.
ROOT_FIGURE = re.compile(r"\]\(docs/([^)\s]+)\)")


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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("science_dirs", type=Path, nargs="+", help="`ewa science` output directories")
    p.add_argument("--control", type=control_arg, action="append", default=[], metavar="NAME=DIR",
                   help="a negative control's `ewa science` directory (ewa.analysis.science.CONTROLS names them)")
    p.add_argument("--registry", type=Path, help="publish only tables checked against this registry, and record "
                   "their report in it")
    p.add_argument("--page", type=Path, default=Path("docs/results.md"),
                   help="the Markdown page to write into; figures go beside it")
    args = p.parse_args()
    if args.registry:
        registrations = []
        for science_dir in [*args.science_dirs, *(d for _, d in args.control)]:
            registration = json.loads((science_dir / "registration.json").read_text())
            if registration.get("checked") is False:
                sys.exit(f"science.py: {science_dir} was not checked against a registry (`ewa science --registry`); "
                         "not publishing it")
            registrations.append(registration)
        try:
            for registration in {json.dumps(r, sort_keys=True): r for r in registrations}.values():
                record_report(args.registry, registration)
        except RegistryError as e:
            sys.exit(f"science.py: {e}")
    figures = args.page.parent
    figures.mkdir(parents=True, exist_ok=True)
    parts = [SCIENCE[0], ""]
    summaries = {}
    for science_dir in args.science_dirs:
        benchmark, setting = science_dir.parts[-2:]
        shutil.copy(science_dir / "seeds.png", figures / f"frontier-{benchmark}-{setting}-seeds.png")
        shutil.copy(science_dir / "frontier.png", figures / f"frontier-{benchmark}-{setting}.png")
        if len(args.science_dirs) > 1:
            parts += [f"#### {benchmark} / {setting}", ""]
        parts += [ROOT_FIGURE.sub(r"](\1)", (science_dir / "science.md").read_text().rstrip()), ""]
        if (science_dir / "summary.json").is_file():
            summaries[benchmark, setting] = json.loads((science_dir / "summary.json").read_text())
    page = args.page.read_text() if args.page.exists() else "# Results\n"
    printed = ["\n".join(parts + [SCIENCE[1]])]
    page = replace_section(page, SCIENCE, printed[0])
    if args.control:
        lines = [CONTROLS[0], ""]
        for name, directory in args.control:
            control = json.loads((directory / "summary.json").read_text())
            main_table = summaries.get((control["benchmark"], control["setting"]))
            if main_table is None:
                sys.exit(f"science.py: control {name} is {control['benchmark']} / {control['setting']}, which "
                         "none of the study's tables given is")
            lines += controls_section(main_table, {name: control})
        printed.append("\n".join(lines + [CONTROLS[1]]))
        page = replace_section(page, CONTROLS, printed[-1])
    tmp = args.page.with_suffix(".md.tmp")
    tmp.write_text(page)
    tmp.replace(args.page)
    print("\n\n".join(printed))


if __name__ == "__main__":
    main()
