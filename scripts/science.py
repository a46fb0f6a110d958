"""Put `make science`'s combined table into the README: the section between the science markers, and its
figures under docs/.

    python scripts/science.py results/science/mini/reasoning [--readme README.md]
"""
from __future__ import annotations

import argparse
import shutil
from pathlib import Path

START, END = "<!-- science:start -->", "<!-- science:end -->"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("science_dir", type=Path, help="an `ewa science` output directory")
    p.add_argument("--readme", type=Path, default=Path("README.md"))
    args = p.parse_args()
    benchmark, setting = args.science_dir.parts[-2:]
    docs = args.readme.parent / "docs"
    docs.mkdir(exist_ok=True)
    shutil.copy(args.science_dir / "seeds.png", docs / f"frontier-{benchmark}-{setting}-seeds.png")
    shutil.copy(args.science_dir / "frontier.png", docs / f"frontier-{benchmark}-{setting}.png")
    text = "\n".join([START, "", (args.science_dir / "science.md").read_text().rstrip(), "", END])
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
