"""The withdrawal rule (science.withdraw_if, ewa.analysis.withdrawal) on real per-seed outputs: two seeds
judged by `ewa evaluate` in the bwrap sandbox, analysed by `ewa frontier`, `ewa claims` and `ewa approaches`,
and real `ewa preflight` records (bwrap contains the probe; the process backend does not). `ewa science`
renders a clean run's claims, withdraws by rule a run over a bound (no claim rendered), and
scripts/science.py carries the withdrawal to the page, the archive and the registry."""
from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from helpers import DESIGN, ROOT, SUM_OK, alpha_specs, requires_bwrap, write_approach_samples

import ewa.io
from ewa.analysis.registry import experiment_sha256, read_registry, write_registry
from ewa.cli import main
from ewa.config import load
from ewa.io import write_jsonl
from ewa.problems import Problem, make_test, write_problems

pytestmark = [pytest.mark.timeout(300), requires_bwrap]

SEEDS, N = (3, 4), 5  # samples per problem: `sample.n` of the runs
COMMIT, SHA = "c" * 40, "e" * 64  # what every job's provenance names (the registration matches them)
WA_CODE, RE_CODE = "print(0)\n", "raise ValueError('crash')\n"


def codes(alpha: float, problem: int) -> list[str | None]:
    """Each sample's program: higher alphas solve more; problem 0's last sample crashes (RE share 1/20)."""
    last = RE_CODE if problem == 0 else WA_CODE
    return [SUM_OK, SUM_OK if alpha >= 0.5 else WA_CODE, WA_CODE, None if alpha < 0 else SUM_OK, last]


def judge_seed(root: Path, seed: int, problems: Path, calibration: Path) -> tuple[Path, Path]:
    """One seed as the pipeline makes it: every alpha's samples judged, then frontier, claims, approaches."""
    evals = []
    for alpha in DESIGN:
        samples = root / "samples" / f"alpha{alpha:+.2f}.jsonl"
        samples.parent.mkdir(parents=True, exist_ok=True)
        write_jsonl(samples, [{"problem_id": f"mini/f{p // 2}/p{p}", "sample_id": s, "code": code}
                              for p in range(4) for s, code in enumerate(codes(alpha, p))])
        out = root / "evals" / f"alpha{alpha:+.2f}" / "mini" / "reasoning.parquet"
        assert main(["evaluate", "--problems", str(problems), "--samples", str(samples), "--out", str(out),
                     "--workers", "1", "--calibration", str(calibration)]) == 0
        evals.append(str(out))
    specs = alpha_specs(evals)
    frontier, claims, approaches = (root / step / "mini" / "reasoning" for step in ("frontier", "claims", "approaches"))
    assert main(["frontier", "--evals", *specs, "--k", "1", "--budget", "2", "--bootstrap", "20", "--formats", "png",
                 "--out-dir", str(frontier)]) == 0
    assert main(["claims", "--evals", *specs, "--ensembles", str(frontier / "ensembles.csv"), "--bootstrap", "20",
                 "--seed", str(seed), "--out-dir", str(claims)]) == 0
    assert main(["approaches", "--evals", *specs, "--samples", *alpha_specs(write_approach_samples(evals)),
                 "--out-dir", str(approaches)]) == 0
    return claims, approaches


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    """Seeds 3 and 4 and two preflight records: the bwrap sandbox's (contained) and the process backend's."""
    root = tmp_path_factory.mktemp("withdrawal")
    problems = root / "problems.jsonl"
    write_problems([Problem(id=f"mini/f{p // 2}/p{p}", source="t", difficulty="easy", statement="", testtype="stdin",
                            tests=(make_test("1 2\n", "3\n"), make_test(f"{p} 5\n", f"{p + 5}\n")))
                    for p in range(4)], problems)
    calibration = root / "calibration.json"
    calibration.write_text(json.dumps({"time_factor": 1.0}))
    preflight = {}
    for backend in ("bwrap", "process"):
        preflight[backend] = root / "preflight" / f"{backend}.json"
        with warnings.catch_warnings():  # the process backend warns once per process: maybe earlier
            warnings.simplefilter("ignore", RuntimeWarning)
            assert main(["preflight", "--config", json.dumps({"sandbox": {"backend": backend}}),
                         "--out", str(preflight[backend])]) == 0  # the process backend's escape is a warning
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(ewa.io, "code_version", lambda: {"commit": COMMIT, "dirty": []})
        monkeypatch.setenv(ewa.io.EXPERIMENT_ENV, SHA)
        seeds = [judge_seed(root / f"seed{s}", s, problems, calibration) for s in SEEDS]
    return {"root": root, "seeds": seeds, "preflight": preflight}


