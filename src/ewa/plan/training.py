"""The train rule's plan: memory per GPU of one GRPO step (model states as sharded, one micro-batch's
activations, TRL's log-prob head, the colocated vLLM), hours per regime, checkpoints and reward work."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ewa.errors import UserError
from ewa.plan import memory, speed, workload
from ewa.plan.memory import CUDA_RUNTIME_GB, GB
from ewa.plan.model import BF16
from ewa.plan.rule import (Inputs, RulePlan, attempts_note, check_heads, gb, memory_refusal, vllm_refusal,
                           weight_width)

TRAIN_ADVICE = {
    "activations": "lower grpo.per_device_train_batch_size",
    "log-prob head": "lower grpo.per_device_train_batch_size",
    "optimizer": "offload it (grpo.accelerate_config: zero3_offload) or add GPUs",
    "weights": "shard them (zero3/fsdp) or add GPUs", "gradients": "shard them (zero3/fsdp) or add GPUs",
    "reference": "shard it (zero3/fsdp) or set grpo.beta: 0",
    "vLLM": "lower grpo.vllm_gpu_memory_utilization or set grpo.trl.vllm_enable_sleep_mode: true",
}


def trained_regimes(config: dict) -> list[dict]:
    """Only the merge endpoints are trained (rules/merge.smk asks for their checkpoints)."""
    names = dict.fromkeys([config["merge"]["low"], config["merge"]["high"]])
    return [r for r in config["regimes"] if r["name"] in names]


@dataclass(frozen=True)
class Step:
    """How one GRPO step is laid out on the train job's GPUs."""
    processes: int  # training processes, one per GPU (1 without an accelerate config or GPUs)
    sharding: memory.Sharding
    micro: int  # completions per forward/backward per process
    accumulation: int
    completions: int  # per optimizer step (one generation batch)
    prompt: int
    completion: int
    vllm_share: float  # bytes per GPU the colocated vLLM takes (0: no vLLM)
    tensor_parallel: int
    sleep: bool  # TRL's vllm_enable_sleep_mode: vLLM frees its share while the trainer steps

    @property
    def sequence(self) -> int:
        return self.prompt + self.completion


def step_layout(i: Inputs) -> Step:
    from ewa.train.grpo import batch_shape

    s, res = i.config["grpo"], i.profile.of("train")
    processes = res.gpus if (res.gpus and s["accelerate_config"]) else 1  # no config: one plain process
    sharding = memory.read_sharding(s["accelerate_config"]) if res.gpus else memory.Sharding("none", 0, False, False)
    micro, accumulation = batch_shape(s, processes)
    tp = s["vllm_tensor_parallel_size"]
    share = s["vllm_gpu_memory_utilization"] * res.gpu_mem_gb * GB if (s["use_vllm"] and res.gpus) else 0.0
    if share:
        if processes % tp:
            raise UserError(f"grpo.vllm_tensor_parallel_size: {tp} does not divide the {processes} training "
                            f"processes (TRL's colocated vLLM needs whole groups)")
        check_heads(i.arch, tp, "grpo.vllm_tensor_parallel_size")
    return Step(processes, sharding, micro, accumulation, s["prompts_per_step"] * s["num_generations"],
                i.prompt_tokens, s["max_completion_length"], share, tp, bool(s["trl"].get("vllm_enable_sleep_mode")))


