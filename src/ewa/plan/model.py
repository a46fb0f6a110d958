"""The model a config trains: its architecture, and its exact parameter count from building it on the
meta device (accelerate.init_empty_weights), so no weights are read and no memory is spent."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ewa.errors import UserError

BF16 = 2  # bytes per parameter or activation in bfloat16


@dataclass(frozen=True)
class Architecture:
    source: str  # the config.json it was read from, or "model.tiny"
    model_type: str
    parameters: int
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    max_positions: int
    tied: bool

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def kv_bytes_per_token(self, tensor_parallel: int = 1) -> int:
        """K and V of every layer for one token on one GPU of a tensor-parallel group (bf16). vLLM splits
        the KV heads over the group and replicates them when there are fewer heads than GPUs."""
        heads_per_gpu = -(-self.kv_heads // tensor_parallel)
        return 2 * self.layers * heads_per_gpu * self.head_dim * BF16

    def weight_bytes(self, bytes_per_parameter: int = BF16) -> int:
        return self.parameters * bytes_per_parameter

    def summary(self) -> dict:
        return {"source": self.source, "model_type": self.model_type, "parameters": self.parameters,
                "hidden_size": self.hidden, "intermediate_size": self.intermediate, "layers": self.layers,
                "heads": self.heads, "kv_heads": self.kv_heads, "vocab_size": self.vocab,
                "max_position_embeddings": self.max_positions, "tie_word_embeddings": self.tied}


def config_json_path(model: dict, model_config: str | None) -> Path | None:
    """Where the architecture comes from: --model-config (a config.json or the directory holding one),
    else the local model directory `model.init` names; None for the tiny init."""
    if model_config:
        path = Path(model_config)
        return path / "config.json" if path.is_dir() else path
    if model["init"] == "tiny":
        return None
    return Path(model["init"]) / "config.json"


def tiny_config(tiny: dict) -> dict:
    """The config.json `ewa init` writes for the tiny Qwen2 (ewa.init.tiny.build_tiny_model)."""
    return {"model_type": "qwen2", "vocab_size": tiny["vocab_size"], "hidden_size": tiny["hidden_size"],
            "intermediate_size": tiny["intermediate_size"], "num_hidden_layers": tiny["num_layers"],
            "num_attention_heads": tiny["num_heads"], "num_key_value_heads": tiny["num_kv_heads"],
            "max_position_embeddings": tiny["max_position_embeddings"], "tie_word_embeddings": True}


def read_config_json(path: Path, flag: str) -> dict:
    if not path.is_file():
        hint = " (stage the model there, or pass --model-config FILE)" if flag == "model.init" else ""
        raise UserError(f"{flag}: {path} is missing{hint}")
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise UserError(f"{flag}: {path} is not valid JSON ({e.msg})") from None
    if not isinstance(raw, dict) or "model_type" not in raw:
        raise UserError(f"{flag}: {path} has no 'model_type'")
    return raw


def architecture(model: dict, model_config: str | None = None) -> Architecture:
    """The architecture of the config's `model` section (or of --model-config)."""
    path = config_json_path(model, model_config)
    flag = "--model-config" if model_config else "model.init"
    raw = tiny_config(model["tiny"]) if path is None else read_config_json(path, flag)
    where = "model.tiny" if path is None else str(path)
    return build(raw, where)


def build(raw: dict, where: str) -> Architecture:
    from accelerate import init_empty_weights
    from transformers import AutoConfig, AutoModelForCausalLM

    fields = dict(raw)
    model_type = fields.pop("model_type")
    try:
        config = AutoConfig.for_model(model_type, **fields)
        with init_empty_weights():  # parameters on the meta device: shapes, no storage
            net = AutoModelForCausalLM.from_config(config)
        net.tie_weights()  # built on the meta device the LM head stays a second matrix; loading ties it
    except (ValueError, KeyError, TypeError) as e:
        raise UserError(f"{where}: not a causal LM transformers can build ({e})") from None
    missing = [k for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                           "vocab_size", "max_position_embeddings") if getattr(config, k, None) is None]
    if missing:
        raise UserError(f"{where}: field '{missing[0]}' is missing")
    heads = config.num_attention_heads
    return Architecture(
        source=where, model_type=model_type,
        parameters=sum(p.numel() for p in net.parameters()),  # tied embeddings are one parameter (once tied)
        hidden=config.hidden_size, intermediate=config.intermediate_size, layers=config.num_hidden_layers,
        heads=heads, kv_heads=getattr(config, "num_key_value_heads", None) or heads,
        head_dim=getattr(config, "head_dim", None) or config.hidden_size // heads,
        vocab=config.vocab_size, max_positions=config.max_position_embeddings,
        tied=bool(getattr(config, "tie_word_embeddings", False)),
    )
