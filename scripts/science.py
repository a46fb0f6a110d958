"""Put `make science`'s combined tables into the README: the section between the science markers (one
subsection per setting, in the order given), and their figures under docs/.

    python scripts/science.py results/science/mini/reasoning results/science/mini/tools ... [--readme README.md]
"""
from __future__ import annotations

import argparse
import shutil
from pathlib import Path

START, END = "<!-- science:start -->", "<!-- science:end -->"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("science_dirs", type=Path, nargs="+", help="`ewa science` output directories")
    p.add_argument("--readme", type=Path, default=Path("README.md"))
    args = p.parse_args()
    docs = args.readme.parent / "docs"
    docs.mkdir(exist_ok=True)
    parts = [START, ""]
    for science_dir in args.science_dirs:
        benchmark, setting = science_dir.parts[-2:]
        shutil.copy(science_dir / "seeds.png", docs / f"frontier-{benchmark}-{setting}-seeds.png")
        shutil.copy(science_dir / "frontier.png", docs / f"frontier-{benchmark}-{setting}.png")
        if len(args.science_dirs) > 1:
            parts += [f"#### {benchmark} / {setting}", ""]
        parts += [(science_dir / "science.md").read_text().rstrip(), ""]
    text = "\n".join(parts + [END])
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