def science(run: dict, out: Path, rule: dict | None = None, n: int = N, preflight: str = "bwrap",
            registry: Path | None = None) -> int:
    config = {"science": {"withdraw_if": rule or {}}, "sample": {"n": n}}
    return main(["science", "--config", json.dumps(config), "--claims", *(str(c) for c, _ in run["seeds"]),
                 "--approaches", *(str(a) for _, a in run["seeds"]),
                 "--frontier-plot", str(run["seeds"][0][0].parents[2] / "frontier/mini/reasoning/frontier.png"),
                 "--benchmark", "mini", "--setting", "reasoning", "--preflight", str(run["preflight"][preflight]),
                 "--out-dir", str(out), *(["--registry", str(registry)] if registry else [])])


def assert_withdrawn(out: Path, stderr: str, why: str) -> dict:
    text, record = (out / "science.md").read_text(), json.loads((out / "withdrawal.json").read_text())
    assert record["withdrawn"] and why in record["reason"]
    warnings = [line for line in stderr.splitlines() if line.startswith("ewa science: warning:")]
    assert len(warnings) == 1 and f"withdrawn by rule: {record['reason']}" in warnings[0]
    assert f"withdrawn by rule: {record['reason']}" in text
    assert "| claim |" not in text and "Verdict shares" not in text and "headroom" not in text
    assert json.loads((out / "summary.json").read_text())["claims"] == []
    return record


def test_a_clean_run_renders_its_claims_and_the_rule_it_passed(run, tmp_path, capsys):
    out = tmp_path / "science"
    assert science(run, out) == 0
    assert "warning" not in capsys.readouterr().err
    text, record = (out / "science.md").read_text(), json.loads((out / "withdrawal.json").read_text())
    assert not record["withdrawn"] and record["rule"]["max_re_share"] == 0.2
    assert "| claim |" in text and "Verdict shares per alpha" in text
    assert ("checked before this table was rendered: passed (largest RE share 0.050 (seed 3, alpha -0.50), bound 0.2;"
            in text and "the preflight's containment probe held" in text)
    assert len(record["files"]) == 2 * (1 + len(DESIGN)) + 1  # each seed's claims provenance and tables, the preflight


def test_an_re_share_over_the_bound_withdraws_the_whole_run(run, tmp_path, capsys):
    out = tmp_path / "science"
    assert science(run, out, {"max_re_share": 0.04}) == 0
    record = assert_withdrawn(out, capsys.readouterr().err, "seed 3, alpha -0.50: RE share 0.050 > max_re_share 0.04")
    assert {(b["seed"], b["rule"], b["measured"], b["bound"]) for b in record["breaches"]} == {
        (s, "max_re_share", 0.05, 0.04) for s in SEEDS}
    assert all(b["files"][0].endswith("reasoning.parquet") for b in record["breaches"])
    # the first breach is named, and how many more the record holds: one withdraws the run, every seed
    assert record["reason"].endswith(f"(and {len(record['breaches']) - 1} more in withdrawal.json)")


def test_a_failed_containment_probe_withdraws_the_run(run, tmp_path, capsys):
    out = tmp_path / "science"
    assert science(run, out, preflight="process") == 0
    record = assert_withdrawn(out, capsys.readouterr().err, "sandbox check warning: process is not isolated")
    (found,) = record["breaches"]
    assert found["rule"] == "containment" and found["files"] == [str(run["preflight"]["process"])]


