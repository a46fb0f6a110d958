"""Helpers shared by the test modules (the one place they live: no test module imports another).

- paths and the workflow: ROOT, BIN, workflow_env(), workflow_copy(), reduced_config(), snakemake_cmd(),
  run_snakemake()
- the synthetic alpha grid with hand-countable verdict mixes: DESIGN, write_design(), expected_rate(),
  alpha_specs(), write_approach_samples()
- pico model settings for `ewa init` / build_tiny_model: PICO, PICO_ONE_HEAD, PICO_WIDE
- a stage's settings as `ewa COMMAND --config` hands them over (validated, the schema's defaults filled):
  tiny_settings(), sft_settings(), grpo_settings(), sample_settings(), sandbox_settings(),
  metrics_settings(), ensemble_settings(), claims_settings()
- what the environment offers: requires_bwrap, docker_engine(), docker_image_ready()

The sandbox fixtures (`sandbox`, `sandbox_factory`) and the reduced pipeline's run (`finished`) live in
conftest.py.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # the venv's bin: `ewa` and `snakemake`
REDUCED = ROOT / "configs" / "reduced.yaml"
# What a copy of the workflow needs besides results: the schema ships inside the package now.
WORKFLOW_FILES = ("Snakefile", "rules", "envs", "report", "profiles", "configs")
REGIMES = [{"name": "low", "fraction": 0.5}, {"name": "high", "fraction": 1.0}]
SUM_OK = "a, b = map(int, input().split())\nprint(a + b)\n"


# --- the workflow ----------------------------------------------------------------------------------

def workflow_env() -> dict[str, str]:
    """The environment workflow jobs run in (also inherited by SLURM jobs, sbatch --export=ALL):
    `ewa` and `snakemake` from the venv, nothing from a model hub, the caller's EWA_WORKER."""
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "EWA_WORKER": os.environ.get("EWA_TEST_WORKER", "0")}
    env.pop("PYTEST_CURRENT_TEST", None)  # one per test: a worker serves one environment (ewa.worker)
    return env


def reduced_config() -> dict:
    """configs/reduced.yaml: the smallest run of the whole pipeline."""
    return yaml.safe_load(REDUCED.read_text())


def private_uid() -> int:
    """A uid for a process-backend sandbox that no other sandbox uses: below every block
    ewa.sandbox.backends.claim_uid_block hands out, and one per xdist worker, so a test's process
    census or kill sweep never meets another worker's candidates."""
    from ewa.sandbox.backends import UID_BLOCK_SIZE, UID_BLOCK_TOP, UID_BLOCKS

    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    return UID_BLOCK_TOP - UID_BLOCKS * UID_BLOCK_SIZE - 1 - int(worker or 0)


def workflow_copy(dest: Path, config: dict | None = None) -> Path:
    """The workflow copied into `dest`, with `config` (default: the reduced one) as its config.yaml."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in WORKFLOW_FILES:
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest / name)
    (dest / "config.yaml").write_text(yaml.safe_dump(config or reduced_config()))
    return dest


def snakemake_cmd(*args) -> list[str]:
    """What `make demo` runs in a workflow copy: clear a killed run's stale lock, then Snakemake."""
    snakemake = [str(BIN / "snakemake"), "--profile", "profiles/local", "--cores", "2",
                 "--configfile", "config.yaml", *args]
    return ["bash", "-c", 'bash "$0" && exec "$@"', str(ROOT / "scripts/unlock-if-stale.sh"), *snakemake]


def run_snakemake(workdir: Path, *args, check=True) -> subprocess.CompletedProcess:
    r = subprocess.run(snakemake_cmd(*args), cwd=workdir, env=workflow_env(), capture_output=True, text=True)
    if check:
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    return r


# --- a synthetic alpha grid ------------------------------------------------------------------------

