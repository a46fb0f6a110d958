"""What a problem statement allows of an answer, read off its text: letters in any case ("You can output
the answer in any case (upper or lower)"), and an error bound on real numbers ("Your answer is considered
correct if its absolute or relative error does not exceed $10^{-6}$"). The judge then compares as the
statement says (ewa.sandbox.checkers.OutputRule).

    >>> output_rules(["Print YES or NO. You can print each letter in arbitrary case."])["any_case"]
    True
    >>> output_rules(["The answer is accepted if its absolute or relative error does not exceed 10^{-9}."])
    ... # doctest: +NORMALIZE_WHITESPACE
    {'float_tol': 1e-09, 'float_error': 'absolute or relative',
     'rule_phrases': {'float_tol': 'absolute or relative error does not exceed 10^{-9}'}}
    >>> output_rules(["In any case, the answer does not exceed 10^9. Find the absolute error."])
    {}

Each rule is tied to what is printed or judged, so "in any case, the answer fits in 64 bits", "test
case", "uppercase and lowercase letters are different" or "the absolute value of the error" without a
bound do not count.
"""
from __future__ import annotations

import re

_SUPERSCRIPT = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")
_OUTPUT = r"\b(?:print|output|writ|display|answer|letter|character|string|word|respon|verdict|yes|no)\w*"
_ANY_CASE = r"in\s+(?:any|arbitrary|an\s+arbitrary|either|whatever)\s+(?:letter\s+)?(?:case|register)"
ANY_CASE = [re.compile(p, re.IGNORECASE) for p in (
    # "You can output the answer in any case (upper or lower)", "Each letter can be printed in arbitrary
    # case"; not the adverb "in any case, ...".
    _OUTPUT + r"[^.;!?]{0,80}?\b" + _ANY_CASE + r"\b(?!\s*,\s*(?:the|it|this|that|there|we|you|so|all)\b)",
    _ANY_CASE + r"\s*\(\s*(?:upper|lower)",
    r"\b(?:answer|output|checker|comparison\s+of\s+the\s+answer|verdict)\w*\s+(?:is|are|will\s+be)\s+"
    r"case[\s-]?insensitive",
    r"(?<!not )\bcase[\s-]?insensitive\b[^.;!?]{0,40}\b(?:answer|output|checker|respons)\w*",
    r"\b(?:can|may)\b[^.;!?]{0,60}\b(?:upper|lower)[\s-]?case\s+(?:or|and)\s+(?:upper|lower)[\s-]?case",
    # `"yEs", "yes", "Yes", and "YES" will be recognized as positive` (the mixed-case spelling is the sign)
    r"(?-i:\b(?:yEs|yES|YeS|YEs|yeS|nO)\b)[^.;!?]{0,80}\b(?:recogni[sz]ed|accepted|considered|treated|correct)",
    r"в\s+любом\s+регистре|регистр\s+(?:букв\s+)?не\s+важен",
)]

_NUMBER = (r"(?:(?P<coef>\d+(?:\.\d+)?)\s*(?:\\cdot|\\times|·|\*|×)\s*)?"
           r"(?:10\s*\^\s*[{(]?\s*-\s*(?P<pow>\d+)\s*[})]?"  # 10^{-6}, 10^-6, 10^(-6)
           r"|10\s*-\s*(?P<sup>\d+)\b"  # 10<sup>-6</sup> as plain text: "10 - 6", "10-6"
           r"|(?P<mant>\d+(?:\.\d+)?)\s*[eE]\s*-\s*(?P<exp>\d+)"  # 1e-6
           r"|(?P<dec>0\.\d*[1-9]\d*))")  # 0.000001
_BOUND = (r"(?:(?:does|do|will|should|must|shall)\s+not\s+exceed|doesn'?t\s+exceed|not\s+exceed(?:ing)?|"
          r"exceed(?:s|ing)?|at\s+most|no\s+(?:more|greater|larger)\s+than|not\s+(?:more|greater|larger)\s+than|"
          r"(?:strictly\s+)?less\s+than(?:\s+or\s+equal\s+to)?|smaller\s+than|within|up\s+to|of|is|≤|<=|\\le(?:q)?|"
          r"не\s+превышает|не\s+более)")
# What is bounded: an error of the answer, or how far it may differ from the jury's.
_ERROR = (r"(?:(?P<kind>(?:absolute|relative)(?:\s+(?:or|and|and/or)\s+(?:absolute|relative))?)\s+"
          r"(?:error|precision|difference|inaccuracy|tolerance)s?"
          r"|(?:answer|output|result|value)\w*\s+(?:with\s+an?\s+)?(?:error|precision)"
          r"|differ\w*\s+(?:from\s+the\s+(?:correct|jury'?s?|right|true|exact|optimal)\s+(?:one|answer|value)\s+)?by"
          r"|max\s*\W{0,3}\s*1\s*,[^≤<]{0,30}?\)[^≤<]{0,10}"  # formally, |a - b| / max(1, |b|) <= 10^{-6}
          r"|(?P<ru>(?:абсолютн\w+\s+или\s+относительн\w+|относительн\w+\s+или\s+абсолютн\w+|абсолютн\w+)\s+"
          r"погрешност\w*))")
FLOAT_TOL = re.compile(_ERROR + r"\s*(?:\w+\s+){0,3}?" + _BOUND + r"\s*(?:\w+\s+){0,2}?" + _NUMBER, re.IGNORECASE)


def _flat(text: str) -> str:
    """One line: LaTeX dollars dropped, dashes and superscripts made plain."""
    text = text.translate(_SUPERSCRIPT).replace("$", " ")
    return " ".join(re.sub(r"[−–—‐]", "-", text).split())


def any_case(texts: list[str]) -> str | None:
    """The phrase saying letters of the answer may be printed in any case, or None."""
    for text in texts:
        flat = _flat(text)
        for pattern in ANY_CASE:
            m = pattern.search(flat)
            if m:
                return m.group(0)
    return None


def _value(m: re.Match) -> float:
    if m["pow"] or m["sup"]:
        value = 10.0 ** -int(m["pow"] or m["sup"])
    elif m["mant"]:
        value = float(m["mant"]) * 10.0 ** -int(m["exp"])
    else:
        value = float(m["dec"])
    return value * float(m["coef"] or 1)


def float_tolerance(texts: list[str]) -> tuple[float, str, str] | None:
    """(bound, "absolute" | "absolute or relative", phrase) for the first error bound the statement puts
    on real answers, or None. Only "absolute" alone bounds the absolute error alone; a relative bound is
    Codeforces' |a - b| / max(1, |b|)."""
    for text in texts:
        for m in FLOAT_TOL.finditer(_flat(text)):
            value = _value(m)
            if not 0 < value <= 0.5:
                continue
            kind = (m["kind"] or m["ru"] or "").lower()
            absolute = ("absolute" in kind or "абсолютн" in kind) and "relative" not in kind \
                and "относительн" not in kind
            return value, "absolute" if absolute else "absolute or relative", m.group(0)
    return None


def output_rules(texts: list[str]) -> dict:
    """The problem's `meta` entries: any_case, float_tol and float_error, and rule_phrases (what each was
    read from); empty when the statement says neither."""
    rules, phrases = {}, {}
    if (phrase := any_case(texts)) is not None:
        rules["any_case"], phrases["any_case"] = True, phrase
    if (bound := float_tolerance(texts)) is not None:
        rules["float_tol"], rules["float_error"], phrases["float_tol"] = bound
    if phrases:
        rules["rule_phrases"] = phrases
    return rules
