"""The checks of `ewa gpu-check`, each a function of the bench returning one Outcome. The device under test
is a parameter (`bench.device`: cuda, or cpu with --cpu); the reference is always the CPU, so `--cpu` runs the
same functions and compares the CPU with itself (determinism)."""
from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ewa.gpucheck.bench import ALPHAS, Bench, device_env

REFERENCE = "cpu"
PLAN_TOLERANCE = 0.10  # the plan's goal: within +10% of the measured peak, never under it
MEMORY_TIMEOUT_S = 480


@dataclass
class Outcome:
    name: str
    status: str  # ok | FAIL | skipped
    figure: str
    fix: str = ""
    data: dict = field(default_factory=dict)

    def line(self) -> str:
        text = f"ewa gpu-check: {self.name} {self.status}: {self.figure}"
        if self.fix and self.status == "FAIL":
            text += f"; fix: {self.fix}"
        return " ".join(text.split())  # one line, whatever the messages it quotes hold


def versus(bench: Bench) -> str:
    return f"{bench.device} vs {REFERENCE}" if bench.device != REFERENCE else "cpu run twice"


# -- merge --------------------------------------------------------------------------------------------
def tensors_of(model: Path) -> dict:
    from safetensors import safe_open

    out = {}
    for shard in sorted(model.glob("*.safetensors")):
        with safe_open(str(shard), framework="pt") as f:
            out.update({name: f.get_tensor(name) for name in f.keys()})
    return out


def differences(a: Path, b: Path) -> tuple[int, list[tuple[str, float]]]:
    """(tensors compared, [(name, max |a - b|) of every tensor whose bytes differ])."""
    import torch

    ta, tb = tensors_of(a), tensors_of(b)
    differ = [(name, float("inf")) for name in sorted(set(ta) ^ set(tb))]
    for name in sorted(set(ta) & set(tb)):
        x, y = ta[name], tb[name]
        if x.dtype != y.dtype or x.shape != y.shape:
            differ.append((name, float("inf")))
        elif not torch.equal(x.reshape(-1).view(torch.uint8), y.reshape(-1).view(torch.uint8)):
            differ.append((name, (x.float() - y.float()).abs().max().item()))
    return len(ta), differ


def check_merge(bench: Bench) -> Outcome:
    runs = [(bench.device, 0), (REFERENCE, 1 if bench.device == REFERENCE else 0)]
    (grid, seconds), (reference, ref_seconds) = (bench.merged(d, r) for d, r in runs)
    worst = None
    for alpha in ALPHAS:
        count, differ = differences(grid[alpha], reference[alpha])
        if differ and worst is None:
            worst = (alpha, count, differ)
    timing = f"{seconds:.1f} s vs {ref_seconds:.1f} s"
    if worst:
        alpha, count, differ = worst
        name, diff = max(differ, key=lambda d: d[1])
        return Outcome("merge", "FAIL", f"alpha {alpha:+g}: {len(differ)} of {count} tensors differ, {versus(bench)} "
                       f"(largest |difference| {diff:.3g} in {name})",
                       "set merge.device: cpu (the CPU merge is the reference) and report this line")
    return Outcome("merge", "ok", f"{len(ALPHAS)} alphas x {count} tensors bitwise identical, {versus(bench)} "
                   f"({timing})", data={"seconds": seconds, "reference_seconds": ref_seconds})


