"""The bundled mini problem set: determinism, splits, format, reference programs and nested tiers."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from helpers import REGIMES

from ewa.data import load as load_benchmark
from ewa.data.mini import FAMILIES, build, corpus_texts, instances, run_source
from ewa.data.mini.family import param_line, param_reader
from ewa.data.mini.loader import load
from ewa.tiers import build_tiers, regime_tests
from ewa.problems import Problem, read_problems, write_problems

PYTHON = "/usr/bin/python3"


@pytest.fixture(scope="session")
def problems() -> list[Problem]:
    return build(seed=0)


def test_at_least_30_families_with_disjoint_train_and_heldout_params():
    assert len(FAMILIES) >= 30
    for fam in FAMILIES.values():
        train = {json.dumps(p, sort_keys=True) for p in fam.train}
        heldout = {json.dumps(p, sort_keys=True) for p in fam.heldout}
        assert train and heldout, fam.name
        assert not train & heldout, fam.name
        assert len(fam.wrong) >= 1, fam.name


def test_splits_partition_the_instances(problems):
    train, heldout = instances("train"), instances("heldout")
    assert {i.id for i in train} | {i.id for i in heldout} == {p.id for p in problems}
    assert not {i.id for i in train} & {i.id for i in heldout}
    assert len({p.id for p in problems}) == len(problems)
    assert {p.meta["split"] for p in problems if p.id in {i.id for i in heldout}} == {"heldout"}


def test_same_seed_gives_byte_identical_file_across_processes(problems, tmp_path):
    here = tmp_path / "here.jsonl"
    write_problems(problems, here)
    there = tmp_path / "there.jsonl"
    code = "import sys; from ewa.data.mini import build; from ewa.problems import write_problems; " \
           "write_problems(build(seed=0), sys.argv[1])"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}  # set/dict iteration must not leak into the output
    subprocess.run([sys.executable, "-c", code, str(there)], check=True, env=env)
    assert here.read_bytes() == there.read_bytes()
    assert [p.id for p in read_problems(here)] == [p.id for p in problems]


def test_other_seed_changes_hidden_tests_only(problems):
    other = {p.id: p for p in build(seed=1)}
    assert set(other) == {p.id for p in problems}
    for p in problems:
        q = other[p.id]
        assert q.statement == p.statement and q.meta["solutions"] == p.meta["solutions"]
        hidden = [i for i, t in enumerate(p.tests) if not t.public]
        assert any(p.tests[i].input != q.tests[i].input for i in hidden), p.id


def test_records_round_trip_and_follow_the_format(problems):
    for p in problems:
        rec = json.loads(json.dumps(p.to_record()))
        back = Problem.from_record(rec)
        assert back == p and back.meta == p.meta
        assert p.source == "mini" and p.testtype == "stdin" and p.difficulty in ("easy", "medium", "hard")
        fam, params = p.meta["family"], p.meta["params"]
        assert p.id.startswith(f"mini/{fam}/")
        assert [t.size for t in p.tests] == sorted(t.size for t in p.tests)
        assert [t.public for t in p.tests] == [True, True] + [False] * (len(p.tests) - 2)
        assert all(t.size == len(t.input.encode()) for t in p.tests)
        assert sum(len(t.input) for t in p.tests) < 1_000_000
        sol = p.meta["solutions"]
        assert set(sol) == {"brute", "efficient", "wrong"} and sol["wrong"]
        for src in [sol["brute"], sol["efficient"], *sol["wrong"]]:
            assert len(src) < 350, (p.id, len(src))
            compile(src, p.id, "exec")
        assert all(t.input.startswith(param_line(params)) for t in p.tests), p.id  # the values come first
        for value in params.values():
            assert str(value) in p.statement, p.id
        assert f"an extra line: {param_line(params).strip()}." in p.statement, p.id


def test_instances_of_a_family_share_their_programs(problems):
    """Parameters are read from the input, so a held-out instance is solved by the family's own program."""
    by_family = {}
    for p in problems:
        by_family.setdefault(p.meta["family"], []).append(p.meta["solutions"])
    for name, sols in by_family.items():
        assert all(s == sols[0] for s in sols), name
        reader = param_reader(FAMILIES[name].train[0])
        for src in [sols[0]["brute"], sols[0]["efficient"], *sols[0]["wrong"]]:
            assert f"\n{reader}\n" in src, name


