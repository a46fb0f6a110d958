"""The train rule's plan: memory per GPU of one GRPO step (model states as sharded, one micro-batch's
activations, TRL's log-prob head, the colocated vLLM), hours per regime, checkpoints and reward work."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ewa.errors import UserError
from ewa.plan import memory, speed, workload
from ewa.plan.memory import CUDA_RUNTIME_GB, GB, ONE_PROCESS_CUDA_RUNTIME_GB
from ewa.plan.model import BF16
from ewa.plan.rule import (Inputs, RulePlan, attempts_note, check_heads, gb, memory_refusal, vllm_refusal,
                           weight_width)

# What shrinks each term of a train job's memory, named when no single change found by train_fix makes the
# job fit. None: no config change shrinks it (the model and the libraries set it): TRL's log-prob head is one
# logit tile and the LM head's fp32 gradient whatever the micro-batch, and the ZeRO-3 gather and the CUDA
# context do not depend on the config.
TRAIN_ADVICE = {
    "activations": "lower grpo.per_device_train_batch_size or grpo.max_completion_length",
    "log-prob head": None, "ZeRO-3 gather": None, "CUDA": None, "autocast copies": None,
    "optimizer": "offload it (grpo.accelerate_config: zero3_offload) or add GPUs",
    "weights": "shard them (zero3/fsdp) or add GPUs", "gradients": "shard them (zero3/fsdp) or add GPUs",
    "reference": "shard it (zero3/fsdp) or set grpo.beta: 0",
    "vLLM": "raise grpo.vllm_tensor_parallel_size so that a smaller grpo.vllm_gpu_memory_utilization holds vLLM, "
            "or set grpo.trl.vllm_enable_sleep_mode: true",
}


def trained_regimes(config: dict) -> list[dict]:
    """Only the regimes a merge reads are trained: the line's ends and any regime of merge.families."""
    from ewa.families import trained_sources

    names = trained_sources(config)
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
    sharding = memory.read_sharding(s["accelerate_config"]) if res.gpus else memory.NO_SHARDING
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


def memory_terms(i: Inputs, step: Step, held: memory.Precision | None = None) -> tuple[dict[str, float], float, float]:
    """(bytes per GPU by term, peak bytes per GPU, host bytes of offloaded state per node). `held`: what the
    training path keeps (default: what ewa's trainer set-up holds on this path, memory.precision)."""
    s, arch = i.config["grpo"], i.arch
    held = held or memory.precision(step.sharding, s["bf16"])
    states = memory.model_states(arch, step.sharding, step.processes, held, reference=s["beta"] > 0)
    stage3 = step.sharding.stage >= 3
    # the decoder layers' share of the gradients, created as backward frees the layers' saved inputs
    layer_gradients = states["gradients"] * (1 - arch.vocab * arch.hidden * (1 if arch.tied else 2) / arch.parameters)
    activations = memory.activations(arch, step.micro, step.sequence, s["gradient_checkpointing"], held,
                                     layer_gradients if step.accumulation == 1 else 0.0)
    head = memory.logprob_head(arch, step.micro, step.completion, held, gathered=stage3)
    # autocast's weight copies live while forward runs, beside the saved layer inputs (and the gradients of
    # earlier micro-batches): a term only where that exceeds what backward holds
    saved_inputs = arch.layers * step.micro * step.sequence * arch.hidden * held.residual
    forward = memory.autocast_copies(arch, held) + (saved_inputs if s["gradient_checkpointing"] else activations)
    backward = states["gradients"] + activations + head
    forward += states["gradients"] if step.accumulation > 1 else 0
    terms = {"weights": states["weights"], "gradients": states["gradients"], "optimizer": states["optimizer"],
             "reference": states["reference"],
             "ZeRO-3 gather": min(arch.parameters, memory.ZERO3_LIVE_PARAMETERS) * BF16 if stage3 else 0,
             "activations": activations, "log-prob head": head,
             "autocast copies": max(0.0, forward - backward) if held.autocast else 0}
    if i.profile.of("train").gpus:
        terms["CUDA"] = (ONE_PROCESS_CUDA_RUNTIME_GB if step.processes == 1 else CUDA_RUNTIME_GB) * GB
    if step.vllm_share:
        terms["vLLM"] = step.vllm_share
    dynamic = terms["activations"] + terms["log-prob head"] + terms["autocast copies"]
    static = sum(terms.values()) - dynamic - step.vllm_share
    # asleep, vLLM's share and the trainer's activations take turns (but its CUDA graphs, in its overhead, stay
    # allocated); awake, they add up
    asleep = dynamic + min(step.vllm_share, memory.VLLM_OVERHEAD_GB * GB)
    peak = static + (max(step.vllm_share, asleep) if step.sleep else step.vllm_share + dynamic)
    return terms, peak, states["host"]


