"""`ewa init`: the shared initial model every regime's GRPO run starts from — the tiny Qwen2 built and
SFT-warm-started here, or a local Hugging Face model directory (validated, linked, optionally SFT'd).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
from pathlib import Path

from ewa.cli import UserError
from ewa.io import atomic_path, json_object_arg, provenance, sha256_file, write_json
from ewa.problems import Problem, read_problems
from ewa.prompts import IO_INSTRUCTIONS, PLANS, SYSTEM_PROMPT

log = logging.getLogger(__name__)

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")
PROVENANCE_FILE = "ewa_init.json"


def check_model_dir(path: str | os.PathLike, what: str = "--init") -> Path:
    """A usable HF model directory, or one UserError line naming what is missing."""
    path = Path(path)
    if not path.is_dir():
        raise UserError(f"{what}: {path} is not a directory (expected 'tiny' or a local Hugging Face model)")
    if not (path / "config.json").is_file():
        raise UserError(f"{what}: {path}/config.json is missing")
    try:
        config = json.loads((path / "config.json").read_text())
    except json.JSONDecodeError as e:
        raise UserError(f"{what}: {path}/config.json is not valid JSON ({e.msg})") from None
    if not isinstance(config, dict) or "model_type" not in config:
        raise UserError(f"{what}: {path}/config.json has no 'model_type'")
    if not any((path / f).is_file() for f in TOKENIZER_FILES):
        raise UserError(f"{what}: {path} has no tokenizer (one of {', '.join(TOKENIZER_FILES)})")
    if not any((path / f).is_file() for f in WEIGHT_FILES):
        raise UserError(f"{what}: {path} has no weights (model.safetensors or a safetensors index)")
    return path


def tokenizer_corpus(problems: list[Problem]) -> list[str]:
    """Texts the tiny tokenizer learns from: the bundled mini corpus, the train problems and the prompts."""
    from ewa.mini import corpus_texts

    texts = [SYSTEM_PROMPT, *IO_INSTRUCTIONS.values(), *PLANS.values()]
    texts += list(corpus_texts())
    for p in problems:
        texts += [p.statement, p.starter_code]
        solutions = p.meta.get("solutions") or {}
        texts += [solutions.get("brute") or "", solutions.get("efficient") or "", *(solutions.get("wrong") or [])]
    return [t for t in texts if t]


def build_tiny(settings: dict, problems: list[Problem], out: Path) -> dict:
    from ewa.models.sft import run_sft, sft_examples, sft_settings
    from ewa.models.tiny import build_tiny_model, count_parameters, tiny_settings, train_tokenizer

    seed = int(settings.get("seed", 0))
    tiny = tiny_settings(settings.get("tiny"))
    sft = sft_settings(settings.get("sft"))
    tokenizer = train_tokenizer(tokenizer_corpus(problems), tiny["vocab_size"])
    tokenizer.model_max_length = tiny["max_position_embeddings"]
    model = build_tiny_model(tokenizer, tiny, seed)
    log.info("tiny Qwen2: %d parameters, vocabulary %d", count_parameters(model), len(tokenizer))
    summary = {"parameters": count_parameters(model), "vocab_size": len(tokenizer), "tiny": tiny, "sft": sft}
    if sft["steps"] > 0:
        summary["sft_result"] = run_sft(model, tokenizer, sft_examples(problems, sft["mix"]), sft, seed)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return summary


def link_or_copy(src: Path, dst: Path) -> None:
    """Hard-link the files of a (possibly huge) model directory; copy where links are not possible."""
    def link(s, d):
        try:
            os.link(s, d)
        except OSError:
            shutil.copy2(s, d)
    shutil.copytree(src, dst, copy_function=link, dirs_exist_ok=True)


def adopt_hf(path: Path, settings: dict, problems: list[Problem], out: Path) -> dict:
    sft = settings.get("sft") or {}
    if not int(sft.get("steps", 0)):
        link_or_copy(path, out)
        return {"source": str(path.resolve())}
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ewa.models.sft import run_sft, sft_examples, sft_settings

    sft = sft_settings(sft)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype="auto")
    result = run_sft(model, tokenizer, sft_examples(problems, sft["mix"]), sft, int(settings.get("seed", 0)))
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return {"source": str(path.resolve()), "sft": sft, "sft_result": result}


def check_settings(init: str, settings: dict) -> None:
    from ewa.models.sft import sft_settings
    from ewa.models.tiny import tiny_settings

    if init == "tiny":
        tiny_settings(settings.get("tiny"))
    sft_settings(settings.get("sft"))
    if not isinstance(settings.get("seed", 0), int):
        raise ValueError(f"model.seed: must be an integer, got {settings['seed']!r}")


def build_init(init: str, settings: dict, problems_path: str | os.PathLike, out: str | os.PathLike) -> dict:
    """Write the shared init to `out` atomically; returns its provenance record."""
    source = None if init == "tiny" else check_model_dir(init)  # bad input fails before any work
    check_settings(init, settings)
    problems = read_problems(problems_path)
    with atomic_path(out) as tmp:
        tmp.mkdir()
        summary = build_tiny(settings, problems, tmp) if source is None else adopt_hf(source, settings, problems, tmp)
        record = provenance(
            settings, init=init, seed=int(settings.get("seed", 0)), problems=str(problems_path),
            problems_sha256=sha256_file(problems_path), n_problems=len(problems), **summary,
        )
        write_json(tmp / PROVENANCE_FILE, record)
    return record


def set_threads(threads: int) -> None:
    import torch

    if threads < 1:
        raise UserError(f"--threads: must be at least 1, got {threads}")
    torch.set_num_threads(threads)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--init", help="'tiny' or a local HF model directory (default: settings.init)")
    parser.add_argument("--settings", default="{}", help="JSON: the config's `model` section")
    parser.add_argument("--problems", required=True, help="train problems (canonical JSONL)")
    parser.add_argument("--out", required=True, help="output HF model directory")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (1: tiny models lose more to thread sync than they gain)")


def run(args: argparse.Namespace) -> int:
    settings = json_object_arg(args.settings, "--settings")  # the config's `model` section
    init = args.init or settings.get("init") or "tiny"
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    set_threads(args.threads)
    record = build_init(init, settings, args.problems, args.out)
    print(json.dumps({k: record[k] for k in ("init", "seed", "n_problems") if k in record}))
    return 0
