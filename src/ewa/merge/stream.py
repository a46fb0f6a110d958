"""The merge's single pass: each tensor of every input is read once, blended in float32 for every
coefficient set (every alpha), and appended to every output model; outputs appear atomically, one writer
at a time, and only once their shards read back with every tensor of the inputs."""
from __future__ import annotations

import json
import math
import os
import shutil
from contextlib import ExitStack
from pathlib import Path
from typing import Sequence

import torch

from ewa.io import atomic_path, exclusive_output, provenance
from ewa.merge import HASH_MODES, MergeError, parse_size
from ewa.checkpoint import (CONFIG_FILE, MERGE_RECORD_FILE, Checkpoint, CheckpointError, ShardReader,
                            check_compatible, check_tensors, expected_tensors, fingerprint, model_config,
                            read_checkpoint, read_config)
from ewa.merge.blend import DeviceBlend, HostBlend, resolve_device
from ewa.merge.writer import BlockWriter, ModelWriter, as_bytes, plan_layout

# (block bytes, buffers) of the write ring: on CPU a block stays in cache from blend to write(); on a GPU
# large blocks keep kernel launches and copies few (pinned buffers for the device-to-host copies). The
# GPU path also holds ewa.merge.blend.LANES staging blocks of each input, on the host and on the card.
CPU_BLOCKS, GPU_BLOCKS = (1 << 20, 32), (64 << 20, 4)
# Weights, training state and records belong to the source checkpoint, not to the merged model; so does
# its card. (ewa_train.json/ewa_init.json would otherwise claim the merge was trained.)
NOT_COPIED = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".gguf", ".safetensors.index.json",
              MERGE_RECORD_FILE, "trainer_state.json", "README.md", "ewa_train.json", "ewa_init.json", "metrics.csv")
# Config keys that do not change what the weights compute, so inputs may differ in them: provenance, the
# storage dtype (each tensor's dtype is compared from the headers), what a forward call returns or caches,
# and the scale of a random init (a merged model has every tensor). Every other key must agree.
CONFIG_KEYS_IGNORED = frozenset({
    "_name_or_path", "_commit_hash", "transformers_version", "dtype", "torch_dtype", "use_cache",
    "output_attentions", "output_hidden_states", "return_dict", "_attn_implementation",
    "_attn_implementation_autoset", "initializer_range"})


def exact_source(coefficients: Sequence[float]) -> int | None:
    """Which input an output reproduces bit for bit (0 = base, i = endpoint i), or None for a blend."""
    nonzero = [i for i, c in enumerate(coefficients, 1) if c != 0]
    if not nonzero:
        return 0
    if len(nonzero) == 1 and coefficients[nonzero[0] - 1] == 1:
        return nonzero[0]
    return None


def blender_for(device: str, writer: BlockWriter) -> HostBlend | DeviceBlend:
    return HostBlend(writer) if device == "cpu" else DeviceBlend(device, writer)


def stream(base: Checkpoint, endpoints: list[Checkpoint], coefficient_sets, models: list[ModelWriter],
           blend, meter=None) -> None:
    """The single pass: each tensor of every input is read once and written to every output (counted on
    `meter`, an ewa.progress.Progress, in tensors and GB read)."""
    exact = [exact_source(c) for c in coefficient_sets]
    readers = [ShardReader(c) for c in (base, *endpoints)]
    try:
        for name in base.weight_map:
            tensors = [reader.get(name) for reader in readers]
            if meter is not None:
                meter.update(1, gb=sum(t.numel() * t.element_size() for t in tensors) / 1e9)
            for model in models:
                model.begin(name)
            if not tensors[0].is_floating_point():  # integer/bool buffers have no meaningful average
                for other, ckpt in zip(tensors[1:], endpoints):
                    if not torch.equal(tensors[0], other):
                        raise MergeError(f"tensor {name!r} ({tensors[0].dtype}) differs between {base.path} and "
                                         f"{ckpt.path}; non-floating tensors are copied, so they must be equal")
                exact_here = [0] * len(models)
            else:
                exact_here = exact
            blended = []
            for model, coefficients, source in zip(models, coefficient_sets, exact_here):
                if source is not None:  # alpha 0 / 1 and integer buffers: the source bytes, no float round trip
                    model.write(as_bytes(tensors[source]))
                else:
                    blended.append((model, coefficients))
            if blended:
                blend(tensors, blended)
    finally:
        for reader in readers:
            reader.close()


