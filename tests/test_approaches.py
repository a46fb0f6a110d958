"""`ewa approaches`: approaches classified by CPU-time growth (ewa.analysis.growth) on evaluation tables
built here with known cost curves, checked against the plan lines ewa.prompts writes; the plan-line table
on helpers.DESIGN; one brute force and one efficient reference of a mini family judged in the sandbox."""
from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from helpers import alpha_specs, write_approach_samples, write_design

from ewa.analysis.approaches import approach_of, brute_suffices, premise_table
from ewa.analysis.growth import Suite, classified, profile, profiles, read_suites
from ewa.cli import main
from ewa.evaluate.run import row, to_table
from ewa.prompts import code_answer

SIZES = (10, 20, 1000, 2000, 4000, 8000, 16000, 32000)  # bytes, the judge's order
LIMIT_S = 0.5
FLOOR_S = 0.002  # what the fork server's child costs before the program does anything


def judged(cost, sizes=SIZES, floor=FLOOR_S, limit=LIMIT_S, fail_at=None, fail="WA", memory=None,
           memory_limit=256.0, early_stop=True) -> list[dict]:
    """Per-test records (ewa.evaluate.run's `tests`) of a program costing floor + cost(size) CPU seconds
    and memory(size) MB, judged as the sandbox does: over a limit is TLE/MLE, `fail_at` fails with `fail`."""
    tests = []
    for i, size in enumerate(sizes):
        cpu, mb = floor + cost(size), memory(size) if memory else 13.0
        verdict = "TLE" if cpu > limit else "MLE" if mb >= memory_limit else fail if i == fail_at else "AC"
        cpu = limit + 0.3 if verdict == "TLE" else cpu  # the kill comes late; growth must not use it
        tests.append({"index": i, "verdict": verdict, "cpu_time_s": cpu, "wall_time_s": cpu * 1.1,
                      "peak_memory_mb": min(mb, memory_limit), "tier": None, "error": "", "wall_backstop": False})
        if verdict == "CE" or (early_stop and verdict != "AC"):
            break
    return tests


def quadratic(size):
    return 3e-9 * size ** 2  # 12 ms at 2000 bytes, TLE from 16000


def linear(size):
    return 1e-7 * size  # 3 ms at the largest test: never above the noise floor


PROGRAMS = {  # name -> (per-test records, plan, growth class, verdict)
    "quadratic": (judged(quadratic), "brute", "brute", "TLE"),
    "linear": (judged(linear), "efficient", "efficient", "AC"),
    "early_wa": (judged(linear, fail_at=2), "efficient", "unknown", "WA"),
    "ce": ([{"index": 0, "verdict": "CE", "cpu_time_s": 0.0, "wall_time_s": 0.0, "peak_memory_mb": 0.0,
             "tier": None, "error": "no code", "wall_backstop": False}], "efficient", "unknown", "CE"),
    "quadratic_unstated": (judged(quadratic), None, "brute", "TLE"),
    "quadratic_says_efficient": (judged(quadratic), "efficient", "brute", "TLE"),
}
GRID = {0.0: ["quadratic"] * 3 + ["linear", "early_wa"],
        1.0: ["quadratic", "linear", "linear", "linear", "early_wa", "early_wa", "quadratic_says_efficient",
              "quadratic_unstated", "ce"]}
SUITE = Suite(SIZES, LIMIT_S, 256.0)


def growth_of(*samples, suite=SUITE, time_factor=1.0) -> pd.DataFrame:
    """classified() over samples of one problem, each given as its per-test records."""
    rows = [{"problem_id": "p", "sample_id": i, **asdict(profile(t, suite, time_factor))} for i, t in enumerate(samples)]
    return classified(pd.DataFrame(rows)).set_index("sample_id")


# --- growth of one sample --------------------------------------------------------------------------

def test_quadratic_growth_is_brute_and_linear_growth_past_the_brute_forces_is_efficient():
    got = growth_of(judged(quadratic), judged(linear))
    assert got.loc[0, ["growth", "evidence"]].tolist() == ["brute", "cpu growth"]
    assert got.loc[0, "exponent"] == pytest.approx(2.0, abs=0.05)  # floor subtracted: the n^2 itself
    # the brute force's work reaches 4 x 10 ms at the 4000-byte test (position 4): the separating test
    assert got.loc[0, "slow_at"] == 4 and got.loc[1, "separating_test"] == 4
    assert got.loc[1, ["growth", "evidence"]].tolist() == ["efficient", "flat past the separating test"]


