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
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
WORKFLOW_FILES = ("Snakefile", "rules", "schemas", "envs", "report", "profiles", "configs")


def env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false"}


def workflow_copy(dest: Path, config: dict | None = None) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for name in WORKFLOW_FILES:
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest / name)
    reduced = yaml.safe_load((ROOT / "configs/reduced.yaml").read_text())
    (dest / "config.yaml").write_text(yaml.safe_dump(config or reduced))
    return dest


def snakemake_cmd(*args) -> list[str]:
    """What `make demo` runs: clear a killed run's stale lock, then Snakemake."""
    snakemake = [str(BIN / "snakemake"), "--profile", "profiles/local", "--cores", "2",
                 "--configfile", "config.yaml", *args]
    return ["bash", "-c", 'bash "$0" && exec "$@"', str(ROOT / "scripts/unlock-if-stale.sh"), *snakemake]


def run(workdir: Path, *args, check=True) -> subprocess.CompletedProcess:
    r = subprocess.run(snakemake_cmd(*args), cwd=workdir, env=env(), capture_output=True, text=True)
    if check:
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    return r


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


def reduced() -> dict:
    return yaml.safe_load((ROOT / "configs/reduced.yaml").read_text())


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """One uninterrupted run of the reduced pipeline."""
    wd = workflow_copy(tmp_path_factory.mktemp("finished"))
    run(wd)
    return wd


def result_files(workdir: Path) -> dict[str, Path]:
    return {str(p.relative_to(workdir)): p for p in sorted((workdir / "results").rglob("*"))
            if p.is_file() and "benchmarks" not in p.parts}


def test_end_to_end_outputs(finished):
    cfg = reduced()
    frontier = pd.read_csv(finished / "results/frontier/mini/reasoning/frontier.csv")
    assert sorted(frontier["alpha"]) == sorted(cfg["merge"]["alphas"])
    assert set(frontier["label"]) == {"extrapolated", "interpolated"}
    evals = pd.read_parquet(finished / "results/evals/alpha+0.50/mini/tools.parquet")
    assert len(evals) == cfg["sample"]["n"] * cfg["benchmarks"]["mini"]["limit"]
    assert set(evals["verdict"]) <= {"AC", "WA", "TLE", "MLE", "RE", "CE"}
    for regime in ("low", "high"):
        assert (finished / f"results/checkpoints/{regime}/config.json").exists()
    merged = json.loads((finished / "results/merged/alpha-0.50/ewa_merge.json").read_text())
    assert merged["alpha"] == -0.5
    assert not [p for p in (finished / "results").rglob("*") if ".tmp" in p.name or "partial" in p.name]
    assert run(finished, "-n").stdout.count("rule ") == 0  # nothing left to do


def test_adding_an_alpha_builds_only_that_alpha_and_the_aggregates(finished, tmp_path):
    cfg = reduced()
    wd = tmp_path / "wd"
    shutil.copytree(finished, wd, symlinks=True)
    cfg["merge"]["alphas"] = cfg["merge"]["alphas"] + [1.0]
    (wd / "config.yaml").write_text(yaml.safe_dump(cfg))
    settings = cfg["sample"]["settings"]
    expected = {("merge", "tag=+1.00")}
    expected |= {(r, f"tag=+1.00, benchmark=mini, setting={s}") for r in ("sample", "evaluate") for s in settings}
    expected |= {(r, f"benchmark=mini, setting={s}") for r in ("frontier", "approaches") for s in settings}
    assert planned_jobs(wd) == expected


def test_changing_one_regime_retrains_only_that_regime(finished, tmp_path):
    cfg = reduced()
    wd = tmp_path / "wd"
    shutil.copytree(finished, wd, symlinks=True)
    cfg["regimes"][0]["fraction"] = 0.25  # the low regime only
    (wd / "config.yaml").write_text(yaml.safe_dump(cfg))
    jobs = planned_jobs(wd)
    assert ("train", "regime=low") in jobs
    assert ("train", "regime=high") not in jobs
    assert not {r for r, _ in jobs} & {"init", "prepare_train_data", "prepare_benchmark", "calibrate"}


def test_one_frontier_target_builds_only_its_inputs(tmp_path):
    cfg = reduced()
    cfg["benchmarks"]["humaneval"] = {"format": "humaneval", "limit": 2}
    wd = workflow_copy(tmp_path / "wd", cfg)
    jobs = planned_jobs(wd, "results/frontier/mini/reasoning/frontier.csv")
    assert {w for r, w in jobs if r == "frontier"} == {"benchmark=mini, setting=reasoning"}
    assert all("humaneval" not in w and "setting=tools" not in w for _, w in jobs)
    assert {w for r, w in jobs if r == "sample"} == {
        f"tag={t}, benchmark=mini, setting=reasoning" for t in ("-0.50", "+0.50", "+1.50")}
    # reduced.yaml judges with fixed time limits, so no calibration job either
    assert {r for r, _ in jobs} == {"prepare_train_data", "prepare_benchmark", "tiers", "init", "train",
                                   "merge", "sample", "evaluate", "frontier"}


def kill_when(workdir: Path, proc: subprocess.Popen, pattern: str, timeout: float = 900) -> None:
    """SIGKILL the whole Snakemake process group once a file matching `pattern` exists."""
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if list((workdir / "results").glob(pattern)):
            time.sleep(1.0)  # let the job get some work done, but not all of it
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return
        time.sleep(0.2)
    pytest.fail(f"no {pattern} appeared (run ended: {proc.poll()})")


def comparable(path: Path):
    """File content without what legitimately differs between runs: provenance, timings."""
    if path.suffix == ".parquet":
        df = pd.read_parquet(path)
        return df.drop(columns=[c for c in df.columns if "time" in c], errors="ignore").to_json()
    if path.suffix in (".json", ".png", ".svg", ".log"):  # provenance records; plots (checked elsewhere)
        return None
    return path.read_bytes()


def test_killed_mid_sampling_and_mid_evaluation_restarts_into_identical_results(finished, tmp_path):
    wd = workflow_copy(tmp_path / "wd")
    for pattern in ("samples/**/*.partial.jsonl", "evals/**/*.partial"):
        proc = subprocess.Popen(snakemake_cmd(), cwd=wd, env=env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        kill_when(wd, proc, pattern)
    run(wd)
    assert not [p for p in (wd / "results").rglob("*") if ".tmp" in p.name or "partial" in p.name]
    mine, reference = result_files(wd), result_files(finished)
    assert mine.keys() == reference.keys()
    for name in mine:
        if name.startswith(("results/samples", "results/evals", "results/frontier")):
            assert comparable(mine[name]) == comparable(reference[name]), name
