"""Model directories as every stage reads them: checking a Hugging Face directory is usable, a safetensors
checkpoint's tensor specs, its content fingerprint, and its tensors one at a time through memory maps."""
from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
from safetensors import SafetensorError, safe_open

from ewa.io import sha256_file
from ewa.errors import UserError

WEIGHTS_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
# Sampled fingerprint: size + first MiB (the safetensors header) + 32 blocks of 64 KiB spread over the
# file: ~3 MiB read per shard whatever its size. Retraining changes every block, but an edit to a single
# tensor can slip through -- hash_mode="full" (sha256 of every byte, ~1.3 GB/s here) catches that.
SAMPLE_HEAD, SAMPLE_BLOCKS, SAMPLE_BLOCK = 1 << 20, 32, 64 << 10
MODEL_WEIGHT_FILES = (WEIGHTS_FILE, INDEX_FILE, "pytorch_model.bin", "pytorch_model.bin.index.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")


class CheckpointError(UserError):
    """A model directory that cannot be read; the message names the file."""


def check_model_dir(path: str | os.PathLike, what: str = "--init") -> Path:
    """A usable HF model directory, or one error line naming what is missing."""
    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"{what}: {path} is not a directory (expected 'tiny' or a local Hugging Face model)")
    if not (path / "config.json").is_file():
        raise CheckpointError(f"{what}: {path}/config.json is missing")
    try:
        config = json.loads((path / "config.json").read_text())
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{what}: {path}/config.json is not valid JSON ({e.msg})") from None
    if not isinstance(config, dict) or "model_type" not in config:
        raise CheckpointError(f"{what}: {path}/config.json has no 'model_type'")
    if not any((path / f).is_file() for f in TOKENIZER_FILES):
        raise CheckpointError(f"{what}: {path} has no tokenizer (one of {', '.join(TOKENIZER_FILES)})")
    if not any((path / f).is_file() for f in MODEL_WEIGHT_FILES):
        raise CheckpointError(f"{what}: {path} has no weights (model.safetensors or a safetensors index)")
    return path


@dataclass(frozen=True)
class Checkpoint:
    """A safetensors model directory as the merge sees it: which shard holds each tensor, and its spec."""

    path: Path
    weight_map: dict[str, str]  # tensor name -> shard file, in shard then storage order
    specs: dict[str, tuple[str, tuple[int, ...]]]  # tensor name -> (safetensors dtype, shape)

    @property
    def files(self) -> list[str]:
        return list(dict.fromkeys(self.weight_map.values()))


def read_checkpoint(path: str | os.PathLike) -> Checkpoint:
    """Read the index (or the single model.safetensors) and every shard header; no tensor data."""
    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"{path}: model directory not found")
    if (path / WEIGHTS_FILE).is_file():  # transformers prefers the single file too
        listed, files = None, [WEIGHTS_FILE]
    elif (path / INDEX_FILE).is_file():
        try:
            listed = json.loads((path / INDEX_FILE).read_text())["weight_map"]
            if not isinstance(listed, dict) or not all(isinstance(v, str) for v in listed.values()):
                raise TypeError
        except (json.JSONDecodeError, KeyError, TypeError):
            raise CheckpointError(f"{path / INDEX_FILE}: malformed index (expected a JSON object with a weight_map)") from None
        files = list(dict.fromkeys(listed.values()))
    else:
        raise CheckpointError(f"{path}: no {WEIGHTS_FILE} or {INDEX_FILE} (not a safetensors model directory)")
    weight_map, specs = {}, {}
    for file in files:
        shard = path / file
        if not shard.is_file():
            raise CheckpointError(f"{shard}: shard listed in {INDEX_FILE} is missing")
        try:
            with safe_open(shard, framework="pt") as f:
                for name in f.offset_keys():  # storage order keeps reads sequential on a cold disk
                    if listed is None or listed.get(name) == file:
                        view = f.get_slice(name)
                        weight_map[name] = file
                        specs[name] = (view.get_dtype(), tuple(view.get_shape()))
        except SafetensorError as e:
            raise CheckpointError(f"{shard}: not a readable safetensors file ({e})") from None
    if listed is not None and (missing := [n for n in listed if n not in specs]):
        raise CheckpointError(f"{path / listed[missing[0]]}: does not contain tensor {missing[0]!r} listed in {INDEX_FILE}")
    if not specs:
        raise CheckpointError(f"{path}: holds no tensors")
    return Checkpoint(path, weight_map, specs)


def check_compatible(base: Checkpoint, others: Sequence[Checkpoint]) -> None:
    """Same tensor names, shapes and dtypes everywhere, or an error naming the first tensor that differs."""
    for other in others:
        if missing := [n for n in base.specs if n not in other.specs]:
            raise CheckpointError(f"tensor {missing[0]!r} is in {base.path} but missing from {other.path}")
        if extra := [n for n in other.specs if n not in base.specs]:
            raise CheckpointError(f"tensor {extra[0]!r} is in {other.path} but missing from {base.path}")
        for name, (dtype, shape) in base.specs.items():
            other_dtype, other_shape = other.specs[name]
            if shape != other_shape:
                raise CheckpointError(f"tensor {name!r}: shape {list(shape)} in {base.path} but {list(other_shape)} in {other.path}")
            if dtype != other_dtype:
                raise CheckpointError(f"tensor {name!r}: dtype {dtype} in {base.path} but {other_dtype} in {other.path}")


def fingerprint(ckpt: Checkpoint, mode: str = "sampled") -> dict:
    """Content hash of each weight file, for the merge record (see SAMPLE_* for the trade-off)."""
    files = {}
    for file in ckpt.files:
        path = ckpt.path / file
        size = path.stat().st_size
        if mode == "full":
            digest = sha256_file(path)
        else:
            h = hashlib.sha256(size.to_bytes(8, "little"))
            with open(path, "rb") as f:
                h.update(f.read(SAMPLE_HEAD))
                for i in range(SAMPLE_BLOCKS):
                    f.seek(size * i // SAMPLE_BLOCKS)
                    h.update(f.read(SAMPLE_BLOCK))
            digest = h.hexdigest()
        files[file] = {"size": size, "sha256": digest}
    record = {"path": str(ckpt.path.resolve()), "hash": mode, "files": files}
    if WEIGHTS_FILE not in files:
        record["index_sha256"] = sha256_file(ckpt.path / INDEX_FILE)
    return record


class ShardReader:
    """Opens a checkpoint's shards on demand and lets go of each after its last tensor, so about one
    memory-mapped shard per input is resident at a time."""

    def __init__(self, ckpt: Checkpoint):
        self.ckpt = ckpt
        self.left = Counter(ckpt.weight_map.values())
        self.handles = {}

    def get(self, name: str) -> torch.Tensor:
        file = self.ckpt.weight_map[name]
        if file not in self.handles:
            self.handles[file] = safe_open(self.ckpt.path / file, framework="pt")
        tensor = self.handles[file].get_tensor(name)  # a view of the mapping: no copy
        self.left[file] -= 1
        if not self.left[file]:
            self.handles.pop(file).__exit__(None, None, None)  # the mapping lives on until the views die
        return tensor

    def close(self) -> None:
        for handle in self.handles.values():
            handle.__exit__(None, None, None)
        self.handles.clear()
