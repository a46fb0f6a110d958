"""Put `make science`'s combined tables into docs/results.md: the section between the science markers
(one subsection per setting, in the order given), with their figures copied beside the page.

    python scripts/science.py results/science/mini/reasoning results/science/mini/tools ... [--page docs/results.md]
"""
from __future__ import annotations

import argparse
import re
import shutil
from pathlib import Path

START, END = "<!-- science:start -->", "<!-- science:end -->"
# `ewa science` links its figures from the repository's root (docs/NAME.png); the page lives in docs/.
ROOT_FIGURE = re.compile(r"\]\(docs/([^)\s]+)\)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("science_dirs", type=Path, nargs="+", help="`ewa science` output directories")
    p.add_argument("--page", type=Path, default=Path("docs/results.md"),
                   help="the Markdown page to write into; figures go beside it")
    args = p.parse_args()
    figures = args.page.parent
    figures.mkdir(parents=True, exist_ok=True)
    parts = [START, ""]
    for science_dir in args.science_dirs:
        benchmark, setting = science_dir.parts[-2:]
        shutil.copy(science_dir / "seeds.png", figures / f"frontier-{benchmark}-{setting}-seeds.png")
        shutil.copy(science_dir / "frontier.png", figures / f"frontier-{benchmark}-{setting}.png")
        if len(args.science_dirs) > 1:
            parts += [f"#### {benchmark} / {setting}", ""]
        parts += [ROOT_FIGURE.sub(r"](\1)", (science_dir / "science.md").read_text().rstrip()), ""]
    text = "\n".join(parts + [END])
    page = args.page.read_text() if args.page.exists() else "# Results\n"
    if START in page:
        page = page[:page.index(START)] + text + page[page.index(END) + len(END):]
    else:
        page = page.rstrip("\n") + "\n\n" + text + "\n"
    tmp = args.page.with_suffix(".md.tmp")
    tmp.write_text(page)
    tmp.replace(args.page)
    print(text)


if __name__ == "__main__":
    main()