def test_a_truncated_evaluation_withdraws_the_run(run, tmp_path, capsys):
    out = tmp_path / "science"
    assert science(run, out, n=N + 1) == 0  # the config implies 6 samples a problem; 5 were judged
    assert_withdrawn(out, capsys.readouterr().err, "20 samples judged, the config implies 24 (4 problems x sample.n 6)")


def test_a_bad_rule_is_one_line_naming_the_field(run, tmp_path, capsys):
    assert science(run, tmp_path / "science", {"max_re_share": 1.5}) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "science.withdraw_if.max_re_share" in err and "maximum of 1" in err
    assert science(run, tmp_path / "science", {"max_re": 0.1}) == 2
    assert "unknown key 'science.withdraw_if.max_re'" in capsys.readouterr().err
    assert not (tmp_path / "science").exists()


def test_the_rule_is_registered_with_the_config():
    """The registration pins the whole validated config, the rule's defaults included: another rule is
    another config sha256, which `ewa science --registry` refuses."""
    config = load(ROOT / "configs" / "science.yaml")
    assert config["science"]["withdraw_if"] == {"max_re_share": 0.2, "max_backstop_share": 0.01, "containment": True,
                                                "calibration": True, "complete": True}
    before = experiment_sha256(config)
    config["science"]["withdraw_if"]["max_re_share"] = 0.5
    assert experiment_sha256(config) != before


def test_publishing_a_withdrawn_run_says_so_on_the_page_archive_and_registry(run, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(ewa.io, "code_version", lambda: {"commit": COMMIT, "dirty": []})
    monkeypatch.setenv(ewa.io.EXPERIMENT_ENV, SHA)
    registry = tmp_path / "registry.yaml"
    write_registry(registry, {"reports": [], "withdrawn": [], "next": [
        {"experiment": "configs/science.yaml", "seeds": list(SEEDS), "commit": COMMIT, "config_sha256": SHA}]})
    study = tmp_path / "science" / "mini" / "reasoning"
    assert science(run, study, {"max_re_share": 0.04}, registry=registry) == 0
    capsys.readouterr()
    page = tmp_path / "docs" / "results.md"
    page.parent.mkdir()
    page.write_text("# Results\n\n<!-- science:start -->\n<!-- science:end -->\n")
    done = subprocess.run([sys.executable, str(ROOT / "scripts/science.py"), str(study), "--registry", str(registry),
                           "--page", str(page)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "study withdrawn by rule: mini / reasoning: seed 3, alpha -0.50: RE share 0.050" in done.stderr
    text = page.read_text()
    assert "withdrawn by rule: seed 3, alpha -0.50: RE share 0.050 > max_re_share 0.04" in text
    assert "| claim |" not in text
    (entry,) = read_registry(registry)["withdrawn"]
    assert entry["seeds"] == list(SEEDS) and entry["note"].startswith("withdrawn by rule: mini / reasoning: seed 3")
    assert read_registry(registry)["next"] == [] and read_registry(registry)["reports"] == []
    archived = tmp_path / "docs" / "science" / "study" / "mini" / "reasoning"
    assert sorted(p.name for p in archived.iterdir()) == ["run.json"]  # no seed's claims are published
    assert json.loads((archived / "run.json").read_text())["withdrawal"]["withdrawn"] is True
    assert json.loads((archived / "run.json").read_text())["control_rule"] == "every_seed"  # registered with the run
    # the page renders again from the archive alone, and the seeds are never reported again
    again = subprocess.run([sys.executable, str(ROOT / "scripts/science.py"), "--render-only", "--page", str(page)],
                           capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert page.read_text() == text
    assert science(run, tmp_path / "again", registry=registry) == 2
    assert "seed 3 was in a withdrawn registration" in capsys.readouterr().err