def vllm_max_len(i: Inputs) -> int:
    return i.config["grpo"]["trl"].get("vllm_max_model_length") or i.arch.max_positions


def smaller_micro_batches(step: Step) -> list[int]:
    """Micro-batches below the step's that split its completions evenly over the processes, largest first."""
    return [m for m in range(step.micro - 1, 0, -1) if step.completions % (m * step.processes) == 0]


def levers(i: Inputs, step: Step) -> list[tuple[str, str, Step]]:
    """Changes besides the micro-batch that lower a step's peak without changing what it computes, the
    cheapest first: vLLM asleep while the trainer steps (a wake-up per step), the optimizer state in host
    memory (CPU Adam every step, host RAM), and vLLM's share down to what it needs at its TP (a smaller KV
    cache: slower generation). Each as (the advice, what it costs, the step it gives)."""
    s, res, arch = i.config["grpo"], i.profile.of("train"), i.arch
    found = []
    if step.vllm_share and not step.sleep:
        found.append(("set grpo.trl.vllm_enable_sleep_mode: true", "vLLM frees its share while the trainer steps",
                      replace(step, sleep=True)))
    if step.processes > 1 and not step.sharding.offload_optimizer:
        offload = memory.read_sharding("zero3_offload")
        host = memory.model_states(arch, offload, step.processes, memory.precision(offload, s["bf16"]),
                                   reference=s["beta"] > 0)["host"]
        if not res.mem_gb or host <= res.mem_gb * GB:
            found.append(("set grpo.accelerate_config: zero3_offload", f"{gb(host)} GB of host memory per node",
                          replace(step, sharding=offload)))
    if step.vllm_share:
        least = memory.vllm_utilization_for(arch, step.tensor_parallel, vllm_max_len(i), res.gpu_mem_gb)
        if least < s["vllm_gpu_memory_utilization"]:
            found.append((f"lower grpo.vllm_gpu_memory_utilization from {s['vllm_gpu_memory_utilization']:g} to "
                          f"{least:g}", f"what vLLM needs at TP {step.tensor_parallel}: less KV cache, slower generation",
                          replace(step, vllm_share=least * res.gpu_mem_gb * GB)))
    return found


def train_fix(i: Inputs, step: Step, limit: float) -> str:
    """The least costly change that brings the step's peak under `limit`, by recomputing the peak: a smaller
    micro-batch alone, else each lever with the largest micro-batch that then fits; else what shrinks the
    largest term that can shrink."""
    def peak(candidate: Step) -> float:
        return memory_terms(i, candidate)[1]

    smaller = smaller_micro_batches(step)
    lower = "lower grpo.per_device_train_batch_size from {} to {}".format
    for m in smaller:
        if (p := peak(replace(step, micro=m))) <= limit:
            return f"fix: {lower(step.micro, m)} ({gb(p)} GB)"
    for advice, cost, changed in levers(i, step):
        for m in [step.micro, *smaller]:
            if (p := peak(replace(changed, micro=m))) <= limit:
                both = advice if m == step.micro else f"{advice} and {lower(step.micro, m)}"
                alone = (f"; {lower(step.micro, smaller[-1])} alone would need "
                         f"{gb(peak(replace(step, micro=smaller[-1])))} GB" if smaller else "")
                return f"fix: {both} ({gb(p)} GB; {cost}){alone}"
    terms = memory_terms(i, step)[0]
    shrinkable = [k for k in sorted(terms, key=terms.get, reverse=True) if terms[k] and TRAIN_ADVICE.get(k)]
    if not shrinkable:
        return "no config change here fits: add GPUs or use GPUs with more memory"
    return f"no one change here fits; {shrinkable[0]}: {TRAIN_ADVICE[shrinkable[0]]}"