def copy_non_weights(source: Path, target: Path, config: dict) -> None:
    """config.json (from the parsed object), generation_config.json, tokenizer files: everything a loader
    needs besides weights."""
    (target / CONFIG_FILE).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    for entry in sorted(source.iterdir()):
        if entry.is_file() and entry.name != CONFIG_FILE and not entry.name.endswith(NOT_COPIED):
            shutil.copy2(entry, target / entry.name)


UNSET = "unset"


def config_difference(a: dict, b: dict) -> tuple | None:
    """The path to the first key (in sorted order, nested dicts entered) whose values differ, ignoring
    CONFIG_KEYS_IGNORED at every level; None when the configs describe the same computation."""
    for key in sorted(a.keys() | b.keys(), key=str):
        if key in CONFIG_KEYS_IGNORED:
            continue
        x, y = a.get(key, UNSET), b.get(key, UNSET)
        if isinstance(x, dict) and isinstance(y, dict):
            if (inner := config_difference(x, y)) is not None:
                return (key, *inner)
        elif x != y:
            return (key,)
    return None


def config_value(config: dict, path: tuple) -> str:
    for key in path:
        config = config.get(key, UNSET) if isinstance(config, dict) else UNSET
    return config if config is UNSET else repr(config)[:80]


def check_same_architecture(inputs: list[Checkpoint]) -> dict:
    """Every input's config.json parses and describes the same model as the first's; returns the first's
    parsed JSON. Files that agree key by key (CONFIG_KEYS_IGNORED aside; endpoints trained from one init
    do) need nothing more; otherwise they are compared as transformers reads them (legacy keys
    normalised, defaults filled), which costs importing it."""
    raw = [read_config(c.path) for c in inputs]
    if all(config_difference(raw[0], other) is None for other in raw[1:]):
        return raw[0]
    parsed = [model_config(c.path).to_dict() for c in inputs]
    for other, config in zip(inputs[1:], parsed[1:]):
        if (path := config_difference(parsed[0], config)) is not None:
            key = ".".join(map(str, path))
            raise MergeError(f"{other.path / CONFIG_FILE}: {key!r} is {config_value(config, path)} but "
                             f"{config_value(parsed[0], path)} in {inputs[0].path / CONFIG_FILE}; "
                             f"the inputs of a merge must share one architecture")
    return raw[0]


def open_inputs(base_dir, endpoint_dirs, out_dirs: list[Path]) -> tuple[Checkpoint, list[Checkpoint], dict]:
    """Read and cross-check every input's tensor specs and config; refuse outputs that would overwrite an
    input. Returns the base, the endpoints, and the config the outputs get."""
    base = read_checkpoint(base_dir)
    if not (base.path / CONFIG_FILE).is_file():
        raise MergeError(f"{base.path}: no config.json (not a Hugging Face model directory)")
    endpoints = [read_checkpoint(p) for p in endpoint_dirs]
    check_compatible(base, endpoints)
    config = check_same_architecture([base, *endpoints])
    # Every input has the base's tensors and architecture, so the base speaks for all: no tensor its
    # config asks for may be absent from the outputs. Extra tensors are merged like any other.
    check_tensors(base, expected_tensors(base.path), extra_ok=True)
    inputs = [c.path.resolve() for c in (base, *endpoints)]
    if len({p.resolve() for p in out_dirs}) != len(out_dirs):
        raise MergeError(f"output directories are not distinct: {[str(p) for p in out_dirs]}")
    for out in out_dirs:
        res = out.resolve()
        if any(res == i or i in res.parents or res in i.parents for i in inputs):
            raise MergeError(f"{out}: output directory overlaps an input model directory")
    return base, endpoints, config


def verify_output(written_dir: Path, out: Path, base: Checkpoint) -> None:
    """The written shards read back (headers only) with every tensor of the inputs in its dtype and shape,
    and nothing else: what a merge promises, checked before anything is published."""
    try:
        written = read_checkpoint(written_dir)
    except CheckpointError as e:
        raise MergeError(f"{out}: the written model does not read back ({e}); nothing was published") from None
    for name, spec in base.specs.items():
        if name not in written.specs:
            raise MergeError(f"{out}: tensor {name!r} is missing from the written shards; nothing was published")
        if written.specs[name] != spec:
            raise MergeError(f"{out}: tensor {name!r} was written as {written.specs[name]} instead of {spec}; "
                             f"nothing was published")
    if extra := [n for n in written.specs if n not in base.specs]:
        raise MergeError(f"{out}: the written shards hold tensor {extra[0]!r} that no input has; nothing was published")


