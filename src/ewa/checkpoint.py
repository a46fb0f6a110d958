"""Model directories as every stage reads them: checking a Hugging Face directory is usable and loads whole
(every tensor its config asks for, none else, right shapes), a safetensors checkpoint's tensor specs, its
content fingerprint, and its tensors one at a time through memory maps."""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
from safetensors import SafetensorError, safe_open

from ewa.io import sha256_file
from ewa.errors import UserError

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
# Sampled fingerprint: size + first MiB (the safetensors header) + 32 blocks of 64 KiB spread over the
# file: ~3 MiB read per shard whatever its size. Retraining changes every block, but an edit to a single
# tensor can slip through -- hash_mode="full" (sha256 of every byte, at disk speed) catches that.
SAMPLE_HEAD, SAMPLE_BLOCKS, SAMPLE_BLOCK = 1 << 20, 32, 64 << 10
MODEL_WEIGHT_FILES = (WEIGHTS_FILE, INDEX_FILE, "pytorch_model.bin", "pytorch_model.bin.index.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")
MERGE_RECORD_FILE = "ewa_merge.json"  # what a merged model directory records about its making


class CheckpointError(UserError):
    """A model directory that cannot be read; the message names the file."""


def read_config(path: str | os.PathLike, what: str | None = None) -> dict:
    """A model directory's config.json as parsed JSON, or one error line naming the file."""
    file = Path(path) / CONFIG_FILE
    where = f"{what}: {file}" if what else str(file)
    if not file.is_file():
        raise CheckpointError(f"{where} is missing")
    try:
        config = json.loads(file.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{where} is not valid JSON ({getattr(e, 'msg', None) or e.reason})") from None
    if not isinstance(config, dict) or "model_type" not in config:
        raise CheckpointError(f"{where} has no 'model_type'")
    return config


def merge_record(model_dir: str | os.PathLike) -> dict | None:
    """The merge record of a merged model directory (None for any other model). Sampling copies it into
    its provenance: with merge.temp the directory itself is deleted once its alpha is sampled."""
    path = Path(model_dir) / MERGE_RECORD_FILE
    return json.loads(path.read_text()) if path.is_file() else None


def model_config(path: str | os.PathLike, what: str | None = None):
    """config.json as transformers reads it (legacy keys normalised, defaults filled), or one error line."""
    import transformers

    read_config(path, what)
    file = Path(path) / CONFIG_FILE
    try:
        return transformers.AutoConfig.from_pretrained(path)
    except Exception as e:  # any failure here is the config's: unknown model_type, a bad value, ...
        raise CheckpointError(f"{f'{what}: ' if what else ''}{file}: transformers {transformers.__version__} "
                              f"cannot read it ({one_line(e)})") from None


def one_line(error: BaseException, limit: int = 300) -> str:
    """A library's (often multi-line) exception as the tail of a one-line message."""
    text = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
    return f"{type(error).__name__}: {text[:limit] + '...' if len(text) > limit else text}"


def check_model_dir(path: str | os.PathLike, what: str = "--init") -> Path:
    """A usable HF model directory, or one error line naming what is missing."""
    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"{what}: {path} is not a directory (expected 'tiny' or a local Hugging Face model)")
    read_config(path, what)
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

    @property
    def listing(self) -> Path:
        """The file that says which tensors the checkpoint holds: the single file, or the index."""
        return self.path / (WEIGHTS_FILE if self.files == [WEIGHTS_FILE] else INDEX_FILE)


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


@dataclass(frozen=True)
class ModelTensors:
    """The tensors a model's state dict holds, as a loader matches them against a checkpoint."""

    source: str  # what the expectation comes from, for messages: "config.json (Qwen2ForCausalLM)"
    shapes: dict[str, tuple[int, ...]]  # state-dict name -> shape (non-persistent buffers are not in it)
    tied: dict[str, str]  # tied name -> the name it shares storage with: either may be the one on disk
    ignore_missing: re.Pattern | None  # names the model class declares optional on load
    ignore_unexpected: re.Pattern | None  # stale names of old checkpoints the loader drops (inv_freq, ...)


