"""Bytes per GPU. Model states follow the ZeRO paper's accounting (Rajbhandari et al. 2020, sec. 3.1) for what
each training path really holds (`precision`): DeepSpeed's bf16 mixed precision keeps 2 bytes of bf16 weights, 2
of bf16 gradients and 12 of fp32 master weights, momentum and variance per parameter; ewa's other paths load the
parameters in fp32 (ewa.train.grpo) and train them under bf16 autocast (one process, DDP) or FSDP2's bf16
mixed precision, so weights, gradients and both Adam moments are fp32 (4 + 4 + 8 bytes; no separate master
copy). Stage 1 shards the optimizer state over the data-parallel GPUs, stage 2 the gradients too, stage 3 the
weights too (FSDP full sharding is stage 3). Offloading moves the optimizer state (and with it the gradients
it consumes) or the weights to host memory.

Activations and TRL's log-prob head are counted from what autograd saves (measured per layer with
saved-tensor hooks on a Qwen2 decoder layer) and checked against one step measured on an H100 80 GB
(docs/scale.md, "Predicted and measured").
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
# CUDA context, cuBLAS workspaces and allocator fragmentation per GPU: one process holds a context and some
# memory reserved but unallocated at its peak (docs/scale.md, "Predicted and measured"); several processes
# add NCCL buffers and ZeRO-3's fragmentation (assumed, not measured).
CUDA_RUNTIME_GB = 3.0
ONE_PROCESS_CUDA_RUNTIME_GB = 1.5
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
    engine: str = "none"  # "deepspeed", "fsdp", or "none" (one process or DDP: bf16 by autocast)

    def describe(self) -> str:
        off = [name for name, on in (("optimizer", self.offload_optimizer), ("parameters", self.offload_params)) if on]
        return f"ZeRO-{self.stage}" + (f", {' and '.join(off)} offloaded to CPU" if off else ", no offload")


NO_SHARDING = Sharding("none", 0, False, False)


def read_sharding(accelerate_config: str | None) -> Sharding:
    """Stage and offload of `grpo.accelerate_config` (a shipped name or a path), read from the file."""
    if not accelerate_config:
        return NO_SHARDING
    from ewa.train.launch import accelerate_config_path

    path = accelerate_config_path(accelerate_config)
    raw = yaml.safe_load(path.read_text()) or {}
    kind = raw.get("distributed_type")
    if kind == "DEEPSPEED":
        ds = raw.get("deepspeed_config") or {}
        return Sharding(path.name, int(ds.get("zero_stage", 0)),
                        ds.get("offload_optimizer_device", "none") not in (None, "none"),
                        ds.get("offload_param_device", "none") not in (None, "none"), "deepspeed")
    if kind == "FSDP":
        fsdp = raw.get("fsdp_config") or {}
        stage = {"NO_SHARD": 0, "SHARD_GRAD_OP": 2}.get(str(fsdp.get("fsdp_sharding_strategy", "FULL_SHARD")), 3)
        if fsdp.get("fsdp_reshard_after_forward") is False:  # FSDP2's spelling of SHARD_GRAD_OP
            stage = min(stage, 2)
        offload = bool(fsdp.get("fsdp_offload_params", False))  # FSDP offloads weights, grads and the step
        return Sharding(path.name, stage, offload, offload, "fsdp")
    return Sharding(path.name, 0, False, False)


@dataclass(frozen=True)
class Precision:
    """What a training path holds: bytes per parameter of each model state, and bytes per element of the
    activations (`residual`: the stream between layers and what norms save; `compute`: matmul outputs)."""
    name: str
    weights: int
    gradients: int
    optimizer: int  # Adam's moments, and fp32 master weights where the weights are not fp32
    reference: int  # TRL's reference model (grpo.beta > 0)
    residual: int
    compute: int
    autocast: bool  # bf16 autocast over fp32 weights: it caches a bf16 copy of each weight while forward runs


FP32 = Precision("fp32 weights, gradients and Adam moments (no master copy)", 4, 4, 8, 4, 4, 4, False)
AUTOCAST = Precision("fp32 weights, gradients and Adam moments; bf16 autocast computes", 4, 4, 8, 4, 4, 2, True)
DEEPSPEED_BF16 = Precision("DeepSpeed bf16: bf16 weights and gradients, fp32 master weights and Adam moments",
                           2, 2, 12, 2, 2, 2, False)
FSDP_BF16 = Precision("FSDP2 bf16 mixed precision: fp32 weights, gradients and Adam moments, bf16 compute",
                      4, 4, 8, 4, 2, 2, False)
# AdamW over bf16 weights (bf16 moments, no master copy; it drops updates below half a bf16 step): what a
# model loaded in bf16 holds, the contrast tests/test_bf16.py and the H100 comparison in docs/scale.md use.
PURE_BF16 = Precision("bf16 weights, gradients and Adam moments (no master copy)", 2, 2, 4, 2, 2, 2, False)


def precision(sharding: Sharding, bf16: bool) -> Precision:
    """What ewa.train.grpo's set-up holds on this path: it loads fp32 (grpo_config), DeepSpeed casts the model
    to bf16 and keeps the fp32 copy in its optimizer, accelerate's FSDP2 keeps fp32 shards and gathers bf16."""
    if not bf16:
        return FP32
    return {"deepspeed": DEEPSPEED_BF16, "fsdp": FSDP_BF16}.get(sharding.engine, AUTOCAST)