def memory_terms(i: Inputs, step: Step) -> tuple[dict[str, float], float, float]:
    """(bytes per GPU by term, peak bytes per GPU, host bytes of offloaded state per node)."""
    s, arch = i.config["grpo"], i.arch
    states = memory.model_states(arch, step.sharding, step.processes, s["bf16"], reference=s["beta"] > 0)
    stage3 = step.sharding.stage >= 3
    terms = {"weights": states["weights"], "gradients": states["gradients"], "optimizer": states["optimizer"],
             "reference": states["reference"],
             "ZeRO-3 gather": min(arch.parameters, memory.ZERO3_LIVE_PARAMETERS) * BF16 if stage3 else 0,
             "activations": memory.activations(arch, step.micro, step.sequence, s["gradient_checkpointing"], s["bf16"]),
             "log-prob head": memory.logprob_head(arch, step.micro, step.completion, gathered=stage3)}
    if i.profile.of("train").gpus:
        terms["CUDA"] = CUDA_RUNTIME_GB * GB
    if step.vllm_share:
        terms["vLLM"] = step.vllm_share
    dynamic = terms["activations"] + terms["log-prob head"]
    static = sum(terms.values()) - dynamic - step.vllm_share
    # asleep, vLLM's share and the trainer's activations take turns; awake, they add up
    peak = static + (max(step.vllm_share, dynamic) if step.sleep else step.vllm_share + dynamic)
    return terms, peak, states["host"]


def refusal(i: Inputs, step: Step, terms: dict, peak: float, host: float) -> str | None:
    """The first reason the step does not fit the profile's GPUs (or host memory), as one line."""
    res, arch = i.profile.of("train"), i.arch
    if peak > res.gpu_mem_gb * GB:
        return memory_refusal("train", gb(peak), res.gpu_mem_gb, {k: gb(v) for k, v in terms.items()}, TRAIN_ADVICE)
    if res.mem_gb and host > res.mem_gb * GB:
        return (f"plan: rule train needs {gb(host)} GB of host memory for the offloaded optimizer, profile gives "
                f"{res.mem_gb:g} GB (set-resources.train.mem_mb)")
    if step.vllm_share:
        max_len = i.config["grpo"]["trl"].get("vllm_max_model_length") or arch.max_positions
        need = memory.vllm_needs(arch, step.tensor_parallel, max_len)
        if need > step.vllm_share:
            return vllm_refusal("train", need, step.vllm_share, res.gpu_mem_gb,
                                "raise grpo.vllm_tensor_parallel_size or grpo.vllm_gpu_memory_utilization")
    return None


def step_seconds(i: Inputs, step: Step, peak: float) -> tuple[dict[str, float], str]:
    """Seconds of one optimizer step by phase (TRL runs them one after another), and how vLLM is laid out."""
    s, arch, res = i.config["grpo"], i.arch, i.profile.of("train")
    spec = speed.gpu_spec(res.gpu_model)
    tp = step.tensor_parallel if step.vllm_share else 1
    engines = step.processes // tp
    room = memory.kv_room(arch, tp, step.vllm_share) if step.vllm_share else max(0.0, res.gpu_mem_gb * GB - peak)
    # TRL sizes the colocated engine for its group's whole generation batch (max_num_seqs)
    decode = speed.decode(arch, math.ceil(step.completions / engines), step.prompt, step.completion, tp, room, spec,
                          max_num_seqs=step.micro * step.accumulation * tp)
    if step.vllm_share:
        layout = (f"vLLM colocated: TP {tp}, {engines} engine{'s' * (engines > 1)}; "
                  f"{s['vllm_gpu_memory_utilization']:g} x "
                  f"{res.gpu_mem_gb:g} GB = {gb(step.vllm_share)} GB holds {gb(arch.weight_bytes() / tp)} GB of "
                  f"weights and {decode.kv_tokens:,} tokens of KV cache ({decode.batch} sequences at once)")
    else:
        layout = "generation without vLLM (transformers generate): costed as vLLM, an underestimate"
    # forward + backward, the recomputed forward, the reference model's forward, and the forward TRL runs for
    # the sampling policy's log-probs (vLLM importance-sampling correction, on by default; or num_iterations > 1)
    old_logps = s["num_iterations"] > 1 or (s["use_vllm"] and s["trl"].get("vllm_importance_sampling_correction", True))
    passes = s["num_iterations"] * (6 + 2 * s["gradient_checkpointing"]) + 2 * (s["beta"] > 0) + 2 * old_logps
    phases = {"generation": decode.seconds,
              f"training ({passes} FLOPs per parameter-token)":
                  speed.compute_seconds(arch, step.completions * step.sequence, passes, step.processes, spec),
              "CPU Adam": speed.offload_seconds(arch, step.processes) if step.sharding.offload_optimizer else 0.0,
              "reward": step.completions * i.train_tests * workload.CPU_S_PER_TEST / max(1, res.cpus)}
    return phases, layout