def test_a_flat_program_is_unknown_without_a_brute_force_to_compare():
    got = growth_of(judged(linear), judged(linear))
    assert (got["growth"] == "unknown").all() and (got["evidence"] == "no brute force to compare").all()


def test_a_time_limit_after_fast_tests_is_brute():
    """One informative test, then a TLE ten times larger: linear growth would have needed ~0.16 s."""
    sizes = (10, 20, 1000, 2000, 4000, 40000)
    got = growth_of(judged(lambda s: 1e-9 * s * s, sizes), suite=Suite(sizes, LIMIT_S, 256.0))
    assert got.loc[0, ["growth", "evidence"]].tolist() == ["brute", "time limit"]
    assert got.loc[0, "time_limit_excess"] == pytest.approx((LIMIT_S - FLOOR_S) / 0.016 / 10, rel=0.01)


def test_a_time_limit_that_linear_growth_explains_is_not_brute():
    """A linear program with a large constant passes 32000 bytes in 0.48 s and times out at 40000."""
    sizes = (*SIZES, 40000)
    got = growth_of(judged(lambda s: 1.5e-5 * s, sizes), suite=Suite(sizes, LIMIT_S, 256.0))
    assert got.loc[0, "exponent"] == pytest.approx(1.0, abs=0.02)
    assert got.loc[0, ["growth", "evidence"]].tolist() == ["unknown", "over a limit without super-linear growth"]


def test_the_time_limit_is_scaled_by_the_calibration_factor():
    """A TLE's bound is limit x time factor: at factor 2 the same TLE implies twice the excess."""
    sizes = (10, 20, 1000, 2000, 4000, 40000)
    tests = judged(lambda s: 1e-9 * s * s, sizes, limit=0.5)
    excess = [growth_of(tests, suite=Suite(sizes, 0.25, 256.0), time_factor=f).loc[0, "time_limit_excess"]
              for f in (1.0, 2.0)]
    assert excess[1] == pytest.approx((0.5 - FLOOR_S) / (0.25 - FLOOR_S) * excess[0], rel=1e-4)


def test_measured_linear_and_n_log_n_growth_are_efficient():
    sizes = (10, 100, 10_000, 20_000, 40_000, 80_000, 160_000)
    suite = Suite(sizes, LIMIT_S, 256.0)
    got = growth_of(judged(lambda s: 5e-7 * s, sizes), judged(lambda s: 5e-8 * s * math.log2(s), sizes), suite=suite)
    assert (got["growth"] == "efficient").all() and (got["evidence"] == "linear growth").all()
    assert got["exponent"].tolist() == pytest.approx([1.0, 1.1], abs=0.05)


def test_super_linear_memory_before_an_mle_is_brute():
    got = growth_of(judged(linear, memory=lambda s: 13 + 3e-6 * s * s, memory_limit=64.0),
                    suite=Suite(SIZES, LIMIT_S, 64.0))
    assert got.loc[0, ["growth", "evidence"]].tolist() == ["brute", "memory growth"]


def test_growth_at_one_input_size_is_brute():
    """A number-valued input: the bytes barely change while the cost grows tenfold."""
    sizes = (2, 2, 3, 3, 3, 3, 3, 3)
    costs = iter([0, 0, 0.015, 0.05, 0.2, 0.4, 1.0, 1.0])
    got = growth_of(judged(lambda s: next(costs), sizes), suite=Suite(sizes, LIMIT_S, 256.0))
    assert got.loc[0, ["growth", "evidence"]].tolist() == ["brute", "cpu growth"]
    assert math.isnan(got.loc[0, "exponent"])


def test_a_slow_start_up_with_jitter_is_not_growth():
    """A fresh interpreter (25 ms, +-4 ms): the floor sets the noise, so jitter never counts as work."""
    jitter = iter([0.0, 0.004, -0.004, 0.003, -0.002, 0.004, -0.003, 0.002])
    got = growth_of(judged(quadratic), judged(lambda s: next(jitter), floor=0.025))
    assert got.loc[1, "points"] == 0 and got.loc[1, "growth"] == "efficient"


def test_failures_before_the_tests_grow_are_unknown():
    """Early stop: a WA on the first hidden test, a TLE on the first test, a compile error."""
    got = growth_of(judged(quadratic), judged(linear, fail_at=2), judged(lambda s: 1.0), PROGRAMS["ce"][0])
    assert got.loc[1:, "growth"].eq("unknown").all()
    assert got.loc[1:, "evidence"].tolist() == ["stopped before the separating test", "no completed test",
                                                "no completed test"]


