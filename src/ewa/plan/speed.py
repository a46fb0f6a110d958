"""The throughput model: hours from FLOPs and bytes moved, at a stated fraction of each GPU's datasheet
peak. Every constant names its source or says it is an assumption; the plan's hours are estimates to
size a job's time limit, not measurements (measure one real step and compare).

Generation (vLLM decode) is bandwidth-bound: each step reads the engine's weights and every running
sequence's KV cache once, or is compute-bound, whichever takes longer (a roofline). Training is
compute-bound: 6 FLOPs per parameter per token for forward + backward (Kaplan et al. 2020, "Scaling
Laws for Neural Language Models", sec. 2.1), 2 more per extra forward pass.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ewa.plan.model import BF16, Architecture

GB = 1e9


@dataclass(frozen=True)
class GPUSpec:
    bf16_tflops: float  # dense, without sparsity
    hbm_tb_s: float


# NVIDIA datasheets, SXM parts: H100 989 TFLOPS BF16 dense, 3.35 TB/s HBM3; H200 the same compute with
# 4.8 TB/s HBM3e; A100 40 GB 312 TFLOPS, 1.555 TB/s. A gpu_model not listed is costed as an H100.
GPU_SPECS = {"h100": GPUSpec(989.0, 3.35), "h200": GPUSpec(989.0, 4.8), "a100": GPUSpec(312.0, 1.555)}
DEFAULT_GPU = "h100"

# Assumed fractions of peak. Training: PaLM reached 46% model-FLOPs utilisation (Chowdhery et al. 2022,
# Table 3) with a purpose-built stack; HF Trainer + ZeRO-3 with small micro-batches does worse, and
# recomputation is counted as FLOPs here, not hidden in the fraction.
TRAIN_MFU = 0.35
# Decode: vLLM reaches roughly half of HBM bandwidth at large batch (assumed); its matmuls at batch
# sizes of a few hundred run at about the same share of peak FLOPs.
DECODE_MBU = 0.5
DECODE_MFU = 0.35
# vLLM caps the sequences it decodes at once (its max_num_seqs default; TRL sets its own in colocate mode).
VLLM_MAX_NUM_SEQS = 256
# ZeRO-Offload: DeepSpeedCPUAdam updates ~1e9 parameters/s per rank (assumed: AVX-512, ~8 cores per
# rank; DeepSpeed's ZeRO-Offload tutorial reports it 5-7x faster than PyTorch's CPU Adam), and bf16
# gradients down plus bf16 parameters up cross PCIe at 25 GB/s per GPU (Gen5 x16 peaks at 64 GB/s per
# direction; assumed, eight GPUs share the host's links).
CPU_ADAM_PARAMS_PER_S = 1e9
PCIE_GB_S = 25.0
# Shared filesystem bandwidth one job gets for checkpoints and merges (assumed; parallel filesystems
# give a single client 1-5 GB/s).
FS_GB_S = 1.0
# Model load, DeepSpeed/FSDP init, vLLM engine start and CUDA graph capture, once per job (assumed).
STARTUP_H = 0.25


def gpu_spec(gpu_model: str | None) -> GPUSpec:
    return GPU_SPECS.get(gpu_model or DEFAULT_GPU, GPU_SPECS[DEFAULT_GPU])


@dataclass(frozen=True)
class Decode:
    seconds: float
    batch: int  # sequences decoded at once by one engine
    kv_tokens: int  # KV-cache capacity of one engine, tokens


def decode(arch: Architecture, sequences: int, prompt: int, completion: int, tensor_parallel: int,
           kv_bytes_per_gpu: float, spec: GPUSpec, max_num_seqs: int = VLLM_MAX_NUM_SEQS) -> Decode:
    """Seconds for one vLLM engine over `tensor_parallel` GPUs to write `sequences` completions of
    `completion` tokens each (every completion assumed to run to the limit: an upper bound)."""
    kv_token = arch.kv_bytes_per_token(tensor_parallel)
    kv_tokens = max(0, int(kv_bytes_per_gpu // kv_token))
    batch = max(1, min(sequences, max_num_seqs, kv_tokens // (prompt + completion)))
    waves = math.ceil(sequences / batch)
    weights = arch.weight_bytes() / tensor_parallel
    read = weights + batch * (prompt + completion / 2) * kv_token  # the mean context over a completion
    step = max(read / (spec.hbm_tb_s * 1e12 * DECODE_MBU),
               2 * arch.parameters / tensor_parallel * batch / (spec.bf16_tflops * 1e12 * DECODE_MFU))
    prefill = sequences * prompt * 2 * arch.parameters / tensor_parallel / (spec.bf16_tflops * 1e12 * TRAIN_MFU)
    return Decode(seconds=waves * completion * step + prefill, batch=batch, kv_tokens=kv_tokens)


def compute_seconds(arch: Architecture, tokens: float, flops_per_parameter: float, gpus: int,
                    spec: GPUSpec) -> float:
    """Seconds for `gpus` GPUs to push `tokens` through the model at `flops_per_parameter` per token."""
    return tokens * arch.parameters * flops_per_parameter / (gpus * spec.bf16_tflops * 1e12 * TRAIN_MFU)


def offload_seconds(arch: Architecture, gpus: int) -> float:
    """One optimizer step with ZeRO-Offload: each rank's share of gradients down and parameters up over
    PCIe, and its CPU Adam update (transfers and update not overlapped: an upper bound)."""
    share = arch.parameters / gpus
    return 2 * share * BF16 / (PCIE_GB_S * GB) + share / CPU_ADAM_PARAMS_PER_S


def constants() -> dict:
    """The model's constants, for the JSON plan."""
    return {"gpus": {k: vars(v) for k, v in GPU_SPECS.items()}, "train_mfu": TRAIN_MFU, "decode_mbu": DECODE_MBU,
            "decode_mfu": DECODE_MFU, "vllm_max_num_seqs": VLLM_MAX_NUM_SEQS,
            "cpu_adam_params_per_s": CPU_ADAM_PARAMS_PER_S, "pcie_gb_s": PCIE_GB_S, "fs_gb_s": FS_GB_S,
            "startup_h": STARTUP_H}
