"""What the plan says about one rule (RulePlan), what every rule's plan is computed from (Inputs), and
the wording shared by their refusals and notes. GB are 1e9 bytes."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ewa.errors import UserError
from ewa.plan.memory import GB, MAX_MEMORY_SHARE
from ewa.plan.model import BF16, Architecture
from ewa.plan.profile import Profile


@dataclass
class RulePlan:
    rule: str
    jobs: int
    gpus: int  # per job
    gpu_mem_gb: float | None  # what the profile gives per GPU
    memory_gb: dict[str, float] = field(default_factory=dict)  # per GPU, by term
    peak_gb: float | None = None  # per GPU
    limit_gb: float | None = None  # the most peak_gb may be: --max-memory-share of gpu_mem_gb
    hours: float | None = None  # per job (the longest job)
    gpu_hours: float = 0.0  # all jobs
    cpu_hours: float = 0.0  # sandbox CPU, all jobs
    program_runs: int = 0  # sandbox runs, all jobs
    disk_gb: float = 0.0  # written by all its jobs (merge.temp deletes merges later: see disk())
    work_disk_gb: float = 0.0  # held only while the jobs run (trainer checkpoints with optimizer state)
    io_gb: dict[str, float] = field(default_factory=dict)  # GB read and written by all its jobs (merge)
    details: list[str] = field(default_factory=list)
    refusal: str | None = None  # why it cannot run on the profile's GPUs (one line)


@dataclass(frozen=True)
class Inputs:
    config: dict
    arch: Architecture
    profile: Profile
    prompt_tokens: int
    benchmarks: list  # workload.Benchmark
    train_tests: float  # hidden tests per training problem
    alphas_at_once: int
    max_memory_share: float = MAX_MEMORY_SHARE  # of each GPU's memory a planned peak may take

    def limit(self, rule: str) -> float:
        """Bytes per GPU a job of `rule` may peak at: the share of what the profile gives."""
        return self.max_memory_share * (self.profile.of(rule).gpu_mem_gb or 0.0) * GB


def gb(x: float) -> float:
    return round(x / GB, 1)


def weight_width(config: dict) -> int:
    """Bytes per parameter of trained checkpoints and their merges: what the trainer saves. DeepSpeed in bf16
    saves its bf16 copy (zero3_save_16bit_model); every other path saves the fp32 weights it updated."""
    from ewa.plan.memory import read_sharding

    s = config["grpo"]
    deepspeed = bool(s["accelerate_config"]) and read_sharding(s["accelerate_config"]).engine == "deepspeed"
    return BF16 if s["bf16"] and deepspeed else 4


def check_heads(arch: Architecture, tensor_parallel: int, key: str) -> None:
    """vLLM splits attention heads evenly over a tensor-parallel group, or refuses to start."""
    if arch.heads % tensor_parallel:
        raise UserError(f"{key}: {tensor_parallel} does not divide the model's {arch.heads} attention heads "
                        f"(vLLM needs it to)")


def vllm_refusal(rule: str, need: float, share: float, mem: float, knob: str) -> str:
    return (f"plan: rule {rule} needs {gb(need)} GB per GPU for vLLM (weights and one full-length sequence), "
            f"its share is {gb(share)} GB of the {mem:g} GB the profile gives ({knob})")


def memory_refusal(rule: str, peak: float, share: float, mem: float, largest: str, fix: str) -> str:
    """One line: what the job needs against the share of the profile's GPU memory it may take, its largest
    term, and the change that makes it fit."""
    return (f"plan: rule {rule} needs {gb(peak)} GB per GPU, profile gives {mem:g} GB of which a job may plan "
            f"{share:g} = {gb(share * mem * GB)} GB (--max-memory-share) (largest: {largest}; {fix})")


def attempts_note(hours: float, at_risk: float, runtime_h: float | None, retries: int) -> str:
    """How many submissions a job needs under the profile's time limit, against the retries it gets."""
    if not runtime_h:
        return ""
    if runtime_h <= at_risk:
        return f"; the time limit ({runtime_h:g} h) is shorter than that: the job never finishes"
    attempts = 1 if hours <= runtime_h else 1 + math.ceil((hours - runtime_h) / (runtime_h - at_risk))
    verdict = "enough" if attempts <= retries + 1 else "NOT enough: raise retries or runtime"
    return f"; time limit {runtime_h:g} h: {attempts} submission(s), retries {retries} allow {retries + 1} ({verdict})"
