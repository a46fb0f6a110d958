"""Merge families beyond the alpha line: every model the config names is one point, an affine combination
sum_i w_i * theta_i (weights summing to 1) of the shared init and the regimes' checkpoints, and each point
has one tag however many families name it, so a point two families share is merged, sampled and judged once.

- the alpha line (`merge.alphas`): theta(a) = (1-a)*theta_low + a*theta_high, the family "low-high";
- a line `{from: init, to: high, alphas: [...]}`: theta_from + a*(theta_to - theta_from); from the init it is
  the trajectory of one run's own update extrapolated (ExPO);
- a simplex `{regimes: [low, mid, high], step: 0.5, extend: 0.5}`: the barycentric lattice of spacing `step`
  over three or more regimes, every weight >= -extend (extend 0: the simplex itself), or its `points` listed.

A point on the low-high line is named by its alpha tag (+0.50), as the line always was; any other point by
its nonzero weights in source order, init first, then the regimes low to high:

>>> cfg = {"regimes": [{"name": "low"}, {"name": "mid"}, {"name": "high"}],
...        "merge": {"low": "low", "high": "high", "alphas": [0.0, 1.0],
...                  "families": [{"from": "init", "to": "high", "alphas": [0.0, 1.0, 1.5]}]}}
>>> [(f.name, f.kind, [p.tag for p in f.points]) for f in families(cfg)]
[('low-high', 'line', ['+0.00', '+1.00']), ('init-high', 'trajectory', ['@init+1.00', '+1.00', '@init-0.50,high+1.50'])]
>>> len(simplex_lattice(3, 0.5, 0.5)), simplex_lattice(3, 1.0, 0.0)
(21, [(1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)])
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

from ewa.alphas import alpha_tag
from ewa.errors import ConfigError

INIT = "init"  # the shared initial model, a source of every family besides the regimes
# Snakemake wildcard constraint of a point's tag off the alpha line: @source+w,source-w,...
POINT_TAG_PATTERN = r"@[A-Za-z0-9_-]+?[+-]\d+\.\d\d(?:,[A-Za-z0-9_-]+?[+-]\d+\.\d\d)*"
WEIGHT_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Point:
    """One model: nonzero weights over sources (init, regimes) in source order, summing to 1."""
    weights: tuple[tuple[str, float], ...]
    tag: str

    @property
    def sources(self) -> list[str]:
        return [s for s, _ in self.weights]

    @property
    def single_source(self) -> str | None:
        """The one source this point is (weight 1 on it), or None for a blend."""
        return self.weights[0][0] if len(self.weights) == 1 else None

    def weight(self, source: str) -> float:
        return dict(self.weights).get(source, 0.0)


@dataclass
class Family:
    """A named set of points: a line (alpha ascending; kind "line" or, from the init, "trajectory") or a
    simplex (coords: each point's weights over `sources`)."""
    name: str
    kind: str  # line | trajectory | simplex
    sources: list[str]
    points: list[Point] = field(default_factory=list)
    coords: list[tuple[float, ...]] = field(default_factory=list)  # alpha (lines) or weights (simplex)


def _round(value: float, key: str) -> float:
    try:
        alpha_tag(value)  # two decimals name it, or the tag would not be unique
    except ValueError as e:
        raise ConfigError(f"config: key '{key}': {e}") from None
    return round(float(value), 2) + 0.0


def make_point(weights: dict[str, float], order: list[str], low: str, high: str) -> Point:
    """The point with these weights (zeros dropped), tagged by its alpha on the low-high line if it lies on it."""
    kept = tuple((s, round(weights[s], 2) + 0.0) for s in order if abs(weights.get(s, 0.0)) > WEIGHT_TOLERANCE)
    if {s for s, _ in kept} <= {low, high}:
        return Point(kept, alpha_tag(dict(kept).get(high, 0.0)))
    return Point(kept, "@" + ",".join(f"{s}{alpha_tag(w)}" for s, w in kept))


def simplex_lattice(n: int, step: float, extend: float) -> list[tuple[float, ...]]:
    """Barycentric points over n sources, weights multiples of `step` summing to 1, each >= -extend, in a
    fixed order (the first source's weight descending, then the second's, ...)."""
    m, q = round(1 / step), round(extend / step)
    total = m + n * q
    out = []
    for cuts in itertools.combinations(range(total + n - 1), n - 1):  # stars and bars
        parts = [b - a - 1 for a, b in zip((-1, *cuts), (*cuts, total + n - 1))]
        out.append(tuple(round((u - q) * step, 10) + 0.0 for u in parts))
    return sorted(out, key=lambda w: tuple(-x for x in w))


def _source_order(config: dict) -> list[str]:
    return [INIT, *(r["name"] for r in config["regimes"])]


def _check_source(name, key: str, regimes: list[str], allow_init: bool) -> None:
    if name == INIT and allow_init:
        return
    if name not in regimes:
        known = ([INIT] if allow_init else []) + regimes
        raise ConfigError(f"config: key '{key}': {name!r} is not one of {known}")


def _line(spec: dict, key: str, config: dict) -> Family:
    regimes = [r["name"] for r in config["regimes"]]
    start, end = spec.get("from", INIT), spec["to"]
    _check_source(start, f"{key}.from", regimes, allow_init=True)
    _check_source(end, f"{key}.to", regimes, allow_init=False)
    if start == end:
        raise ConfigError(f"config: key '{key}': from and to are both {start!r}; a line needs two ends")
    alphas = [_round(a, f"{key}.alphas") for a in spec["alphas"]]
    if len(set(alphas)) != len(alphas):
        raise ConfigError(f"config: key '{key}.alphas': duplicate alphas {spec['alphas']}")
    low, high = config["merge"]["low"], config["merge"]["high"]
    order = _source_order(config)
    family = Family(spec.get("name") or f"{start}-{end}", "trajectory" if start == INIT else "line", [start, end])
    for a in sorted(alphas):
        family.points.append(make_point({start: 1.0 - a, end: a}, order, low, high))
        family.coords.append((a,))
    return family


def _simplex(spec: dict, key: str, config: dict) -> Family:
    regimes = [r["name"] for r in config["regimes"]]
    names = spec["regimes"]
    for i, name in enumerate(names):
        _check_source(name, f"{key}.regimes[{i}]", regimes, allow_init=True)
    if len(set(names)) != len(names) or len(names) < 3:
        raise ConfigError(f"config: key '{key}.regimes': a simplex needs three or more distinct sources, got {names}")
    if ("step" in spec) == ("points" in spec):
        raise ConfigError(f"config: key '{key}': give a simplex either 'step' (a lattice) or 'points' (listed)")
    if "step" in spec:
        step, extend = spec["step"], spec.get("extend", 0.0)
        for value, what in ((1 / step, "1/step"), (extend / step, "extend/step")):
            if abs(value - round(value)) > 1e-6:
                raise ConfigError(f"config: key '{key}.step': {what} must be a whole number (step {step}, extend {extend})")
        coords = simplex_lattice(len(names), step, extend)
        if len(coords) > 500:
            raise ConfigError(f"config: key '{key}.step': the lattice has {len(coords)} points; use a coarser step")
    else:
        coords = []
        for i, weights in enumerate(spec["points"]):
            where = f"{key}.points[{i}]"
            if len(weights) != len(names):
                raise ConfigError(f"config: key '{where}': {len(weights)} weights for {len(names)} regimes {names}")
            if abs(sum(weights) - 1.0) > 1e-6:
                raise ConfigError(f"config: key '{where}': weights {weights} sum to {sum(weights):g}, not 1")
            coords.append(tuple(_round(w, where) for w in weights))
    low, high = config["merge"]["low"], config["merge"]["high"]
    order = _source_order(config)
    family = Family(spec.get("name") or "simplex-" + "-".join(names), "simplex", list(names))
    for weights in coords:
        family.points.append(make_point(dict(zip(names, weights)), order, low, high))
        family.coords.append(tuple(weights))
    return family


def families(config: dict) -> list[Family]:
    """The alpha line (first, named low-high) and every family of `merge.families`, each point tagged;
    ConfigError (one line naming the key) for an unknown source, weights not summing to 1, a point given
    twice in one family, a family name given twice, or a weight that two decimals cannot name."""
    merge = config["merge"]
    regimes = [r["name"] for r in config["regimes"]]
    specs = merge.get("families") or []
    if specs and INIT in regimes:
        raise ConfigError(f"config: key 'regimes': a regime named {INIT!r} cannot be told from the shared init in "
                          "merge.families")
    line = _line({"from": merge["low"], "to": merge["high"], "alphas": merge["alphas"]}, "merge.alphas", config)
    out = [line]
    for i, spec in enumerate(specs):
        key = f"merge.families[{i}]"
        is_line, is_simplex = "alphas" in spec or "to" in spec, "regimes" in spec
        if is_line == is_simplex:
            raise ConfigError(f"config: key '{key}': a family is a line (from, to, alphas) or a simplex (regimes "
                              "with step or points)")
        if is_line:
            missing = [k for k in ("to", "alphas") if k not in spec]
            if missing or {"step", "extend", "points"} & set(spec):
                raise ConfigError(f"config: key '{key}': a line takes from, to and alphas "
                                  f"({'missing ' + missing[0] if missing else 'not step, extend or points'})")
            family = _line(spec, key, config)
        else:
            if {"from", "to", "alphas"} & set(spec):
                raise ConfigError(f"config: key '{key}': a simplex takes regimes with step (and extend) or points")
            family = _simplex(spec, key, config)
        tags = [p.tag for p in family.points]
        repeated = sorted({t for t in tags if tags.count(t) > 1})
        if repeated:
            raise ConfigError(f"config: key '{key}': point {repeated[0]} is given twice")
        if family.name in [f.name for f in out]:
            raise ConfigError(f"config: key '{key}.name': family {family.name!r} is named twice")
        out.append(family)
    return out


def check_families(config: dict) -> None:
    """Raise ConfigError (one line) for any family the config names that is not well formed."""
    families(config)


def model_points(config: dict) -> dict[str, Point]:
    """Every distinct model of the experiment by tag, the alpha line's first, each once."""
    points: dict[str, Point] = {}
    for family in families(config):
        for p in family.points:
            points.setdefault(p.tag, p)
    return points


def is_point_tag(tag: str) -> bool:
    return re.fullmatch(POINT_TAG_PATTERN, tag) is not None


def merge_plan(point: Point) -> tuple[str, list[tuple[str, float]]]:
    """(base, [(source, c)]) with sum_i w_i theta_i = theta_base + sum c * (theta_source - theta_base): the
    first source is the base, so a trajectory point is theta_init + a*(theta_to - theta_init)."""
    (base, _), *rest = point.weights
    return base, list(rest)


def family_spec(config: dict) -> dict:
    """What the families analysis reads: each family with its points (tag, coordinates, weights)."""
    order = _source_order(config)
    return {"sources": order, "low": config["merge"]["low"], "high": config["merge"]["high"],
            "families": [{"name": f.name, "kind": f.kind, "sources": f.sources,
                          "points": [{"tag": p.tag, "coords": list(c), "weights": dict(p.weights)}
                                     for p, c in zip(f.points, f.coords)]} for f in families(config)]}



@dataclass(frozen=True)
class ModelCount:
    """What an experiment's models cost, for `ewa plan`: every model sampled and judged, the merges on the
    low-high line (two inputs each, the alpha grid's and any family's point on it), the merges of points off
    it (inputs of each) and the points that are a source itself (sampled as they are, never merged)."""
    models: int
    line_merges: int
    point_inputs: tuple[int, ...]
    sources_sampled: int
    family_models: int  # models that only merge.families adds

    @property
    def merges(self) -> int:
        return self.line_merges + len(self.point_inputs)


def count_models(config: dict) -> ModelCount:
    points = model_points(config)
    off_line = [p for t, p in points.items() if t[0] == "@"]
    return ModelCount(models=len(points), line_merges=len(points) - len(off_line),
                      point_inputs=tuple(len(p.weights) for p in off_line if not p.single_source),
                      sources_sampled=sum(1 for p in off_line if p.single_source),
                      family_models=len(points) - len(config["merge"]["alphas"]))


def trained_sources(config: dict) -> list[str]:
    """The regimes whose checkpoints the experiment needs: the line's ends and every regime a family weighs."""
    needed = {config["merge"]["low"], config["merge"]["high"]}
    needed |= {s for p in model_points(config).values() for s in p.sources if s != INIT}
    return [r["name"] for r in config["regimes"] if r["name"] in needed]