def model_tensors(model, source: str) -> ModelTensors:
    """What `model` (on the meta device, or loaded) expects from its checkpoint, with transformers' own
    tying and ignore rules, so the check refuses exactly what the loader would fill at random."""
    state = model.state_dict(keep_vars=True)  # the parameters themselves: no copy, and ties stay visible
    # DeepSpeed ZeRO-3 leaves empty placeholders; their real shape is ds_shape
    shapes = {name: tuple(getattr(t, "ds_shape", t.shape)) for name, t in state.items()}
    tied = dict(getattr(model, "all_tied_weights_keys", None) or {})
    first = {}
    for name, t in state.items():  # parameters shared by module (not by mapping) are tied as well
        if (owner := first.setdefault(id(t), name)) != name:
            tied.setdefault(name, owner)
    missing = set(getattr(model, "_keys_to_ignore_on_load_missing", None) or ())
    unexpected = set(getattr(model, "_keys_to_ignore_on_load_unexpected", None) or ())
    # transformers drops these two stale buffers of old checkpoints whatever the class says
    buffers = [name for name, _ in model.named_buffers()]
    if any(b.endswith("rotary_emb.inv_freq") for b in buffers):
        unexpected.add(r"rotary_emb\.inv_freq")
    if any(b.endswith("position_ids") for b in buffers):
        unexpected.add(r"(^|\.)position_ids$")
    def pattern(patterns: set[str]) -> re.Pattern | None:
        return re.compile("|".join(f"({p})" for p in sorted(patterns))) if patterns else None

    return ModelTensors(source, shapes, tied, pattern(missing), pattern(unexpected))


def expected_tensors(path: str | os.PathLike, what: str | None = None) -> ModelTensors:
    """The tensors config.json asks for: the model class built on the meta device (shapes only, no memory
    and no weights read), the way every loader here builds it (AutoModelForCausalLM).

    Importing transformers' model classes costs seconds, more than a small merge, and the answer depends
    only on the config and the transformers version: it is kept in EWA_CACHE_DIR (model-tensors/, one
    small JSON file per config) and built again only for a config or a version not seen before."""
    config = read_config(path, what)
    cached = tensors_cache_file(config)
    if cached is not None and (expected := read_cached_tensors(cached)) is not None:
        return expected
    import transformers

    parsed = model_config(path, what)
    try:
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(parsed)
    except Exception as e:  # the config names a class or values transformers cannot build a model from
        raise CheckpointError(f"{f'{what}: ' if what else ''}{Path(path) / CONFIG_FILE}: transformers "
                              f"{transformers.__version__} cannot build a model from it ({one_line(e)})") from None
    expected = model_tensors(model, f"{CONFIG_FILE} ({type(model).__name__})")
    if cached is not None:
        write_cached_tensors(cached, expected)
    return expected


# Where a config.json came from, not what it says: the same expected tensors whatever these hold. Every
# other key counts, so a config transformers would refuse never shares an entry with one it read.
PROVENANCE_KEYS = ("_name_or_path", "_commit_hash", "transformers_version")
TENSORS_CACHE_FORMAT = 1


def cache_dir() -> Path:
    """ewa's cache of derived facts (EWA_CACHE_DIR, by default .cache/ewa in the working directory, as
    vLLM's caches): anything in it can be deleted and is rebuilt."""
    return Path(os.environ.get("EWA_CACHE_DIR", ".cache/ewa"))


