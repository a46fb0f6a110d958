"""The machine profiles plan the right DAG: dry runs of the paper configs through profiles/slurm and of
the miniature through profiles/local, with job counts computed from each config, and GPU requests
that match what the config will use."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from helpers import BIN, ROOT

from ewa.alphas import alpha_tag
from ewa.config import load

SNAKEMAKE = BIN / "snakemake"
PAPER = ["paper-7b", "paper-32b"]
# The laptop profile (profiles/local once renamed: see test_slurm_profile_resources_reach_the_jobs).
LOCAL_PROFILE = next(p for p in (ROOT / "profiles" / "local", ROOT / "profiles" / "default") if p.is_dir())

pytestmark = pytest.mark.timeout(300)


def dry_run(tmp_path: Path, *args) -> str:
    """`snakemake -n` in an empty directory (no results/ from other runs); stdout and stderr."""
    r = subprocess.run([str(SNAKEMAKE), "-n", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(tmp_path),
                        *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-4000:]
    return r.stdout + r.stderr


def job_counts(out: str) -> dict[str, int]:
    table = out.split("Job stats:")[1].split("total")[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


def job_resources(out: str, rule: str) -> list[dict[str, str]]:
    """The `resources:` of every planned job of `rule`, as printed by the dry run."""
    found = []
    for block in re.split(r"^\s*(?:local)?rule ", out, flags=re.M)[1:]:
        if block.startswith(f"{rule}:"):
            line = re.search(r"^\s*resources: (.*)$", block, re.M)[1]
            found.append(dict(kv.split("=", 1) for kv in line.split(", ")))
    return found


def expected_counts(config: dict, partitions: int = 1) -> dict[str, int]:
    benchmarks, settings = len(config["benchmarks"]), len(config["sample"]["settings"])
    tags = {alpha_tag(a) for a in config["merge"]["alphas"]}
    alphas = len(tags)
    counts = {"preflight": partitions,  # one per partition the first jobs run on (rules/preflight.smk)
              "prepare": 1 + benchmarks,  # train_data and every benchmark
              "init": 1,
              "train": 2,  # only the merge endpoints are trained
              "merge": alphas, "sample": alphas * benchmarks * settings,
              "evaluate": alphas * benchmarks * settings, "frontier": benchmarks * settings,
              "approaches": benchmarks * settings, "all": 1}
    if {"+0.00", "+1.00"} <= tags:  # the claims compare the trained endpoints
        counts["claims"] = benchmarks * settings
    return counts


def staged(name: str, tmp_path: Path) -> Path:
    """configs/NAME.yaml with its model and data staged (empty) under tmp_path, as a user stages them
    before planning: the workflow refuses to plan a run whose inputs are not there."""
    config = yaml.safe_load((ROOT / "configs" / f"{name}.yaml").read_text())
    stage = tmp_path / "staged"
    (stage / "model").mkdir(parents=True)
    config["model"]["init"] = str(stage / "model")
    for dataset in [config["train_data"], *config["benchmarks"].values()]:
        if "input" in dataset:
            dataset["input"] = str(stage / Path(dataset["input"]).name)
            Path(dataset["input"]).touch()
    path = stage / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def slurm_profile() -> dict:
    return yaml.safe_load((ROOT / "profiles" / "slurm" / "config.yaml").read_text())


@pytest.mark.parametrize("name", PAPER)
def test_paper_config_dry_run_through_slurm_profile_lists_the_full_dag(name, tmp_path):
    out = dry_run(tmp_path, "--profile", ROOT / "profiles" / "slurm", "--configfile", staged(name, tmp_path))
    counts, expected = job_counts(out), expected_counts(load(ROOT / "configs" / f"{name}.yaml"), partitions=2)
    # the profile merges the grid in chunks of alphas_per_job, one rule per chunk (rules/merge.smk)
    per_job = slurm_profile()["set-resources"]["merge"]["alphas_per_job"]
    chunks = -(-expected.pop("merge") // per_job)
    assert {rule: counts.get(rule) for rule in expected} == expected
    assert {rule: n for rule, n in counts.items() if rule.startswith("merge")} == \
        {f"merge_chunk{k}": 1 for k in range(1, chunks + 1)}
    assert "Group job judge" in out  # small jobs share allocations


def shell_commands(out: str, rule_pattern: str) -> list[str]:
    """The shell command of every planned job whose rule matches `rule_pattern` (a dry run with -p)."""
    found = []
    for block in re.split(r"^\s*(?:local)?rule ", out, flags=re.M)[1:]:
        if re.match(rf"(?:{rule_pattern}):", block):
            found.append(re.search(r"^Shell command: (.*)$", block, re.M)[1])
    return found


def merge_jobs(out: str) -> list[list[str]]:
    """The outputs of every planned merge job (per-alpha `merge` or `merge_chunkN`), in the order printed."""
    return [re.search(r"^\s*output: (.*)$", block, re.M)[1].split(", ")
            for block in re.split(r"^\s*(?:local)?rule ", out, flags=re.M)[1:] if re.match(r"merge(_chunk\d+)?:", block)]


def profile_copy(tmp_path: Path, edit) -> Path:
    """profiles/slurm with its config.yaml passed through `edit`, under tmp_path."""
    profile = slurm_profile()
    edit(profile)
    directory = tmp_path / "profile"
    directory.mkdir()
    (directory / "config.yaml").write_text(yaml.safe_dump(profile))
    return directory


def test_a_chunked_profile_merges_each_chunk_of_the_grid_in_one_job(tmp_path):
    """alphas_per_job 6 (profiles/slurm): the 17 alphas of paper-32b in 3 jobs that write 6, 6 and 5 alphas of
    the sorted grid, each from one read of the checkpoints; every alpha stays its own output, so sampling
    still asks for results/seed0/merged/alpha<tag>. Without it, 17 jobs of one alpha each."""
    config = staged("paper-32b", tmp_path)
    tags = sorted((alpha_tag(a) for a in load(config)["merge"]["alphas"]), key=float)
    out = dry_run(tmp_path / "chunked", "-p", "--profile", ROOT / "profiles" / "slurm", "--configfile", config)
    jobs = sorted(merge_jobs(out), key=lambda j: float(j[0].rsplit("alpha", 1)[1]))  # dry runs print in any order
    assert [len(j) for j in jobs] == [6, 6, 5]
    assert [o for j in jobs for o in j] == [f"results/seed0/merged/alpha{t}" for t in tags]  # the sorted grid
    commands = shell_commands(out, r"merge_chunk\d+")
    assert len(commands) == 3 and all(c.count("--alphas ") == 1 and "--out-pattern" in c for c in commands)
    chunks = [[alpha_tag(float(a)) for a in c.split("--alphas ")[1].split(" --out-pattern")[0].split()]
              for c in commands]
    assert sorted(chunks, key=lambda c: float(c[0])) == [tags[:6], tags[6:12], tags[12:]]
    assert all("'results/seed0/merged/alpha{alpha}'" in c for c in commands)
    chunk = job_resources(out, "merge_chunk1")[0]  # the profile's merge resources reach the chunk rules
    merge = slurm_profile()["set-resources"]["merge"]
    assert {k: chunk[k] for k in ("gpu", "slurm_partition", "mem_mb")} == {k: str(merge[k]) for k in
                                                                           ("gpu", "slurm_partition", "mem_mb")}
    sample_inputs = re.findall(r"^\s*input: (results/seed0/merged/alpha\S+),", out, re.M)
    assert len(sample_inputs) == len(tags) * 3 and set(sample_inputs) == {o for j in jobs for o in j}

    def per_alpha(profile):
        del profile["set-resources"]["merge"]["alphas_per_job"]
    out = dry_run(tmp_path / "per-alpha", "--profile", profile_copy(tmp_path, per_alpha), "--configfile", config)
    assert [len(j) for j in merge_jobs(out)] == [1] * len(tags) and "Group job merge" in out


def test_gpu_jobs_run_with_expandable_segments_and_cpu_jobs_as_they_are(tmp_path):
    out = dry_run(tmp_path, "-p", "--profile", ROOT / "profiles" / "slurm", "--configfile",
                  staged("paper-7b", tmp_path))
    prefix = 'PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True" ewa '
    gpu = shell_commands(out, r"train|sample|merge|merge_chunk\d+")
    assert len(gpu) == 2 + 51 + 3 and all(c.startswith(prefix) for c in gpu)
    cpu = shell_commands(out, r"prepare|tiers|init|calibrate|evaluate|frontier|claims|approaches")
    assert cpu and not any("PYTORCH_CUDA_ALLOC_CONF" in c for c in cpu)
    # without a profile setting, the variable is left as the job inherits it (the miniature, a laptop)
    out = dry_run(tmp_path / "local", "-p", "--profile", LOCAL_PROFILE, "--configfile", ROOT / "config.yaml")
    assert all(c.startswith('PYTORCH_CUDA_ALLOC_CONF="${PYTORCH_CUDA_ALLOC_CONF:-}" ewa ')
               for c in shell_commands(out, r"train|sample|merge"))


@pytest.mark.parametrize("name", PAPER)
def test_slurm_gpu_requests_match_what_the_paper_config_uses(name):
    config, res = load(ROOT / "configs" / f"{name}.yaml"), slurm_profile()["set-resources"]
    # `ewa train --gpus N` launches one accelerate process per GPU the profile gives the job
    from ewa.train.launch import accelerate_config_path, launch_command
    command = launch_command(["--out", "x"], config["grpo"], int(res["train"]["gpu"]))
    assert command[command.index("--num_processes") + 1] == str(res["train"]["gpu"]) and int(res["train"]["gpu"]) > 1
    sample = config["sample"]
    assert res["sample"]["gpu"] == sample["tensor_parallel_size"] * sample["data_parallel_size"]
    assert config["grpo"]["use_vllm"] and config["sample"]["backend"] == "vllm"
    assert accelerate_config_path(config["grpo"]["accelerate_config"]).is_file()


@pytest.mark.parametrize("name", PAPER)
def test_colocated_vllm_groups_divide_the_training_gpus(name):
    config, res = load(ROOT / "configs" / f"{name}.yaml"), slurm_profile()["set-resources"]
    assert int(res["train"]["gpu"]) % config["grpo"]["vllm_tensor_parallel_size"] == 0  # TRL needs whole groups
    assert config["grpo"]["per_device_train_batch_size"]  # never the whole step's batch at once (ewa plan)


def test_slurm_jobs_survive_site_time_limits(tmp_path):
    """Jobs ask for no more than a 24-48 h partition allows and are resubmitted when they reach it; the
    trainer's checkpoints live beside the rule's output, so Snakemake does not delete them with the job."""
    from ewa.train.grpo import work_dir_for

    profile = slurm_profile()
    assert profile["retries"] >= 3
    for rule in ("train", "sample"):
        assert profile["set-resources"][rule]["runtime"] <= 24 * 60, rule
    for rule, res in profile["set-resources"].items():  # ewa plan checks every GPU job against it
        assert not res.get("gpu") or res["gpu_mem_gb"] == 80, rule
    out = dry_run(tmp_path, "--profile", ROOT / "profiles" / "slurm", "--configfile", staged("paper-7b", tmp_path))
    outputs = re.findall(r"^\s*output: (results/seed0/checkpoints/\S+)$", out, re.M)
    assert outputs and all(work_dir_for(Path(o)).parent == Path(o).parent for o in outputs)
    assert all(not str(work_dir_for(Path(o))).startswith(o + "/") for o in outputs)


def test_slurm_profile_resources_reach_the_jobs(tmp_path):
    # A profiles/default directory is Snakemake's implicit *workflow* profile, loaded on top of any
    # --profile and overriding it key by key (cores, resources, default-resources): a laptop's
    # `resources: mem_mb` would cap every cluster job. The laptop profile must live elsewhere.
    out = dry_run(tmp_path, "--profile", ROOT / "profiles" / "slurm", "--configfile", staged("paper-7b", tmp_path))
    profile = slurm_profile()
    sample, evaluate = job_resources(out, "sample")[0], job_resources(out, "evaluate")[0]
    assert sample["gpu"] == str(profile["set-resources"]["sample"]["gpu"])
    assert sample["mem_mb"] == str(profile["set-resources"]["sample"]["mem_mb"])
    assert evaluate["slurm_partition"] == profile["default-resources"]["slurm_partition"]
    # data jobs too: the rules' defaults are the miniature's (see below), not a cluster's
    for rule in ("prepare", "tiers"):
        wanted = {k: str(profile["set-resources"][rule][k]) for k in ("mem_mb", "runtime")}
        jobs = job_resources(out, rule)
        assert jobs and all({k: r[k] for k in wanted} == wanted for r in jobs), (rule, jobs)


def test_preflight_runs_first_on_each_partition_of_the_profile(tmp_path):
    """profiles/slurm: one preflight on the CPU partition (before prepare, calibrate and init) and one on
    the GPU partition with one GPU of the kind train asks for (before train); the miniature: one, local."""
    out = dry_run(tmp_path, "-p", "--profile", ROOT / "profiles" / "slurm", "--configfile", staged("paper-32b", tmp_path))
    profile = slurm_profile()
    cpu, gpu = profile["default-resources"]["slurm_partition"], profile["set-resources"]["train"]["slurm_partition"]
    jobs = {r["slurm_partition"]: r for r in job_resources(out, "preflight")}
    assert set(jobs) == {cpu, gpu} and "gpu" not in jobs[cpu]
    assert (jobs[gpu]["gpu"], jobs[gpu]["gpu_model"]) == ("1", profile["set-resources"]["train"]["gpu_model"])
    for rule, partition in (("prepare", cpu), ("calibrate", cpu), ("init", cpu), ("train", gpu)):
        inputs = re.findall(rf"^\s*rule {rule}:\n\s*input: ([^\n]*)", out, re.M)
        assert inputs and all(f"results/preflight/{partition}.json" in i for i in inputs), (rule, inputs)
    commands = re.findall(r"^Shell command: (ewa preflight .*)$", out, re.M)
    assert sorted(re.search(r"--gpus (\d+)", c)[1] for c in commands) == ["0", "1"]
    assert all("--configfile staged/paper-32b.yaml" in c for c in commands)
    local = dry_run(tmp_path / "local", "--profile", LOCAL_PROFILE, "--configfile", ROOT / "config.yaml")
    assert [r.get("slurm_partition") for r in job_resources(local, "preflight")] == [None]
    assert "results/preflight/local.json" in local


def test_default_profile_dry_run_plans_the_miniature_without_gpus(tmp_path):
    out = dry_run(tmp_path, "--profile", LOCAL_PROFILE, "--configfile", ROOT / "config.yaml")
    config = load(ROOT / "config.yaml")
    counts, expected = job_counts(out), expected_counts(config)
    assert {rule: counts.get(rule) for rule in expected} == expected
    for rule in ("train", "merge", "sample"):
        assert all("gpu" not in r and "gres" not in r for r in job_resources(out, rule)), rule
    # the data rules' own defaults: streaming keeps them small (the miniature verifies no solutions)
    assert {(r["mem_mb"], r["runtime"]) for r in job_resources(out, "prepare")} == {("2000", "60")}
    assert {(r["mem_mb"], r["runtime"]) for r in job_resources(out, "tiers")} == {("1000", "30")}
    assert all(f"alpha{alpha_tag(a)}" in out for a in config["merge"]["alphas"])
