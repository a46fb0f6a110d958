"""The plan of each GPU-relevant rule (init, train, merge, sample, evaluate) and of the disk the run needs.
Every figure is per job unless named a total; GB are 1e9 bytes."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ewa.errors import UserError
from ewa.plan import memory, speed, workload
from ewa.plan.memory import CUDA_RUNTIME_GB, GB
from ewa.plan.model import BF16, Architecture
from ewa.plan.profile import Profile

# vLLM's default gpu_memory_utilization: ewa's sample backend leaves it, so each engine takes this share.
VLLM_SAMPLE_UTILIZATION = 0.9


@dataclass
class RulePlan:
    rule: str
    jobs: int
    gpus: int  # per job
    gpu_mem_gb: float | None  # what the profile gives per GPU
    memory_gb: dict[str, float] = field(default_factory=dict)  # per GPU, by term
    peak_gb: float | None = None  # per GPU
    hours: float | None = None  # per job (the longest job)
    gpu_hours: float = 0.0  # all jobs
    cpu_hours: float = 0.0  # sandbox CPU, all jobs
    program_runs: int = 0  # sandbox runs, all jobs
    disk_gb: float = 0.0  # kept after the rule's jobs, all jobs
    work_disk_gb: float = 0.0  # held only while the jobs run (trainer checkpoints with optimizer state)
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


def gb(x: float) -> float:
    return round(x / GB, 1)


def weight_width(config: dict) -> int:
    """Bytes per parameter of trained checkpoints and their merges: GRPO in bf16 saves bf16, else fp32."""
    return BF16 if config["grpo"]["bf16"] else 4


def trained_regimes(config: dict) -> list[dict]:
    """Only the merge endpoints are trained (rules/merge.smk asks for their checkpoints)."""
    names = dict.fromkeys([config["merge"]["low"], config["merge"]["high"]])
    return [r for r in config["regimes"] if r["name"] in names]


def init_plan(i: Inputs) -> RulePlan:
    res = i.profile.of("init")
    size = i.arch.weight_bytes(4 if i.config["model"]["init"] == "tiny" else BF16)  # tiny: fp32; HF: as published
    plan = RulePlan("init", 1, res.gpus, res.gpu_mem_gb, disk_gb=gb(size), hours=round(size / (speed.FS_GB_S * GB) / 3600, 2))
    if i.config["model"]["init"] != "tiny":
        plan.details.append(f"hard-links {i.config['model']['init']} (no new bytes on the same filesystem; "
                            f"a copy otherwise)")
        if i.config["model"]["sft"]["steps"]:
            plan.details.append("model.sft.steps > 0 on a real model is not costed here")
    return plan


def check_heads(arch: Architecture, tensor_parallel: int, key: str) -> None:
    """vLLM splits attention heads evenly over a tensor-parallel group, or refuses to start."""
    if arch.heads % tensor_parallel:
        raise UserError(f"{key}: {tensor_parallel} does not divide the model's {arch.heads} attention heads "
                        f"(vLLM needs it to)")


def vllm_refusal(rule: str, need: float, share: float, mem: float, knob: str) -> str:
    return (f"plan: rule {rule} needs {gb(need)} GB per GPU for vLLM (weights and one full-length sequence), "
            f"its share is {gb(share)} GB of the {mem:g} GB the profile gives ({knob})")


def memory_refusal(rule: str, peak: float, mem: float, terms: dict, advice: dict) -> str:
    biggest = max(terms, key=terms.get)
    return (f"plan: rule {rule} needs {peak:.1f} GB per GPU, profile gives {mem:g} GB "
            f"(largest: {biggest} {terms[biggest]:.1f} GB; {advice.get(biggest, 'add GPUs')})")


TRAIN_ADVICE = {
    "activations": "lower grpo.per_device_train_batch_size",
    "log-prob head": "lower grpo.per_device_train_batch_size",
    "optimizer": "offload it (grpo.accelerate_config: zero3_offload) or add GPUs",
    "weights": "shard them (zero3/fsdp) or add GPUs", "gradients": "shard them (zero3/fsdp) or add GPUs",
    "reference": "shard it (zero3/fsdp) or set grpo.beta: 0",
    "vLLM": "lower grpo.vllm_gpu_memory_utilization or set grpo.trl.vllm_enable_sleep_mode: true",
}


def train_plan(i: Inputs) -> RulePlan:
    from ewa.train.grpo import batch_shape

    s, arch, res = i.config["grpo"], i.arch, i.profile.of("train")
    regimes = trained_regimes(i.config)
    processes = res.gpus if (res.gpus and s["accelerate_config"]) else 1
    sharding = memory.read_sharding(s["accelerate_config"]) if res.gpus else memory.Sharding("none", 0, False, False)
    micro, accumulation = batch_shape(s, processes)
    completions = s["prompts_per_step"] * s["num_generations"]
    completion, prompt = s["max_completion_length"], i.prompt_tokens
    sequence = prompt + completion
    plan = RulePlan("train", len(regimes), res.gpus, res.gpu_mem_gb)
    plan.details.append(f"{len(regimes)} regimes ({', '.join(r['name'] for r in regimes)}) x {max(res.gpus, 1)} "
                        f"{'GPUs' if res.gpus else 'CPU process'}; {sharding.describe()} ({sharding.source}); "
                        f"micro-batch {micro} x {sequence:,} tokens ({prompt:,} prompt + {completion:,} completion), "
                        f"accumulation {accumulation} = {completions} completions per step")

    states = memory.model_states(arch, sharding, processes, s["bf16"], reference=s["beta"] > 0)
    terms = {"weights": states["weights"], "gradients": states["gradients"], "optimizer": states["optimizer"],
             "reference": states["reference"],
             "ZeRO-3 gather": min(arch.parameters, memory.ZERO3_LIVE_PARAMETERS) * BF16 if sharding.stage >= 3 else 0,
             "activations": memory.activations(arch, micro, sequence, s["gradient_checkpointing"], s["bf16"]),
             "log-prob head": memory.logprob_head(arch, micro, completion, gathered=sharding.stage >= 3)}
    if res.gpus:
        terms["CUDA"] = CUDA_RUNTIME_GB * GB
    tp, sleep = s["vllm_tensor_parallel_size"], bool(s["trl"].get("vllm_enable_sleep_mode"))
    share = s["vllm_gpu_memory_utilization"] * res.gpu_mem_gb * GB if (s["use_vllm"] and res.gpus) else 0.0
    if share:
        if processes % tp:
            raise UserError(f"grpo.vllm_tensor_parallel_size: {tp} does not divide the {processes} training "
                            f"processes (TRL's colocated vLLM needs whole groups)")
        terms["vLLM"] = share
    dynamic = terms["activations"] + terms["log-prob head"]
    static = sum(terms.values()) - dynamic - share
    peak = static + (max(share, dynamic) if sleep else share + dynamic)  # sleep: vLLM frees its share to train
    plan.memory_gb = {k: gb(v) for k, v in terms.items() if v}
    if res.gpus:
        plan.peak_gb = gb(peak)
        plan.details.append("per GPU: " + " + ".join(f"{k} {v}" for k, v in plan.memory_gb.items())
                            + f" = {plan.peak_gb} GB" + (" (vLLM sleeps while training)" if sleep else ""))
        if peak > res.gpu_mem_gb * GB:
            plan.refusal = memory_refusal("train", plan.peak_gb, res.gpu_mem_gb, plan.memory_gb, TRAIN_ADVICE)
        if states["host"]:
            plan.details.append(f"host: {gb(states['host'])} GB of offloaded optimizer state and gradients per node"
                                + (f" (profile: {res.mem_gb:g} GB)" if res.mem_gb else ""))
            if res.mem_gb and states["host"] > res.mem_gb * GB and not plan.refusal:
                plan.refusal = (f"plan: rule train needs {gb(states['host'])} GB of host memory for the offloaded "
                                f"optimizer, profile gives {res.mem_gb:g} GB (set-resources.train.mem_mb)")

    max_len = s["trl"].get("vllm_max_model_length") or arch.max_positions
    if share:
        check_heads(arch, tp, "grpo.vllm_tensor_parallel_size")
        need = memory.vllm_needs(arch, tp, max_len)
        if need > share and not plan.refusal:
            plan.refusal = vllm_refusal("train", need, share, res.gpu_mem_gb,
                                        "raise grpo.vllm_tensor_parallel_size or grpo.vllm_gpu_memory_utilization")

    # reward: every completion judged on its regime's share of the tests (no early stop: an upper bound)
    steps = s["max_steps"]
    runs = steps * completions * len(regimes)
    test_runs = sum(steps * completions * i.train_tests * (r.get("fraction") or 1.0) for r in regimes)
    plan.program_runs = int(runs)
    plan.cpu_hours = round(test_runs * workload.CPU_S_PER_TEST / 3600, 1)
    width = weight_width(i.config)
    checkpoint = arch.parameters * (width + (12 if s["bf16"] else 8))  # model + optimizer state
    plan.disk_gb = gb(len(regimes) * arch.weight_bytes(width))
    # save_total_limit checkpoints per regime, one more while the trainer writes a new one before rotating
    plan.work_disk_gb = gb(len(regimes) * (s["save_total_limit"] + 1) * checkpoint)
    if not res.gpus:
        plan.details.append("no GPUs in the profile: CPU training is not costed in hours")
        return plan
    if share and memory.kv_room(arch, tp, share) < sequence * arch.kv_bytes_per_token(tp):
        plan.details.append("vLLM has no room for one sequence's KV cache: not costed in hours")
        return plan
    spec = speed.gpu_spec(res.gpu_model)
    engines = processes // tp if share else processes
    if share:
        decode = speed.decode(arch, math.ceil(completions / engines), prompt, completion, tp,
                              memory.kv_room(arch, tp, share), spec, max_num_seqs=micro * accumulation * tp)
        plan.details.append(f"vLLM colocated: TP {tp}, {engines} engines; {s['vllm_gpu_memory_utilization']:g} x "
                            f"{res.gpu_mem_gb:g} GB = {gb(share)} GB holds {gb(arch.weight_bytes() / tp)} GB of weights "
                            f"and {decode.kv_tokens:,} tokens of KV cache ({decode.batch} sequences at once)")
    else:  # transformers generate: costed like vLLM with the memory left over (optimistic)
        decode = speed.decode(arch, math.ceil(completions / processes), prompt, completion, 1,
                              max(0.0, res.gpu_mem_gb * GB - peak), spec)
        plan.details.append("generation without vLLM (transformers generate): costed as vLLM, an underestimate")
    old_logps = s["num_iterations"] > 1 or (s["use_vllm"] and s["trl"].get("vllm_importance_sampling_correction", True))
    passes = s["num_iterations"] * (6 + 2 * s["gradient_checkpointing"]) + 2 * (s["beta"] > 0) + 2 * old_logps
    training = speed.compute_seconds(arch, completions * sequence, passes, processes, spec)
    offload = speed.offload_seconds(arch, processes) if sharding.offload_optimizer else 0.0
    reward = completions * i.train_tests * workload.CPU_S_PER_TEST / max(1, res.cpus)
    step = decode.seconds + training + offload + reward
    saves = steps // s["save_steps"]
    save_s = checkpoint / (speed.FS_GB_S * GB)
    plan.hours = round(speed.STARTUP_H + (steps * step + saves * save_s) / 3600, 1)
    plan.gpu_hours = round(plan.hours * res.gpus * len(regimes))
    plan.details.append(f"per step: generation {decode.seconds:.0f} s + training {training:.0f} s ({passes} FLOPs per "
                        f"parameter-token)" + (f" + CPU Adam {offload:.0f} s" if offload else "")
                        + f" + reward {reward:.0f} s = {step / 60:.1f} min; {steps} steps, {saves} checkpoints of "
                        f"{gb(checkpoint)} GB = {plan.hours} h per regime")
    at_risk = speed.STARTUP_H + s["save_steps"] * step / 3600 + save_s / 3600
    plan.details.append(f"a requeue loses at most {at_risk:.1f} h (startup + {s['save_steps']} steps since the last "
                        f"checkpoint)" + attempts_note(plan.hours, at_risk, res.runtime_h, i.profile.retries))
    return plan


def attempts_note(hours: float, at_risk: float, runtime_h: float | None, retries: int) -> str:
    """How many submissions a job needs under the profile's time limit, against the retries it gets."""
    if not runtime_h:
        return ""
    if runtime_h <= at_risk:
        return f"; the time limit ({runtime_h:g} h) is shorter than that: the job never finishes"
    attempts = 1 if hours <= runtime_h else 1 + math.ceil((hours - runtime_h) / (runtime_h - at_risk))
    verdict = "enough" if attempts <= retries + 1 else "NOT enough: raise retries or runtime"
    return f"; time limit {runtime_h:g} h: {attempts} submission(s), retries {retries} allow {retries + 1} ({verdict})"


