"""Real SLURM: the single-node cluster of scripts/slurm-localhost.sh runs workflows through
snakemake-executor-plugin-slurm with profiles/slurm-localhost, and the reduced pipeline on it gives
the same results as a local run."""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import BIN, REDUCED, ROOT, workflow_env

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(2400)]

CLUSTER_PROFILE = ROOT / "profiles" / "slurm-localhost"
RUN = "seed0"  # configs/reduced.yaml's replicate: its outputs live under results/seed0/


def snakemake(*args, timeout: float) -> subprocess.CompletedProcess:
    r = subprocess.run([str(BIN / "snakemake"), *map(str, args)], cwd=ROOT, env=workflow_env(),
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"snakemake {' '.join(map(str, args))} failed:\n{r.stderr[-6000:]}"
    return r


@pytest.fixture(scope="module")
def cluster():
    """Bring up (or reuse) the one-node cluster of `make slurm-localhost` (which installs slurm-wlm and
    munge from apt where they are missing); it is left running for the next session."""
    if os.geteuid() != 0:
        pytest.skip("needs root: scripts/slurm-localhost.sh installs slurm-wlm and starts its daemons")
    if not shutil.which("sinfo") and not shutil.which("apt-get"):
        pytest.skip("SLURM is not installed and apt-get is not available to install it")
    r = subprocess.run(["bash", str(ROOT / "scripts" / "slurm-localhost.sh")], capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stderr
    state = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True).stdout.split()
    assert state and state[0] in {"idle", "mixed", "allocated", "completing"}, state


def slurm_log_dirs(workdir: Path) -> list[str]:
    """One sbatch log per submitted job, in logs/slurm/group_<group>_<rules>/ or rule_<rule>/."""
    dirs = [p.parent.name for p in (workdir / "logs" / "slurm").rglob("*.log")]
    return sorted("_".join(d.split("_")[:2]) for d in dirs)


def scontrol_job(job_id: str) -> dict[str, str]:
    out = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True, check=True).stdout
    return dict(kv.split("=", 1) for kv in out.split() if "=" in kv)


TRIVIAL = """
rule all:
    input: "total.txt"

rule part:
    output: "parts/{i}.txt"
    threads: 1
    resources: mem_mb=100, runtime=5
    shell: "echo $SLURM_JOB_ID $(date +%s.%N) > {output} && sleep 1 && date +%s.%N >> {output}"

rule total:
    input: expand("parts/{i}.txt", i=range(4))
    output: "total.txt"
    shell: "cat {input} > {output} && echo $SLURM_JOB_ID >> {output}"
"""


def test_grouped_jobs_run_as_one_slurm_job_with_layered_resources(cluster, tmp_path):
    (tmp_path / "Snakefile").write_text(TRIVIAL)
    snakemake("--snakefile", tmp_path / "Snakefile", "--directory", tmp_path, "--profile", CLUSTER_PROFILE,
              "--workflow-profile", "none", "--groups", "part=parts", "--group-components", "parts=4",
              timeout=600)
    runs = [(tmp_path / "parts" / f"{i}.txt").read_text().split() for i in range(4)]
    part_jobs = {job for job, _, _ in runs}
    *parts, total_job = (tmp_path / "total.txt").read_text().split()
    assert len(part_jobs) == 1 and part_jobs.pop().isdigit(), "the four parts must share one SLURM job"
    parts = parts[::3]
    assert parts == [parts[0]] * 4 and total_job.isdigit() and total_job != parts[0]
    # The job-step executor runs a group's members one at a time, whatever the group asked for
    # (snakemake-executor-plugin-slurm#469): profiles/slurm sizes its groups for that. If this fails, the
    # members ran side by side and the profile's `cores` threads per grouped rule can be revisited.
    spans = sorted((float(start), float(end)) for _, start, end in runs)
    assert all(end <= later for (_, end), (later, _) in zip(spans, spans[1:])), spans
    # What Snakemake asks for four 1-thread members on a 2-core node: two layers of two, so 2 CPUs, 200 MB
    # and 2 x 5 min (though they ran one at a time).
    job = scontrol_job(parts[0])
    assert (job["NumCPUs"], job["TimeLimit"], job["JobState"]) == ("2", "00:10:00", "COMPLETED")
    assert re.search(r"mem=200M", job["TRES"]), job["TRES"]
    assert slurm_log_dirs(tmp_path) == ["group_parts", "rule_total"]


