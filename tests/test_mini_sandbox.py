"""The mini set's premise, checked through the real sandbox: brute force passes the low tier and
fails (TLE/MLE) only on the large tests; the efficient reference is AC everywhere; wrong variants
are caught."""
import pytest

from ewa.data import load
from ewa.tiers import regime_tests
from ewa.problems import size_order
from ewa.verdicts import AC, OPTIMIZATION_FAILURES

LOW = {"name": "low", "fraction": 0.5}


@pytest.fixture(scope="module")
def one_instance_per_family():
    seen, chosen = set(), []
    for p in load("mini", split="heldout").problems:
        if p.meta["family"] not in seen:
            seen.add(p.meta["family"])
            chosen.append(p)
    return chosen


@pytest.fixture(scope="module")
def sandbox(sandbox_factory):
    """Whatever sandbox this machine has (bwrap, else the process backend): two workers, nominal limits."""
    return sandbox_factory(backend="auto")


def test_brute_force_fails_only_on_large_tests_and_efficient_is_ac(sandbox, one_instance_per_family):
    jobs = []
    for p in one_instance_per_family:
        jobs.append((p, p.meta["solutions"]["efficient"], None))
        jobs.append((p, p.meta["solutions"]["brute"], None))
    results = sandbox.judge_many(jobs)
    for (p, _, _), eff, brute in zip(jobs[::2], results[::2], results[1::2]):
        assert eff.verdict == AC, (p.id, "efficient", eff.verdict, eff.first_failed_test)
        by_index = {t.index: t.verdict for t in brute.tests}
        low = regime_tests(p, LOW)
        assert all(by_index[i] == AC for i in low), (p.id, "brute fails a low-tier test", by_index)
        largest = size_order(p.tests)[-1]
        assert by_index[largest] in OPTIMIZATION_FAILURES, (p.id, "brute passes the largest test", by_index)
        assert all(v == AC or v in OPTIMIZATION_FAILURES for v in by_index.values()), (p.id, by_index)


def test_wrong_variants_pass_the_smallest_test_and_fail_some_test(sandbox, one_instance_per_family):
    jobs = [(p, w, None) for p in one_instance_per_family for w in p.meta["solutions"]["wrong"]]
    for (p, _, _), r in zip(jobs, sandbox.judge_many(jobs)):
        smallest = size_order(p.tests)[0]
        assert {t.index: t.verdict for t in r.tests}[smallest] == AC, p.id
        assert r.verdict != AC, (p.id, "a wrong variant passed every test")


def test_the_second_example_exposes_a_wrong_variant_in_most_families(sandbox, one_instance_per_family):
    """Public test 2 catches a wrong variant where a small input can, so agentic feedback can show the
    family's pitfall; the rest of a wrong variant's failures are hidden."""
    jobs = [(p, w, None) for p in one_instance_per_family for w in p.meta["solutions"]["wrong"]]
    caught = set()
    for (p, _, _), r in zip(jobs, sandbox.judge_many(jobs)):
        second = size_order(p.tests)[1]
        assert p.tests[second].public
        if {t.index: t.verdict for t in r.tests}[second] != AC:
            caught.add(p.meta["family"])
    assert len(caught) >= len(one_instance_per_family) // 2, sorted(caught)
    assert len(caught) < len(one_instance_per_family), "some pitfalls only show on large inputs"


def test_brute_force_solves_every_small_input_instance(sandbox):
    small = load("mini", split="heldout", small_inputs=1.0).problems
    results = sandbox.judge_many([(p, p.meta["solutions"]["brute"], None) for p in small])
    assert [(p.id, r.verdict) for p, r in zip(small, results) if r.verdict != AC] == []
