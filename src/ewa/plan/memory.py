"""Bytes per GPU. Model states follow the ZeRO paper's accounting (Rajbhandari et al. 2020, sec. 3.1):
mixed-precision Adam keeps 2 bytes of bf16 weights, 2 of bf16 gradients and 12 of fp32 master weights,
momentum and variance per parameter; stage 1 shards the 12 over the data-parallel GPUs, stage 2 the
gradients too, stage 3 the weights too (FSDP full sharding is stage 3). Offloading moves the optimizer
state (and with it the gradients it consumes) or the weights to host memory.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import yaml

from ewa.plan.model import BF16, Architecture

# DeepSpeed ZeRO-3 gathers at most stage3_max_live_parameters (default 1e9) parameters at once
# (DeepSpeed config docs); accelerate's shipped configs leave it at the default.
ZERO3_LIVE_PARAMETERS = 1e9
# TRL 1.16's fused log-prob head (trl/trainer/utils.py add_fused_lm_head, kernels/chunked_logprob.py)
# never materialises batch x sequence x vocabulary logits: it projects 4,096 tokens x 32,768 vocabulary
# entries at a time in fp32 and accumulates an fp32 gradient of the whole LM-head matrix.
LOGPROB_TOKEN_TILE, LOGPROB_VOCAB_TILE = 4096, 32768
# CUDA context, cuBLAS/NCCL workspaces and allocator fragmentation per GPU (assumed; a bare context is
# ~0.5 GB on an H100, NCCL buffers and fragmentation under ZeRO-3 take a few GB more).
CUDA_RUNTIME_GB = 3.0
# vLLM's own activations and CUDA graphs inside its gpu_memory_utilization share (assumed).
VLLM_OVERHEAD_GB = 2.0
# The share of a GPU's memory a planned peak may take (`ewa plan --max-memory-share`). PyTorch's caching
# allocator reserves more than the tensors it holds (blocks split and cached, the "reserved but unallocated"
# of an out-of-memory message), and cuBLAS, NCCL and autograd take transients this model does not list;
# PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (profiles/slurm) narrows that gap, it does not close it.
MAX_MEMORY_SHARE = 0.90
GB = 1e9


@dataclass(frozen=True)
class Sharding:
    source: str  # the accelerate config file, or "none"
    stage: int  # ZeRO stage (FSDP full shard: 3, shard-grad-op: 2; plain DDP or one process: 0)
    offload_optimizer: bool
    offload_params: bool

    def describe(self) -> str:
        off = [name for name, on in (("optimizer", self.offload_optimizer), ("parameters", self.offload_params)) if on]
        return f"ZeRO-{self.stage}" + (f", {' and '.join(off)} offloaded to CPU" if off else ", no offload")


def read_sharding(accelerate_config: str | None) -> Sharding:
    """Stage and offload of `grpo.accelerate_config` (a shipped name or a path), read from the file."""
    if not accelerate_config:
        return Sharding("none", 0, False, False)
    from ewa.train.launch import accelerate_config_path

    path = accelerate_config_path(accelerate_config)
    raw = yaml.safe_load(path.read_text()) or {}
    kind = raw.get("distributed_type")
    if kind == "DEEPSPEED":
        ds = raw.get("deepspeed_config") or {}
        return Sharding(path.name, int(ds.get("zero_stage", 0)),
                        ds.get("offload_optimizer_device", "none") not in (None, "none"),
                        ds.get("offload_param_device", "none") not in (None, "none"))
    if kind == "FSDP":
        fsdp = raw.get("fsdp_config") or {}
        stage = {"NO_SHARD": 0, "SHARD_GRAD_OP": 2}.get(str(fsdp.get("fsdp_sharding_strategy", "FULL_SHARD")), 3)
        if fsdp.get("fsdp_reshard_after_forward") is False:  # FSDP2's spelling of SHARD_GRAD_OP
            stage = min(stage, 2)
        offload = bool(fsdp.get("fsdp_offload_params", False))  # FSDP offloads weights, grads and the step
        return Sharding(path.name, stage, offload, offload)
    return Sharding(path.name, 0, False, False)


def model_states(arch: Architecture, sharding: Sharding, processes: int, bf16: bool, reference: bool) -> dict:
    """Bytes per GPU of weights, gradients, optimizer state and TRL's reference model (beta > 0), and the
    host bytes offloading moves off the GPUs (the whole node's)."""
    p = arch.parameters
    weight, grad, optim = (BF16, BF16, 12) if bf16 else (4, 4, 8)  # fp32 Adam: no separate master copy
    weights = 0 if sharding.offload_params else p * weight / (processes if sharding.stage >= 3 else 1)
    grads = 0 if sharding.offload_optimizer else p * grad / (processes if sharding.stage >= 2 else 1)
    optimizer = 0 if sharding.offload_optimizer else p * optim / (processes if sharding.stage >= 1 else 1)
    # TRL prepares the reference model with the same DeepSpeed/FSDP plugin: sharded under stage 3
    ref = (p * weight / (processes if sharding.stage >= 3 else 1)) if reference else 0
    host = (p * (optim + 4) if sharding.offload_optimizer else 0) + (p * weight if sharding.offload_params else 0)
    return {"weights": weights, "gradients": grads, "optimizer": optimizer, "reference": ref, "host": host}


def layer_bytes_per_token(arch: Architecture, width: int) -> float:
    """What autograd keeps per token in one decoder layer (Korthikanti et al. 2022, sec. 4.1, adapted to
    a SwiGLU MLP and grouped-query attention with a fused kernel and no dropout): attention keeps its
    norm input, normed input, Q, K, V and output; the MLP its norm input, normed input, gate, up, the
    activation and their product."""
    return width * (4 * arch.hidden + 2 * arch.kv_dim + 2 * arch.hidden + 4 * arch.intermediate)


def activations(arch: Architecture, micro_batch: int, sequence: int, checkpointing: bool, bf16: bool) -> float:
    """One micro-batch's activations at their peak, in backward: with checkpointing, every layer's input
    plus the layer being recomputed; without, every layer's; either way plus that layer's gradients."""
    width = BF16 if bf16 else 4
    tokens = micro_batch * sequence
    layer = tokens * layer_bytes_per_token(arch, width)
    # While a layer back-propagates, autograd holds its saved (with checkpointing: just recomputed)
    # activations and also produces the gradient of each, as large as the activation it belongs to, before
    # the activations are freed: a second layer's worth on top of what forward left.
    backward = layer
    if checkpointing:
        return arch.layers * tokens * arch.hidden * width + layer + backward
    return arch.layers * layer + backward


def logprob_head(arch: Architecture, micro_batch: int, completion: int, gathered: bool) -> float:
    """TRL's fused log-prob head: one fp32 logit tile and its gradient, the fp32 LM-head gradient and its
    cast, the hidden-state gradient, and the LM head itself where ZeRO-3 gathers it."""
    tiles = 2 * min(LOGPROB_TOKEN_TILE, micro_batch * completion) * min(LOGPROB_VOCAB_TILE, arch.vocab) * 4
    head = arch.vocab * arch.hidden
    return tiles + head * (4 + BF16 + (BF16 if gathered else 0)) + micro_batch * completion * arch.hidden * 4


def vllm_needs(arch: Architecture, tensor_parallel: int, max_model_len: int) -> float:
    """Bytes per GPU vLLM needs to start: its share of the weights and the KV cache of one sequence of
    max_model_len tokens (vLLM refuses to start otherwise), plus its own overhead."""
    return (arch.weight_bytes() / tensor_parallel + max_model_len * arch.kv_bytes_per_token(tensor_parallel)
            + VLLM_OVERHEAD_GB * GB)


def kv_room(arch: Architecture, tensor_parallel: int, share: float) -> float:
    """Bytes per GPU left for the KV cache in a vLLM share."""
    return max(0.0, share - arch.weight_bytes() / tensor_parallel - VLLM_OVERHEAD_GB * GB)


def constants() -> dict:
    return {"zero3_live_parameters": ZERO3_LIVE_PARAMETERS, "logprob_tile": [LOGPROB_TOKEN_TILE, LOGPROB_VOCAB_TILE],
            "cuda_runtime_gb": CUDA_RUNTIME_GB, "vllm_overhead_gb": VLLM_OVERHEAD_GB}


def vllm_utilization_for(arch: Architecture, tensor_parallel: int, max_model_len: int, gpu_mem_gb: float) -> float:
    """The smallest gpu_memory_utilization (two decimals, as a config holds it) whose share vLLM starts in."""
    return math.ceil(vllm_needs(arch, tensor_parallel, max_model_len) / (gpu_mem_gb * GB) * 100 - 1e-9) / 100