# alpha -> per-problem verdict mix (AC, TLE, MLE, WA, RE, CE), 10 samples each; p3 is never solved.
DESIGN = {
    -0.5: [(2, 6, 1, 1, 0, 0), (2, 6, 1, 1, 0, 0), (2, 6, 1, 1, 0, 0), (0, 8, 0, 2, 0, 0)],
    0.0: [(3, 4, 1, 1, 1, 0), (3, 4, 1, 1, 1, 0), (3, 4, 1, 1, 1, 0), (0, 6, 0, 4, 0, 0)],
    0.5: [(4, 2, 1, 2, 1, 0), (4, 2, 1, 2, 1, 0), (4, 2, 1, 2, 1, 0), (0, 5, 0, 5, 0, 0)],
    1.0: [(4, 1, 0, 4, 1, 0), (4, 1, 0, 4, 1, 0), (4, 1, 0, 4, 1, 0), (0, 3, 0, 7, 0, 0)],
    1.5: [(2, 2, 0, 5, 1, 0), (2, 2, 0, 5, 1, 0), (0, 2, 0, 6, 1, 1), (0, 3, 0, 7, 0, 0)],
}
ORDER = ("AC", "TLE", "MLE", "WA", "RE", "CE")
DIFFICULTY = {"p0": "easy", "p1": "easy", "p2": "hard", "p3": "hard"}
FAMILY = {"p0": "f0", "p1": "f0", "p2": "f0", "p3": "f1"}  # p0-p2 are siblings (and nearly alike)


def verdicts(mix) -> list[str]:
    return [v for v, k in zip(ORDER, mix) for _ in range(k)]


def write_design(root: Path, design: dict = DESIGN) -> tuple[list[str], Path]:
    """One evaluation table per alpha of `design` (DESIGN by default; in its order, rows shuffled) under
    root/evals, and the problems file; returns (table paths, problems path)."""
    paths = []
    for alpha, mixes in design.items():
        rows = [{"problem_id": f"p{p}", "sample_id": s, "verdict": v, "tests_passed": 1, "tests_total": 4,
                 "first_failed_test": 1, "first_failed_tier": 0, "cpu_time_s": 0.1, "peak_memory_mb": 9.0}
                for p, mix in enumerate(mixes) for s, v in enumerate(verdicts(mix))]
        path = root / "evals" / f"alpha{alpha:+.2f}" / "mini" / "reasoning.parquet"
        path.parent.mkdir(parents=True)
        pd.DataFrame(rows).sample(frac=1, random_state=0).to_parquet(path, index=False)  # order must not matter
        paths.append(str(path))
    problems = root / "problems.jsonl"
    problems.write_text("".join(json.dumps({"id": pid, "source": "t", "difficulty": d, "statement": "s",
                                            "testtype": "stdin", "tests": [{"input": "", "output": ""}],
                                            "meta": {"family": FAMILY[pid]}}) + "\n"
                                for pid, d in DIFFICULTY.items()))
    return paths, problems


def alpha_specs(paths: list[str], alphas=tuple(DESIGN)) -> list[str]:
    """`alpha=A:PATH` for each grid file, as `--evals` / `--samples` take them (DESIGN's alphas by default)."""
    return [f"alpha={a}:{p}" for a, p in zip(alphas, paths, strict=True)]


def expected_rate(alpha, verdict_set, problems=range(4)) -> float:
    """Mean over problems of the per-problem share of verdicts in verdict_set, by plain counting."""
    shares = [sum(v in verdict_set for v in verdicts(DESIGN[alpha][p])) / 10 for p in problems]
    return sum(shares) / len(shares)


def write_approach_samples(eval_paths: list[str]) -> list[str]:
    """One samples file per evaluation table: TLE samples declare brute force, sample 0 no plan, the
    rest the efficient algorithm (what the tiny model's plan line would say)."""
    from ewa.prompts import code_answer

    paths = []
    for path in eval_paths:
        evals = pd.read_parquet(path)
        out = Path(path).with_suffix(".jsonl")
        with out.open("w") as f:
            for r in evals.itertuples():
                kind = None if r.sample_id == 0 else "brute" if r.verdict == "TLE" else "efficient"
                f.write(json.dumps({"problem_id": r.problem_id, "sample_id": r.sample_id,
                                    "completion": code_answer("print(1)", kind)}) + "\n")
        paths.append(str(out))
    return paths


# --- settings as the CLI hands them to a stage ------------------------------------------------------
# The stages read validated sections and fill no default; the tests build theirs the one way the CLI
# does, through ewa.config (the schema's defaults, `given` on top).

def tiny_settings(given: dict | None = None) -> dict:
    from ewa.config import section

    return section("model", {"tiny": given or {}})["tiny"]


def sft_settings(given: dict | None = None) -> dict:
    from ewa.config import section

    return section("model", {"sft": given or {}})["sft"]