# -- sample -------------------------------------------------------------------------------------------
def read_samples(path: Path) -> dict:
    import json

    rows = (json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return {(r["problem_id"], r["sample_id"]): r for r in rows}


def check_sample(bench: Bench) -> Outcome:
    runs = [(bench.device, 0), (REFERENCE, 1 if bench.device == REFERENCE else 0)]
    (path, prov), (ref_path, _) = (bench.samples(d, r) for d, r in runs)
    got = str((prov.get("backend_info") or {}).get("device"))
    if not got.startswith(bench.device):
        return Outcome("sample", "FAIL", f"the hf backend sampled on {got}, not {bench.device}",
                       "run ewa preflight --gpus 1 on this node: torch does not use its GPU")
    a, b = read_samples(path), read_samples(ref_path)
    same = sum(a[k]["completion"] == b.get(k, {}).get("completion") for k in a)
    tokens = sum(r["tokens_generated"] for r in a.values())
    figure = (f"{same} of {len(a)} completions identical for the same seeds, {versus(bench)} "
              f"(hf backend, {tokens} tokens)")
    if same != len(a) or len(a) != len(b):
        first = next((k for k in sorted(a) if a[k]["completion"] != b.get(k, {}).get("completion")), None)
        where = f"first differs: problem {first[0]} sample {first[1]}" if first else f"the CPU run has {len(b)}"
        return Outcome("sample", "FAIL", f"{figure}; {where}",
                       "sampling here does not reproduce the CPU's: report this line with the record of "
                       "ewa gpu-check --out FILE (the GPU and the versions)")
    return Outcome("sample", "ok", figure, data={"completions": len(a), "tokens": tokens})


# -- judge --------------------------------------------------------------------------------------------
def sandbox_fix(bench: Bench) -> str:
    from ewa.preflight import sandbox_fix as fix

    return fix(bench.config["sandbox"]["backend"]) + " (ewa preflight checks it alone)"


def check_judge(bench: Bench) -> Outcome:
    import json

    import pyarrow.parquet as pq

    from ewa.evaluate.run import evaluate_file
    from ewa.sandbox import sandbox_from_config

    out = bench.work / "evals" / "reasoning.parquet"
    settings = {k: bench.config["evaluate"][k] for k in ("early_stop", "judge_duplicates")}
    try:  # a sandbox that cannot start fails here, before minutes of sampling
        with sandbox_from_config(bench.config["sandbox"], workers=1, time_factor=1.0):
            pass
    except (ValueError, RuntimeError, OSError) as e:  # UserError included
        backend = bench.config["sandbox"]["backend"]
        return Outcome("judge", "FAIL", f"sandbox.backend {backend}: {e}", sandbox_fix(bench))
    samples = bench.samples(bench.device)[0]
    started = time.perf_counter()
    evaluate_file(str(bench.problems()[1]), str(samples), out, bench.config["sandbox"], settings)
    table = pq.read_table(out)
    backend = json.loads(table.schema.metadata[b"ewa"])["sandbox"]["backend"]
    verdicts = table.column("verdict").to_pylist()
    mix = ", ".join(f"{v} {verdicts.count(v)}" for v in sorted(set(verdicts)))
    return Outcome("judge", "ok", f"{len(verdicts)} samples judged in {backend} in "
                   f"{time.perf_counter() - started:.1f} s ({mix})", data={"backend": backend, "rows": len(verdicts)})


# -- train --------------------------------------------------------------------------------------------
def check_train(bench: Bench) -> Outcome:
    import pandas as pd
    import torch

    from ewa.config import section
    from ewa.train.grpo import train_regime

    steps = 2
    settings = section("grpo", {**bench.config["grpo"], **bench.sizes.grpo, "max_steps": steps,
                                "save_steps": 1000, "per_device_train_batch_size": None, "use_vllm": False,
                                "accelerate_config": None, "keep_work_dir": False})
    regime = bench.config["regimes"][0]
    out = bench.work / "checkpoints" / regime["name"]
    threads = torch.get_num_threads()
    if bench.device == "cpu":  # the tiny model loses more to thread sync than it gains (the train rule's choice)
        torch.set_num_threads(1)
    started = time.perf_counter()
    try:
        # the trainer prints each step's metrics on stdout, where the checks' lines go: to the log with them
        with contextlib.redirect_stdout(sys.stderr):
            record = train_regime(bench.init(), bench.problems()[0], regime, settings, out,
                                  seed=bench.config["seed"], sandbox=bench.config["sandbox"])
    except (ValueError, RuntimeError) as e:  # UserError included: the reward's sandbox did not start
        if "sandbox" in str(e):
            return Outcome("train", "FAIL", str(e), sandbox_fix(bench))
        raise
    finally:
        torch.set_num_threads(threads)
    seconds = time.perf_counter() - started
    metrics = pd.read_csv(out / "metrics.csv")
    where = "cuda" if torch.cuda.is_available() else "cpu"
    figure = (f"{record['global_step']} GRPO steps of the tiny model on {where} in {seconds:.0f} s "
              f"(bf16 {str(settings['bf16']).lower()}, loss {metrics['loss'].iloc[-1]:.3g})")
    if record["global_step"] != steps or len(metrics) != steps or where != bench.device:
        return Outcome("train", "FAIL", figure, "run ewa train with grpo.max_steps: 2 on this node for the traceback")
    return Outcome("train", "ok", figure, data={"seconds": seconds})


# -- memory -------------------------------------------------------------------------------------------
def memory_setting(bench: Bench, prompt_tokens: int) -> tuple[dict, int]:
    """The grpo section and prompt length of the measured steps: one process, no ZeRO, no vLLM (the plan's
    one-GPU case), every optimizer step one micro-batch."""
    from ewa.config import section
    from ewa.train.grpo import batch_shape

    s = {**bench.config["grpo"], "max_steps": 2, "save_steps": 1000, "accelerate_config": None, "use_vllm": False,
         **bench.sizes.memory}
    micro, _ = batch_shape(section("grpo", s), 1)
    s.update(prompts_per_step=1, num_generations=max(2, micro), per_device_train_batch_size=micro)
    return section("grpo", s), bench.sizes.prompt_tokens or prompt_tokens


DEFAULT_SHAPE = "qwen2.5-coder-1.5b.config.json"  # Qwen2.5-Coder-1.5B-Instruct's published architecture


def check_memory(bench: Bench, model_config: Path | None, prompt_tokens: int) -> Outcome:
    import torch

    from ewa.gpucheck.memory import measure_in_child, others_on_device, plan_train

    # On a card, a real model's shape (random init, nothing downloaded): a tiny model's step is mostly the
    # CUDA context, which says nothing about the plan's terms
    default = Path(__file__).with_name(DEFAULT_SHAPE) if bench.device == "cuda" else bench.init() / "config.json"
    model_config = model_config or default
    grpo, prompt = memory_setting(bench, prompt_tokens)
    cuda = bench.device == "cuda"
    card_gb = torch.cuda.get_device_properties(0).total_memory / 1e9 if cuda else 80.0  # nominal H100 off a GPU
    plan = plan_train(bench.config, grpo, model_config, prompt, card_gb, bench.work / "plan")
    setting = (f"{plan['parameters']:,} parameters, micro-batch {grpo['per_device_train_batch_size']} x "
               f"({prompt:,} + {grpo['max_completion_length']:,}) tokens, bf16 {str(grpo['bf16']).lower()}, "
               f"beta {grpo['beta']:g}")
    if cuda and plan["peak_gb"] > card_gb:
        return Outcome("memory", "skipped", f"ewa plan predicts {plan['peak_gb']} GB for one step of {setting} on "
                       f"one GPU without ZeRO, more than this card's {card_gb:.0f} GB: pass --model-config of a "
                       f"smaller shape", data={"plan": plan})
    env = device_env(bench.device)
    env.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")  # as profiles/slurm runs train jobs
    others = others_on_device() if cuda else 0.0  # this process's merge and GRPO steps hold some of the card
    got = measure_in_child(model_config, bench.init(), grpo, prompt, bench.work / "memory", env, MEMORY_TIMEOUT_S,
                           others)
    data = {"plan": plan, "measured": got, "grpo": grpo, "prompt_tokens": prompt}
    if "error" in got:
        return Outcome("memory", "FAIL", f"two training steps of {setting} failed: {got['error']}",
                       "lower grpo.per_device_train_batch_size or pass a smaller --model-config; report the line "
                       "if ewa plan said it fits", data)
    measured, predicted = got["peak_gb"], plan["peak_gb"]
    if not cuda:
        return Outcome("memory", "skipped", f"needs cuda: the plan models GPU memory; two training steps of "
                       f"{setting} ran on the cpu ({got['what']} {measured:.2f} GB; ewa plan predicts "
                       f"{predicted} GB on a GPU)", data=data)
    ratio = predicted / measured
    figure = (f"ewa plan predicts {predicted} GB, measured {measured:.1f} GB ({got['what']}; "
              f"{ratio:.2f}x) for one step of {setting} on {got['device']}")
    if ratio < 1:
        return Outcome("memory", "FAIL", figure, "the plan under-predicts this setting: run with --max-memory-share "
                       f"{0.9 * ratio:.2f} until it is fixed, and report this line", data)
    if ratio > 1 + PLAN_TOLERANCE:
        return Outcome("memory", "FAIL", figure, "the plan over-predicts this setting: jobs it refuses may fit; "
                       "report this line (ewa plan --json itemises the terms)", data)
    return Outcome("memory", "ok", figure, data=data)
