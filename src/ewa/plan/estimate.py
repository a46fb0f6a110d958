"""The plan of each rule that needs GPUs, disk or sandbox time (init, train, merge, sample, evaluate), of
the disk the whole run needs, and of the study that repeats the run per seed (science_all). Every figure
is per job unless named a total; GB are 1e9 bytes."""
from __future__ import annotations

from ewa.families import count_models
from ewa.plan import memory, speed, workload
from ewa.plan.memory import CUDA_RUNTIME_GB, GB
from ewa.plan.model import BF16
from ewa.plan.rule import (Inputs, RulePlan, attempts_note, check_heads, gb, memory_refusal, vllm_refusal,
                           weight_width)
from ewa.plan.training import train_plan

# vLLM's default gpu_memory_utilization: ewa's sample backend leaves it, so each engine takes this share.
VLLM_SAMPLE_UTILIZATION = 0.9


def init_plan(i: Inputs) -> RulePlan:
    res = i.profile.of("init")
    model = i.config["model"]
    tiny, sft = model["init"] == "tiny", model["sft"]
    warm_start = not tiny and sft["steps"] > 0
    # tiny, and a warm start of a model directory, save fp32 (ewa.init.build); a linked model is as published
    size = i.arch.weight_bytes(4 if tiny or warm_start else BF16)
    hours = round(size / (speed.FS_GB_S * GB) / 3600, 2)  # a copy; a reflink takes no time
    plan = RulePlan("init", 1, res.gpus, res.gpu_mem_gb, disk_gb=gb(size), hours=hours)
    if warm_start:
        warm_start_plan(i, plan)
    elif not tiny:
        plan.details.append(f"copies {model['init']} into results/ (a reflink where the filesystem has one: no new "
                            f"bytes; else a copy, never a hard link the model's files could be changed through)")
    return plan


def warm_start_plan(i: Inputs, plan: RulePlan) -> None:
    """model.sft on a model directory: TRL's SFTTrainer in the init job's one process, on one GPU or the CPU,
    in float32 (ewa.init.sft, ewa.init.build): weights, gradients and AdamW's moments unsharded, and one
    micro-batch's activations without checkpointing. Refused where the job cannot hold them."""
    res, sft, arch = i.profile.of("init"), i.config["model"]["sft"], i.arch
    states = memory.model_states(arch, memory.NO_SHARDING, 1, memory.FP32, reference=False)
    terms = {k: states[k] for k in ("weights", "gradients", "optimizer")}
    terms["activations"] = memory.activations(arch, sft["batch_size"], sft["max_length"], False, memory.FP32)
    terms["log-prob head"] = memory.logprob_head(arch, sft["batch_size"], sft["max_length"], memory.FP32, False)
    plan.details.append(f"model.sft: {sft['steps']} steps of {sft['batch_size']} x up to {sft['max_length']:,} "
                        f"tokens on {i.config['model']['init']}, float32 in one process (TRL's SFTTrainer); the "
                        f"hours are not costed")
    fix = "fix: warm-start the model outside ewa, or a smaller one"
    largest = max(terms, key=terms.get)
    if res.gpus > 1:
        plan.refusal = (f"plan: rule init trains model.sft in one process on one GPU (TRL's SFTTrainer refuses "
                        f"several), the profile gives it {res.gpus} (fix: set-resources.init gpu: 1)")
    elif res.gpus:
        terms["CUDA"] = memory.ONE_PROCESS_CUDA_RUNTIME_GB * GB
        plan.memory_gb = {k: gb(v) for k, v in terms.items()}
        plan.peak_gb, plan.limit_gb = gb(sum(terms.values())), gb(i.limit("init"))
        if sum(terms.values()) > i.limit("init"):
            plan.refusal = memory_refusal("init", sum(terms.values()), i.max_memory_share, res.gpu_mem_gb,
                                          largest, fix)
    else:
        need = sum(terms.values())
        plan.details.append(f"model.sft on the CPU holds {gb(need):,} GB of host memory ("
                            + " + ".join(f"{k} {gb(v):,}" for k, v in terms.items()) + ")")
        if res.mem_gb is not None and need > res.mem_gb * GB:
            plan.refusal = (f"plan: rule init needs {gb(need):,} GB of host memory for model.sft on the CPU, "
                            f"the profile gives {res.mem_gb:g} GB (mem_mb) (largest: {largest}; {fix}, or "
                            f"give the init a GPU that holds it)")