def merge_plan(i: Inputs) -> RulePlan:
    from ewa.merge.stream import GPU_BLOCKS

    res = i.profile.of("merge")
    alphas = len(i.config["merge"]["alphas"])
    size = i.arch.weight_bytes(weight_width(i.config))
    plan = RulePlan("merge", alphas, res.gpus, res.gpu_mem_gb, disk_gb=gb(alphas * size))
    if res.gpus:
        block, buffers = GPU_BLOCKS  # the write ring, plus fp32 copies of one block of each input and the blend
        terms = {"ring buffers": block * buffers, "fp32 block": 3 * block * 2, "CUDA": CUDA_RUNTIME_GB * GB}
        plan.memory_gb = {k: gb(v) for k, v in terms.items()}
        plan.peak_gb = gb(sum(terms.values()))
    plan.hours = round(3 * size / (speed.FS_GB_S * GB) / 3600, 2)  # read both endpoints, write the blend
    plan.gpu_hours = round(plan.hours * res.gpus * alphas, 1)
    plan.details.append(f"{alphas} alphas, {gb(size)} GB each: read {gb(2 * size)} GB, write {gb(size)} GB per alpha "
                        f"at {speed.FS_GB_S:g} GB/s")
    return plan


def sample_plan(i: Inputs) -> RulePlan:
    c, arch, res = i.config["sample"], i.arch, i.profile.of("sample")
    alphas, settings = len(i.config["merge"]["alphas"]), c["settings"]
    jobs = alphas * len(i.benchmarks) * len(settings)
    plan = RulePlan("sample", jobs, res.gpus, res.gpu_mem_gb)
    backend = c["backend"] if c["backend"] != "auto" else ("vllm" if res.gpus else "hf")
    tp = c["tensor_parallel_size"]
    share = VLLM_SAMPLE_UTILIZATION * res.gpu_mem_gb * GB if (res.gpus and backend == "vllm") else 0.0
    if share:
        check_heads(arch, tp, "sample.tensor_parallel_size")
        need = memory.vllm_needs(arch, tp, arch.max_positions)
        plan.memory_gb = {"vLLM": gb(share)}
        plan.peak_gb = gb(share)
        plan.details.append(f"vLLM, TP {tp} on {res.gpus} GPUs: each GPU gives it {VLLM_SAMPLE_UTILIZATION:g} x "
                            f"{res.gpu_mem_gb:g} GB, {gb(arch.weight_bytes() / tp)} GB of weights, the rest KV cache")
        if need > share:
            plan.refusal = vllm_refusal("sample", need, share, res.gpu_mem_gb,
                                        "raise sample.tensor_parallel_size and the profile's sample gpu")
        if tp != res.gpus:
            plan.details.append(f"sample.tensor_parallel_size {tp} differs from the {res.gpus} GPUs the profile gives")
    elif res.gpus:
        plan.details.append(f"backend {backend} on GPU: memory not costed")
    spec = speed.gpu_spec(res.gpu_model)
    longest, gpu_hours, tokens, runs, disk = 0.0, 0.0, 0, 0, 0.0
    for bench in i.benchmarks:
        for setting in settings:
            samples = bench.problems * c["n"]
            new = c["max_new_tokens"] * workload.generation_calls(setting, c)
            tokens += samples * new * alphas
            runs += samples * workload.sampling_runs(setting, c) * alphas
            disk += samples * new * workload.SAMPLE_BYTES_PER_TOKEN * alphas
            if share:
                seconds = speed.decode(arch, samples, i.prompt_tokens, new, tp, memory.kv_room(arch, tp, share),
                                       spec).seconds
                hours = speed.STARTUP_H + seconds / 3600
                longest = max(longest, hours)
                gpu_hours += hours * res.gpus * alphas
    plan.program_runs, plan.disk_gb = int(runs), gb(disk)
    plan.cpu_hours = round(runs * workload.CPU_S_PER_TEST / 3600, 1)
    if share and not plan.refusal:
        plan.hours, plan.gpu_hours = round(longest, 1), round(gpu_hours)
        plan.details.append(f"{tokens / 1e9:.2f} G tokens generated in all (every sample to its token limit: "
                            f"an upper bound); a requeue resumes from the completed problems"
                            + attempts_note(plan.hours, speed.STARTUP_H, res.runtime_h, i.profile.retries))
    else:
        plan.details.append("no vLLM on GPUs: generation is not costed in hours")
    return plan


