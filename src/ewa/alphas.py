"""The alpha grid's one text form: theta(a) = (1-a)*theta_low + a*theta_high is stored, named and
passed between processes as a signed two-decimal tag, and parsed back here.

>>> alpha_tag(0.5), alpha_tag(-1), alpha_tag(-0.0)
('+0.50', '-1.00', '+0.00')
>>> parse_alpha_tag("+0.50"), alpha_label(1.5)
(0.5, 'extrapolated')
>>> parse_alpha_spec("alpha=-0.25:results/evals/x.parquet")
(-0.25, PosixPath('results/evals/x.parquet'))
"""
from __future__ import annotations

import math
import re
from pathlib import Path

# Snakemake wildcard constraint matching alpha_tag's output: `wildcard_constraints: tag=ALPHA_TAG_PATTERN`.
ALPHA_TAG_PATTERN = r"[+-]\d+\.\d\d"


def alpha_tag(alpha: float) -> str:
    """Canonical signed two-decimal name of an alpha for paths and wildcards: 0.5 -> "+0.50".

    Alphas that two decimals cannot name are refused, so two grid points never share a directory.
    """
    alpha = float(alpha)
    if not math.isfinite(alpha) or abs(alpha - round(alpha, 2)) > 1e-9:
        raise ValueError(f"alpha {alpha!r} needs more than two decimals; its tag would not be unique")
    return f"{round(alpha, 2) + 0.0:+.2f}"  # + 0.0 turns -0.0 into +0.00


def parse_alpha_tag(tag: str) -> float:
    """The alpha an alpha_tag names; anything else is an error naming the text."""
    if not re.fullmatch(ALPHA_TAG_PATTERN, tag):
        raise ValueError(f"{tag!r} is not an alpha tag (like +0.50 or -1.00)")
    return float(tag)


def alpha_label(alpha: float) -> str:
    """endpoint (a trained checkpoint), interpolated (0 < a < 1) or extrapolated (a < 0 or a > 1)."""
    if math.isclose(alpha, 0.0, abs_tol=1e-8) or math.isclose(alpha, 1.0, abs_tol=1e-8):
        return "endpoint"
    return "interpolated" if 0.0 < alpha < 1.0 else "extrapolated"


def parse_alpha_spec(spec: str, flag: str = "--evals") -> tuple[float, Path]:
    """`alpha=A:PATH` or `A:PATH` -> (alpha, path): how a file of one grid point is named on a command line."""
    body = spec[len("alpha="):] if spec.startswith("alpha=") else spec
    head, sep, tail = body.partition(":")
    try:
        if not sep or not tail:
            raise ValueError
        return float(head), Path(tail)
    except ValueError:
        raise ValueError(f"{flag} {spec!r}: expected alpha=A:PATH, e.g. alpha=0.5:evals.parquet") from None


def alpha_spec(alpha: float, path) -> str:
    """The inverse of parse_alpha_spec."""
    return f"alpha={float(alpha)!r}:{path}"