def merge_plan(i: Inputs) -> RulePlan:
    """Merge jobs read both endpoints once per job and write each alpha of their chunk: one alpha per job by
    default, `alphas_per_job` (set-resources.merge in the profile) to read them once per chunk."""
    from ewa.merge.blend import LANES
    from ewa.merge.stream import GPU_BLOCKS

    res = i.profile.of("merge")
    count = count_models(i.config)
    alphas, points = count.line_merges, count.point_inputs  # points: merge.families' points off the line
    per_job = min(i.profile.alphas_per_job, alphas)
    jobs = -(-alphas // per_job)
    size = i.arch.weight_bytes(weight_width(i.config))
    plan = RulePlan("merge", jobs + len(points), res.gpus, res.gpu_mem_gb, disk_gb=gb((alphas + len(points)) * size))
    if res.gpus:
        # ewa.merge.blend.DeviceBlend, per block of a tensor: each input's raw bytes in every staging lane, their
        # float32 widening, the deltas from the base (several terms), the float32 output and its rounding (the
        # write ring is pinned host memory, not the card's)
        block, width = GPU_BLOCKS[0], weight_width(i.config)
        inputs = max([2, *(k + 1 for k in points)])
        terms = {"staging lanes": LANES * inputs * block, "fp32 blocks": (2 * inputs + 1) * block * 4 / width,
                 "rounded block": block, "CUDA": CUDA_RUNTIME_GB * GB}
        plan.memory_gb = {k: gb(v) for k, v in terms.items()}
        plan.peak_gb, plan.limit_gb = gb(sum(terms.values())), gb(i.limit("merge"))
        if sum(terms.values()) > i.limit("merge"):
            plan.refusal = memory_refusal("merge", sum(terms.values()), i.max_memory_share, res.gpu_mem_gb,
                                          "fp32 blocks", "fix: set merge.device: cpu")
    plan.hours = round((max([2 + per_job, *(k + 1 for k in points)]) * size / (speed.FS_GB_S * GB) / 3600), 2)
    plan.gpu_hours = round((2 * jobs + alphas + sum(k + 1 for k in points)) * size / (speed.FS_GB_S * GB) / 3600
                           * res.gpus, 1)
    plan.io_gb = {"read": gb(2 * jobs * size), "read_one_alpha_per_job": gb(2 * alphas * size),
                  "read_one_job": gb(2 * size), "written": gb(alphas * size)}
    layout = (f"{jobs} jobs of up to {per_job} alphas (set-resources.merge.alphas_per_job), each reading both "
              f"endpoints once" if per_job > 1 else "one job per alpha")
    other = (f"{alphas} jobs of one alpha would read {plan.io_gb['read_one_alpha_per_job']:,} GB" if per_job > 1 else
             f"set-resources.merge.alphas_per_job: {alphas} would read {plan.io_gb['read_one_job']:,} GB in one job")
    plan.details.append(f"{alphas} alphas, {gb(size)} GB each, {layout}: read {plan.io_gb['read']:,} GB and write "
                        f"{plan.io_gb['written']:,} GB in all at {speed.FS_GB_S:g} GB/s ({other})")
    if count.family_models:
        plan.details.append(family_note(count, size))
    return plan


def family_note(count, size: float) -> str:
    """What merge.families adds to the alpha line: the models, their merges and the bytes those read."""
    return (f"merge.families adds {count.family_models} models to the alpha grid's {count.models - count.family_models} "
            f"({count.models} sampled and judged in all): {len(count.point_inputs)} merges off the line reading "
            f"{gb(sum(count.point_inputs) * size):,} GB and writing {gb(len(count.point_inputs) * size):,} GB, "
            f"{count.sources_sampled} sources sampled as they are (a family's points on the line are among its alphas)")


def data_parallel_advice(arch, tp: int, dp: int, share: float, sequences: int, context: int) -> str | None:
    """A smaller TP whose engine holds the weights, one full-length sequence (or vLLM refuses to start)
    and the KV cache of a full decode batch at the mean context. More engines of it on the same GPUs do the
    same work without tensor parallelism's two all-reduces per layer, which speed.decode does not cost;
    vLLM's maintainers advise replicas for a model that fits one GPU (vllm-project/vllm discussion #294)."""
    for t in (t for t in range(1, tp) if tp % t == 0):
        engines = tp * dp // t
        batch = min(-(-sequences // engines), speed.VLLM_MAX_NUM_SEQS)
        kv = batch * context * arch.kv_bytes_per_token(t)
        if memory.vllm_needs(arch, t, arch.max_positions) <= share and kv <= memory.kv_room(arch, t, share):
            return (f"TP {t} fits ({gb(arch.weight_bytes() / t)} GB of weights, {gb(kv)} GB of KV cache for {batch} "
                    f"sequences at once): sample.tensor_parallel_size {t} x sample.data_parallel_size {engines} runs "
                    f"{engines} engines on the same {tp * dp} GPUs without TP's all-reduces (not costed here)")
    return None


def sample_tp_knob(arch, tp: int, dp: int, share: float) -> str:
    """The smallest larger TP whose engine starts in vLLM's share of each GPU (the sample rule's advice)."""
    for t in range(tp + 1, arch.heads + 1):
        if arch.heads % t == 0 and memory.vllm_needs(arch, t, arch.max_positions) <= share:
            return (f"raise sample.tensor_parallel_size from {tp} to {t} and the profile's sample gpu to {t * dp}")
    return "no TP holds it in this GPU's share: GPUs with more memory"


def sample_plan(i: Inputs) -> RulePlan:
    c, arch, res = i.config["sample"], i.arch, i.profile.of("sample")
    alphas, settings = count_models(i.config).models, c["settings"]  # every model, merge.families' too
    jobs = alphas * len(i.benchmarks) * len(settings)
    plan = RulePlan("sample", jobs, res.gpus, res.gpu_mem_gb)
    backend = c["backend"] if c["backend"] != "auto" else ("vllm" if res.gpus else "hf")
    tp, dp = c["tensor_parallel_size"], c["data_parallel_size"]
    # vLLM holds itself to this share (it measures the GPU and sizes its KV cache to fill the share): checked
    # against what vLLM needs, not against --max-memory-share, which is for what PyTorch allocates as it goes
    share = VLLM_SAMPLE_UTILIZATION * res.gpu_mem_gb * GB if (res.gpus and backend == "vllm") else 0.0
    if share:
        check_heads(arch, tp, "sample.tensor_parallel_size")
        need = memory.vllm_needs(arch, tp, arch.max_positions)
        plan.memory_gb = {"vLLM": gb(share)}
        plan.peak_gb = gb(share)
        layout = f"{dp} engines of TP {tp}" if dp > 1 else f"TP {tp}"
        plan.details.append(f"vLLM, {layout} on {res.gpus} GPUs: each GPU gives it {VLLM_SAMPLE_UTILIZATION:g} x "
                            f"{res.gpu_mem_gb:g} GB, {gb(arch.weight_bytes() / tp)} GB of weights, the rest KV cache")
        if need > share:
            plan.refusal = vllm_refusal("sample", need, share, res.gpu_mem_gb, sample_tp_knob(arch, tp, dp, share))
        if tp * dp != res.gpus:
            plan.details.append(f"sample.tensor_parallel_size {tp} x sample.data_parallel_size {dp} = {tp * dp} GPUs "
                                f"differs from the {res.gpus} GPUs the profile gives"
                                + ("; ewa sample stops on fewer" if tp * dp > res.gpus else ""))
        most = max((b.problems * c["n"] for b in i.benchmarks), default=0)
        longest_sample = max((workload.generated_tokens(s, c) for s in settings), default=0)
        advice = data_parallel_advice(arch, tp, dp, share, most, i.prompt_tokens + longest_sample // 2)
        if advice and not plan.refusal:
            plan.details.append(advice)
    elif res.gpus:
        plan.details.append(f"backend {backend} on GPU: memory not costed")
    spec = speed.gpu_spec(res.gpu_model)
    longest, gpu_hours, tokens, runs, disk = 0.0, 0.0, 0, 0, 0.0
    for bench in i.benchmarks:
        for setting in settings:
            samples = bench.problems * c["n"]
            new = workload.generated_tokens(setting, c)
            tokens += samples * new * alphas
            runs += samples * workload.sampling_runs(setting, c) * alphas
            disk += samples * new * workload.SAMPLE_BYTES_PER_TOKEN * alphas
            if share:  # the engines share the samples and run side by side
                seconds = speed.decode(arch, -(-samples // dp), i.prompt_tokens, new, tp,
                                       memory.kv_room(arch, tp, share), spec).seconds
                hours = speed.STARTUP_H + seconds / 3600
                longest = max(longest, hours)
                gpu_hours += hours * res.gpus * alphas
    plan.program_runs, plan.disk_gb = int(runs), gb(disk)
    plan.cpu_hours = round(runs * workload.CPU_S_PER_TEST / 3600, 1)
    if not share:
        plan.details.append("no vLLM on GPUs: generation is not costed in hours")
    elif not plan.refusal:
        plan.hours, plan.gpu_hours = round(longest, 1), round(gpu_hours)
        plan.details.append(f"{tokens / 1e9:.2f} G tokens generated in all (every sample to its token limit: "
                            f"an upper bound); a requeue resumes from the completed problems"
                            + attempts_note(plan.hours, speed.STARTUP_H, res.runtime_h, i.profile.retries))
    return plan


def evaluate_plan(i: Inputs) -> RulePlan:
    res = i.profile.of("evaluate")
    c = i.config["sample"]
    alphas, settings = count_models(i.config).models, c["settings"]
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
    # a merge job's alphas appear together, when it ends: a chunk of them is on disk at once at least
    at_once = min(max(i.alphas_at_once, i.profile.alphas_per_job), count_models(i.config).merges)
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
            "alphas_at_once": at_once if temp else count_models(i.config).merges, "merge_temp": temp}


def science_all(i: Inputs, plans: dict[str, RulePlan], run_disk: dict) -> dict:
    """What `make science` (target science_all) costs: the run planned above once per seed of science.seeds,
    each seed's own GRPO runs, merges, samples and evaluations, started from one shared init
    (science.init_seed), from another run's (science.init_from: none built) or from an init per seed."""
    science = i.config["science"]
    seeds = len(science["seeds"])
    inits = 0 if science.get("init_from") else 1 if science.get("init_seed") is not None else seeds
    per_seed = [p for rule, p in plans.items() if rule != "init"]
    kept = run_disk["total_gb"] - run_disk["kept_gb"]["init"]
    return {"seeds": seeds, "inits": inits, "init_seed": science.get("init_seed"),
            "init_from": science.get("init_from"),
            "jobs": {rule: p.jobs * (inits if rule == "init" else seeds) for rule, p in plans.items()},
            "gpu_hours": round(plans["init"].gpu_hours * inits + sum(p.gpu_hours for p in per_seed) * seeds),
            "cpu_hours": round(plans["init"].cpu_hours * inits + sum(p.cpu_hours for p in per_seed) * seeds, 1),
            "kept_gb": round(run_disk["kept_gb"]["init"] * inits + kept * seeds, 1)}


def plan_rules(i: Inputs) -> dict[str, RulePlan]:
    return {p.rule: p for p in (init_plan(i), train_plan(i), merge_plan(i), sample_plan(i), evaluate_plan(i))}
