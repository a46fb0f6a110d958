"""Benchmark formats, found by name: everything ewa knows about one benchmark lives in its format's module.

A format module exposes `FORMAT`, a `Format`: how its published files become canonical problems (`records`),
the judge semantics its problems name (their host-side comparison, and the harness that runs inside the
sandbox, as fork-server source), how its problems and failures are shown to a model, its `ewa plan` hints and
the interpreter `ewa preflight` must find. A config names a format by `format:`; `ewa formats` lists them.

Built-in formats are one line each in BUILTIN. Any installed package adds its own through the entry-point
group `ewa.formats` (an entry point naming a module with a FORMAT, or a Format itself), so a researcher's
format needs no change to ewa:

    [project.entry-points."ewa.formats"]
    mylab = "mylab_tasks.ewa_format"

docs/own-benchmark.md walks through both routes.
"""
from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Callable, Iterator

from ewa.errors import UserError

ENTRY_POINT_GROUP = "ewa.formats"
BUILTIN = {
    "mini": "ewa.data.mini",
    "humaneval": "ewa.data.humaneval",
    "livecodebench": "ewa.data.livecodebench",
    "codecontests": "ewa.data.codecontests",
    "mbpp": "ewa.data.mbpp",
    "apps": "ewa.data.apps",
    "jsonl": "ewa.data.jsonl",
}


class FormatError(UserError):
    """An unknown format, or a format package that does not load; one line naming it."""


@dataclass(frozen=True)
class PlanHints:
    """What `ewa plan` assumes of a benchmark whose file is not at hand (and the config sets no limit)."""
    problems: int = 165  # problems in the benchmark (its dataset card)
    tests: float = 100.0  # hidden tests per problem
    # Counts the problems and tests exactly, without running anything: (dataset entry, seed) -> (problems,
    # mean tests per problem); None: only assumed, or counted from --problems.
    count: Callable[[dict, int], tuple[int, float]] | None = None


@dataclass(frozen=True)
class Format:
    """One benchmark format. `records(input, **options)` yields a Problem, a ProblemError (a malformed record,
    yielded so --skip-invalid can count it) or a data.verify.Dropped (a valid record left out on purpose) per
    source record; `options` are the dataset entry's keys other than format and input (split, seed,
    skip_invalid, and those the format declares in `options`): accept `**_` for the rest."""
    name: str
    description: str
    records: Callable[..., Iterator]
    input: str = "required"  # "required"; "optional": the format ships its own file; "none": generated
    options: dict = field(default_factory=dict)  # JSON-schema properties of the format's own config keys
    splits: tuple[str, ...] | None = None  # the values its `split` key takes; None: any (the format checks)
    semantics: tuple = ()  # the ewa.sandbox.semantics.Semantics its problems' `judge` may name
    harnesses: dict = field(default_factory=dict)  # harness name -> path of its fork-server source
    verifiable: bool = False  # its records ship reference solutions (`verify_solutions` runs them)
    min_python: tuple[int, int] = (3, 8)  # the oldest judge interpreter its programs parse and run on
    plan: PlanHints = PlanHints()
    corpus: Callable[[], Iterator[str]] | None = None  # texts a tokenizer built from scratch learns from
    # How its problems are shown to a model (ewa.prompts): the user turn that poses a problem, and the one
    # after a failed public run (Problem, SampleResult) -> text or None; None: ewa's own, built from the
    # statement, the starter code and the public tests.
    prompt: Callable | None = None
    feedback: Callable | None = None
    module: str = ""  # where it was found (filled in by the registry)

    def needs_input(self) -> bool:
        return self.input == "required"


@functools.lru_cache(maxsize=None)
def _entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def names() -> list[str]:
    """Every format's name: the built-ins, then the installed ones."""
    return list(BUILTIN) + sorted(n for n in _entry_points() if n not in BUILTIN)


def _known() -> str:
    installed = sorted(n for n in _entry_points() if n not in BUILTIN)
    return f"built-in: {', '.join(BUILTIN)}; installed: {', '.join(installed) or 'none'}"


@functools.lru_cache(maxsize=None)
def get(name: str) -> Format:
    """The format `name`; one line naming it and the known ones, or the package that failed to load."""
    if name in BUILTIN:
        return _checked(name, importlib.import_module(BUILTIN[name]).FORMAT, BUILTIN[name])
    ep = _entry_points().get(name)
    if ep is None:
        raise FormatError(f"unknown format {name!r} ({_known()})")
    try:
        loaded = ep.load()
    except Exception as e:
        raise FormatError(f"format {name!r}: entry point {ep.value!r} (package "
                          f"{ep.dist.name if ep.dist else '?'}) does not load: {type(e).__name__}: {e}") from None
    fmt = getattr(loaded, "FORMAT", loaded)
    if not isinstance(fmt, Format):
        raise FormatError(f"format {name!r}: entry point {ep.value!r} is neither an ewa.formats.Format nor a "
                          "module with FORMAT")
    return _checked(name, fmt, ep.value)


def _checked(name: str, fmt: Format, where: str) -> Format:
    if fmt.name != name:
        raise FormatError(f"format {name!r}: {where} registers a Format named {fmt.name!r}")
    for path in fmt.harnesses.values():
        if not Path(path).is_file():
            raise FormatError(f"format {name!r}: harness source {path} is missing")
    object.__setattr__(fmt, "module", where)
    return fmt


def formats() -> list[Format]:
    return [get(n) for n in names()]


@functools.lru_cache(maxsize=None)
def judges() -> dict:
    """Every format's judge semantics (ewa.sandbox.semantics.Semantics) by name, built-ins first; "plain",
    ewa's own, is not a format's (ewa.sandbox.semantics.registered() adds it)."""
    found = {}
    for fmt in formats():
        for sem in fmt.semantics:
            if sem.name in found or sem.name == "plain":
                raise FormatError(f"format {fmt.name!r}: judge {sem.name!r} is defined twice")
            found[sem.name] = sem
    return found


@functools.lru_cache(maxsize=None)
def defining(judge: str) -> Format | None:
    """The format that defines the judge semantics `judge` (None: plain, ewa's own)."""
    return next((fmt for fmt in formats() for sem in fmt.semantics if sem.name == judge), None)


@functools.lru_cache(maxsize=None)
def harness_sources() -> tuple[tuple[str, str], ...]:
    """(harness name, fork-server source) of every format, for the in-sandbox server; built-ins first."""
    seen, out = set(), []
    for fmt in formats():
        for harness, path in fmt.harnesses.items():
            if harness in seen:
                raise FormatError(f"format {fmt.name!r}: harness {harness!r} is defined twice")
            seen.add(harness)
            out.append((harness, Path(path).read_text()))
    return tuple(out)


def refresh() -> None:
    """Forget what was found, so a package installed since (in this process) is seen."""
    for cached in (_entry_points, get, judges, defining, harness_sources):
        cached.cache_clear()


def dataset_format(spec: dict, where: str) -> Format:
    """The format of a config's dataset entry (`where`: its key); a ConfigError naming the key if unknown."""
    from ewa.errors import ConfigError

    try:
        return get(spec["format"])
    except FormatError as e:
        raise ConfigError(f"config: key '{where}.format': {e}") from None
