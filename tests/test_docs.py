"""The documentation as a reader meets it: the README short and first with the two commands, every docs
page reachable from it, every relative link landing on a file (and heading), and config files whose
comments say what a key sets and why, not how it came to be."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers import ROOT

README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
CONFIGS = [ROOT / "config.yaml", *sorted((ROOT / "configs").glob("*.yaml"))]

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks, with inline code spans blanked (their text is not a link)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(CODE_SPAN.sub(lambda m: "x" * len(m[0]), line))
    return lines


def links(page: Path) -> list[str]:
    return [m[1] for line in prose_lines(page.read_text()) for m in LINK.finditer(line)]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    return re.sub(r"[^\w\- ]", "", text.replace("`", "").strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    fenced = False
    for line in page.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced and (m := HEADING.match(line)):
            base = slug(m[2])
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def test_the_pages_exist():
    assert README.is_file() and DOCS, "README.md and docs/*.md"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for target in links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: are not checked here
            continue
        path, _, anchor = target.partition("#")
        if path.startswith("/"):
            broken.append(f"{target}: absolute; links are relative")
            continue
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert broken == [], f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in links(README) if t.partition("#")[0]}
    assert [p.name for p in DOCS if p.resolve() not in linked] == []


def test_the_readme_is_short():
    assert len(README.read_text().splitlines()) <= 250


def test_the_readme_opens_with_the_two_commands():
    text = README.read_text()
    block = re.search(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M)
    assert block, "README: no code block"
    commands = [line.split("#")[0].strip() for line in block[1].splitlines()]
    assert [c for c in commands if c][:2] == ["make demo", "make test"]


def test_the_readme_tells_no_history():
    """No commit hashes or measured run times in the README: they belong in docs/miniature.md."""
    prose = "\n".join(prose_lines(README.read_text()))
    text = README.read_text()
    assert not re.findall(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b", text)
    assert not re.findall(r"\d+\s*min\s+\d+\s*s\b", prose)


# ---- config files ----------------------------------------------------------------------------------
# A comment tells what a key sets and why this value; these are the marks of one that tells history.
HISTORY = {
    "a commit hash": re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b"),
    "a seed number": re.compile(r"\bseeds?\s+\d", re.I),
    "a run time": re.compile(r"\d\s*(?:min|minutes)\b|\b\d+\s*h\s+\d+\s*min\b|\btook\b", re.I),
    "a past-tense story": re.compile(r"\b(?:was|were|used to|before|previously|no longer|anymore|instead of|"
                                     r"at first|until)\b", re.I),
}


def comments(path: Path) -> list[tuple[int, str, bool]]:
    """(line number, comment text, whole line?) for every comment; values here hold no '#'."""
    out = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        unquoted = re.sub(r"\"[^\"]*\"|'[^']*'", lambda m: "x" * len(m[0]), line)
        if (m := re.search(r"(?:^|\s)#(.*)$", unquoted)):
            out.append((number, line[m.start(1):], not line[:m.start()].strip()))
    return out


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(ROOT)))
def test_config_comments_tell_no_history(path):
    found = [f"line {n}: {what}: {text.strip()}" for n, text, _ in comments(path)
             for what, pattern in HISTORY.items() if pattern.search(text)]
    assert found == []


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(ROOT)))
def test_config_keys_have_at_most_one_comment_line(path):
    """After the file's opening comment, a key has one comment line: above it or beside it, not both."""
    lines = path.read_text().splitlines()
    whole = {n for n, _, is_whole in comments(path) if is_whole}
    inline = {n for n, _, is_whole in comments(path) if not is_whole}
    header = 0
    while header + 1 in whole:
        header += 1
    crowded = [n for n in sorted(whole) if n > header and (n + 1 in whole or n + 1 in inline)]
    assert crowded == [], f"{path.name}: lines {crowded} stack comments on one key"
    dangling = [n for n in sorted(whole) if n > header and (n == len(lines) or not lines[n].strip())]
    assert dangling == [], f"{path.name}: lines {dangling} comment no key"
