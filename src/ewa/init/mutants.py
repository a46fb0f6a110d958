"""Generic textual mutants of a reference program: the plausible slips (an off-by-one bound, a flipped
comparison, min for max) an agentic trace's failing first attempt is made of, and the syntax slips
(a dropped colon or parenthesis) behind the programs that do not compile.

`mutants(source)` and `syntax_slips(source)` are deterministic: operators in a fixed order, each applied
at one site at a time from the top of the program. Lines that read the input are left alone, so a mutant
still parses its input.
"""
from __future__ import annotations

import re
from typing import Callable, Iterator

Site = tuple[int, int, str]  # (start, end, replacement) within one line


def _paren_end(line: str, open_at: int) -> int | None:
    """Index of the parenthesis closing the one at `open_at`, or None."""
    depth = 0
    for i in range(open_at, len(line)):
        depth += {"(": 1, ")": -1}.get(line[i], 0)
        if depth == 0:
            return i
    return None


def _range_bound(line: str) -> list[Site]:
    """range(a, b) -> range(a, b+1): the upper bound one too far (steps left alone)."""
    sites = []
    for m in re.finditer(r"\brange\(", line):
        end = _paren_end(line, m.end() - 1)
        if end is None:
            continue
        args, depth, commas = line[m.end():end], 0, 0
        for ch in args:
            depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(ch, 0)
            commas += ch == "," and depth == 0
        if commas <= 1 and args.strip():
            sites.append((end, end, "+1"))
    return sites


def _swap(pattern: str, table: dict[str, str]) -> Callable[[str], list[Site]]:
    """Each match replaced by its entry in `table` (dropped if it has none)."""
    def sites(line: str) -> list[Site]:
        return [(m.start(), m.end(), table.get(m.group(), "")) for m in re.finditer(pattern, line)]
    return sites


def _print_transform(line: str) -> list[Site]:
    """print(x%M) -> print(x): the final reduction dropped."""
    m = re.fullmatch(r"(\s*print\(.*?)(%\w+)\)\s*", line)
    return [(m.start(2), m.end(2), "")] if m else []


def _constant(line: str) -> list[Site]:
    """An integer literal one too large (c[0]=1 -> c[0]=2); exponents and big sentinels left alone."""
    return [(m.start(), m.end(), str(int(m.group()) + 1)) for m in re.finditer(r"(?<![\w.*])\d+(?![\w.*])", line)
            if int(m.group()) < 100]


# Fixed order: the slips most likely to change a tiny example's answer come first.
OPERATORS: tuple[tuple[str, Callable[[str], list[Site]]], ...] = (
    ("min/max", _swap(r"\b(?:min|max)(?=\()", {"min": "max", "max": "min"})),
    ("range bound", _range_bound),
    ("comparison", _swap(r"(?<![<>=!])(?:<=|>=|<|>)(?![<>=])", {"<=": "<", ">=": ">", "<": "<=", ">": ">="})),
    ("equality", _swap(r"==|!=", {"==": "!=", "!=": "=="})),
    ("+1/-1", _swap(r"[+-]1(?!\d)", {"+1": "", "-1": ""})),
    ("print transform", _print_transform),
    ("modulo dropped", _swap(r"%\w+", {})),
    ("constant", _constant),
    ("sign", _swap(r"(?<=[\w)\]])[+-](?=[\w(])", {"+": "-", "-": "+"})),
)


def _reads_input(line: str) -> bool:
    return "input(" in line or "stdin" in line or line.startswith(("import ", "from "))


def _variants(source: str, operators) -> Iterator[tuple[str, str, bool]]:
    """(operator name, program, compiles) for every operator and site of `operators`, in a fixed order;
    each program differs from `source` and from every earlier one."""
    lines, seen = source.split("\n"), {source}
    for name, find in operators:
        for k, line in enumerate(lines):
            if _reads_input(line):
                continue
            for start, end, repl in find(line):
                program = "\n".join(lines[:k] + [line[:start] + repl + line[end:]] + lines[k + 1:])
                if program in seen:
                    continue
                seen.add(program)
                try:
                    compile(program, "<variant>", "exec")
                    yield name, program, True
                except SyntaxError:
                    yield name, program, False


def mutants(source: str) -> Iterator[tuple[str, str]]:
    """(operator name, mutated program) for every operator and site, in a fixed order; each mutant
    compiles, differs from `source` and from every earlier mutant."""
    return ((name, program) for name, program, compiles in _variants(source, OPERATORS) if compiles)


# A sampled program that does not compile mostly lost a colon or a closing bracket: traces that start
# from such a slip teach what to do with a SyntaxError, which the tiny model meets in a fifth of its answers.
SYNTAX_SLIPS: tuple[tuple[str, Callable[[str], list[Site]]], ...] = (
    ("colon dropped", lambda line: [(len(line) - 1, len(line), "")] if line.rstrip().endswith(":")
     and line == line.rstrip() else []),
    ("parenthesis dropped", lambda line: [(line.rindex(")"), line.rindex(")") + 1, "")] if ")" in line else []),
)


def syntax_slips(source: str) -> Iterator[tuple[str, str]]:
    """(slip name, program) for every syntax slip of `source`, in a fixed order; none of them compiles."""
    return ((name, program) for name, program, compiles in _variants(source, SYNTAX_SLIPS) if not compiles)


# A small model's tool calls mostly crash on an input written from memory, not on the program: traces that
# call a correct program on a misread input teach that such a traceback does not make the program wrong.
def input_slips(stdin: str) -> Iterator[str]:
    """Misreadings of a test input, in a fixed order: a count line one too large (from the last), the last
    line's last value dropped, its first value replaced by a letter, the last line dropped. Each differs
    from `stdin` and from every earlier one."""
    lines = stdin.rstrip("\n").split("\n")
    last = lines[-1].split()
    candidates = [lines[:k] + [str(int(line) + 1)] + lines[k + 1:] for k, line in reversed(list(enumerate(lines)))
                  if re.fullmatch(r"-?\d+", line.strip())]
    if last:
        candidates += [lines[:-1] + [" ".join(last[:-1])], lines[:-1] + [" ".join(["a"] + last[1:])]]
    if len(lines) > 1:
        candidates.append(lines[:-1])
    seen = {stdin}
    for candidate in candidates:
        text = "\n".join(candidate) + "\n"
        if text not in seen:
            seen.add(text)
            yield text