def model_states(arch: Architecture, sharding: Sharding, processes: int, held: Precision, reference: bool) -> dict:
    """Bytes per GPU of weights, gradients, optimizer state and TRL's reference model (beta > 0), and the
    host bytes offloading moves off the GPUs (the whole node's)."""
    p = arch.parameters
    weight, grad, optim = held.weights, held.gradients, held.optimizer
    weights = 0 if sharding.offload_params else p * weight / (processes if sharding.stage >= 3 else 1)
    grads = 0 if sharding.offload_optimizer else p * grad / (processes if sharding.stage >= 2 else 1)
    optimizer = 0 if sharding.offload_optimizer else p * optim / (processes if sharding.stage >= 1 else 1)
    # TRL prepares the reference model with the same DeepSpeed/FSDP plugin: sharded under stage 3
    ref = (p * held.reference / (processes if sharding.stage >= 3 else 1)) if reference else 0
    # DeepSpeed's CPU Adam keeps fp32 gradients beside the optimizer state in host memory
    host = (p * (optim + 4) if sharding.offload_optimizer else 0) + (p * weight if sharding.offload_params else 0)
    return {"weights": weights, "gradients": grads, "optimizer": optimizer, "reference": ref, "host": host}


def layer_bytes_per_token(arch: Architecture, held: Precision) -> float:
    """What autograd keeps per token in one Qwen2-style decoder layer (SwiGLU MLP, grouped-query attention,
    fused attention kernel, no dropout), as counted with saved-tensor hooks: in compute width the gate, up,
    activation and product of the MLP, K and V, and six hidden-wide tensors (the normed inputs of attention
    and MLP, Q, and the attention output as the kernel and the output projection keep it); each RMSNorm also
    saves an fp32 copy of its input (2 x 4 bytes). Over fp32 weights under autocast, the norms' outputs are fp32 and
    each is saved again as the bf16 cast a projection takes (5 hidden-wide tensors grow by residual - compute
    bytes). The rotary tables (under 1%) are left out; docs/scale.md compares this with the hooks' counts."""
    c, r = held.compute, held.residual
    return c * (4 * arch.intermediate + 2 * arch.kv_dim + 6 * arch.hidden) + 8 * arch.hidden + (r - c) * 5 * arch.hidden


def activations(arch: Architecture, micro_batch: int, sequence: int, checkpointing: bool, held: Precision,
                layer_gradients: float = 0.0) -> float:
    """One micro-batch's activations at their peak, in backward. Without checkpointing, every layer's saved
    activations and the one back-propagating's gradients. With it, every layer's input (in residual width) and
    the saved activations of the layer being recomputed; backward frees each layer's input as it creates that
    layer's gradients, so where those gradients appear only in this backward (`layer_gradients`: their bytes on
    this GPU when a step has one micro-batch; HF Trainer drops gradients after each optimizer step) the two take
    turns and at most the larger of them, plus one layer of the other, is live at once."""
    tokens = micro_batch * sequence
    layer = tokens * layer_bytes_per_token(arch, held)
    if not checkpointing:
        return arch.layers * layer + layer
    inputs = arch.layers * tokens * arch.hidden * held.residual
    live = max(inputs / arch.layers, inputs - layer_gradients * (1 - 1 / arch.layers))
    return live + layer


def logprob_head(arch: Architecture, micro_batch: int, completion: int, held: Precision, gathered: bool) -> float:
    """TRL's fused log-prob head in backward (trl/kernels/chunked_logprob.py): one logit tile in compute width,
    the fp32 gradient of the LM-head matrix and its cast to the weights' dtype, the fp32 hidden-state gradient
    and its cast, and the LM head itself where ZeRO-3 gathers it (bf16)."""
    tokens = micro_batch * completion
    tile = min(LOGPROB_TOKEN_TILE, tokens) * min(LOGPROB_VOCAB_TILE, arch.vocab) * held.compute
    head = arch.vocab * arch.hidden
    head_grad = head * (4 + (held.weights if held.weights != 4 else 0))
    hidden_grad = tokens * arch.hidden * (4 + (held.residual if held.residual != 4 else 0))
    return tile + head_grad + hidden_grad + (head * BF16 if gathered else 0)


def autocast_copies(arch: Architecture, held: Precision) -> float:
    """The bf16 copies autocast caches of fp32 weights while a forward runs (it caches casts of leaf tensors
    that require grad until the outermost autocast region exits): every weight a projection uses; not the
    embedding, whose lookup is not autocast, nor the LM head, which TRL's fused head casts tile by tile."""
    if not held.autocast:
        return 0.0
    head = arch.vocab * arch.hidden * (1 if arch.tied else 2)
    return (arch.parameters - head) * BF16


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
            "cuda_runtime_gb": CUDA_RUNTIME_GB, "one_process_cuda_runtime_gb": ONE_PROCESS_CUDA_RUNTIME_GB,
            "vllm_overhead_gb": VLLM_OVERHEAD_GB}


def vllm_utilization_for(arch: Architecture, tensor_parallel: int, max_model_len: int, gpu_mem_gb: float) -> float:
    """The smallest gpu_memory_utilization (two decimals, as a config holds it) whose share vLLM starts in."""
    return math.ceil(vllm_needs(arch, tensor_parallel, max_model_len) / (gpu_mem_gb * GB) * 100 - 1e-9) / 100