def test_a_wrong_answer_past_the_separating_test_keeps_its_class():
    """A WA test ran to the end: an efficient program failing on a large test is still efficient."""
    got = growth_of(judged(quadratic), judged(linear, fail_at=6), judged(quadratic, fail_at=5))
    assert got["growth"].tolist() == ["brute", "efficient", "brute"]
    assert got.loc[2, "evidence"] == "cpu growth"  # WA at 8000 bytes, after 12 and 48 ms


# --- the approaches step ---------------------------------------------------------------------------

def write_grid(root: Path) -> tuple[list[str], list[str], Path]:
    """GRID as evaluation tables (ewa.evaluate.run's schema, a calibration record), sample files with
    plan lines, and the problems file; problem q repeats p so separating tests are per problem."""
    problems = root / "problems.jsonl"
    problems.write_text("".join(json.dumps({
        "id": pid, "source": "t", "difficulty": "easy", "statement": "s", "testtype": "stdin",
        "time_limit_s": LIMIT_S / 2, "tests": [{"input": "", "output": "", "size": s} for s in SIZES]}) + "\n"
        for pid in ("p", "q")))
    evals, samples = [], []
    for alpha, names in GRID.items():
        rows, lines = [], []
        for pid in ("p", "q"):
            for sid, name in enumerate(names):
                tests, plan, _, verdict = PROGRAMS[name]
                rows.append({"_order": 0, "problem_id": pid, "sample_id": sid, "verdict": verdict, "tests": tests})
                lines.append(json.dumps({"problem_id": pid, "sample_id": sid, "completion": code_answer("x", plan)}))
        path = root / f"alpha{alpha:+.2f}.parquet"
        table = to_table(rows).drop_columns(["_order"])
        pq.write_table(table.replace_schema_metadata({b"ewa": json.dumps({"time_factor": 2.0})}), path)
        (root / f"alpha{alpha:+.2f}.jsonl").write_text("\n".join(lines) + "\n")
        evals.append(str(path))
        samples.append(str(root / f"alpha{alpha:+.2f}.jsonl"))
    return evals, samples, problems


def run_approaches(tmp_path, capsys, problems=True) -> Path:
    evals, samples, problems_path = write_grid(tmp_path)
    out = tmp_path / "approaches"
    args = ["approaches", "--evals", *alpha_specs(evals, GRID), "--samples", *alpha_specs(samples, GRID),
            "--out-dir", str(out)]
    assert main(args + (["--problems", str(problems_path)] if problems else [])) == 0, capsys.readouterr().err
    return out


def test_the_main_table_classifies_by_growth(tmp_path, capsys):
    out = run_approaches(tmp_path, capsys)
    table = pd.read_csv(out / "approaches.csv").set_index(["alpha", "approach"])
    assert set(table["classified_by"]) == {"growth"}
    for alpha, names in GRID.items():
        for cls in ("brute", "efficient", "unknown"):
            members = [PROGRAMS[n] for n in names if PROGRAMS[n][2] == cls]
            row = table.loc[(alpha, cls)]
            assert row.n == 2 * len(members)  # two problems
            assert row.share == pytest.approx(len(members) / len(names), abs=1e-4)
            for verdict in ("AC", "TLE", "WA", "CE"):
                assert row[verdict] == pytest.approx(sum(m[3] == verdict for m in members) / len(members), abs=1e-4)
    assert table.loc[(1.0, "unknown"), "corr"] == pytest.approx(1.0)  # early WA and CE: nothing to read
    classes = pd.read_parquet(out / "classified.parquet")
    assert len(classes) == 2 * sum(map(len, GRID.values()))
    expected = {(a, sid): PROGRAMS[n][2] for a, names in GRID.items() for sid, n in enumerate(names)}
    assert all(expected[r.alpha, r.sample_id] == r.growth for r in classes.itertuples())
    # the problems' 0.25 s times the tables' calibration factor 2 is the limit; the tightest bound comes
    # from the 2000-byte test (12 ms of work), 8 times smaller than the first TLE
    tle = classes[classes.verdict == "TLE"]["time_limit_excess"]
    assert tle.to_numpy() == pytest.approx((LIMIT_S - FLOOR_S) / 0.012 / 8, rel=1e-3)
    prov = json.loads((out / "provenance.json").read_text())["config"]
    assert prov["classified_by"] == "growth" and prov["thresholds"]["BRUTE_EXPONENT"] == 1.5
    assert list(prov["problems"]) == [str(tmp_path / "problems.jsonl")]


