"""The shared initial model every regime's GRPO run starts from: the tiny Qwen2 built and SFT-warm-started
here, or a Hugging Face model directory, local or from the cache by its hub name (validated, copied,
optionally SFT'd)."""
from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import time
from collections import Counter
from pathlib import Path

from ewa.checkpoint import check_loadable, check_loaded, check_model_dir
from ewa.errors import UserError
from ewa.init import PROVENANCE_FILE
from ewa.io import atomic_path, exclusive_output, provenance, sha256_file, write_json
from ewa.problems import Problem, read_problems
from ewa.prompts import IO_INSTRUCTIONS, PLANS, SYSTEM_PROMPT
from ewa.runtime import compute_record

log = logging.getLogger(__name__)



def tokenizer_corpus(problems: list[Problem], examples: list[dict]) -> list[str]:
    """Texts the tiny tokenizer learns from: the corpus the formats ship (ewa.formats.Format.corpus: the
    bundled miniature's reference programs), the train problems, the prompts and
    every SFT example as the chat template renders it (so template boilerplate, tool-call JSON and
    feedback become short token sequences)."""
    from transformers.utils.chat_template_utils import render_jinja_template

    from ewa import formats
    from ewa.init.tiny import CHAT_TEMPLATE

    texts = [SYSTEM_PROMPT, *IO_INSTRUCTIONS.values(), *PLANS.values()]
    texts += [text for fmt in formats.formats() if fmt.corpus for text in fmt.corpus()]
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


# linux/fs.h FICLONE, _IOW(0x94, 9, int): make the destination share the source's extents, copy-on-write.
FICLONE = 0x40049409


def clone_file(src: str | os.PathLike, dst: str | os.PathLike) -> str:
    """`dst`, a file of its own (its own inode) with the bytes of `src` (a symlink followed, as the Hugging Face
    cache's snapshots are): a copy-on-write reflink where the filesystem has one (Btrfs, XFS, ZFS 2.2+: no
    new bytes, instant), else copy_file_range (in the kernel; server-side on NFS 4.2), else a plain copy.
    Never a hard link: a tool that later rewrites one of the user's files in place (truncate and write) would
    change the run's init as well. Returns "reflink" or "copy"."""
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        try:
            fcntl.ioctl(fout.fileno(), FICLONE, fin.fileno())
            method = "reflink"
        except OSError:  # EOPNOTSUPP, EXDEV (another filesystem), EINVAL, ENOTTY ...
            method = "copy"
            left = os.fstat(fin.fileno()).st_size
            try:
                while left > 0 and (n := os.copy_file_range(fin.fileno(), fout.fileno(), min(left, 1 << 30))):
                    left -= n
            except (OSError, AttributeError):  # not in this kernel, sandbox or OS: go on from where it stopped
                pass
            shutil.copyfileobj(fin, fout, 1 << 24)
    shutil.copystat(src, dst)
    return method


def copy_model(src: Path, dst: Path) -> dict:
    """The model directory `src` copied file by file (clone_file), and how: method, files, bytes, seconds."""
    start, methods, sizes = time.monotonic(), [], []

    def clone(s, d):
        methods.append(clone_file(s, d))
        sizes.append(os.path.getsize(d))
        return d
    shutil.copytree(src, dst, copy_function=clone, dirs_exist_ok=True)
    method = methods[0] if len(set(methods)) == 1 else "mixed" if methods else "none"
    return {"method": method, "files": len(methods), "bytes": sum(sizes), "seconds": round(time.monotonic() - start, 2)}


def adopt_hf(path: Path, model: dict, problems: list[Problem], out: Path, seed: int, sandbox: dict) -> dict:
    sft = model["sft"]
    if not sft["steps"]:  # the default for a model directory: its weights are the user's, used as they are
        log.info("%s: used as it is (model.sft.steps 0: no warm start)", path)
        copied = copy_model(path, out)
        log.info("%s: %d files, %.2f GB copied (%s) in %.1f s", path, copied["files"], copied["bytes"] / 1e9,
                 copied["method"], copied["seconds"])
        return {"source": str(path.resolve()), "copied": copied}
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
    from ewa.hub import local_model, note

    init = model["init"]
    local, resolved = (init, None) if init == "tiny" else local_model(init)  # a hub name: its snapshot in the cache
    if resolved is not None:
        note(resolved)  # the provenance record names the reference and its commit
    source = None if init == "tiny" else check_model_dir(local)  # bad input fails before any work
    if source is not None:
        check_loadable(source, "--init")  # copied or fine-tuned, it must load whole
        from ewa.capabilities import warm_start_refusal

        if refused := warm_start_refusal(str(source), model["sft"]):  # before the traces, not inside TRL after
            raise UserError(refused.line())
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
