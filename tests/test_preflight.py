"""`ewa preflight` through the real CLI, with each check made to fail here for real: a missing interpreter,
a sandbox that cannot start, a run larger than the disk, an interpreter older than the benchmark's
programs, GPUs asked of a CPU build of torch. Every failure or warning is one line naming the node, the
check and the fix; a failure exits 2, a warning does not."""
from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest
import yaml

from helpers import BIN, REDUCED, reduced_config, requires_bwrap, workflow_env

from ewa.formats import get as get_format
from ewa.preflight import driver_problem, min_python, needs_vllm

pytestmark = pytest.mark.timeout(600)
NODE = socket.gethostname()


def python39() -> str | None:
    """A Python 3.9 interpreter (older than LiveCodeBench's minimum, new enough for the fork server) that
    runs with an empty environment, as the sandbox starts it (a pyenv shim does not); None if none here."""
    candidates = ["/usr/bin/python3.9", "/usr/local/bin/python3.9",
                  *map(str, sorted(Path.home().glob(".pyenv/versions/3.9*/bin/python3.9")))]
    for path in candidates:
        try:
            out = subprocess.run([path, "-E", "-c", "import sys; print(sys.version_info[:2])"], env={},
                                 capture_output=True, text=True, timeout=30).stdout
        except OSError:
            continue
        if out.strip() == "(3, 9)":
            return path
    return None


OLD_PYTHON = python39()


def preflight(tmp_path: Path, *args, env: dict | None = None) -> tuple[subprocess.CompletedProcess, dict | None]:
    """`ewa preflight ARGS --out tmp_path/results/preflight/node.json --results tmp_path/results`: the
    process and the record it wrote."""
    out = tmp_path / "results" / "preflight" / "node.json"
    r = subprocess.run([str(BIN / "ewa"), "preflight", *map(str, args), "--results", str(tmp_path / "results"),
                        "--out", str(out)], capture_output=True, text=True, env=env or workflow_env(), timeout=540)
    return r, (json.loads(out.read_text()) if out.is_file() else None)


def problem_lines(r: subprocess.CompletedProcess) -> list[str]:
    """The failure and warning lines (stderr), without Python's warnings about the process backend."""
    return [line for line in r.stderr.splitlines() if line.startswith("ewa preflight: ")]


def config_file(tmp_path: Path, **sections) -> Path:
    """The reduced config with `sections` replacing its own, as a file (the whole experiment)."""
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({**reduced_config(), **sections}))
    return path


def assert_one_line(r, check: str, status: str, *words: str) -> str:
    lines = problem_lines(r)
    assert len(lines) == 1, r.stdout + r.stderr
    line = lines[0]
    assert line.startswith(f"ewa preflight: {NODE}: {check} {status}: ") and "; fix: " in line, line
    assert all(w in line for w in words), line
    return line


@requires_bwrap
def test_a_working_node_passes_and_records_what_it_checked(tmp_path):
    r, record = preflight(tmp_path, "--config", REDUCED)
    assert r.returncode == 0 and not problem_lines(r), r.stdout + r.stderr
    assert record["node"] == NODE and record["ok"] and record["failed"] == []
    checks = record["checks"]
    assert {k: checks[k]["status"] for k in ("interpreter", "sandbox", "disk")} == {"interpreter": "ok", "sandbox": "ok",
                                                                                   "disk": "ok"}
    assert "contained the probe" in checks["sandbox"]["detail"]
    assert checks["disk"]["peak_gb"] >= 0 and checks["disk"]["free_gb"] > checks["disk"]["peak_gb"]
    # no GPU here and none asked for: the GPU checks are skipped, and the record says why
    assert checks["gpu"]["status"] == "skipped" and "--gpus 0" in checks["gpu"]["detail"]
    assert record["versions"]["judge_python"].startswith("3.") and record["versions"]["sandbox_backend"] == "bwrap"
    assert not list((tmp_path / "results" / "preflight").glob(".preflight-probe-*"))  # the probe cleans up


def test_a_missing_interpreter_fails_in_one_line(tmp_path):
    config = json.dumps({"sandbox": {"backend": "bwrap", "python": "/nonexistent/python3"}})
    r, record = preflight(tmp_path, "--config", config)
    assert r.returncode == 2
    assert_one_line(r, "interpreter", "failed", "/nonexistent/python3", "point sandbox.python at")
    assert record["failed"] == ["interpreter"] and record["checks"]["sandbox"]["status"] == "skipped"


def test_a_docker_sandbox_without_its_image_fails_in_one_line(tmp_path):
    config = json.dumps({"sandbox": {"backend": "docker", "docker_image": "ewa-preflight-no-such-image:0"}})
    r, record = preflight(tmp_path, "--config", config)
    assert r.returncode == 2
    assert_one_line(r, "sandbox", "failed", "docker", "make docker-sandbox")
    assert record["failed"] == ["sandbox"] and record["checks"]["interpreter"]["status"] == "skipped"