def grpo_settings(given: dict | None = None) -> dict:
    from ewa.config import section

    return section("grpo", given or {})


def sample_settings(seed: int = 0, stream: str = "", **given):
    """The SampleConfig `ewa sample` builds from a `sample` section of `given` keys."""
    from ewa.config import section
    from ewa.sample.config import SampleConfig

    return SampleConfig.from_dict(section("sample", given), seed=seed, stream=stream)


def sandbox_settings(**fields):
    """The SandboxSettings sandbox_from_config builds from the schema's `sandbox` section, `fields` on top."""
    from ewa.config import section
    from ewa.sandbox import SandboxSettings

    sandbox = section("sandbox")
    return SandboxSettings(**{"python": sandbox["python"], "docker_image": sandbox["docker_image"],
                              "max_source_bytes": sandbox["max_source_bytes"], **fields})


def metrics_settings(**given):
    """The MetricsSettings `ewa frontier` builds from a default config, with `given` fields on top."""
    from ewa.analysis.metrics import MetricsSettings
    from ewa.config import validate

    config = validate({}, partial=True)
    ev = config["evaluate"]
    return MetricsSettings(**{"k": tuple(ev["k"]), "bootstrap": ev["bootstrap"], "ci": ev["ci"],
                              "seed": config["seed"], "cluster_by": ev["cluster_by"], **given})


def claims_settings(**given):
    """The ClaimsSettings `ewa claims` builds from a default config, with `given` fields on top."""
    from ewa.analysis.claims import ClaimsSettings
    from ewa.config import validate

    config = validate({}, partial=True)
    ev = config["evaluate"]
    return ClaimsSettings(**{"bootstrap": ev["bootstrap"], "ci": ev["ci"], "seed": config["seed"],
                             "cluster_by": ev["cluster_by"], "dev_fraction": ev["dev_fraction"],
                             "budget": ev["budget"], "min_headroom": ev["min_headroom"], **given})


def ensemble_settings(**given):
    """The EnsembleSettings `ewa frontier` builds from a default config, with `given` fields on top."""
    from ewa.analysis.ensemble import EnsembleSettings
    from ewa.config import validate

    config = validate({}, partial=True)
    ev = config["evaluate"]
    return EnsembleSettings(**{"budgets": (ev["budget"],), "windows": tuple(ev["windows"]),
                               "dev_fraction": ev["dev_fraction"], "seed": config["seed"],
                               "bootstrap": ev["bootstrap"], "ci": ev["ci"], "cluster_by": ev["cluster_by"],
                               **given})


# --- pico models -----------------------------------------------------------------------------------

# model.tiny settings (ewa.init.tiny.build_tiny_model) small enough to build and SFT in seconds.
PICO = {"vocab_size": 600, "hidden_size": 32, "num_layers": 2, "num_heads": 2, "num_kv_heads": 1,
        "intermediate_size": 64, "max_position_embeddings": 512}
# head_dim 32 (hidden 32, one head): the smallest vLLM's CPU attention supports.
PICO_ONE_HEAD = {"hidden_size": 32, "num_layers": 2, "num_heads": 1, "num_kv_heads": 1, "intermediate_size": 64,
                 "max_position_embeddings": 1024}
# Twice the usual width: hidden 32 cannot memorise a program in a few seconds of SFT, and the GRPO
# test needs an init that writes code for the sandbox to judge.
PICO_WIDE = {"vocab_size": 500, "hidden_size": 64, "num_layers": 2, "num_heads": 4, "num_kv_heads": 2,
             "intermediate_size": 128, "max_position_embeddings": 512}


# --- the environment -------------------------------------------------------------------------------

def bwrap_usable() -> bool:
    from ewa.sandbox import default_backend

    return default_backend(sandbox_settings()) == "bwrap"


requires_bwrap = pytest.mark.skipif(not bwrap_usable(), reason="bubblewrap is not usable here")


def docker_engine() -> bool:
    return shutil.which("docker") is not None and subprocess.run(
        ["docker", "info"], capture_output=True).returncode == 0


def docker_image_ready(image: str = "ewa-sandbox:latest") -> bool:
    return shutil.which("docker") is not None and subprocess.run(
        ["docker", "image", "inspect", image], capture_output=True).returncode == 0