def vllm_train_knob(i: Inputs, step: Step, share: float) -> str:
    """The change that gives the colocated vLLM room to start: a TP whose weight share fits, else more of the
    GPU."""
    arch, mem = i.arch, i.profile.of("train").gpu_mem_gb
    for t in range(step.tensor_parallel + 1, step.processes + 1):
        if step.processes % t == 0 and arch.heads % t == 0 and memory.vllm_needs(arch, t, vllm_max_len(i)) <= share:
            return f"raise grpo.vllm_tensor_parallel_size from {step.tensor_parallel} to {t}"
    least = memory.vllm_utilization_for(arch, step.tensor_parallel, vllm_max_len(i), mem)
    return (f"raise grpo.vllm_gpu_memory_utilization to {least:g}" if least <= 1
            else "no TP or share of these GPUs holds it: GPUs with more memory")


def refusal(i: Inputs, step: Step, terms: dict, peak: float, host: float) -> str | None:
    """The first reason the step does not fit the profile's GPUs (or host memory), as one line."""
    res, arch = i.profile.of("train"), i.arch
    limit = i.limit("train")
    if peak > limit:
        largest = max(terms, key=terms.get)
        label = f"{largest} {gb(terms[largest])} GB"
        if largest == "vLLM":
            need = memory.vllm_needs(arch, step.tensor_parallel, vllm_max_len(i))
            label += f", of which vLLM needs {gb(need)} GB at TP {step.tensor_parallel}"
        return memory_refusal("train", peak, i.max_memory_share, res.gpu_mem_gb, label, train_fix(i, step, limit))
    if res.mem_gb and host > res.mem_gb * GB:
        return (f"plan: rule train needs {gb(host)} GB of host memory for the offloaded optimizer, profile gives "
                f"{res.mem_gb:g} GB (set-resources.train.mem_mb)")
    if step.vllm_share:
        need = memory.vllm_needs(arch, step.tensor_parallel, vllm_max_len(i))
        if need > step.vllm_share:
            return vllm_refusal("train", need, step.vllm_share, res.gpu_mem_gb,
                                vllm_train_knob(i, step, step.vllm_share))
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
                        f"({step.sharding.source}); {memory.precision(step.sharding, s['bf16']).name}; "
                        f"micro-batch {step.micro} x {step.sequence:,} tokens ({step.prompt:,} prompt + "
                        f"{step.completion:,} completion), accumulation {step.accumulation} = {step.completions} "
                        f"completions per step")
    terms, peak, host = memory_terms(i, step)
    plan.memory_gb = {k: gb(v) for k, v in terms.items() if v}
    if res.gpus:
        plan.peak_gb, plan.limit_gb = gb(peak), gb(i.limit("train"))
        plan.details.append("per GPU: " + " + ".join(f"{k} {v}" for k, v in plan.memory_gb.items())
                            + f" = {plan.peak_gb} GB" + (" (vLLM sleeps while training)" if step.sleep else "")
                            + f", of at most {plan.limit_gb} ({i.max_memory_share:g} x {res.gpu_mem_gb:g} GB)")
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
    held = memory.precision(step.sharding, s["bf16"])
    checkpoint = arch.parameters * (held.weights + held.optimizer)  # the model and its optimizer state
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