# -- the reduced pipeline, on the cluster and locally -----------------------------------------------

# Provenance that legitimately differs between two runs: timings, hosts, process ids, dates, and
# the measured speed (configs/reduced.yaml turns calibration off, so limits do not depend on it).
VOLATILE_KEY = re.compile(r"(time|duration|elapsed|wall|seconds|_s$|per_s|speed|throughput|host|node|pid"
                          r"|date|stamp|created|started|finished|versions|platform|slurm|logging_dir)", re.I)
SKIPPED_SUFFIXES = (".png", ".bin", ".pt", ".pth", ".pkl", ".log")  # plots; pickles embed paths and dates


def normalise(value, runs: tuple[str, ...]):
    """Drop volatile keys; write the run directory as <run> (outputs may record absolute paths)."""
    if isinstance(value, dict):
        return {k: normalise(v, runs) for k, v in value.items() if not VOLATILE_KEY.search(str(k))}
    if isinstance(value, list):
        return [normalise(v, runs) for v in value]
    if isinstance(value, str):
        for run in runs:
            value = value.replace(run, "<run>")
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return value


def frame(path: Path, runs):
    import pandas as pd
    df = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    df = df[[c for c in df.columns if not VOLATILE_KEY.search(str(c))]]
    return normalise(json.loads(df.to_json(orient="split", double_precision=15)), runs)


def content(path: Path, runs):
    """What must agree between the two runs for one output file."""
    if path.suffix == ".safetensors":  # bit-exact tensors; the header's metadata may differ
        import torch
        from safetensors.torch import load_file
        return {k: (str(t.dtype), tuple(t.shape), t.contiguous().view(-1).view(torch.uint8).numpy().tobytes())
                for k, t in load_file(path).items()}
    if path.suffix == ".json":
        return normalise(json.loads(path.read_text()), runs)
    if path.suffix == ".jsonl":
        return [normalise(json.loads(line), runs) for line in path.read_text().splitlines() if line.strip()]
    if path.suffix in (".parquet", ".csv"):
        return frame(path, runs)
    return path.read_bytes()


def compared_files(results: Path) -> set[str]:
    return {str(p.relative_to(results)) for p in results.rglob("*")
            if p.is_file() and not p.name.startswith(".") and p.suffix not in SKIPPED_SUFFIXES
            and "benchmarks" not in p.relative_to(results).parts  # seed<N>/benchmarks/: wall times only
            and p.relative_to(results).parts[0] != "preflight"}  # the node's check: names its run's checkout


@pytest.mark.slow
def test_reduced_pipeline_on_slurm_matches_local_run(cluster, request, tmp_path):
    """The reduced pipeline as SLURM jobs reproduces the local run (`finished`, tests/conftest.py)."""
    slurm = tmp_path / "slurm"
    run = snakemake("--snakefile", ROOT / "Snakefile", "--configfile", REDUCED, "--directory", slurm,
                    "--profile", CLUSTER_PROFILE, "--workflow-profile", "none", timeout=1200)
    # Asked for only now: under xdist another worker builds the local run meanwhile.
    local = request.getfixturevalue("finished")

    # Every job went through sbatch, grouped as profiles/slurm-localhost says.
    assert "submitted with SLURM jobid" in run.stderr
    assert slurm_log_dirs(slurm) == ["group_alpha", "group_data", "group_frontier", "group_train"]

    runs = (str(local), str(slurm))
    files = compared_files(local / "results")
    assert files == compared_files(slurm / "results")
    for kind in ("data/", "checkpoints/", "samples/", "evals/", "frontier/"):
        assert any(f.startswith(f"{RUN}/{kind}") for f in files), f"no results/{RUN}/{kind} output to compare"
    # merge.temp: each merged model is deleted once sampled, inside the SLURM group job as well as locally
    assert not list((slurm / "results" / RUN).glob("merged/alpha*")), "merged models left behind"
    differ = [f for f in sorted(files)
              if content(local / "results" / f, runs) != content(slurm / "results" / f, runs)]
    assert not differ, f"SLURM and local runs differ in {differ}"