def tensors_cache_file(config: dict) -> Path | None:
    """Where the expected tensors of this config under the installed transformers are kept; None when
    transformers is not installed (the build below then fails with its own message)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("transformers")
    except PackageNotFoundError:
        return None
    content = {k: v for k, v in config.items() if k not in PROVENANCE_KEYS}
    key = json.dumps([TENSORS_CACHE_FORMAT, installed, content], sort_keys=True)
    return cache_dir() / "model-tensors" / f"{hashlib.sha256(key.encode()).hexdigest()}.json"


def read_cached_tensors(file: Path) -> ModelTensors | None:
    try:
        data = json.loads(file.read_text())
        return ModelTensors(data["source"], {k: tuple(v) for k, v in data["shapes"].items()}, dict(data["tied"]),
                            *(re.compile(p) if p is not None else None
                              for p in (data["ignore_missing"], data["ignore_unexpected"])))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, re.error):
        return None  # absent, or not ours to trust: built again


def write_cached_tensors(file: Path, expected: ModelTensors) -> None:
    """Written under a temporary name of its own and renamed, so concurrent jobs never read half a file and
    the last writer wins with the same content (not ewa.io.atomic_path: its lock would fail a job whose
    output is only a cache); a cache that cannot be written costs only the next job's time."""
    data = {"source": expected.source, "shapes": {k: list(v) for k, v in expected.shapes.items()},
            "tied": expected.tied, "ignore_missing": getattr(expected.ignore_missing, "pattern", None),
            "ignore_unexpected": getattr(expected.ignore_unexpected, "pattern", None)}
    # one name per writing thread (not mkstemp: its 0600 mode would hide the entry from a shared cache's group)
    tmp = file.with_name(f".{file.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data))
        os.replace(tmp, file)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def check_tensors(ckpt: Checkpoint, expected: ModelTensors, what: str | None = None, extra_ok: bool = False) -> None:
    """Refuse a checkpoint the model would not load whole: a tensor missing (it would be initialised at
    random), one the model has no place for (unless `extra_ok`), or a shape that differs; one line naming
    tensor and file."""
    prefix = f"{what}: " if what else ""
    group = {}  # tied names share one group: the checkpoint needs any one of them
    for name, other in expected.tied.items():
        group.setdefault(other, {other}).add(name)
        group[name] = group[other]

    def present(name: str) -> bool:
        return any(n in ckpt.specs for n in group.get(name, (name,)))

    def ignored(pattern: re.Pattern | None, name: str) -> bool:
        return pattern is not None and pattern.search(name) is not None

    def more(names: list[str]) -> str:
        return f" (and {len(names) - 1} more)" if len(names) > 1 else ""

    if missing := [n for n in expected.shapes if not present(n) and not ignored(expected.ignore_missing, n)]:
        raise CheckpointError(f"{prefix}{ckpt.listing}: tensor {missing[0]!r}{more(missing)} that {expected.source} "
                              f"asks for is missing (it would be initialised at random)")
    extra = [] if extra_ok else [n for n in ckpt.specs if n not in expected.shapes
                                 and not ignored(expected.ignore_unexpected, n)]
    if extra:
        raise CheckpointError(f"{prefix}{ckpt.path / ckpt.weight_map[extra[0]]}: tensor {extra[0]!r}{more(extra)} "
                              f"is not in {expected.source}")
    for name, shape in expected.shapes.items():
        if name in ckpt.specs and tuple(ckpt.specs[name][1]) != shape:
            raise CheckpointError(f"{prefix}{ckpt.path / ckpt.weight_map[name]}: tensor {name!r} has shape "
                                  f"{list(ckpt.specs[name][1])} but {expected.source} makes it {list(shape)}")


def check_loadable(model_dir: str | os.PathLike, what: str = "--model") -> Checkpoint:
    """Before any load: config.json parses and builds a model, and the safetensors headers hold exactly
    the tensors it asks for, in its shapes. Reads headers and config only; returns the header specs.
    Raises CheckpointError (one line naming the file and tensor)."""
    path = Path(model_dir)
    if not path.is_dir():
        raise CheckpointError(f"{what}: {path} is not a model directory")
    read_config(path, what)
    try:
        ckpt = read_checkpoint(path)
    except CheckpointError as e:
        raise CheckpointError(f"{what}: {e}") from None
    check_tensors(ckpt, expected_tensors(path, what), what)
    return ckpt


def check_loaded(model, model_dir: str | os.PathLike, what: str = "--model") -> None:
    """After a load: the model's state dict against the checkpoint's headers, so a tensor the loader
    initialised (or dropped) rather than read never passes silently, whatever path the load took."""
    try:
        ckpt = read_checkpoint(model_dir)
    except CheckpointError as e:
        raise CheckpointError(f"{what}: {e}") from None
    check_tensors(ckpt, model_tensors(model, f"the loaded {type(model).__name__}"), what)


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