def test_the_plan_lines_stay_available_and_agreement_is_reported(tmp_path, capsys):
    out = run_approaches(tmp_path, capsys)
    declared = pd.read_csv(out / "declared.csv").set_index(["alpha", "approach"])
    assert declared.loc[(1.0, "unstated"), "n"] == 2 and declared.loc[(1.0, "efficient"), "n"] == 2 * 7
    assert declared.loc[(0.0, "brute"), "TLE"] == 1.0
    agreement = pd.read_csv(out / "agreement.csv").set_index("alpha")
    # alpha 0: the three brute forces and the efficient program agree; the early WA is unknown
    assert agreement.loc[0.0, ["n", "stated", "both_known"]].tolist() == [10, 10, 8]
    assert agreement.loc[0.0, "agreement"] == 1.0 and agreement.loc[0.0, "coverage"] == pytest.approx(0.8)
    # alpha 1: one program says efficient but grows quadratically; 4 of 8 stated samples are unknown
    row = agreement.loc[1.0]
    assert (row.both_known, row.agreement, row.coverage) == (10, pytest.approx(0.8), pytest.approx(10 / 16))
    assert (row.efficient_as_brute, row.efficient_as_efficient, row.efficient_as_unknown) == (2, 6, 6)
    assert (row.brute_as_brute, row.unstated_as_brute, row.unstated_as_unknown) == (2, 2, 0)
    # the premise table reads the same plan lines (GRID's problems do not say where a brute force suffices)
    premise = pd.read_csv(out / "premise.csv").set_index("alpha")
    assert premise["brute_corr"].tolist() == pytest.approx(declared.xs("brute", level="approach")["corr"].tolist())
    assert premise["brute_ac_where_suffices"].isna().all() and premise.loc[1.0, "efficient_attempts"] == 2 * 7
    printed = capsys.readouterr().out
    assert "alpha +1.00 growth vs plan line: agreement 0.800 over 10 samples, coverage 0.625 of 16" in printed


def test_without_the_problems_file_the_table_is_by_plan_line(tmp_path, capsys):
    """helpers.DESIGN's tables have no per-test records; its plan lines still give the table."""
    evals, _ = write_design(tmp_path)
    samples = write_approach_samples(evals)
    out = tmp_path / "approaches"
    assert main(["approaches", "--evals", *alpha_specs(evals), "--samples", *alpha_specs(samples),
                 "--out-dir", str(out)]) == 0, capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["approaches.csv", "declared.csv", "premise.csv", "provenance.json"]
    table = pd.read_csv(out / "approaches.csv").set_index(["alpha", "approach"])
    assert set(table["classified_by"]) == {"plan line"}
    truth = pd.concat(pd.read_parquet(p).assign(alpha=a) for a, p in zip((-0.5, 0.0, 0.5, 1.0, 1.5), evals))
    truth["approach"] = ["unstated" if s == 0 else "brute" if v == "TLE" else "efficient"
                         for s, v in zip(truth.sample_id, truth.verdict)]
    for (alpha, approach), group in truth.groupby(["alpha", "approach"]):
        row = table.loc[(alpha, approach)]
        assert row.n == len(group)
        assert row.share == pytest.approx(len(group) / (truth.alpha == alpha).sum(), abs=1e-4)
        assert row.WA == pytest.approx((group.verdict == "WA").mean(), abs=1e-4)
        assert row["corr"] == pytest.approx(group.verdict.isin(["WA", "RE", "CE"]).mean(), abs=1e-4)
    assert table.xs("brute", level="approach")["TLE"].eq(1).all()
    assert table.groupby(level="alpha")["share"].sum().round(6).eq(1).all()
    assert json.loads((out / "provenance.json").read_text())["config"]["samples"]