def train_plan(i: Inputs) -> RulePlan:
    s, arch, res = i.config["grpo"], i.arch, i.profile.of("train")
    regimes = trained_regimes(i.config)
    step = step_layout(i)
    plan = RulePlan("train", len(regimes), res.gpus, res.gpu_mem_gb)
    plan.details.append(f"{len(regimes)} regimes ({', '.join(r['name'] for r in regimes)}) x {max(res.gpus, 1)} "
                        f"{'GPUs' if res.gpus else 'CPU process'}; {step.sharding.describe()} "
                        f"({step.sharding.source}); "
                        f"micro-batch {step.micro} x {step.sequence:,} tokens ({step.prompt:,} prompt + "
                        f"{step.completion:,} completion), accumulation {step.accumulation} = {step.completions} "
                        f"completions per step")
    terms, peak, host = memory_terms(i, step)
    plan.memory_gb = {k: gb(v) for k, v in terms.items() if v}
    if res.gpus:
        plan.peak_gb = gb(peak)
        plan.details.append("per GPU: " + " + ".join(f"{k} {v}" for k, v in plan.memory_gb.items())
                            + f" = {plan.peak_gb} GB" + (" (vLLM sleeps while training)" if step.sleep else ""))
        if host:
            plan.details.append(f"host: {gb(host)} GB of offloaded optimizer state and gradients per node"
                                + (f" (profile: {res.mem_gb:g} GB)" if res.mem_gb else ""))
        plan.refusal = refusal(i, step, terms, peak, host)

    # reward: every completion judged on its regime's share of the tests (no early stop: an upper bound)
    steps = s["max_steps"]
    plan.program_runs = steps * step.completions * len(regimes)
    test_runs = sum(steps * step.completions * i.train_tests * (r.get("fraction") or 1.0) for r in regimes)
    plan.cpu_hours = round(test_runs * workload.CPU_S_PER_TEST / 3600, 1)
    width = weight_width(i.config)
    checkpoint = arch.parameters * (width + (12 if s["bf16"] else 8))  # the model and its optimizer state
    plan.disk_gb = gb(len(regimes) * arch.weight_bytes(width))
    # save_total_limit checkpoints per regime, one more while the trainer writes a new one before rotating
    plan.work_disk_gb = gb(len(regimes) * (s["save_total_limit"] + 1) * checkpoint)
    if not res.gpus:
        plan.details.append("no GPUs in the profile: CPU training is not costed in hours")
        return plan
    if step.vllm_share and memory.kv_room(arch, step.tensor_parallel, step.vllm_share) < \
            step.sequence * arch.kv_bytes_per_token(step.tensor_parallel):
        plan.details.append("vLLM has no room for one sequence's KV cache: not costed in hours")
        return plan
    phases, layout = step_seconds(i, step, peak)
    seconds = sum(phases.values())
    saves, save_s = steps // s["save_steps"], checkpoint / (speed.FS_GB_S * GB)
    plan.hours = round(speed.STARTUP_H + (steps * seconds + saves * save_s) / 3600, 1)
    plan.gpu_hours = round(plan.hours * res.gpus * len(regimes))
    plan.details.append(layout)
    plan.details.append("per step: " + " + ".join(f"{k} {v:.0f} s" for k, v in phases.items() if v)
                        + f" = {seconds / 60:.1f} min; {steps} steps, {saves} checkpoints of {gb(checkpoint)} GB "
                        f"= {plan.hours} h per regime")
    at_risk = speed.STARTUP_H + (s["save_steps"] * seconds + save_s) / 3600
    plan.details.append(f"a requeue loses at most {at_risk:.1f} h (startup + {s['save_steps']} steps since the last "
                        f"checkpoint)" + attempts_note(plan.hours, at_risk, res.runtime_h, i.profile.retries))
    return plan
