"""`ewa gpu-check --cpu`, run for real as a user runs it: every check a CPU can do (merge and sampling run
twice and compared, the samples judged in bwrap, two GRPO steps, two training steps' peak RSS) on a tiny
model it builds itself; and a check that fails (a sandbox backend that cannot run) exits nonzero with its fix."""
from __future__ import annotations

import hashlib
import json
import subprocess

import pytest
import torch

from helpers import BIN, requires_bwrap, workflow_env

pytestmark = requires_bwrap
CHECKS = ("merge", "sample", "judge", "train", "memory")


def gpu_check(cwd, *args, cpu=True) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "ewa"), "gpu-check", *(["--cpu"] if cpu else []), *args], cwd=cwd,
                          env=workflow_env(), capture_output=True, text=True, timeout=900)


def check_lines(run: subprocess.CompletedProcess) -> dict[str, str]:
    """The one line each check printed, by check name."""
    lines = [line for line in (run.stdout + run.stderr).splitlines() if line.startswith("ewa gpu-check: ")]
    return {name: line for line in lines for name in CHECKS if line.startswith(f"ewa gpu-check: {name} ")}


def digests(directory) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.glob("*.safetensors"))}


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    """One whole `ewa gpu-check --cpu` in an empty directory (the schema's defaults, bwrap), its work kept."""
    cwd = tmp_path_factory.mktemp("gpu-check")
    run = gpu_check(cwd, "--config", json.dumps({"sandbox": {"backend": "bwrap"}}), "--work", "work",
                    "--out", "record.json")
    return run, cwd


@pytest.mark.slow
def test_every_cpu_check_holds_and_says_so_in_one_line(checked):
    run, cwd = checked
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = check_lines(run)
    assert list(lines) == list(CHECKS), lines
    assert " ok: 5 alphas x " in lines["merge"] and "bitwise identical, cpu run twice" in lines["merge"]
    assert "sample ok: 8 of 8 completions identical for the same seeds" in lines["sample"]
    assert "judge ok: 8 samples judged in bwrap" in lines["judge"]
    assert "train ok: 2 GRPO steps of the tiny model on cpu" in lines["train"]
    assert "memory skipped: needs cuda" in lines["memory"] and "peak RSS" in lines["memory"]
    record = json.loads((cwd / "record.json").read_text())
    assert record["ok"] and {k: v["status"] for k, v in record["checks"].items()} == {
        "merge": "ok", "sample": "ok", "judge": "ok", "train": "ok", "memory": "skipped"}
    assert record["checks"]["memory"]["measured"]["steps"] == 2
    assert record["checks"]["memory"]["plan"]["peak_gb"] > 0
    # what the lines claim, seen in the files the checks wrote
    work = cwd / "work"
    for alpha in ("alpha-0.50", "alpha+0.50", "alpha+1.50"):
        assert digests(work / "merged-cpu-0" / alpha) == digests(work / "merged-cpu-1" / alpha)
    assert digests(work / "merged-cpu-0" / "alpha+1.50") != digests(work / "merged-cpu-0" / "alpha+0.00")
    runs = [(work / f"samples-cpu-{i}" / "reasoning.jsonl").read_text().splitlines() for i in (0, 1)]
    assert len(runs[0]) == 8 and runs[0] == runs[1]
    assert (work / "checkpoints" / "low" / "metrics.csv").is_file()


@pytest.mark.slow
def test_a_failing_check_exits_nonzero_with_its_fix(checked):
    """docker with an image no engine holds: the judge cannot start its sandbox, on any machine."""
    _, cwd = checked
    config = {"sandbox": {"backend": "docker", "docker_image": "ewa-gpu-check-no-such-image:none"}}
    run = gpu_check(cwd, "--config", json.dumps(config), "--model", str(cwd / "work" / "init"), "--only", "judge")
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    line = check_lines(run)["judge"]
    assert line.startswith("ewa gpu-check: judge FAIL: sandbox.backend docker: ")
    assert "; fix: start the Docker engine" in line and "make docker-sandbox" in line
    assert "1 of 1 checks failed (judge)" in run.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here: ewa gpu-check would check it")
def test_without_a_gpu_it_says_so_in_one_line(tmp_path):
    run = gpu_check(tmp_path, cpu=False)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [run.stderr.strip()]
    assert run.stderr.startswith("ewa gpu-check: error: torch ") and "sees no CUDA device" in run.stderr
    assert "ewa gpu-check --cpu" in run.stderr and not list(tmp_path.iterdir())  # nothing made