def test_tables_without_per_test_records_are_one_error_line(tmp_path, capsys):
    evals, problems = write_design(tmp_path)
    samples = write_approach_samples(evals)
    out = tmp_path / "approaches"
    assert main(["approaches", "--evals", *alpha_specs(evals), "--samples", *alpha_specs(samples),
                 "--problems", str(problems), "--out-dir", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and evals[0] in err[0] and "no 'tests' column" in err[0]
    assert not out.exists()


def test_a_problems_file_with_other_tests_is_one_error_line(tmp_path, capsys):
    evals, samples, problems = write_grid(tmp_path)
    problems.write_text(problems.read_text().replace(', {"input": "", "output": "", "size": 32000}', ""))
    args = ["approaches", "--evals", *alpha_specs(evals, GRID), "--samples", *alpha_specs(samples, GRID),
            "--problems", str(problems), "--out-dir", str(tmp_path / "out")]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not the problems file it was judged on" in err[0]


def test_a_judged_sample_missing_from_the_samples_is_one_error_line(tmp_path, capsys):
    evals, _ = write_design(tmp_path)
    samples = write_approach_samples(evals)
    lines = Path(samples[2]).read_text().splitlines()
    Path(samples[2]).write_text("\n".join(lines[:-1]) + "\n")
    out = tmp_path / "approaches"
    assert main(["approaches", "--evals", *alpha_specs(evals), "--samples", *alpha_specs(samples),
                 "--out-dir", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and samples[2] in err[0] and "1 judged sample(s)" in err[0]
    assert not out.exists()


def test_plan_lines_name_the_approach():
    assert approach_of(code_answer("x", "brute")) == "brute"
    assert approach_of(code_answer("x", "wrong")) == "efficient"  # wrong variants claim efficiency
    assert approach_of(code_answer("x")) == "unstated"
    assert approach_of("Approach: dynamic programming.\n```python\n```") == "unstated"


# --- the real sandbox ------------------------------------------------------------------------------

def test_judged_reference_programs_are_classified_brute_and_efficient(sandbox, tmp_path):
    """A mini family's brute force (O(n^2)) and efficient program (O(n)), judged with evaluation's early
    stop, through the evaluation table's schema."""
    from ewa.data.mini import build
    from ewa.problems import write_problems

    problem = build(split="train", families=["two_sum_count"])[0]
    write_problems([problem], tmp_path / "problems.jsonl")
    rows = [row({"problem_id": problem.id, "sample_id": kind, "carried": {}}, i,
                sandbox.judge(problem, problem.meta["solutions"][kind], early_stop=True))
            for i, kind in enumerate(("brute", "efficient"))]
    pq.write_table(to_table(rows), tmp_path / "evals.parquet")
    got = classified(profiles(tmp_path / "evals.parquet", read_suites(tmp_path / "problems.jsonl")))
    got = got.set_index("sample_id")
    assert got.loc["brute", "growth"] == "brute", got.loc["brute"].to_dict()
    assert got.loc["efficient", "growth"] == "efficient", got.loc["efficient"].to_dict()


# --- the premise, by plan line ---------------------------------------------------------------------

def test_the_premise_compares_the_kinds_by_plan_line_where_a_brute_force_suffices(tmp_path):
    problems = tmp_path / "problems.jsonl"
    problems.write_text("".join(json.dumps({
        "id": pid, "source": "t", "difficulty": "easy", "statement": "s", "testtype": "stdin",
        "tests": [{"input": "1", "output": "1"}], "meta": {"inputs": inputs}}) + "\n"
        for pid, inputs in (("s", "small"), ("s2", "small"), ("f", "full"))))
    suffices = brute_suffices(problems)
    assert suffices == {"s": True, "s2": True, "f": False}
    rows = [("s", "brute", "AC"), ("s", "brute", "AC"), ("s", "brute", "WA"), ("s", "efficient", "CE"),
            ("s2", "brute", "RE"), ("s2", "efficient", "AC"),
            ("f", "brute", "TLE"), ("f", "efficient", "WA"), ("f", "unstated", "AC")]
    judged = pd.DataFrame(rows, columns=["problem_id", "declared", "verdict"]).assign(alpha=0.0)
    row = premise_table(judged, suffices).set_index("alpha").loc[0.0]
    # where a brute force suffices: 2 of 4 brute-force attempts AC; most of them AC on s, none on s2
    assert (row.brute_attempts_there, row.brute_ac_where_suffices, row.problems_mostly_brute_ac) == (4, 0.5, 0.5)
    # everywhere: brute WA, RE of 5 (the TLE is no correctness failure); efficient CE, WA of 3
    assert (row.brute_attempts, row.efficient_attempts) == (5, 3)
    assert row.brute_corr == pytest.approx(0.4) and row.efficient_corr == pytest.approx(2 / 3)
    assert row.corr_ratio == pytest.approx(5 / 3)
    # a benchmark that does not say where a brute force suffices: only the correctness shares
    unmarked = premise_table(judged, {}).iloc[0]
    assert math.isnan(unmarked.brute_ac_where_suffices) and unmarked.brute_corr == pytest.approx(0.4)


def test_a_benchmark_without_the_marker_knows_no_problem_where_a_brute_force_suffices(tmp_path):
    problems = tmp_path / "problems.jsonl"
    problems.write_text(json.dumps({"id": "p", "source": "t", "difficulty": "easy", "statement": "s",
                                    "testtype": "stdin", "tests": [{"input": "1", "output": "1"}]}) + "\n")
    assert brute_suffices(problems) == {} and brute_suffices(None) == {}
