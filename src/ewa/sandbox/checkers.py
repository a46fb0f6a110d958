"""Output checkers. They run in the host process, out of the candidate's reach; the candidate only
ever hands over bytes (stdout) or values forkserver.decode rebuilt from trusted types (builtins, and
Decimal, Fraction, deque or an opaque stand-in only under the lcb harness)."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Callable

from ewa.problems import Problem, ProblemError, Test

SLACK = 1e-15  # testlib's allowance for the representation error of the bound itself
ERROR_KINDS = ("absolute", "absolute or relative")


@dataclass(frozen=True)
class OutputRule:
    """How one problem's stdout is compared: reals within `tol` (of the expected value, or of it relative to
    max(1, |expected|) unless `absolute_only`), letters in any case when `any_case`. `stated`: the tolerance
    is the problem's own (its statement's), not the sandbox's float_tol."""
    tol: float
    absolute_only: bool = False
    any_case: bool = False
    stated: bool = False

    def record(self) -> dict:
        """What a result row keeps: the tolerance used, the statement's kind of error (None: float_tol)."""
        kind = ("absolute" if self.absolute_only else "absolute or relative") if self.stated else None
        return {"float_tol": self.tol, "float_error": kind, "any_case": self.any_case}


def output_rule(problem: Problem, default_tol: float) -> OutputRule:
    """The problem's rule from its `meta` (`float_tol` and `float_error`, `any_case`, as a loader reads
    them off the statement: ewa.data.statement), else `default_tol`, case-sensitive."""
    meta = problem.meta
    tol, kind = meta.get("float_tol"), meta.get("float_error", "absolute or relative")
    any_case = meta.get("any_case", False)
    if tol is not None and (not isinstance(tol, (int, float)) or isinstance(tol, bool) or not 0 <= tol < 1):
        raise ProblemError(f"problem {problem.id!r}: field 'meta.float_tol' must be a number in [0, 1), got {tol!r}")
    if kind not in ERROR_KINDS:
        raise ProblemError(f"problem {problem.id!r}: field 'meta.float_error' must be one of "
                           f"{', '.join(ERROR_KINDS)}, got {kind!r}")
    if not isinstance(any_case, bool):
        raise ProblemError(f"problem {problem.id!r}: field 'meta.any_case' must be true or false, got {any_case!r}")
    if tol is None:
        return OutputRule(default_tol, any_case=any_case)
    return OutputRule(float(tol), absolute_only=kind == "absolute", any_case=any_case, stated=True)


def numbers_close(got: float, expected: float, tol: float) -> bool:
    """Within `tol`, absolutely or relative to the larger of the two (the sandbox's float_tol)."""
    if got == expected:
        return True
    if tol <= 0 or not (math.isfinite(got) and math.isfinite(expected)):
        return False
    return math.isclose(got, expected, rel_tol=tol, abs_tol=tol)


def within_error(got: float, expected: float, tol: float, absolute_only: bool = False) -> bool:
    """A statement's error bound as Codeforces' checkers apply it: |a - b| <= tol, or (absolute or relative
    error) |a - b| / max(1, |b|) <= tol, for the jury's b."""
    if got == expected:
        return True
    if not (math.isfinite(got) and math.isfinite(expected)):
        return False
    scale = 1.0 if absolute_only else max(1.0, abs(expected))
    return abs(got - expected) <= tol * scale + SLACK


def _float_token(token: str) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None


def tokens_match(got: str, expected: str, tol: float = 0.0, any_case: bool = False,
                 close: Callable[[float, float, float], bool] = numbers_close) -> bool:
    """Whitespace-tolerant token compare; a token of the expected output that is written as a real
    number ('0.333', '1e-9') may differ from the program's by the float tolerance (as `close` judges
    it); with `any_case`, tokens equal up to letter case match ("print YES or NO in any case")."""
    got_tokens, exp_tokens = got.split(), expected.split()
    if len(got_tokens) != len(exp_tokens):
        return False
    for g, e in zip(got_tokens, exp_tokens):
        if g == e or (any_case and g.lower() == e.lower()):
            continue
        if tol <= 0 or not any(c in e for c in ".eE") or e.lower() in ("nan", "inf", "-inf"):
            return False
        gf, ef = _float_token(g), _float_token(e)
        if gf is None or ef is None or not close(gf, ef, tol):
            return False
    return True


def rule_match(got: str, expected: str, rule: OutputRule) -> bool:
    """tokens_match under a problem's OutputRule."""
    if not rule.stated:
        return tokens_match(got, expected, rule.tol, rule.any_case)
    return tokens_match(got, expected, rule.tol, rule.any_case,
                        lambda g, e, tol: within_error(g, e, tol, rule.absolute_only))


def values_match(got, expected, tol: float = 0.0) -> bool:
    """Structural equality of a returned value and a JSON-decoded expected value; tuples equal lists
    (JSON has no tuples), bools equal only bools, ints and floats compare within tolerance."""
    if isinstance(expected, bool) or isinstance(got, bool):
        return type(got) is type(expected) and got == expected
    if isinstance(expected, (int, float)) and isinstance(got, (int, float)):
        if isinstance(expected, int) and isinstance(got, int):
            return got == expected
        return numbers_close(float(got), float(expected), tol)
    if isinstance(expected, (list, tuple)):
        return (isinstance(got, (list, tuple)) and len(got) == len(expected)
                and all(values_match(g, e, tol) for g, e in zip(got, expected)))
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return False
        got = {k if isinstance(k, str) else json.dumps(k): v for k, v in got.items()}  # JSON keys are strings
        return got.keys() == expected.keys() and all(values_match(got[k], expected[k], tol) for k in expected)
    return type(got) is type(expected) and got == expected


def expected_value(problem: Problem, index: int, test: Test):
    """The JSON value a functional test expects; a malformed one names the problem and the test."""
    try:
        return json.loads(test.output)
    except json.JSONDecodeError as e:
        raise ProblemError(f"problem {problem.id!r}: field 'tests[{index}].output' is not JSON ({e.msg})") from None

