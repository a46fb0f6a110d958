"""The whole pipeline on the reduced config: an end-to-end run, the exact jobs Snakemake plans for
partial rebuilds, and runs killed with SIGKILL mid-sampling and mid-evaluation that restart into
results identical to the uninterrupted run."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from helpers import reduced_config, run_snakemake as run, snakemake_cmd, workflow_copy, workflow_env

from ewa.alphas import alpha_tag

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

RUN = "results/seed0"  # configs/reduced.yaml is the replicate with seed 0


def planned_jobs(workdir: Path, *targets) -> set[tuple[str, str]]:
    """(rule, wildcards) of every job a dry run plans."""
    out = run(workdir, "-n", *targets).stdout
    jobs, rule = set(), None
    for line in out.splitlines():
        if m := re.match(r"(?:local)?rule (\w+):", line.strip()):
            rule = m[1]
            jobs.add((rule, ""))
        elif rule and (m := re.match(r"wildcards: (.*)", line.strip())):
            jobs.discard((rule, ""))
            jobs.add((rule, m[1]))
    return {j for j in jobs if j[0] != "all"}


def result_files(workdir: Path) -> dict[str, Path]:
    return {str(p.relative_to(workdir)): p for p in sorted((workdir / "results").rglob("*"))
            if p.is_file() and "benchmarks" not in p.parts}


def test_end_to_end_outputs(finished):
    cfg = reduced_config()
    frontier = pd.read_csv(finished / RUN / "frontier/mini/reasoning/frontier.csv")
    assert sorted(frontier["alpha"]) == sorted(cfg["merge"]["alphas"])
    assert set(frontier["label"]) == {"extrapolated", "interpolated"}
    evals = pd.read_parquet(finished / RUN / "evals/alpha+0.50/mini/tools.parquet")
    assert len(evals) == cfg["sample"]["n"] * cfg["benchmarks"]["mini"]["limit"]
    assert set(evals["verdict"]) <= {"AC", "WA", "TLE", "MLE", "RE", "CE"}
    for regime in ("low", "high"):
        assert (finished / RUN / f"checkpoints/{regime}/config.json").exists()
    # merge.temp (the default): every merged model is gone once sampled; the samples keep its record
    assert not list((finished / RUN).glob("merged/alpha*"))
    provenance = json.loads((finished / RUN / "samples/alpha-0.50/mini/tools.provenance.json").read_text())
    assert provenance["model_record"]["alpha"] == -0.5
    assert not left_behind(finished)
    assert run(finished, "-n").stdout.count("rule ") == 0  # nothing left to do


def test_the_report_opens_on_the_runs_front_page(finished, tmp_path):
    """`snakemake --report` shows the study, this run's config and its claims with their verdicts (the
    claims need the endpoints, alphas 0 and 1, which the reduced grid leaves out: added here)."""
    import html

    from ewa.analysis.claims import CLAIMS

    wd = tmp_path / "wd"
    shutil.copytree(finished, wd, symlinks=True)
    cfg = reduced_config()
    cfg["merge"]["alphas"] = sorted(cfg["merge"]["alphas"] + [0.0, 1.0])
    (wd / "config.yaml").write_text(yaml.safe_dump(cfg))
    run(wd)
    run(wd, "--report", "report.html")
    page = html.unescape((wd / "report.html").read_text())
    assert "correctness-efficiency frontiers of weight-averaged code RL" in page
    assert "alphas</strong>: -0.50, +0.00, +0.50, +1.00, +1.50" in page and "n = 2 per problem" in page
    claims = pd.read_csv(wd / RUN / "claims/mini/reasoning/claims.csv")
    assert all(c.title in page for c in CLAIMS)
    assert f"{claims.value[0]:+.3f} [{claims.ci_lo[0]:+.3f}, {claims.ci_hi[0]:+.3f}]" in page
    assert "mini / tools" in page and "Where to look" in page


def test_every_file_a_step_writes_is_declared_by_its_rule(finished):
    """No step leaves an undeclared file: each file under results/ is an output of the DAG (Snakemake's
    summary lists them), or lies inside a declared directory output (a model directory)."""
    summary = run(finished, "--summary").stdout.splitlines()
    declared = {line.split("\t")[0] for line in summary[1:] if line.strip()}
    directories = {d for d in declared if (finished / d).is_dir()}
    undeclared = [name for name in result_files(finished)
                  if name not in declared and not any(name.startswith(d + "/") for d in directories)]
    assert not undeclared, undeclared
    assert any(d.endswith("/init") for d in directories)


def test_adding_an_alpha_builds_only_that_alpha_and_the_aggregates(finished, tmp_path):
    cfg = reduced_config()
    wd = tmp_path / "wd"
    shutil.copytree(finished, wd, symlinks=True)
    cfg["merge"]["alphas"] = cfg["merge"]["alphas"] + [1.0]
    (wd / "config.yaml").write_text(yaml.safe_dump(cfg))
    settings = cfg["sample"]["settings"]
    expected = {("merge", "seed=0, tag=+1.00")}
    expected |= {(r, f"seed=0, tag=+1.00, benchmark=mini, setting={s}") for r in ("sample", "evaluate")
                 for s in settings}
    expected |= {(r, f"seed=0, benchmark=mini, setting={s}") for r in ("frontier", "approaches") for s in settings}
    expected.add(("front_page", "seed=0"))  # the front page shows the config's alpha grid
    assert planned_jobs(wd) == expected


def test_rebuilding_after_sampling_merges_nothing(finished, tmp_path):
    """The merged models are deleted (merge.temp); a rerun that needs only what comes after sampling
    must not merge them again: an evaluation asked for again, frontiers with another bootstrap."""
    cfg = reduced_config()
    wd = tmp_path / "wd"
    shutil.copytree(finished, wd, symlinks=True)
    evals = f"{RUN}/evals/alpha+0.50/mini/tools.parquet"
    (wd / evals).unlink()
    assert planned_jobs(wd, evals) == {("evaluate", "seed=0, tag=+0.50, benchmark=mini, setting=tools")}
    shutil.copy2(finished / evals, wd / evals)
    cfg["evaluate"]["bootstrap"] += 1
    (wd / "config.yaml").write_text(yaml.safe_dump(cfg))
    assert planned_jobs(wd) == {("frontier", f"seed=0, benchmark=mini, setting={s}") for s in cfg["sample"]["settings"]}


def test_a_new_setting_built_alone_samples_only_that_setting(finished, tmp_path):
    """docs/architecture.md's way to extend a finished run: target the new setting's outputs. Its sample
    jobs need the (deleted) merged models again; the settings already sampled stay as they are."""
    cfg = reduced_config()
    wd = tmp_path / "wd"
    shutil.copytree(finished, wd, symlinks=True)
    cfg["sample"]["settings"] = cfg["sample"]["settings"] + ["agentic"]
    (wd / "config.yaml").write_text(yaml.safe_dump(cfg))
    tags = [alpha_tag(a) for a in cfg["merge"]["alphas"]]
    expected = {("merge", f"seed=0, tag={t}") for t in tags}
    expected |= {(r, f"seed=0, tag={t}, benchmark=mini, setting=agentic") for r in ("sample", "evaluate") for t in tags}
    expected |= {(r, "seed=0, benchmark=mini, setting=agentic") for r in ("frontier", "approaches")}
    targets = [f"{RUN}/{step}/mini/agentic/{step}.csv" for step in ("frontier", "approaches")]
    assert planned_jobs(wd, *targets) == expected


def test_changing_one_regime_retrains_only_that_regime(finished, tmp_path):
    cfg = reduced_config()
    wd = tmp_path / "wd"
    shutil.copytree(finished, wd, symlinks=True)
    cfg["regimes"][0]["fraction"] = 0.25  # the low regime only
    (wd / "config.yaml").write_text(yaml.safe_dump(cfg))
    jobs = planned_jobs(wd)
    assert ("train", "seed=0, regime=low") in jobs
    assert ("train", "seed=0, regime=high") not in jobs
    assert not {r for r, _ in jobs} & {"preflight", "init", "prepare", "calibrate"}


def test_one_frontier_target_builds_only_its_inputs(tmp_path):
    cfg = reduced_config()
    cfg["benchmarks"]["humaneval"] = {"format": "humaneval", "limit": 2}
    wd = workflow_copy(tmp_path / "wd", cfg)
    jobs = planned_jobs(wd, f"{RUN}/frontier/mini/reasoning/frontier.csv")
    assert {w for r, w in jobs if r == "frontier"} == {"seed=0, benchmark=mini, setting=reasoning"}
    assert all("humaneval" not in w and "setting=tools" not in w for _, w in jobs)
    assert {w for r, w in jobs if r == "sample"} == {
        f"seed=0, tag={t}, benchmark=mini, setting=reasoning" for t in ("-0.50", "+0.50", "+1.50")}
    # reduced.yaml judges with fixed time limits, so no calibration job either
    assert {r for r, _ in jobs} == {"preflight", "prepare", "tiers", "init", "train", "merge", "sample", "evaluate",
                                    "frontier"}
    assert ("preflight", "partition=local") in jobs


def kill_when(workdir: Path, proc: subprocess.Popen, pattern: str, delay: float = 1.0, timeout: float = 900) -> None:
    """SIGKILL the whole Snakemake process group `delay` seconds after a file matching `pattern` exists."""
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if list((workdir / "results").glob(pattern)):
            time.sleep(delay)  # let the job get some work done, but not all of it
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return
        time.sleep(0.02)  # a tiny model's merge holds its lock for well under a second
    pytest.fail(f"no {pattern} appeared (run ended: {proc.poll()})")


def comparable(path: Path):
    """File content without what legitimately differs between runs: provenance, timings."""
    if path.suffix == ".parquet":
        df = pd.read_parquet(path)
        return df.drop(columns=[c for c in df.columns if "time" in c], errors="ignore").to_json()
    if path.suffix in (".json", ".png", ".svg", ".log"):  # provenance records; plots (checked elsewhere)
        return None
    return path.read_bytes()


def left_behind(workdir: Path) -> list[str]:
    """Temporaries, partial results and lock files anywhere under results/."""
    return [str(p) for p in (workdir / "results").rglob("*")
            if ".tmp" in p.name or "partial" in p.name or p.name.endswith(".lock")]


def test_killed_mid_merge_sampling_and_evaluation_restarts_into_identical_results(finished, tmp_path):
    """From the trained state of the uninterrupted run: SIGKILL at seeded random points inside merge (its
    lock or temporaries exist), sample and evaluate jobs, one after another on the same work dir; the
    final rerun leaves nothing behind and matches the uninterrupted run."""
    import random

    wd = tmp_path / "wd"
    shutil.copytree(finished, wd, symlinks=True)
    for step in ("samples", "evals", "frontier", "claims", "approaches", "report"):  # all after training
        shutil.rmtree(wd / RUN / step, ignore_errors=True)
    rng = random.Random(0)
    for pattern in ("seed0/merged/.alpha*", "seed0/samples/**/*.partial.jsonl", "seed0/evals/**/*.partial"):
        proc = subprocess.Popen(snakemake_cmd(), cwd=wd, env=workflow_env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        kill_when(wd, proc, pattern, delay=rng.uniform(0.0, 1.5))
    for _ in range(2):  # then anywhere in whatever runs next
        proc = subprocess.Popen(snakemake_cmd(), cwd=wd, env=workflow_env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            proc.wait(timeout=rng.uniform(3.0, 20.0))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    run(wd)
    assert not left_behind(wd)
    mine, reference = result_files(wd), result_files(finished)
    assert mine.keys() == reference.keys()
    for name in mine:
        if name.startswith(tuple(f"{RUN}/{step}" for step in ("samples", "evals", "frontier"))):
            assert comparable(mine[name]) == comparable(reference[name]), name


def ewa_status(workdir: Path, *args) -> dict:
    """`ewa status --json` of a workflow directory, as a person runs it."""
    r = subprocess.run(["ewa", "status", str(workdir), "--json", *args], env=workflow_env(), capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


def test_status_of_a_finished_run_and_of_one_killed_while_sampling(finished, tmp_path):
    """`ewa status` on the finished run: every job done, nothing running or failed. Then from its trained
    state, a run killed with SIGKILL while a sample job runs: that job is named as killed, what it had done
    is shown, training is done, and nothing is running."""
    done = ewa_status(finished)
    assert (done["state"], done["jobs_left"], done["running"], done["failed"]) == ("finished", 0, [], [])
    assert {"train", "merge", "sample", "evaluate", "training"} <= set(done["rules"])
    assert all(c["done"] == c["total"] for c in done["rules"].values())
    wd = tmp_path / "wd"
    shutil.copytree(finished, wd, symlinks=True)
    for step in ("samples", "evals", "frontier", "claims", "approaches", "report"):
        shutil.rmtree(wd / RUN / step, ignore_errors=True)
    proc = subprocess.Popen(snakemake_cmd(), cwd=wd, env=workflow_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    progress = wd / "logs" / "progress" / "seed0" / "samples"
    deadline = time.time() + 600
    try:
        while not any(json.loads(p.read_text() or "{}").get("state") == "running" for p in progress.rglob("*.json")):
            assert proc.poll() is None and time.time() < deadline, "no sample job started"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    for _ in range(10):  # a job in a worker (EWA_WORKER=1) ends a moment after the Snakemake that ran it
        killed = ewa_status(wd, "--no-plan")
        if not killed["running"]:
            break
        time.sleep(1)
    assert killed["state"] == "stopped" and not killed["running"]
    samples = [f for f in killed["failed"] if f["rule"] == "sample"]
    assert samples and {f["state"] for f in samples} == {"killed"} and all(f["why"] for f in samples)
    assert all("sample" in f["name"] and "alpha" in f["name"] for f in samples)
    assert samples[0]["log"].startswith("logs/seed0/sample/alpha")
    assert killed["rules"]["train"] == {"done": 2, "running": 0, "failed": 0, "pending": 0, "total": 2}
    assert killed["rules"]["sample"]["done"] < killed["rules"]["sample"]["total"]
    screen = subprocess.run(["ewa", "status", str(wd), "--no-plan"], env=workflow_env(), capture_output=True,
                            text=True).stdout
    assert "failed or killed:" in screen and samples[0]["name"] in screen