def _run(src: str, stdin: str) -> str:
    done = subprocess.run([PYTHON, "-I", "-c", src], input=stdin, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-300:]
    return done.stdout


def test_efficient_reference_reproduces_the_low_regime_tests(problems):
    jobs = [(p, i) for p in problems for i in regime_tests(p, REGIMES[0])]
    with ThreadPoolExecutor(2) as pool:
        outs = list(pool.map(lambda job: _run(job[0].meta["solutions"]["efficient"], job[0].tests[job[1]].input),
                             jobs))
    for (p, i), out in zip(jobs, outs):
        assert out.split() == p.tests[i].output.split(), (p.id, i)


def test_wrong_variants_pass_the_smallest_test_and_fail_another(problems):
    for p in problems:
        for k, src in enumerate(p.meta["solutions"]["wrong"]):
            code = compile(src, p.id, "exec")
            verdicts = []
            for t in p.tests:
                try:
                    verdicts.append(run_source(code, t.input).split() == t.output.split())
                except Exception:
                    verdicts.append(False)
            assert verdicts[0], f"{p.id} wrong[{k}] fails the smallest test"
            assert not all(verdicts), f"{p.id} wrong[{k}] passes every test"


def test_brute_force_agrees_on_the_tiniest_tests(problems):
    for p in problems:
        code = compile(p.meta["solutions"]["brute"], p.id, "exec")
        for t in p.tests[:2]:
            assert run_source(code, t.input).split() == t.output.split(), p.id


def test_tiers_are_nested_and_public_tests_are_low(problems):
    tiers = build_tiers(problems, REGIMES)["problems"]
    for p in problems:
        low, high = (set(tiers[p.id]["regime_tests"][r["name"]]) for r in REGIMES)
        assert low < high == set(range(len(p.tests)))
        assert {i for i, _ in p.public_tests} <= low
        assert len(low) == len(p.tests) // 2


def test_corpus_texts_cover_training_instances_only():
    texts = corpus_texts()
    joined = "\n".join(texts)
    train, heldout = instances("train"), instances("heldout")
    assert all(i.statement in texts and i.solutions["efficient"] in texts for i in train)
    assert not any(i.statement in joined for i in heldout)


def test_loader_splits_and_errors():
    fam = "two_sum_count"
    heldout = load(split="heldout", families=[fam])
    train = load(split="train", families=[fam])
    assert {p.meta["split"] for p in heldout} == {"heldout"} and {p.meta["split"] for p in train} == {"train"}
    assert len(load(split="all", families=[fam])) == len(train) + len(heldout)
    report = load_benchmark("mini", None, split="heldout", families=[fam])
    assert [p.id for p in report.problems] == [p.id for p in heldout]
    with pytest.raises(ValueError, match="split"):
        load(split="test")
    with pytest.raises(ValueError, match="input"):
        load("problems.jsonl")
    with pytest.raises(ValueError, match="time_limit_s"):
        load(time_limit_s=1.0)
    with pytest.raises(ValueError, match="families"):
        load(families=["no_such_family"])


def test_small_inputs_keep_the_smaller_half_of_held_out_suites_only():
    full = load(split="all")
    mixed = load(split="all", small_inputs=0.5)
    assert [p.id for p in mixed] == [p.id for p in full]
    small = [m for m in mixed if m.meta["inputs"] == "small"]
    per_family = {}
    for m in small:
        per_family[m.meta["family"]] = per_family.get(m.meta["family"], 0) + 1
    assert set(per_family.values()) == {1} and len(per_family) == len(FAMILIES)  # one of two held-out each
    for m, f in zip(mixed, full):
        if m.meta["inputs"] == "small":
            assert m.meta["split"] == "heldout" and m.tests == f.tests[:4] and m.statement == f.statement
        else:
            assert m.tests == f.tests and m.meta["inputs"] == "full"
    assert {m.meta["inputs"] for m in load(split="heldout", small_inputs=1.0)} == {"small"}
    with pytest.raises(ValueError, match="small_inputs"):
        load(split="heldout", small_inputs=1.5)
