from hypothesis import given, settings
from hypothesis import strategies as st

from ewa.tiers import build_tiers, regime_tests, tier_of_tests
from ewa.problems import Problem, Test, size_order


def problem_with_sizes(sizes):
    return Problem(id="p", source="t", difficulty="easy", statement="s", testtype="stdin",
                   tests=tuple(Test("x" * s, "", s) for s in sizes))


sizes = st.lists(st.integers(0, 50), min_size=1, max_size=30)
fractions = st.lists(st.floats(0.01, 1.0), min_size=1, max_size=5).map(sorted)


@given(sizes, fractions)
@settings(max_examples=200, deadline=None)
def test_fraction_tiers_are_nested_prefixes_of_size_order(sizes, fractions):
    p = problem_with_sizes(sizes)
    regimes = [{"name": f"r{i}", "fraction": f} for i, f in enumerate(fractions)]
    order = size_order(p.tests)
    chosen = [regime_tests(p, r) for r in regimes]
    for lower, higher in zip(chosen, chosen[1:]):
        assert set(lower) <= set(higher)
    for c in chosen:
        assert c == order[: len(c)]  # a prefix of the size order
        assert all(p.tests[i].size <= p.tests[j].size for i in c for j in set(order) - set(c))


@given(sizes, st.lists(st.integers(0, 60), min_size=1, max_size=4).map(sorted))
@settings(max_examples=200, deadline=None)
def test_size_threshold_tiers_are_nested(sizes, thresholds):
    p = problem_with_sizes(sizes)
    if min(sizes) > thresholds[0]:
        return  # the lowest regime selects nothing; covered by the error test below
    regimes = [{"name": f"r{i}", "max_size": t} for i, t in enumerate(thresholds)]
    chosen = [set(regime_tests(p, r)) for r in regimes]
    assert all(a <= b for a, b in zip(chosen, chosen[1:]))
    tiers = tier_of_tests(p, regimes)
    for i, t in enumerate(tiers):
        assert t == len(regimes) or i in chosen[t] and (t == 0 or i not in chosen[t - 1])


def test_ties_keep_file_order_and_full_fraction_takes_all():
    p = problem_with_sizes([5, 1, 5, 1])
    assert size_order(p.tests) == [1, 3, 0, 2]
    assert regime_tests(p, {"name": "all", "fraction": 1.0}) == [1, 3, 0, 2]
    assert regime_tests(p, {"name": "half", "fraction": 0.5}) == [1, 3]


def test_a_tier_selecting_nothing_is_an_error_naming_regime_and_problem():
    import pytest

    from ewa.tiers import TierError
    with pytest.raises(TierError, match="regime 'tiny' selects no tests of problem 'p'"):
        regime_tests(problem_with_sizes([10, 20]), {"name": "tiny", "max_size": 5})


def test_tier_file_records_every_regime():
    p = problem_with_sizes([3, 1, 2, 4])
    out = build_tiers([p], [{"name": "low", "fraction": 0.5}, {"name": "high", "fraction": 1.0}])
    assert out["problems"]["p"]["regime_tests"] == {"low": [1, 2], "high": [1, 2, 0, 3]}
    assert out["problems"]["p"]["test_tier"] == [1, 0, 0, 1]