def merge(base_dir, endpoint_dirs, coefficient_sets, out_dirs, roles: list[str], records: list[dict], *,
          device: str, max_shard_bytes, hash_mode: str, progress: bool) -> list[Path]:
    """Validate everything up front, stream once, publish every output atomically.

    `roles` names [base, *endpoints] in the record; `records` holds each output's method-specific fields.
    """
    coefficient_sets = [[float(c) for c in cs] for cs in coefficient_sets]
    out_dirs = [Path(p) for p in out_dirs]
    if not out_dirs or len(out_dirs) != len(coefficient_sets):
        raise MergeError(f"{len(coefficient_sets)} coefficient sets / alphas but {len(out_dirs)} output directories")
    for cs in coefficient_sets:
        if len(cs) != len(endpoint_dirs) or not all(math.isfinite(c) for c in cs):
            raise MergeError(f"coefficients {cs}: need {len(endpoint_dirs)} finite numbers, one per endpoint")
    if hash_mode not in HASH_MODES:
        raise MergeError(f"hash {hash_mode!r}: expected one of {', '.join(HASH_MODES)}")
    if (max_shard_bytes := parse_size(max_shard_bytes)) <= 0:
        raise MergeError("max shard size must be positive")
    base, endpoints, model_config_json = open_inputs(base_dir, endpoint_dirs, out_dirs)
    device = resolve_device(device)
    layout = plan_layout(list(base.weight_map), base.specs, max_shard_bytes)
    config = {"device": device, "max_shard_bytes": max_shard_bytes, "hash": hash_mode}

    with ExitStack() as stack:
        # One writer per output; under the locks, what killed runs left is removed, and a full disk
        # becomes one line (exclusive_output). Entered first, so they are released last.
        for out in out_dirs:
            stack.enter_context(exclusive_output(out, what="ewa merge"))
        hashes = {role: fingerprint(c, hash_mode) for role, c in zip(roles, (base, *endpoints))}
        tmp_dirs = [stack.enter_context(atomic_path(p)) for p in out_dirs]
        for tmp in tmp_dirs:
            tmp.mkdir()
        gpu = device.startswith("cuda")
        writer = BlockWriter(*(GPU_BLOCKS if gpu else CPU_BLOCKS), pin_memory=gpu)
        models = [ModelWriter(tmp, layout, writer) for tmp in tmp_dirs]
        blend = blender_for(device, writer)
        # unwound first: the card stops copying, writes stop and files close before the temp dirs go
        stack.callback(lambda: [m.abort() for m in models])
        stack.callback(writer.close, cancel=True)
        stack.callback(blend.close)
        threads = torch.get_num_threads()
        # the writer thread needs a core of its own; blending is memory-bound and gains little from more
        torch.set_num_threads(max(1, min(threads, (os.cpu_count() or 2) - 1)))
        stack.callback(torch.set_num_threads, threads)
        if progress:  # tensors of all, GB read per second (ewa.progress): lines on stderr, the job's progress file
            from ewa.progress import Progress

            meter = stack.enter_context(Progress(
                "merge", len(base.weight_map), "tensors", out=out_dirs[0], counters={"gb": "GB"},
                label=f"ewa merge {', '.join(p.name for p in out_dirs)}"))
        else:
            meter = None
        stream(base, endpoints, coefficient_sets, models, blend, meter)
        blend.close()
        for model in models:
            model.close()
        writer.close()
        for tmp, out in zip(tmp_dirs, out_dirs):
            verify_output(tmp, out, base)
        for tmp, coefficients, record in zip(tmp_dirs, coefficient_sets, records):
            copy_non_weights(base.path, tmp, model_config_json)
            exact = exact_source(coefficients)
            record = {**record, "exact_copy_of": None if exact is None else roles[exact], "inputs": hashes}
            (tmp / MERGE_RECORD_FILE).write_text(json.dumps(provenance(config, **record), indent=2) + "\n")
    return out_dirs