def test_bwrap_missing_from_the_path_fails_in_one_line(tmp_path):
    env = {**workflow_env(), "PATH": str(tmp_path / "empty-bin")}  # the CLI is called by its full path
    r, record = preflight(tmp_path, "--config", json.dumps({"sandbox": {"backend": "bwrap"}}), env=env)
    assert r.returncode == 2
    line = assert_one_line(r, "sandbox", "failed", "bwrap")
    assert line.endswith("fix: install bubblewrap and allow unprivileged user namespaces "
                         "(sysctl kernel.unprivileged_userns_clone=1), or set sandbox.backend: docker and run "
                         "make docker-sandbox")
    assert record["checks"]["interpreter"]["status"] == "ok"  # the host's interpreter is fine


@requires_bwrap
def test_a_run_larger_than_the_disk_fails_in_one_line(tmp_path):
    """model.tiny at ~100B parameters: `ewa plan` says the run holds terabytes (init, checkpoints, merged
    alphas), more than any test machine's free space."""
    model = {**reduced_config()["model"], "init": "tiny",
             "tiny": {"hidden_size": 16384, "num_heads": 128, "num_kv_heads": 8, "num_layers": 128,
                      "intermediate_size": 53248}}
    r, record = preflight(tmp_path, "--config", config_file(tmp_path, model=model))
    assert r.returncode == 2
    assert_one_line(r, "disk", "failed", "GB free", "at its peak", "ewa plan --configfile")
    disk = record["checks"]["disk"]
    assert disk["peak_gb"] > disk["free_gb"] and record["failed"] == ["disk"]


@requires_bwrap
@pytest.mark.skipif(OLD_PYTHON is None, reason="no Python 3.9 on this machine")
def test_an_interpreter_older_than_the_benchmark_needs_is_a_warning(tmp_path):
    """A real Python 3.9 judging LiveCodeBench (3.10 syntax): the sandbox works, so this warns and exits 0."""
    lcb = tmp_path / "lcb.jsonl"
    lcb.touch()
    config = config_file(tmp_path, sandbox={"backend": "bwrap", "python": OLD_PYTHON, "calibrate": False},
                         benchmarks={"lcb": {"format": "livecodebench", "input": str(lcb)}})
    r, record = preflight(tmp_path, "--config", config)
    assert r.returncode == 0, r.stderr
    assert_one_line(r, "interpreter", "warning", OLD_PYTHON, "Python 3.9", "livecodebench", ">= 3.10",
                    "set sandbox.python to another interpreter")
    assert record["ok"] and record["checks"]["sandbox"]["status"] == "ok"


@requires_bwrap
def test_gpus_asked_of_a_cpu_build_of_torch_fail_in_one_line(tmp_path):
    import torch

    if torch.version.cuda:
        pytest.skip("torch here is a CUDA build")
    r, record = preflight(tmp_path, "--config", json.dumps({"sandbox": {"backend": "bwrap"}}), "--gpus", "1")
    assert r.returncode == 2
    assert_one_line(r, "gpu", "failed", "asks for 1 GPU", "CPU build", "make setup-gpu")
    assert record["gpus_asked"] == 1 and record["versions"]["torch"] == torch.__version__


def test_the_containment_probe_catches_an_unisolated_backend(tmp_path):
    """`process` (asked for by name; rlimits only) reaches the host's loopback: a warning naming it, so
    the probe is not vacuous for bwrap and docker."""
    r, record = preflight(tmp_path, "--config", json.dumps({"sandbox": {"backend": "process"}}))
    assert r.returncode == 0
    assert_one_line(r, "sandbox", "warning", "process is not isolated", "connected to the host's 127.0.0.1")
    assert record["checks"]["sandbox"]["status"] == "warning"


# -- the pieces the checks are made of ----------------------------------------------------------------
@pytest.mark.parametrize("torch_cuda, driver, fails", [
    ("13.0", (12, 8), True),  # torch 2.13 from PyPI on a pre-580 driver
    ("13.0", (13, 0), False), ("13.0", (13, 2), False),
    ("12.8", (12, 4), False),  # minor version compatibility within CUDA 12
    ("13.0", None, True),  # no driver answers
])
def test_driver_against_torch_cuda(torch_cuda, driver, fails):
    assert (driver_problem(torch_cuda, driver) is not None) == fails


def test_what_the_configs_need():
    paper = yaml.safe_load((REDUCED.parent / "paper-7b.yaml").read_text())
    from ewa.config import validate

    paper, mini = validate(paper, partial=True), validate(reduced_config(), partial=True)
    assert min_python(paper) == ((3, 10), ["codecontests", "livecodebench"])
    assert min_python(mini) == (get_format("mini").min_python, ["mini"])
    assert needs_vllm(paper) == "required" and needs_vllm(mini) == "optional"  # auto: vLLM where it runs
    assert needs_vllm({**mini, "sample": {**mini["sample"], "backend": "hf"}}) == "no"
