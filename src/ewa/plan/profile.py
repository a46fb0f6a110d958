"""What a Snakemake profile (its config.yaml) gives each rule: GPUs, memory per GPU, host memory,
CPUs, runtime, and how often a failed job is resubmitted. Without a profile every rule runs on the
CPU with no time limit, as plain `snakemake` would run it."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ewa.errors import UserError

# GB per GPU of a `gpu_model` (the GRES type) when the profile gives no `gpu_mem_gb` (NVIDIA datasheets;
# A100 is the 40 GB part: set gpu_mem_gb: 80 for the 80 GB one).
GPU_MEMORY_GB = {"h100": 80, "h200": 141, "a100": 40}
PLANNED_RULES = ("init", "train", "merge", "sample", "evaluate")


@dataclass(frozen=True)
class Resources:
    gpus: int = 0
    gpu_model: str | None = None
    gpu_mem_gb: float | None = None
    mem_gb: float | None = None  # host memory of the job (mem_mb)
    cpus: int = 1
    runtime_h: float | None = None  # the job's time limit (runtime, minutes)


@dataclass(frozen=True)
class Profile:
    path: str | None = None
    rules: dict[str, Resources] = field(default_factory=dict)
    retries: int = 0
    group_sizes: dict[str, int] = field(default_factory=dict)  # rule -> jobs per group job
    alphas_per_job: int = 1  # alphas one merge job writes from one read of the endpoints (rules/merge.smk)

    def of(self, rule: str) -> Resources:
        return self.rules.get(rule, Resources())


def gpu_count(resources: dict) -> int:
    """`gpu: N`, or a gres like gpu:h100:8 (the same reading as rules/common.smk's gpus())."""
    if resources.get("gpu"):
        return int(resources["gpu"])
    match = re.search(r"gpu(?::[\w.]+)?:(\d+)", str(resources.get("gres", "")))
    return int(match[1]) if match else 0


def rule_resources(rule: str, settings: dict, defaults: dict, threads: dict) -> Resources:
    merged = {**defaults, **settings}
    gpus = gpu_count(merged)
    model = merged.get("gpu_model")
    if model is None and (m := re.search(r"gpu:([A-Za-z][\w.]*):\d+", str(merged.get("gres", "")))):
        model = m[1]
    memory = merged.get("gpu_mem_gb")
    if gpus and memory is None:
        if model not in GPU_MEMORY_GB:
            raise UserError(f"profile: set-resources.{rule}: give gpu_mem_gb (GB per GPU) or a gpu_model "
                            f"among {', '.join(GPU_MEMORY_GB)}")
        memory = GPU_MEMORY_GB[model]
    return Resources(
        gpus=gpus, gpu_model=model, gpu_mem_gb=float(memory) if memory is not None else None,
        mem_gb=merged["mem_mb"] / 1000 if "mem_mb" in merged else None,
        cpus=int(merged.get("cpus_per_task") or threads.get(rule) or 1),
        runtime_h=merged["runtime"] / 60 if "runtime" in merged else None,
    )


def load_profile(directory: str | None) -> Profile:
    if directory is None:
        return Profile()
    path = Path(directory) / "config.yaml"
    if not path.is_file():
        raise UserError(f"--profile: {path} is missing (expected a Snakemake profile directory)")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise UserError(f"--profile: {path} is not valid YAML ({e.__class__.__name__})") from None
    defaults, threads = raw.get("default-resources") or {}, raw.get("set-threads") or {}
    per_rule = raw.get("set-resources") or {}
    rules = {rule: rule_resources(rule, per_rule.get(rule) or {}, defaults, threads)
             for rule in {*PLANNED_RULES, *per_rule}}
    groups, sizes = raw.get("groups") or {}, raw.get("group-components") or {}
    per_job = (per_rule.get("merge") or {}).get("alphas_per_job", 1)
    if not isinstance(per_job, int) or isinstance(per_job, bool) or per_job < 1:
        raise UserError(f"profile: set-resources.merge.alphas_per_job: expected a whole number >= 1, got {per_job!r}")
    return Profile(path=str(directory), rules=rules, retries=int(raw.get("retries") or 0),
                   group_sizes={rule: int(sizes.get(group, 1)) for rule, group in groups.items()},
                   alphas_per_job=per_job)
