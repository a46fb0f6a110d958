"""Output checkers. They run in the host process, out of the candidate's reach; the candidate only
ever hands over bytes (stdout) or values forkserver.decode rebuilt from trusted types (builtins, and
Decimal, Fraction, deque or an opaque stand-in only under the lcb harness)."""
from __future__ import annotations

import json
import math

from ewa.problems import Problem, ProblemError, Test


def numbers_close(got: float, expected: float, tol: float) -> bool:
    if got == expected:
        return True
    if tol <= 0 or not (math.isfinite(got) and math.isfinite(expected)):
        return False
    return math.isclose(got, expected, rel_tol=tol, abs_tol=tol)


def _float_token(token: str) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None


def tokens_match(got: str, expected: str, tol: float = 0.0) -> bool:
    """Whitespace-tolerant token compare; a token of the expected output that is written as a real
    number ('0.333', '1e-9') may differ from the program's by the float tolerance."""
    got_tokens, exp_tokens = got.split(), expected.split()
    if len(got_tokens) != len(exp_tokens):
        return False
    for g, e in zip(got_tokens, exp_tokens):
        if g == e:
            continue
        if tol <= 0 or not any(c in e for c in ".eE") or e.lower() in ("nan", "inf", "-inf"):
            return False
        gf, ef = _float_token(g), _float_token(e)
        if gf is None or ef is None or not numbers_close(gf, ef, tol):
            return False
    return True


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