def evaluate_plan(i: Inputs) -> RulePlan:
    res = i.profile.of("evaluate")
    c = i.config["sample"]
    alphas, settings = len(i.config["merge"]["alphas"]), c["settings"]
    plan = RulePlan("evaluate", alphas * len(i.benchmarks) * len(settings), res.gpus, res.gpu_mem_gb)
    runs = sum(b.problems * c["n"] * b.tests for b in i.benchmarks) * len(settings) * alphas
    longest = max(b.problems * c["n"] * b.tests for b in i.benchmarks) * workload.CPU_S_PER_TEST / 3600
    plan.program_runs = int(runs)
    plan.cpu_hours = round(runs * workload.CPU_S_PER_TEST / 3600, 1)
    plan.hours = round(longest / max(1, res.cpus), 1)
    plan.disk_gb = gb(sum(b.problems for b in i.benchmarks) * c["n"] * len(settings) * alphas
                      * workload.EVAL_BYTES_PER_SAMPLE)
    plan.details.append(f"every sample on every hidden test on {res.cpus} workers (early stop and deduplication "
                        f"make it less); a requeue resumes from the judged problems"
                        + attempts_note(plan.hours, 0.0, res.runtime_h, i.profile.retries))
    return plan


def disk(i: Inputs, plans: dict[str, RulePlan]) -> dict:
    """GB the run keeps when done (total) and holds at its fullest (peak: while training, or while the
    merged alphas being sampled exist)."""
    temp = i.config["merge"]["temp"]
    size = gb(i.arch.weight_bytes(weight_width(i.config)))
    merged_all = plans["merge"].disk_gb
    at_once = min(i.alphas_at_once, len(i.config["merge"]["alphas"]))
    merged_peak = round(at_once * size, 1) if temp else merged_all
    kept = {"init": plans["init"].disk_gb, "checkpoints": plans["train"].disk_gb,
            "merged": 0.0 if temp else merged_all, "samples": plans["sample"].disk_gb,
            "evals": plans["evaluate"].disk_gb}
    work = plans["train"].work_disk_gb
    if i.config["grpo"]["keep_work_dir"]:
        kept["trainer checkpoints"] = work
    base = kept["init"] + kept["checkpoints"] + kept["samples"] + kept["evals"]
    # training ends before merging starts: trainer checkpoints and merges coexist only when kept
    both = work + merged_peak if i.config["grpo"]["keep_work_dir"] else max(work, merged_peak)
    return {"kept_gb": kept, "total_gb": round(sum(kept.values()), 1), "peak_gb": round(base + both, 1),
            "trainer_checkpoints_gb": work, "merged_all_gb": merged_all, "merged_peak_gb": merged_peak,
            "alphas_at_once": at_once if temp else len(i.config["merge"]["alphas"]), "merge_temp": temp}


def plan_rules(i: Inputs) -> dict[str, RulePlan]:
    return {p.rule: p for p in (init_plan(i), train_plan(i), merge_plan(i), sample_plan(i), evaluate_plan(i))}
