"""The shared initial model every regime's GRPO run starts from: the tiny Qwen2 built and SFT-warm-started
here, or a local Hugging Face model directory (validated, linked, optionally SFT'd)."""
from __future__ import annotations

import json
import logging
import os
import shutil
from collections import Counter
from pathlib import Path

from ewa.checkpoint import check_loadable, check_loaded, check_model_dir
from ewa.init import PROVENANCE_FILE
from ewa.io import atomic_path, exclusive_output, provenance, sha256_file, write_json
from ewa.problems import Problem, read_problems
from ewa.prompts import IO_INSTRUCTIONS, PLANS, SYSTEM_PROMPT
from ewa.runtime import compute_record

log = logging.getLogger(__name__)



def tokenizer_corpus(problems: list[Problem], examples: list[dict]) -> list[str]:
    """Texts the tiny tokenizer learns from: the bundled mini corpus, the train problems, the prompts and
    every SFT example as the chat template renders it (so template boilerplate, tool-call JSON and
    feedback become short token sequences)."""
    from transformers.utils.chat_template_utils import render_jinja_template

    from ewa.data.mini import corpus_texts
    from ewa.init.tiny import CHAT_TEMPLATE

    texts = [SYSTEM_PROMPT, *IO_INSTRUCTIONS.values(), *PLANS.values()]
    texts += list(corpus_texts())
    for p in problems:
        texts += [p.statement, p.starter_code]
        solutions = p.meta.get("solutions") or {}
        texts += [solutions.get("brute") or "", solutions.get("efficient") or "", *(solutions.get("wrong") or [])]
    for e in dict.fromkeys(json.dumps(e, sort_keys=True) for e in examples):  # each distinct example once
        e = json.loads(e)
        rendered, _ = render_jinja_template(conversations=[e["prompt"] + e["completion"]], tools=json.loads(e["tools"]),
                                            chat_template=CHAT_TEMPLATE)
        texts.append(rendered[0])
    return [t for t in texts if t]


def warm_start_examples(problems: list[Problem], sft: dict, sandbox: dict) -> list[dict]:
    """The SFT rows of every setting; tools and agentic traces run their candidates in the sandbox."""
    from ewa.init.traces import sft_examples
    from ewa.sandbox import sandbox_from_config

    if not (sft["mix"]["tools"] or sft["mix"]["agentic"]):
        return sft_examples(problems, sft["mix"])
    # Factor 1: the traces run public tests only, whose verdicts no result depends on.
    with sandbox_from_config(sandbox, time_factor=1.0) as runner:
        return sft_examples(problems, sft["mix"], runner)


def build_tiny(model: dict, problems: list[Problem], out: Path, seed: int, sandbox: dict) -> dict:
    from ewa.chat import add_response_parser
    from ewa.init.sft import run_sft
    from ewa.init.tiny import build_tiny_model, count_parameters, train_tokenizer

    tiny, sft = model["tiny"], model["sft"]
    examples = warm_start_examples(problems, sft, sandbox) if sft["steps"] > 0 else []
    tokenizer = train_tokenizer(tokenizer_corpus(problems, examples), tiny["vocab_size"])
    tokenizer.model_max_length = tiny["max_position_embeddings"]
    net = build_tiny_model(tokenizer, tiny, seed)
    log.info("tiny Qwen2: %d parameters, vocabulary %d", count_parameters(net), len(tokenizer))
    summary = {"parameters": count_parameters(net), "vocab_size": len(tokenizer), "tiny": tiny, "sft": sft}
    if examples:
        summary["sft_examples"] = dict(Counter(e["setting"] for e in examples))
        summary["sft_result"] = run_sft(net, tokenizer, examples, sft, seed, history=out)
    net.save_pretrained(out)
    add_response_parser(tokenizer).save_pretrained(out)  # ships its response template: loaders need no TRL
    return summary


def link_or_copy(src: Path, dst: Path) -> None:
    """Hard-link the files of a (possibly huge) model directory; copy where links are not possible."""
    def link(s, d):
        try:
            os.link(s, d)
        except OSError:
            shutil.copy2(s, d)
    shutil.copytree(src, dst, copy_function=link, dirs_exist_ok=True)


def adopt_hf(path: Path, model: dict, problems: list[Problem], out: Path, seed: int, sandbox: dict) -> dict:
    sft = model["sft"]
    if not sft["steps"]:  # the default for a model directory: its weights are the user's, used as they are
        log.info("%s: used as it is (model.sft.steps 0: no warm start)", path)
        link_or_copy(path, out)
        return {"source": str(path.resolve())}
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ewa.init.sft import run_sft

    tokenizer = AutoTokenizer.from_pretrained(path)
    # float32 whatever the checkpoint stores (published models: bf16), as GRPO loads it (ewa.train.grpo): at a
    # warm start's learning rate AdamW's updates are far below half a bf16 step, so bf16 weights would keep
    # almost none of them. Saved as trained: rounding back to bf16 would drop them at the end instead.
    net = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    check_loaded(net, path, "--init")  # SFT on a tensor filled at random would hide it for good
    result = run_sft(net, tokenizer, warm_start_examples(problems, sft, sandbox), sft, seed, history=out)
    net.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return {"source": str(path.resolve()), "sft": sft, "sft_result": result}


def build_init(model: dict, problems_path: str | os.PathLike, out: str | os.PathLike, seed: int,
               sandbox: dict) -> dict:
    """Write the shared init (the validated `model` section) to `out` atomically; returns its provenance.
    `sandbox` (the config's validated section) runs the tools and agentic SFT traces' programs."""
    init = model["init"]
    source = None if init == "tiny" else check_model_dir(init)  # bad input fails before any work
    if source is not None:
        check_loadable(source, "--init")  # linked or fine-tuned, it must load whole
    problems = read_problems(problems_path)
    with exclusive_output(out, what="ewa init"), atomic_path(out) as tmp:
        tmp.mkdir()
        summary = (build_tiny(model, problems, tmp, seed, sandbox) if source is None
                   else adopt_hf(source, model, problems, tmp, seed, sandbox))
        record = provenance(
            {**model, "seed": seed}, init=init, seed=seed, problems=str(problems_path),
            problems_sha256=sha256_file(problems_path), n_problems=len(problems), compute=compute_record(), **summary,
        )
        write_json(tmp / PROVENANCE_FILE, record)
    return record
